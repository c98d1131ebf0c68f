import Foundation
import Providers
import Reconciliation
import TextFormats

// The provider side of the generative money test: one transaction each, as a small ledger that answers what the
// provider's documents say it answers (rendered to the JSON payrecon's real mapping reads), and that applies a call
// the way the provider does (or refuses it). The statuses come from the documents: PayPal's OpenAPI enums (read from
// Tests/Fixtures/paypal-openapi at start), PXP's states and modification states (docs/PROVIDER-FACTS.md PXP-20s),
// Paypercut's intent, payment and refund statuses (PAYPERCUT-6, -7, -17).

/// SplitMix64: reproducible from a seed.
struct Gen {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
    mutating func count(_ range: ClosedRange<Int>) -> Int { Int(int(Int64(range.lowerBound)...Int64(range.upperBound))) }
    mutating func pick<T>(_ items: [T]) -> T { items[Int(next() % UInt64(items.count))] }
    /// True `percent` times in a hundred.
    mutating func chance(_ percent: Int) -> Bool { Int(next() % 100) < percent }
}

/// How a call came out at the provider, as the test decides it.
enum CallFate: CaseIterable {
    /// Applied and answered.
    case applied
    /// Applied, and the provider answered that it is not final yet (a PENDING refund or capture).
    case pending
    /// Refused (a 4xx): nothing moved.
    case refused
    /// Refused with 429 before it was processed: nothing moved.
    case notProcessed
    /// The answer was lost: applied or not, the caller cannot tell.
    case lostApplied, lostNotApplied
    /// Applied, and answered with what cannot be read (over the size cap, a field missing).
    case appliedUnreadable
    /// Answered readably that it was not done (a refund answered FAILED): nothing moved.
    case declined
    /// Never sent (its OAuth token refused): nothing moved.
    case notSent
}

/// One provider transaction of an order.
protocol Ledger {
    var ref: String { get }
    /// What payrecon's real mapping makes of the provider's answer now (nil: the answer does not map).
    func snapshot(links: [TransactionLink]) -> Snapshot?
    /// Applies a call (`pending`: the provider accepts it and has not finished); nil when the provider refuses it,
    /// else the provider's reference and the links payrecon records from its answer.
    mutating func apply(
        _ kind: ActionKind, amount: Int64, target: Int64, providerTarget: String?, final: Bool, pending: Bool,
        key: String, orderID: String, actionID: Int64
    ) -> (ref: String, links: [TransactionLink])?
    /// Money returned to the payer: refunds completed or accepted and pending.
    var returned: Int64 { get }
    /// Money captured, captures accepted and pending included.
    var captured: Int64 { get }
    /// Whether the provider finds a call made under `key` by the mark it carried (PayPal's refund custom_id, a PXP
    /// modification's merchantTransactionId), and what it says of it.
    func find(key: String, kind: ActionKind) -> CallOutcome?
    /// The provider answers a repeated idempotency key with the first result.
    static var deduplicates: Bool { get }
}

// MARK: - PayPal (Orders v2)

enum PayPalEnums {
    struct Loaded { var order, authorization, capture, refund: [String] }
    /// The status enums of PayPal's own OpenAPI documents.
    static let loaded: Loaded = {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/paypal-openapi")
        func schemas(_ file: String) -> [String: Any] {
            let data = (try? Data(contentsOf: dir.appendingPathComponent(file))) ?? Data()
            let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            return (json?["components"] as? [String: Any])?["schemas"] as? [String: Any] ?? [:]
        }
        func statusEnum(_ schemas: [String: Any], _ name: String) -> [String] {
            let schema = schemas[name] as? [String: Any]
            let status = (schema?["properties"] as? [String: Any])?["status"] as? [String: Any]
            return (status?["enum"] ?? schema?["enum"]) as? [String] ?? []
        }
        let payments = schemas("payments_payment_v2.json"), orders = schemas("checkout_orders_v2.json")
        return Loaded(
            order: statusEnum(orders, "order_status"), authorization: statusEnum(payments, "authorization_status"),
            capture: statusEnum(payments, "capture_status"), refund: statusEnum(payments, "refund_status"))
    }()
}

struct PayPalLedger: Ledger {
    static let deduplicates = true
    struct Auth { var id: String; var status: String; var amount: Int64 }
    struct Capture { var id: String; var status: String; var amount: Int64; var auth: String? }
    struct Refund { var id: String; var status: String; var amount: Int64; var capture: String; var custom: String? }

    let ref: String
    var intent: String
    var status: String
    var value: Int64
    var auths: [Auth] = []
    var captures: [Capture] = []
    var refunds: [Refund] = []
    var next = 0

    static let moved: Set = ["COMPLETED", "PENDING"]
    static let holding: Set = ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED", "PENDING"]

    init(ref: String, gen: inout Gen, value: Int64) {
        let e = PayPalEnums.loaded
        self.ref = ref
        self.value = value
        intent = gen.chance(50) ? "AUTHORIZE" : "CAPTURE"
        status = gen.chance(80) ? "COMPLETED" : gen.pick(e.order)
        // Each status from PayPal's enum, the usual ones more often (so that orders reach the rows that act).
        if intent == "AUTHORIZE" {
            auths.append(Auth(id: ref + "-A", status: gen.chance(60) ? "CREATED" : gen.pick(e.authorization), amount: value))
        }
        let captureCount =
            intent == "AUTHORIZE" && auths[0].status == "CREATED" ? gen.count(0...1) : gen.count(intent == "CAPTURE" ? 1...2 : 0...2)
        for c in 0..<captureCount {
            let id = ref + "-C\(c)"
            let amount = gen.chance(50) ? value : gen.int(1...value)
            captures.append(
                Capture(id: id, status: gen.chance(50) ? "COMPLETED" : gen.pick(e.capture), amount: amount, auth: auths.first?.id))
            for r in 0..<gen.count(0...2) {
                refunds.append(Refund(id: id + "-R\(r)", status: gen.pick(e.refund), amount: gen.int(1...amount), capture: id, custom: nil))
            }
        }
    }

    func money(_ minor: Int64) -> JSONValue {
        .object([("currency_code", .string("USD")), ("value", .string(JSONValue.decimalString(minorUnits: minor, exponent: 2)))])
    }

    func payment(_ id: String, _ status: String, _ amount: Int64, kind: String, up: String?, custom: String? = nil) -> JSONValue {
        var links: [JSONValue] = [.object([("href", .string("https://api.paypal.com/v2/payments/\(kind)/\(id)")), ("rel", "self")])]
        if let up { links.append(.object([("href", .string("https://api.paypal.com/v2/payments/\(up)")), ("rel", "up")])) }
        var members: [(String, JSONValue)] = [
            ("id", .string(id)), ("status", .string(status)), ("amount", money(amount)),
            ("create_time", "2026-11-01T10:00:00Z"), ("links", .array(links))
        ]
        if let custom { members.append(("custom_id", .string(custom))) }
        return .object(members)
    }

    func json() -> JSONValue {
        var payments: [(String, JSONValue)] = []
        if !auths.isEmpty {
            payments.append(("authorizations", .array(auths.map { payment($0.id, $0.status, $0.amount, kind: "authorizations", up: nil) })))
        }
        if !captures.isEmpty {
            payments.append(
                (
                    "captures",
                    .array(
                        captures.map {
                            payment(
                                $0.id, $0.status, $0.amount, kind: "captures",
                                up: $0.auth.map { "authorizations/" + $0 })
                        })
                ))
        }
        if !refunds.isEmpty {
            payments.append(
                (
                    "refunds",
                    .array(
                        refunds.map {
                            payment($0.id, $0.status, $0.amount, kind: "refunds", up: "captures/" + $0.capture, custom: $0.custom)
                        })
                ))
        }
        var unit: [(String, JSONValue)] = [
            ("reference_id", "default"), ("amount", money(value)),
            ("payee", .object([("merchant_id", "MERCHANT")]))
        ]
        if !payments.isEmpty { unit.append(("payments", .object(payments))) }
        return .object([
            ("id", .string(ref)), ("intent", .string(intent)), ("status", .string(status)),
            ("purchase_units", .array([.object(unit)])), ("create_time", "2026-11-01T10:00:00Z")
        ])
    }

    func snapshot(links: [TransactionLink]) -> Snapshot? { try? PayPalMapping.snapshot(order: json(), links: links) }

    func refunded(_ capture: String) -> Int64 {
        refunds.filter { $0.capture == capture && Self.moved.contains($0.status) }.reduce(0) { $0 + $1.amount }
    }

    mutating func apply(
        _ kind: ActionKind, amount: Int64, target: Int64, providerTarget: String?, final: Bool, pending: Bool,
        key: String, orderID: String, actionID: Int64
    ) -> (ref: String, links: [TransactionLink])? {
        next += 1
        switch kind {
        case .capture:
            guard
                let i = auths.firstIndex(where: { $0.id == providerTarget && ($0.status == "CREATED" || $0.status == "PARTIALLY_CAPTURED") }
                )
            else { return nil }
            let onIt = captures.filter { $0.auth == auths[i].id && Self.holding.contains($0.status) }.reduce(0) { $0 + $1.amount }
            // PayPal captures up to 115% of an authorization (payments_payment_v2.json, capture: "up to 115% of the
            // original authorized amount"): the ledger takes that much, so over-capture is payrecon's to avoid.
            guard amount > 0, onIt + amount <= auths[i].amount * 115 / 100 else { return nil }
            let id = ref + "-NC\(next)"
            captures.append(Capture(id: id, status: pending ? "PENDING" : "COMPLETED", amount: amount, auth: auths[i].id))
            auths[i].status = final || onIt + amount == auths[i].amount ? "CAPTURED" : "PARTIALLY_CAPTURED"
            return (id, [])
        case .void:
            guard let i = auths.firstIndex(where: { $0.id == providerTarget && $0.status == "CREATED" }) else { return nil }
            auths[i].status = "VOIDED"
            return (auths[i].id, [])
        case .refund:
            guard
                let i = captures.firstIndex(where: {
                    $0.id == providerTarget && ($0.status == "COMPLETED" || $0.status == "PARTIALLY_REFUNDED")
                }),
                amount > 0, refunded(captures[i].id) + amount <= captures[i].amount
            else { return nil }
            let id = ref + "-NR\(next)"
            refunds.append(Refund(id: id, status: pending ? "PENDING" : "COMPLETED", amount: amount, capture: captures[i].id, custom: key))
            captures[i].status = refunded(captures[i].id) >= captures[i].amount ? "REFUNDED" : "PARTIALLY_REFUNDED"
            return (
                id,
                [
                    TransactionLink(
                        externalID: id, parentExternalID: captures[i].id, orderID: orderID, kind: .refund, amount: amount,
                        currency: "USD", state: pending ? "PENDING" : "COMPLETED", source: .payrecon, actionID: actionID)
                ]
            )
        case .increment:
            return nil
        }
    }

    var returned: Int64 { refunds.filter { Self.moved.contains($0.status) }.reduce(0) { $0 + $1.amount } }
    var captured: Int64 { captures.filter { Self.holding.contains($0.status) }.reduce(0) { $0 + $1.amount } }

    func find(key: String, kind: ActionKind) -> CallOutcome? {
        guard kind == .refund, let r = refunds.first(where: { $0.custom == key }) else { return nil }
        return r.status == "FAILED" || r.status == "CANCELLED" ? .refused(r.status) : .made(providerRef: r.id)
    }
}

// MARK: - PXP

struct PXPLedger: Ledger {
    static let deduplicates = false
    static let states = [
        "Authorised", "Captured", "Executed", "Confirmed", "Approved", "Refunded", "Cancelled", "Refused", "Rejected",
        "Error", "Pending", "Updated"
    ]
    static let modificationStates = ["Captured", "Authorised", "Cancelled", "Refused", "Pending"]

    let ref: String
    let system: String
    var intent: String
    var state: String
    var value: Int64
    var modifications: [PXPModification] = []
    /// merchantTransactionId (from the key) → the modification made under it.
    var made: [String: String] = [:]
    var next = 0

    init(ref: String, gen: inout Gen, value: Int64) {
        self.ref = ref
        system = "SYS-" + ref
        self.value = value
        intent = gen.pick(["Authorisation", "EstimatedAuthorisation", "Purchase"])
        state = gen.chance(60) ? (intent == "Purchase" ? "Captured" : "Authorised") : gen.pick(Self.states)
        for m in 0..<gen.count(0...2) {
            let op: PXPOperation = gen.pick([.capture, .refund, .void, .incremental])
            modifications.append(
                PXPModification(
                    systemTransactionId: "\(system)-M\(m)", parentSystemTransactionId: system, operation: op,
                    amount: gen.int(1...value), state: gen.pick(Self.modificationStates)))
        }
    }

    func json() -> JSONValue {
        .object([
            ("systemTransactionId", .string(system)), ("state", .string(state)),
            ("transactionMethod", .object([("intent", .string(intent)), ("fundingType", "Card")])),
            ("merchant", "M1"), ("site", "S1"), ("merchantTransactionId", .string(ref)),
            ("merchantTransactionDate", "2026-11-01T10:00:00.000Z"),
            ("amounts", .object([("transactionValue", JSONValue.decimal(minorUnits: value, exponent: 2)), ("currencyCode", "USD")]))
        ])
    }

    func snapshot(links: [TransactionLink]) -> Snapshot? {
        try? PXPMapping.snapshot(transaction: json(), modifications: modifications, transactionRef: ref)
    }

    func sum(_ ops: Set<PXPOperation>, _ states: Set<String>) -> Int64 {
        modifications.filter { ops.contains($0.operation) && states.contains($0.state) }.reduce(0) { $0 + $1.amount }
    }

    /// Captured: an authorisation's capture modifications when it has any (how its parent then shows, Authorised or
    /// Captured, is not documented: PXP-33, and either shows the same money), else the value when the parent shows
    /// captured money.
    var captured: Int64 {
        let captures = sum([.capture, .finalCapture], ["Captured", "Pending"])
        if intent != "Purchase" && captures > 0 { return captures }
        let parent: Int64 = ["Captured", "Executed", "Confirmed", "Approved", "Refunded"].contains(state) ? value : 0
        return max(parent, captures)
    }
    var returned: Int64 { max(state == "Refunded" ? value : 0, sum([.refund], ["Authorised", "Pending"])) }

    mutating func apply(
        _ kind: ActionKind, amount: Int64, target: Int64, providerTarget: String?, final: Bool, pending: Bool,
        key: String, orderID: String, actionID: Int64
    ) -> (ref: String, links: [TransactionLink])? {
        let mtid = PXPClient.merchantTransactionId(forIdempotencyKey: key)
        if let id = made[mtid] { return (id, []) }  // looked up before a re-send: found, not sent again
        guard providerTarget == system else { return nil }
        let captures = sum([.capture, .finalCapture], ["Captured", "Pending"])
        let authorised = modifications.filter { $0.operation == .incremental && $0.isAccepted }.compactMap(\.newTotal).reduce(value, max)
        let op: PXPOperation, accepted: String
        switch kind {
        case .capture:
            guard state == "Authorised", amount > 0, captures + amount <= authorised else { return nil }
            op = final ? .finalCapture : .capture; accepted = "Captured"
        case .refund:
            guard captured > 0, amount > 0, returned + amount <= captured else { return nil }
            op = .refund; accepted = "Authorised"
        case .void:
            guard state == "Authorised", captures == 0 else { return nil }
            op = .void; accepted = "Cancelled"
        case .increment:
            guard state == "Authorised", target > authorised else { return nil }
            op = .incremental; accepted = "Authorised"
        }
        next += 1
        let id = "\(system)-N\(next)"
        var m = PXPModification(
            systemTransactionId: id, parentSystemTransactionId: system, operation: op, amount: amount,
            state: pending && kind != .void ? "Pending" : accepted)
        if kind == .increment { m.newTotal = target }
        modifications.append(m)
        made[mtid] = id
        return (id, [])
    }

    func find(key: String, kind: ActionKind) -> CallOutcome? {
        guard let id = made[PXPClient.merchantTransactionId(forIdempotencyKey: key)],
            let m = modifications.first(where: { $0.systemTransactionId == id })
        else { return .notMade }  // lookups find modifications (PXP-32): absent is not made
        return m.isAccepted ? .made(providerRef: id) : m.isPending ? .stillPending : .refused(m.state)
    }
}

// MARK: - Paypercut

struct PaypercutLedger: Ledger {
    static let deduplicates = true
    static let intentStatuses = [
        "requires_payment_method", "requires_confirmation", "requires_action", "processing", "requires_capture",
        "canceled", "succeeded"
    ]
    struct Refund { var id: String; var amount: Int64; var status: String }

    let ref: String
    var manual: Bool
    var status: String
    var amount: Int64
    var capturable: Int64
    var received: Int64
    var paymentRefunded: Int64
    /// Whether Paypercut's `amount_refunded` counts refunds still pending (undocumented: both are generated).
    var totalIncludesPending: Bool
    var refunds: [Refund] = []
    var next = 0

    init(ref: String, gen: inout Gen, value: Int64) {
        self.ref = ref
        amount = value
        manual = gen.chance(50)
        status = gen.chance(60) ? (manual ? "requires_capture" : "succeeded") : gen.pick(Self.intentStatuses)
        capturable = status == "requires_capture" ? value : 0
        received = status == "succeeded" || (status == "canceled" && gen.chance(30)) ? gen.int(1...value) : 0
        paymentRefunded = received > 0 && gen.chance(30) ? gen.int(0...received) : 0
        totalIncludesPending = gen.chance(50)
    }

    func json() -> JSONValue {
        .object([
            ("id", .string(ref)), ("object", "payment_intent"), ("amount", .integer(amount)), ("amount_capturable", .integer(capturable)),
            ("amount_received", .integer(received)), ("currency", .object([("iso", "EUR"), ("scale", 2)])), ("status", .string(status)),
            ("capture_method", .string(manual ? "manual" : "automatic")), ("created", "2026-11-01T10:00:00Z"),
            ("latest_payment", received > 0 ? .string("pay_" + ref) : .null)
        ])
    }

    var reportedRefunded: Int64 {
        paymentRefunded
            + refunds.filter { $0.status == "succeeded" || (totalIncludesPending && $0.status == "pending") }.reduce(0) { $0 + $1.amount }
    }

    func payment() -> JSONValue? {
        guard received > 0 else { return nil }
        return .object([
            ("id", .string("pay_" + ref)), ("status", "succeeded"), ("amount_captured", .integer(received)),
            ("amount_refunded", .integer(reportedRefunded)), ("payment_method", "card"), ("payment_intent", .string(ref))
        ])
    }

    func snapshot(links: [TransactionLink]) -> Snapshot? {
        try? PaypercutMapping.snapshot(intent: json(), payment: payment(), account: nil, links: links)
    }

    var returned: Int64 {
        paymentRefunded + refunds.filter { $0.status == "succeeded" || $0.status == "pending" }.reduce(0) { $0 + $1.amount }
    }
    var captured: Int64 { received }

    mutating func apply(
        _ kind: ActionKind, amount n: Int64, target: Int64, providerTarget: String?, final: Bool, pending: Bool,
        key: String, orderID: String, actionID: Int64
    ) -> (ref: String, links: [TransactionLink])? {
        guard providerTarget == ref else { return nil }
        switch kind {
        case .capture:
            guard status == "requires_capture", n > 0, n <= capturable else { return nil }
            received += n
            capturable = final ? 0 : capturable - n
            if capturable == 0 { status = "succeeded" }
            return (ref, [])
        case .void:
            guard status == "requires_capture" else { return nil }
            status = "canceled"; capturable = 0
            return (ref, [])
        case .refund:
            guard received > 0, n > 0, returned + n <= received else { return nil }
            next += 1
            let id = "re_\(ref)_\(next)"
            refunds.append(Refund(id: id, amount: n, status: pending ? "pending" : "succeeded"))
            return (
                id,
                [
                    TransactionLink(
                        externalID: id, parentExternalID: ref, orderID: orderID, kind: .refund, amount: n, currency: "EUR",
                        state: pending ? "pending" : "succeeded", source: .payrecon, actionID: actionID)
                ]
            )
        case .increment:
            return nil
        }
    }

    func find(key: String, kind: ActionKind) -> CallOutcome? { nil }  // no mark documented: the key is re-sent as sent
}
