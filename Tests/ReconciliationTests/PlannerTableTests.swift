import Testing
@testable import Reconciliation

/// One row of the decision table, or one side of one of its boundaries.
struct TableCase: Sendable, CustomTestStringConvertible {
    var name: String
    var order: Order?
    var snapshot: Snapshot?
    var findings: [DiscrepancyKind]
    var actions: [String] = []
    /// Expected amountAtRisk per finding, when the case checks it.
    var risks: [Int64]? = nil
    var now: Int64 = Fixture.now
    var testDescription: String { name }
}

private typealias F = Fixture

// MARK: PXP

let pxpCases: [TableCase] = [
    // Row: open, authorisation intents, authorised, amt > A → increment amt − A where allowed.
    TableCase(
        name: "pxp open auth amt > A → increment",
        order: F.order(.authorisation, .open, amount: 1200), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["increment 200→1200 @SYS-1"]),
    TableCase(
        name: "pxp open auth amt = A + 1 → increment 1",
        order: F.order(.authorisation, .open, amount: 1001), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["increment 1→1001 @SYS-1"]),
    TableCase(
        name: "pxp open auth amt = A → nothing",
        order: F.order(.authorisation, .open, amount: 1000), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: []),
    TableCase(
        name: "pxp open auth amt < A → nothing (not a discrepancy)",
        order: F.order(.authorisation, .open, amount: 999), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: []),
    TableCase(
        name: "pxp open estimated auth amt > A → increment",
        order: F.order(.estimatedAuthorisation, .open, amount: 5000),
        snapshot: F.snapshot(.estimatedAuthorisation, .authorised, a: 3000),
        findings: [], actions: ["increment 2000→5000 @SYS-1"]),
    TableCase(
        name: "pxp open auth amt > A without systemTransactionId → amount_mismatch",
        order: F.order(.authorisation, .open, amount: 1200),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, targets: ActionTargets()),
        findings: [.amountMismatch], risks: [200]),

    // Row: fulfilled, authorisation intents, authorised, C < amt ≤ A → capture amt − C.
    TableCase(
        name: "pxp fulfilled auth amt = A → capture all",
        order: F.order(.authorisation, .fulfilled, amount: 1000), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["capture 1000→1000 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled auth amt < A → partial capture",
        order: F.order(.authorisation, .fulfilled, amount: 800), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["capture 800→800 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled estimated auth amt = A − 1 → capture",
        order: F.order(.estimatedAuthorisation, .fulfilled, amount: 999),
        snapshot: F.snapshot(.estimatedAuthorisation, .authorised, a: 1000),
        findings: [], actions: ["capture 999→999 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled auth C = amt − 1 → capture 1",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1500, c: 999),
        findings: [], actions: ["capture 1→1000 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled auth C = amt → nothing",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1500, c: 1000),
        findings: []),
    TableCase(
        name: "pxp fulfilled auth amt = 0 → nothing",
        order: F.order(.authorisation, .fulfilled, amount: 0), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: []),
    TableCase(
        name: "pxp fulfilled auth without systemTransactionId → action_not_allowed",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [1000]),

    // Row: fulfilled, authorisation intents, authorised, amt > A → increment (the capture follows later).
    TableCase(
        name: "pxp fulfilled auth amt > A → increment only",
        order: F.order(.authorisation, .fulfilled, amount: 1200), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["increment 200→1200 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled auth amt = A + 1 → increment 1",
        order: F.order(.authorisation, .fulfilled, amount: 1001), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["increment 1→1001 @SYS-1"]),
    TableCase(
        name: "pxp fulfilled auth amt > A without systemTransactionId → action_not_allowed",
        order: F.order(.authorisation, .fulfilled, amount: 1200),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [200]),

    // Row: purchase, captured or refunded, C < amt → amount_mismatch.
    TableCase(
        name: "pxp purchase captured C < amt → amount_mismatch",
        order: F.order(.purchase, .fulfilled, amount: 1000), snapshot: F.snapshot(.purchase, .captured, a: 900, c: 900),
        findings: [.amountMismatch], risks: [100]),
    TableCase(
        name: "pxp purchase captured C = amt − 1 → amount_mismatch of 1",
        order: F.order(.purchase, .open, amount: 1000), snapshot: F.snapshot(.purchase, .captured, a: 999, c: 999),
        findings: [.amountMismatch], risks: [1]),
    TableCase(
        name: "pxp purchase captured C = amt → nothing",
        order: F.order(.purchase, .fulfilled, amount: 1000), snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000),
        findings: []),
    TableCase(
        name: "pxp purchase refunded C < amt → amount_mismatch",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 900),
        snapshot: F.snapshot(.purchase, .refunded, a: 900, c: 900, r: 900),
        findings: [.amountMismatch], risks: [100]),
    TableCase(
        name: "pxp purchase partially refunded C < amt → amount_mismatch",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 100),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 900, c: 900, r: 100),
        findings: [.amountMismatch], risks: [100]),
    TableCase(
        name: "pxp purchase pending (C = 0) → no amount_mismatch",
        order: F.order(.purchase, .open, amount: 1000), snapshot: F.snapshot(.purchase, .pending, a: 0),
        findings: []),

    // Row: fulfilled, failed or voided → state_mismatch. Open: not a discrepancy.
    TableCase(
        name: "pxp fulfilled failed → state_mismatch",
        order: F.order(.purchase, .fulfilled, amount: 1000), snapshot: F.snapshot(.purchase, .failed, a: 0),
        findings: [.stateMismatch], risks: [1000]),
    TableCase(
        name: "pxp fulfilled auth voided → state_mismatch",
        order: F.order(.authorisation, .fulfilled, amount: 1000), snapshot: F.snapshot(.authorisation, .voided, a: 0),
        findings: [.stateMismatch], risks: [1000]),
    TableCase(
        name: "pxp open failed → nothing",
        order: F.order(.purchase, .open, amount: 1000, refund: 100), snapshot: F.snapshot(.purchase, .failed, a: 0),
        findings: []),
    TableCase(
        name: "pxp open voided → nothing",
        order: F.order(.authorisation, .open, amount: 1000), snapshot: F.snapshot(.authorisation, .voided, a: 0),
        findings: []),
    TableCase(
        name: "pxp cancelled failed → nothing",
        order: F.order(.purchase, .cancelled, amount: 1000), snapshot: F.snapshot(.purchase, .failed, a: 0),
        findings: []),
    TableCase(
        name: "pxp cancelled voided → nothing",
        order: F.order(.authorisation, .cancelled, amount: 1000), snapshot: F.snapshot(.authorisation, .voided, a: 0),
        findings: []),

    // Row: cancelled, authorised, C = 0 → void.
    TableCase(
        name: "pxp cancelled authorised → void A",
        order: F.order(.authorisation, .cancelled, amount: 1000), snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [], actions: ["void 1000→0 @SYS-1"]),
    TableCase(
        name: "pxp cancelled authorised, A > amt → void all of A",
        order: F.order(.estimatedAuthorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.estimatedAuthorisation, .authorised, a: 1500),
        findings: [], actions: ["void 1500→0 @SYS-1"]),
    TableCase(
        name: "pxp cancelled authorised without systemTransactionId → action_not_allowed",
        order: F.order(.authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [1000]),
    TableCase(
        name: "pxp cancelled purchase still authorised → void not allowed on a purchase",
        order: F.order(.purchase, .cancelled, amount: 1000), snapshot: F.snapshot(.purchase, .authorised, a: 1000),
        findings: [.actionNotAllowed], risks: [1000]),

    // Row: cancelled, C − R > 0 → refund C − R.
    TableCase(
        name: "pxp cancelled captured → refund C",
        order: F.order(.purchase, .cancelled, amount: 1000), snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000),
        findings: [], actions: ["refund 1000→1000 @SYS-1"]),
    TableCase(
        name: "pxp cancelled partially refunded → refund C − R",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 400),
        findings: [], actions: ["refund 600→1000 @SYS-1"]),
    TableCase(
        name: "pxp cancelled C − R = 1 → refund 1",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 999),
        findings: [], actions: ["refund 1→1000 @SYS-1"]),
    TableCase(
        name: "pxp cancelled C = R → nothing",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .refunded, a: 1000, c: 1000, r: 1000),
        findings: []),
    TableCase(
        name: "pxp cancelled captured auth → refund",
        order: F.order(.authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .captured, a: 1000, c: 1000),
        findings: [], actions: ["refund 1000→1000 @SYS-1"]),
    TableCase(
        name: "pxp cancelled captured without systemTransactionId → action_not_allowed",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [1000]),

    // Row: not cancelled, refund_amount > R → refund rq − R if rq ≤ C, else action_not_allowed.
    TableCase(
        name: "pxp fulfilled refund requested → refund rq",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 300),
        snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000),
        findings: [], actions: ["refund 300→300 @SYS-1"]),
    TableCase(
        name: "pxp open refund requested after a partial refund → refund rq − R",
        order: F.order(.purchase, .open, amount: 1000, refund: 300),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 100),
        findings: [], actions: ["refund 200→300 @SYS-1"]),
    TableCase(
        name: "pxp refund rq = C → refund all",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 1000),
        snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000),
        findings: [], actions: ["refund 1000→1000 @SYS-1"]),
    TableCase(
        name: "pxp refund rq = C + 1 → action_not_allowed",
        order: F.order(.authorisation, .fulfilled, amount: 1500, refund: 1001),
        snapshot: F.snapshot(.authorisation, .captured, a: 1500, c: 1000),
        findings: [.actionNotAllowed], risks: [1001]),
    TableCase(
        name: "pxp refund rq = R + 1 → refund 1",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 301),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 300),
        findings: [], actions: ["refund 1→301 @SYS-1"]),
    TableCase(
        name: "pxp refund rq = R → nothing",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 300),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 300),
        findings: []),
    TableCase(
        name: "pxp refund requested on an uncaptured authorisation → action_not_allowed",
        order: F.order(.authorisation, .open, amount: 1000, refund: 200),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000),
        findings: [.actionNotAllowed], risks: [200]),
    TableCase(
        name: "pxp fulfilled auth: capture and refund in one plan",
        order: F.order(.authorisation, .fulfilled, amount: 1000, refund: 200),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, c: 500),
        findings: [], actions: ["capture 500→1000 @SYS-1", "refund 200→200 @SYS-1"]),

    // Row: C > amt → over_captured.
    TableCase(
        name: "pxp C = amt + 1 → over_captured",
        order: F.order(.purchase, .fulfilled, amount: 1000), snapshot: F.snapshot(.purchase, .captured, a: 1001, c: 1001),
        findings: [.overCaptured], risks: [1]),
    TableCase(
        name: "pxp open auth C > amt → over_captured",
        order: F.order(.authorisation, .open, amount: 500), snapshot: F.snapshot(.authorisation, .captured, a: 1000, c: 1000),
        findings: [.overCaptured], risks: [500]),

    // Row: R > (cancelled ? C : rq) → over_refunded.
    TableCase(
        name: "pxp R = rq + 1 → over_refunded",
        order: F.order(.purchase, .fulfilled, amount: 1000, refund: 300),
        snapshot: F.snapshot(.purchase, .partiallyRefunded, a: 1000, c: 1000, r: 301),
        findings: [.overRefunded], risks: [1]),
    TableCase(
        name: "pxp R > 0 with no refund wanted → over_refunded",
        order: F.order(.purchase, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.purchase, .refunded, a: 1000, c: 1000, r: 1000),
        findings: [.overRefunded], risks: [1000]),
    TableCase(
        name: "pxp cancelled R = C + 1 → over_refunded",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .refunded, a: 1000, c: 1000, r: 1001),
        findings: [.overRefunded], risks: [1]),

    // Row: pending or action_required for longer than pendingMax → stale_pending.
    TableCase(
        name: "pxp pending exactly pendingMax → nothing",
        order: F.order(.purchase, .open, amount: 1000),
        snapshot: F.snapshot(.purchase, .pending, a: 0, createdAt: F.now - F.pendingMax),
        findings: []),
    TableCase(
        name: "pxp pending pendingMax + 1 → stale_pending",
        order: F.order(.purchase, .open, amount: 1000),
        snapshot: F.snapshot(.purchase, .pending, a: 0, createdAt: F.now - F.pendingMax - 1),
        findings: [.stalePending], risks: [1000]),
    TableCase(
        name: "pxp action_required too long → stale_pending",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .actionRequired, a: 0, createdAt: F.now - 10 * F.pendingMax),
        findings: [.stalePending], risks: [1000]),
    TableCase(
        name: "pxp pending without a creation time → nothing",
        order: F.order(.purchase, .open, amount: 1000), snapshot: F.snapshot(.purchase, .pending, a: 0, createdAt: nil),
        findings: []),
    TableCase(
        name: "pxp old authorised transaction is not stale",
        order: F.order(.authorisation, .open, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, createdAt: F.now - 10 * F.pendingMax),
        findings: [])
]

// MARK: PayPal

let paypalCases: [TableCase] = [
    TableCase(
        name: "paypal open auth amt > A → amount_mismatch (no increments)",
        order: F.order(.paypal, .authorisation, .open, amount: 1200),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000),
        findings: [.amountMismatch], risks: [200]),
    TableCase(
        name: "paypal open auth amt = A → nothing",
        order: F.order(.paypal, .authorisation, .open, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000),
        findings: []),
    TableCase(
        name: "paypal fulfilled auth amt = A → capture on the authorization",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000),
        findings: [], actions: ["capture 1000→1000 @AUTH-1"]),
    TableCase(
        name: "paypal fulfilled auth partially captured → capture the rest",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, c: 400),
        findings: [], actions: ["capture 600→1000 @AUTH-1"]),
    TableCase(
        name: "paypal fulfilled auth C = amt → nothing",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 400),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, c: 400),
        findings: []),
    TableCase(
        name: "paypal fulfilled auth without an authorization id → action_not_allowed",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [1000]),
    TableCase(
        name: "paypal fulfilled auth, authorization PENDING → action_not_allowed",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(
            .paypal, .authorisation, .authorised, a: 1000,
            targets: ActionTargets(authorizationID: "AUTH-1", authorizationStatus: "PENDING")),
        findings: [.actionNotAllowed], risks: [1000]),
    TableCase(
        name: "paypal fulfilled auth amt > A → action_not_allowed (no increments)",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1001),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000),
        findings: [.actionNotAllowed], risks: [1]),
    TableCase(
        name: "paypal purchase captured C < amt → amount_mismatch",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 999),
        findings: [.amountMismatch], risks: [1]),
    TableCase(
        name: "paypal purchase captured C = amt → nothing",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000),
        findings: []),
    TableCase(
        name: "paypal fulfilled failed → state_mismatch",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .failed, a: 0),
        findings: [.stateMismatch], risks: [1000]),
    TableCase(
        name: "paypal fulfilled voided → state_mismatch",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .voided, a: 0),
        findings: [.stateMismatch]),
    TableCase(
        name: "paypal open voided → nothing",
        order: F.order(.paypal, .authorisation, .open, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .voided, a: 0),
        findings: []),
    TableCase(
        name: "paypal cancelled authorised, CREATED → void",
        order: F.order(.paypal, .authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000),
        findings: [], actions: ["void 1000→0 @AUTH-1"]),
    TableCase(
        name: "paypal cancelled authorised, authorization status unknown → action_not_allowed",
        order: F.order(.paypal, .authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(
            .paypal, .authorisation, .authorised, a: 1000,
            targets: ActionTargets(authorizationID: "AUTH-1")),
        findings: [.actionNotAllowed], risks: [1000]),
    TableCase(
        name: "paypal cancelled, partially captured → refund the capture (no void once captured)",
        order: F.order(.paypal, .authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, c: 400),
        findings: [], actions: ["refund 400→400 @CAP-1"]),
    TableCase(
        name: "paypal cancelled captured → refund the capture",
        order: F.order(.paypal, .purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000),
        findings: [], actions: ["refund 1000→1000 @CAP-1"]),
    TableCase(
        name: "paypal cancelled, refund spread over two captures",
        order: F.order(.paypal, .authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(
            .paypal, .authorisation, .captured, a: 1000, c: 1000, r: 100,
            targets: ActionTargets(refundableCaptures: [
                CaptureRef(id: "CAP-1", amount: 600, refunded: 100),
                CaptureRef(id: "CAP-2", amount: 400, refunded: 0)
            ])),
        findings: [], actions: ["refund 500→600 @CAP-1", "refund 400→1000 @CAP-2"]),
    TableCase(
        name: "paypal cancelled captured but no refundable capture → action_not_allowed",
        order: F.order(.paypal, .purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000, targets: ActionTargets()),
        findings: [.actionNotAllowed], risks: [1000]),
    TableCase(
        name: "paypal refund requested ≤ C → refund on the capture",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, refund: 250),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000),
        findings: [], actions: ["refund 250→250 @CAP-1"]),
    TableCase(
        name: "paypal refund requested, captures hold too little → action_not_allowed",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, refund: 250),
        snapshot: F.snapshot(
            .paypal, .purchase, .captured, a: 0, c: 1000,
            targets: ActionTargets(refundableCaptures: [CaptureRef(id: "CAP-1", amount: 200, refunded: 0)])),
        findings: [.actionNotAllowed], risks: [250]),
    TableCase(
        name: "paypal refund rq = C + 1 → action_not_allowed",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, refund: 1001),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000),
        findings: [.actionNotAllowed], risks: [1001]),
    TableCase(
        name: "paypal C > amt → over_captured",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1200),
        findings: [.overCaptured], risks: [200]),
    TableCase(
        name: "paypal R > rq → over_refunded",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, refund: 100),
        snapshot: F.snapshot(.paypal, .purchase, .partiallyRefunded, a: 0, c: 1000, r: 150),
        findings: [.overRefunded], risks: [50]),
    TableCase(
        name: "paypal action_required exactly pendingMax → nothing",
        order: F.order(.paypal, .purchase, .open, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .actionRequired, a: 0, createdAt: F.now - F.pendingMax),
        findings: []),
    TableCase(
        name: "paypal action_required pendingMax + 1 → stale_pending",
        order: F.order(.paypal, .purchase, .open, amount: 1000),
        snapshot: F.snapshot(.paypal, .purchase, .actionRequired, a: 0, createdAt: F.now - F.pendingMax - 1),
        findings: [.stalePending]),
    TableCase(
        name: "paypal site on the order is not a PayPal notion → not checked",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, site: "S9"),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000),
        findings: [])
]

// MARK: Paypercut, payouts, blocking, missing and unknown

let otherCases: [TableCase] = [
    TableCase(
        name: "paypercut fulfilled requires_capture → capture on the intent",
        order: F.order(.paypercut, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypercut, .authorisation, .authorised, a: 1000),
        findings: [], actions: ["capture 1000→1000 @REF-1"]),
    TableCase(
        name: "paypercut cancelled requires_capture → void",
        order: F.order(.paypercut, .authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.paypercut, .authorisation, .authorised, a: 1000),
        findings: [], actions: ["void 1000→0 @REF-1"]),
    TableCase(
        name: "paypercut authorised but not requires_capture → action_not_allowed",
        order: F.order(.paypercut, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypercut, .authorisation, .authorised, a: 1000, rawState: "processing"),
        findings: [.actionNotAllowed]),
    TableCase(
        name: "paypercut open amt > A → amount_mismatch (no increments)",
        order: F.order(.paypercut, .authorisation, .open, amount: 1100),
        snapshot: F.snapshot(.paypercut, .authorisation, .authorised, a: 1000),
        findings: [.amountMismatch], risks: [100]),
    TableCase(
        name: "paypercut refund requested → refund on the intent",
        order: F.order(.paypercut, .purchase, .fulfilled, amount: 1000, refund: 1000),
        snapshot: F.snapshot(.paypercut, .purchase, .captured, a: 1000, c: 1000),
        findings: [], actions: ["refund 1000→1000 @REF-1"]),

    // Payouts: only three checks, never an action.
    TableCase(
        name: "payout executed C = amt → nothing",
        order: F.order(.payout, .fulfilled, amount: 1000), snapshot: F.snapshot(.payout, .captured, a: 1000, c: 1000),
        findings: []),
    TableCase(
        name: "payout executed C = amt − 1 → amount_mismatch",
        order: F.order(.payout, .fulfilled, amount: 1000), snapshot: F.snapshot(.payout, .captured, a: 999, c: 999),
        findings: [.amountMismatch], risks: [1]),
    TableCase(
        name: "payout executed C = amt + 1 → amount_mismatch, not over_captured",
        order: F.order(.payout, .open, amount: 1000), snapshot: F.snapshot(.payout, .captured, a: 1001, c: 1001),
        findings: [.amountMismatch], risks: [1]),
    TableCase(
        name: "payout fulfilled failed → state_mismatch only",
        order: F.order(.payout, .fulfilled, amount: 1000), snapshot: F.snapshot(.payout, .failed, a: 0),
        findings: [.stateMismatch], risks: [1000]),
    TableCase(
        name: "payout fulfilled voided → state_mismatch",
        order: F.order(.payout, .fulfilled, amount: 1000), snapshot: F.snapshot(.payout, .voided, a: 0),
        findings: [.stateMismatch]),
    TableCase(
        name: "payout open failed → nothing",
        order: F.order(.payout, .open, amount: 1000), snapshot: F.snapshot(.payout, .failed, a: 0),
        findings: []),
    TableCase(
        name: "payout pending within pendingMax → nothing",
        order: F.order(.payout, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.payout, .pending, a: 0, createdAt: F.now - F.pendingMax),
        findings: []),
    TableCase(
        name: "payout pending too long → stale_pending only",
        order: F.order(.payout, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.payout, .pending, a: 0, createdAt: F.now - F.pendingMax - 1),
        findings: [.stalePending], risks: [1000]),
    TableCase(
        name: "payout refund_amount and cancellation never act",
        order: F.order(.payout, .cancelled, amount: 1000, refund: 500),
        snapshot: F.snapshot(.payout, .captured, a: 1000, c: 1000),
        findings: []),
    TableCase(
        name: "payout authorised (C = 0) → nothing",
        order: F.order(.payout, .cancelled, amount: 1000), snapshot: F.snapshot(.payout, .authorised, a: 1000),
        findings: []),

    // Blocking mismatches: only those, no actions.
    TableCase(
        name: "merchant mismatch suppresses the capture",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 1000, merchant: "M2"),
        findings: [.merchantMismatch], risks: [1000]),
    TableCase(
        name: "missing snapshot merchant is a mismatch",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, merchant: nil),
        findings: [.merchantMismatch]),
    TableCase(
        name: "empty order merchant is not checked",
        order: F.order(.paypal, .authorisation, .fulfilled, amount: 1000, merchant: ""),
        snapshot: F.snapshot(.paypal, .authorisation, .authorised, a: 1000, merchant: "anyone"),
        findings: [], actions: ["capture 1000→1000 @AUTH-1"]),
    TableCase(
        name: "nil order merchant is not checked",
        order: F.order(.paypal, .purchase, .fulfilled, amount: 1000, merchant: nil),
        snapshot: F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1000, merchant: "anyone"),
        findings: []),
    TableCase(
        name: "site mismatch suppresses the refund",
        order: F.order(.purchase, .cancelled, amount: 1000),
        snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000, site: "S2"),
        findings: [.siteMismatch]),
    TableCase(
        name: "currency mismatch suppresses the void and other rows",
        order: F.order(.authorisation, .cancelled, amount: 1000),
        snapshot: F.snapshot(.authorisation, .authorised, a: 5000, c: 0, currency: .eur),
        findings: [.currencyMismatch]),
    TableCase(
        name: "intent mismatch suppresses everything",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.purchase, .captured, a: 2000, c: 2000, r: 3000),
        findings: [.intentMismatch]),
    TableCase(
        name: "all four blocking mismatches are reported together",
        order: F.order(.authorisation, .fulfilled, amount: 1000),
        snapshot: F.snapshot(
            .purchase, .pending, a: 0, currency: .eur, merchant: "M2", site: "S2",
            createdAt: F.now - 10 * F.pendingMax),
        findings: [.merchantMismatch, .siteMismatch, .currencyMismatch, .intentMismatch],
        risks: [1000, 1000, 1000, 1000]),
    TableCase(
        name: "payout with a blocking mismatch",
        order: F.order(.payout, .fulfilled, amount: 1000),
        snapshot: F.snapshot(.payout, .failed, a: 0, merchant: "M2"),
        findings: [.merchantMismatch]),

    TableCase(
        name: "no snapshot → missing_at_provider only",
        order: F.order(.authorisation, .fulfilled, amount: 1000), snapshot: nil,
        findings: [.missingAtProvider], risks: [1000]),
    TableCase(
        name: "no order → unknown_order",
        order: nil, snapshot: F.snapshot(.purchase, .captured, a: 1000, c: 1000),
        findings: [.unknownOrder], risks: [1000]),
    TableCase(
        name: "no order, failed transaction → unknown_order with nothing at risk",
        order: nil, snapshot: F.snapshot(.purchase, .failed, a: 0),
        findings: [.unknownOrder], risks: [0]),
    TableCase(name: "neither → nothing", order: nil, snapshot: nil, findings: [])
]

@Suite struct PlannerTableTests {
    @Test(arguments: pxpCases) func pxp(_ row: TableCase) { check(row) }
    @Test(arguments: paypalCases) func paypal(_ row: TableCase) { check(row) }
    @Test(arguments: otherCases) func paypercutPayoutBlockingMissingUnknown(_ row: TableCase) { check(row) }

    private func check(_ row: TableCase) {
        let plan = Planner.plan(
            order: row.order, snapshot: row.snapshot, emitted: [], now: row.now,
            pendingMax: Fixture.pendingMax)
        #expect(plan.kinds == row.findings)
        #expect(plan.actionSummaries == row.actions)
        #expect(plan.supersede.isEmpty)
        if let risks = row.risks { #expect(plan.findings.map(\.amountAtRisk) == risks) }
        if plan.kinds.contains(where: \.isBlocking) { #expect(plan.actions.isEmpty) }
        for finding in plan.findings { #expect(!finding.detail.isEmpty) }
    }
}
