import Foundation
import Reconciliation
import TextFormats

/// PayPal order answer (GET /v2/checkout/orders/{id}) → `Snapshot`.
///
/// Intent CAPTURE = purchase, AUTHORIZE = authorisation. Merchant = `purchase_units[0].payee.merchant_id`,
/// currency from `purchase_units[0].amount`, value = the purchase units' amounts (all in that currency).
/// Over the payments of every purchase unit: A = per purchase unit, its newest authorization when CREATED
/// (PARTIALLY_CREATED counts as CREATED), PARTIALLY_CAPTURED or CAPTURED (PAYPAL-REAUTHORIZATION: the orders schema
/// gives an authorization no parent, so a unit's newest authorization stands for it — a reauthorization replaces
/// the one it renews — and a void goes to the unit's first, "the original parent"); C = captures COMPLETED,
/// PARTIALLY_REFUNDED or REFUNDED (PayPal's capture statuses have no REVERSED); R = refund records COMPLETED or PENDING
/// that are refunds the merchant made (a PENDING refund is money PayPal accepted to return and may still be moving:
/// it counts as moved, and the raw state says so, `COMPLETED/REFUND_PENDING`); captures PENDING are
/// `pendingCaptured`, outside C and outside the authorization's capturable room; V = refund records COMPLETED that are
/// reversals (chargebacks): those whose own `note_to_payer` says the payment was reversed, unless payrecon made it (a
/// PAYMENT.CAPTURE.REVERSED event naming a record only makes it fetched, and is noted). R counts records only, never a
/// capture's status (an open dispute may show a capture PARTIALLY_REFUNDED with no record). D = `dispute_amount` of the
/// disputes given (those whose own answer names one of this order's payments) that are not RESOLVED, plus the
/// amount of each capture whose dispute PayPal refused to show (its refunds are held as if disputed).
/// State, first match: order VOIDED, or authorizations all VOIDED (or EXPIRED) with C = 0 → voided; captures all
/// DECLINED/FAILED with C = 0, or authorizations all DENIED → failed; a capture PENDING with C = 0 → pending (raw
/// state `PENDING/<status_details.reason>`); no payments and order CREATED/SAVED/APPROVED → pending,
/// PAYER_ACTION_REQUIRED → action_required; R ≥ C > 0 → refunded; R > 0 → partially_refunded; an authorization
/// still open (PARTIALLY_CAPTURED, or CREATED beside captured money) → authorised (with C > 0); C > 0 → captured;
/// A > 0 → authorised. What is left (payments that hold nothing: e.g. voided and denied authorizations) is pending
/// when an authorization is PENDING, else failed; an order COMPLETED without any payment is a mapping error.
/// Method: an ECHECK capture → `echeck`, else the key of `payment_source` (`paypal`, `card`, `venmo`…).
/// Movements: each counted capture, completed refund and completed reversal, with its `create_time` and the fee and
/// net of its breakdown (`movements(captures:merchantRefunds:reversals:currency:)`).
public enum PayPalMapping {
    static let reader = AnswerReader(provider: .paypal)

    static let orderStatuses: Set = ["CREATED", "SAVED", "APPROVED", "VOIDED", "COMPLETED", "PAYER_ACTION_REQUIRED"]
    static let authorizationStatuses: Set = [
        "CREATED", "PARTIALLY_CREATED", "CAPTURED", "DENIED", "PARTIALLY_CAPTURED", "VOIDED",
        "PENDING", "EXPIRED"
    ]
    /// PayPal's published capture statuses (payments_payment_v2.json `capture_status`): no REVERSED.
    static let captureStatuses: Set = ["COMPLETED", "DECLINED", "PARTIALLY_REFUNDED", "PENDING", "REFUNDED", "FAILED"]
    static let refundStatuses: Set = ["CANCELLED", "FAILED", "PENDING", "COMPLETED"]
    static let disputeStatuses: Set = [
        "OPEN", "WAITING_FOR_BUYER_RESPONSE", "WAITING_FOR_SELLER_RESPONSE", "UNDER_REVIEW",
        "RESOLVED", "OTHER"
    ]

    /// Captures whose money counts in C.
    static let countedCaptures: Set = ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"]
    /// Refund records whose money counts as moved: completed, and accepted but not final (PENDING: eCheck-funded, or
    /// the balance was short). FAILED and CANCELLED ones moved nothing.
    static let movedRefunds: Set = ["COMPLETED", "PENDING"]

    struct Payment {
        var id: String
        var status: String
        var amount: Int64
        var up: PayPalReference?
        /// `status_details.reason` (`ECHECK`, `PENDING_REVIEW`…).
        var reason: String?
        /// The purchase unit it belongs to.
        var unit: Int = 0
        var note: String?
        /// `create_time`, unix seconds.
        var at: Int64? = nil
        /// A capture's `seller_receivable_breakdown` or a refund's `seller_payable_breakdown`: `paypal_fee` and
        /// `net_amount`, in the transaction's currency (nil where the answer has no breakdown: a pending capture).
        var fee: Int64? = nil
        var net: Int64? = nil
        var hasBreakdown = false
        /// The net credited (or debited) in the payee's receiving currency after a conversion: a capture's
        /// `receivable_amount`, a refund's `net_amount_in_receivable_currency`.
        var received: (currency: Currency, amount: Int64)? = nil
    }

    /// A refund record that is a reversal (a chargeback, money the buyer's bank took back), not a refund the
    /// merchant made: one whose own answer says so, its `note_to_payer` PayPal's "Payment reversed". Read from the
    /// API answer only: a PAYMENT.CAPTURE.REVERSED event naming a record (`reversals`) makes payrecon fetch it, never
    /// decides it (a body is a hint: a forged one naming a merchant refund would take it out of R, and the refund
    /// would be made again). payrecon's own refunds never are.
    static func isReversal(_ refund: Payment, own: Set<String>) -> Bool {
        guard !own.contains(refund.id) else { return false }
        // The note PayPal writes on its reversal record, exactly (a merchant's own note may mention a reversal).
        return refund.note?.trimmingCharacters(in: .whitespaces).lowercased() == "payment reversed"
    }

    /// - Parameters:
    ///   - links: what payrecon knows of the order: reversal records events named (kind `reversal`) and the refunds
    ///     it made itself (source payrecon, kind `refund`).
    ///   - unreadableDisputes: disputes PayPal refused to show (403), with the capture each one names.
    public static func snapshot(
        order o: JSONValue, disputes: [JSONValue] = [], links: [TransactionLink] = [],
        unreadableDisputes: [(dispute: String, capture: String)] = []
    ) throws(ProviderMappingError) -> Snapshot {
        let r = reader
        guard o.objectMembers != nil else { throw r.fail("(answer)", o, "expected a JSON object") }
        let orderID = try r.string(o["id"], "id")
        let status = try r.string(o["status"], "status")
        guard orderStatuses.contains(status) else { throw r.fail("status", o["status"], "unknown order status") }
        let intent: Intent
        switch try r.string(o["intent"], "intent") {
        case "CAPTURE": intent = .purchase
        case "AUTHORIZE": intent = .authorisation
        default: throw r.fail("intent", o["intent"], "unknown intent")
        }
        let units = try r.array(o["purchase_units"], "purchase_units")
        guard let first = units.first else { throw r.fail("purchase_units", o["purchase_units"], "no purchase unit") }
        let merchant = try r.optionalString(first["payee"]?["merchant_id"], "purchase_units[0].payee.merchant_id")
        let currency = try r.currency(first["amount"]?["currency_code"], "purchase_units[0].amount.currency_code")

        let p = try readPayments(units, currency: currency, links: links)
        let A = try sum(p.current, ["CREATED", "PARTIALLY_CAPTURED", "CAPTURED"])
        let C = try sum(p.captures, countedCaptures)
        let R = try sum(p.merchantRefunds, movedRefunds)
        let (D, notes) = try disputeHold(disputes, unreadable: unreadableDisputes, captures: p.captures, currency: currency)
        let (state, rawState) = try state(status: status, p, C: C, R: R, A: A, answer: o)

        var method = o["payment_source"]?.objectMembers?.first?.0
        if p.captures.contains(where: { $0.reason == "ECHECK" }) { method = "echeck" }
        var snapshot = Snapshot(
            provider: .paypal, transactionRef: orderID, merchant: merchant, site: nil, intent: intent, currency: currency,
            value: p.value, authorised: A, captured: C, refunded: R, state: state, rawState: rawState,
            createdAt: try r.timestamp(o["create_time"], "create_time"),
            capabilities: capabilities(current: p.current, roots: p.roots, captures: p.captures, refunds: p.refunds, currency: currency),
            method: method, reversed: try sum(p.reversalRecords, ["COMPLETED"]), disputed: D)
        (snapshot.orderReferences, snapshot.orderReferenceFields) = orderReferences(units)
        snapshot.refundPending = p.merchantRefunds.contains(where: { $0.status == "PENDING" })
        snapshot.notes =
            notes
            + p.calledReversals.map {
                "a PAYMENT.CAPTURE.REVERSED event named \($0) a reversal, but PayPal's answer reads it as a refund the merchant made: counted in R"
            }
        snapshot.pendingCaptured = try sum(p.captures, ["PENDING"])
        snapshot.movements = movements(
            captures: p.captures, merchantRefunds: p.merchantRefunds, reversals: p.reversalRecords, currency: currency)
        return snapshot
    }

    /// The order's payments over every purchase unit, as the figures read them.
    struct Payments {
        var value: Int64 = 0
        var auths: [Payment] = [], captures: [Payment] = [], refunds: [Payment] = []
        /// Per purchase unit, its newest authorization (a reauthorization replaces the one it renews), and each one's
        /// original parent (what a void goes to).
        var current: [Payment] = [], roots: [String: String] = [:]
        /// Refund records that are refunds the merchant made, and those that are reversals (chargebacks).
        var merchantRefunds: [Payment] = [], reversalRecords: [Payment] = []
        /// Records a PAYMENT.CAPTURE.REVERSED event named that PayPal's answer reads as refunds the merchant made.
        var calledReversals: [String] = []
        var none: Bool { auths.isEmpty && captures.isEmpty && refunds.isEmpty }
    }

    static func readPayments(_ units: [JSONValue], currency: Currency, links: [TransactionLink]) throws(ProviderMappingError) -> Payments {
        var p = Payments()
        for (u, unit) in units.enumerated() {
            let f = "purchase_units[\(u)]"
            p.value = try add(p.value, try money(unit["amount"], "\(f).amount", currency), "\(f).amount")
            p.auths += try payments(unit["payments"]?["authorizations"], "\(f).payments.authorizations", authorizationStatuses, currency)
                .map {
                    var a = $0; a.unit = u; return a
                }
            p.captures += try payments(unit["payments"]?["captures"], "\(f).payments.captures", captureStatuses, currency)
            p.refunds += try payments(unit["payments"]?["refunds"], "\(f).payments.refunds", refundStatuses, currency)
        }
        // PARTIALLY_CREATED counts as CREATED, EXPIRED as VOIDED.
        for i in p.auths.indices {
            if p.auths[i].status == "PARTIALLY_CREATED" { p.auths[i].status = "CREATED" }
            if p.auths[i].status == "EXPIRED" { p.auths[i].status = "VOIDED" }
        }
        for unit in Set(p.auths.map(\.unit)).sorted() {
            let mine = p.auths.filter { $0.unit == unit }
            p.current.append(mine.last!)
            // The original parent: the unit's earliest authorization still alive (not an earlier voided or denied attempt).
            p.roots[mine.last!.id] = (mine.first { $0.status != "VOIDED" && $0.status != "DENIED" } ?? mine.last!).id
        }
        let reversals = Set(links.filter { $0.kind == .reversal }.map(\.externalID))
        let own = Set(links.filter { $0.source == .payrecon && $0.kind == .refund }.map(\.externalID))
        p.merchantRefunds = p.refunds.filter { !isReversal($0, own: own) }
        p.reversalRecords = p.refunds.filter { isReversal($0, own: own) }
        // What an event called a reversal and PayPal's answer does not: said, and counted as the refund it is.
        p.calledReversals = p.merchantRefunds.filter { reversals.contains($0.id) && !own.contains($0.id) }.map(\.id)
        return p
    }

    /// D, and what the check could not read: a dispute PayPal refused to show holds its whole capture (refunding a
    /// disputed payment pays twice), and a note says which permission is missing.
    static func disputeHold(
        _ disputes: [JSONValue], unreadable: [(dispute: String, capture: String)], captures: [Payment],
        currency: Currency
    ) throws(ProviderMappingError) -> (Int64, [String]) {
        var D = try disputed(disputes, currency: currency)
        var notes: [String] = []
        for (dispute, captureID) in unreadable {
            D = try add(D, captures.first { $0.id == captureID }?.amount ?? 0, "disputes")
            notes.append(
                "dispute \(dispute) on capture \(captureID) could not be read: PayPal answered 403; give the app the "
                    + "disputes permission (https://uri.paypal.com/services/disputes/read-seller), meanwhile its refunds are held")
        }
        return (D, notes)
    }

    /// The state, first match (see the type's comment), and the raw state (`COMPLETED/REFUND_PENDING` while a refund
    /// the merchant made is pending; `PENDING/<reason>` for a pending payment).
    static func state(
        status: String, _ p: Payments, C: Int64, R: Int64, A: Int64, answer o: JSONValue
    ) throws(ProviderMappingError)
        -> (TransactionState, String)
    {
        var raw = status
        if p.merchantRefunds.contains(where: { $0.status == "PENDING" }) { raw += "/REFUND_PENDING" }
        func pendingRaw(_ payment: Payment) -> String { "PENDING" + (payment.reason.map { "/" + $0 } ?? "") }
        let current = p.current, captures = p.captures
        if status == "VOIDED" || (!current.isEmpty && current.allSatisfy({ $0.status == "VOIDED" }) && C == 0) { return (.voided, raw) }
        if (!captures.isEmpty && captures.allSatisfy({ $0.status == "DECLINED" || $0.status == "FAILED" }) && C == 0)
            || (!current.isEmpty && current.allSatisfy({ $0.status == "DENIED" }))
        {
            return (.failed, raw)
        }
        if let pending = captures.first(where: { $0.status == "PENDING" }), C == 0 { return (.pending, pendingRaw(pending)) }
        if p.none && ["CREATED", "SAVED", "APPROVED"].contains(status) { return (.pending, raw) }
        if p.none && status == "PAYER_ACTION_REQUIRED" { return (.actionRequired, raw) }
        if C > 0 && R >= C { return (.refunded, raw) }
        if R > 0 { return (.partiallyRefunded, raw) }
        // Still holds an open authorization, with C > 0 (another purchase unit's, say).
        if current.contains(where: { $0.status == "PARTIALLY_CAPTURED" || ($0.status == "CREATED" && C > 0) }) { return (.authorised, raw) }
        if C > 0 { return (.captured, raw) }
        if A > 0 { return (.authorised, raw) }
        if let pending = current.first(where: { $0.status == "PENDING" }) { return (.pending, pendingRaw(pending)) }
        if !p.none { return (.failed, raw) }
        throw reader.fail("status", o["status"], "no payments to derive a state from")
    }

    /// The merchant order ids the answer names (`purchase_units[].reference_id` and `custom_id`, not PayPal's
    /// "default"), each with the field that names it.
    static func orderReferences(_ units: [JSONValue]) -> ([String], [String: String]) {
        var named: [String] = []
        var fields: [String: String] = [:]
        for (u, unit) in units.enumerated() {
            for key in ["reference_id", "custom_id"] {
                if let id = unit[key]?.stringValue, !id.isEmpty, id != "default", !named.contains(id) {
                    named.append(id)
                    fields[id] = "PayPal purchase_units[\(u)].\(key)"
                }
            }
        }
        return (named, fields)
    }

    /// The money the order moved: its counted captures, and its completed refunds and reversals, each with the fee
    /// and net its breakdown states. A breakdown without `paypal_fee` is a capture PayPal took no fee on (0); one
    /// without `net_amount` nets gross − fee; no breakdown at all leaves both unknown.
    static func movements(captures: [Payment], merchantRefunds: [Payment], reversals: [Payment], currency: Currency) -> [Movement] {
        func movement(_ p: Payment, _ kind: Movement.Kind) -> Movement {
            let fee: Int64? = p.hasBreakdown ? (p.fee ?? 0) : nil
            // A conversion into the currency of the transaction itself is no conversion.
            let received = p.received.flatMap { $0.currency == currency ? nil : $0 }
            return Movement(
                id: p.id, kind: kind, at: p.at, currency: currency, gross: p.amount, fee: fee,
                net: p.hasBreakdown ? Movement.net(gross: p.amount, fee: fee, stated: p.net) : nil,
                received: received?.amount, receivedCurrency: received?.currency)
        }
        return captures.filter { countedCaptures.contains($0.status) }.map { movement($0, .capture) }
            + merchantRefunds.filter { $0.status == "COMPLETED" }.map { movement($0, .refund) }
            + reversals.filter { $0.status == "COMPLETED" }.map { movement($0, .reversal) }
    }

    /// D: the disputes' `dispute_amount` where the status is not RESOLVED.
    static func disputed(_ disputes: [JSONValue], currency: Currency) throws(ProviderMappingError) -> Int64 {
        let r = reader
        var total: Int64 = 0
        for d in disputes {
            let id = (try? r.string(d["dispute_id"], "dispute_id")) ?? "?"
            let f = "dispute \(id)"
            let status = try r.string(d["status"], "\(f).status")
            guard disputeStatuses.contains(status) else { throw r.fail("\(f).status", d["status"], "unknown dispute status") }
            guard status != "RESOLVED" else { continue }
            total = try add(total, try money(d["dispute_amount"], "\(f).dispute_amount", currency), "\(f).dispute_amount")
        }
        return total
    }

    /// The authorizations still open for capture/void (per purchase unit), and the captures still holding
    /// unrefunded, unreversed money. Completed and pending refund records (refunds and reversals alike: neither can be refunded
    /// again) count against the capture their `up` link names; records that link nowhere known are attributed to
    /// captures in order, filling each one's remaining amount.
    static func capabilities(
        current: [Payment], roots: [String: String], captures: [Payment], refunds: [Payment],
        currency: Currency
    ) -> Capabilities {
        let openAuths = current.filter { $0.status == "CREATED" || $0.status == "PARTIALLY_CAPTURED" }
        let open = openAuths.first
        let countable = captures.filter { countedCaptures.contains($0.status) }
        var refunded = [Int64](repeating: 0, count: countable.count)
        var unlinked: [Int64] = []
        for refund in refunds where movedRefunds.contains(refund.status) {
            if case .capture(let id)? = refund.up, let i = countable.firstIndex(where: { $0.id == id }) {
                refunded[i] += refund.amount
            } else if case .capture(let id)? = refund.up, captures.contains(where: { $0.id == id }) {
                continue  // a record of an uncountable capture
            } else {
                unlinked.append(refund.amount)
            }
        }
        for var amount in unlinked {
            for i in countable.indices where amount > 0 {
                let room = max(0, countable[i].amount - refunded[i])
                let take = min(room, amount)
                refunded[i] += take
                amount -= take
            }
        }
        var refs: [RefundSource] = []
        for (i, c) in countable.enumerated() where (c.status == "COMPLETED" || c.status == "PARTIALLY_REFUNDED") && c.amount > refunded[i] {
            refs.append(RefundSource(id: c.id, amount: c.amount, refunded: refunded[i]))
        }
        var capabilities = PayPalProvider.capabilities(
            authorizationID: open?.id, authorizationStatus: open?.status, refundableCaptures: refs,
            currency: currency)
        // A reauthorization is voided through the original parent.
        if let open, let root = roots[open.id], root != open.id, case .allowed = capabilities.void {
            capabilities.void = .allowed(target: root)
        }
        // Several purchase units: a capture spreads over their open authorizations, a void voids each (kept while
        // one is left open, so each authorization's request id stays the same from one attempt to the next).
        if current.count > 1 && !openAuths.isEmpty {
            capabilities.captureSources = openAuths.map { auth in
                // Captures PENDING on it are given up too: never captured a second time.
                let capturedOnIt = captures.filter {
                    $0.up == .authorization(auth.id) && (countedCaptures.contains($0.status) || $0.status == "PENDING")
                }
                .reduce(Int64(0)) { $0 + $1.amount }
                return RefundSource(id: auth.id, amount: auth.amount, refunded: capturedOnIt)
            }
        }
        return capabilities
    }

    // MARK: Reading

    static func payments(
        _ v: JSONValue?, _ field: String, _ statuses: Set<String>, _ currency: Currency
    ) throws(ProviderMappingError)
        -> [Payment]
    {
        let r = reader
        var out: [Payment] = []
        for (i, p) in try r.array(v, field).enumerated() {
            let f = "\(field)[\(i)]"
            let status = try r.string(p["status"], "\(f).status")
            guard statuses.contains(status) else { throw r.fail("\(f).status", p["status"], "unknown status") }
            let id = try r.string(p["id"], "\(f).id")
            var payment = Payment(
                id: id, status: status, amount: try money(p["amount"], "\(f).amount", currency), up: upLink(p),
                reason: p["status_details"]?["reason"]?.stringValue, note: p["note_to_payer"]?.stringValue)
            payment.at = try r.timestamp(p["create_time"], "\(f).create_time")
            // A capture's breakdown is seller_receivable_breakdown, a refund's seller_payable_breakdown.
            for key in ["seller_receivable_breakdown", "seller_payable_breakdown"] {
                guard let b = p[key], !b.isNull else { continue }
                let bf = "\(f).\(key)"
                guard b.objectMembers != nil else { throw r.fail(bf, b, "expected an object") }
                payment.hasBreakdown = true
                if let fee = b["paypal_fee"], !fee.isNull { payment.fee = try money(fee, "\(bf).paypal_fee", currency) }
                if let net = b["net_amount"], !net.isNull { payment.net = try money(net, "\(bf).net_amount", currency) }
                // Returned "only when the currency of the captured payment is different from the currency of the PayPal
                // account where the payee wants to credit the funds" (payments_payment_v2.json).
                for name in ["receivable_amount", "net_amount_in_receivable_currency"] {
                    if let received = b[name], !received.isNull { payment.received = try anyMoney(received, "\(bf).\(name)") }
                }
            }
            out.append(payment)
        }
        return out
    }

    /// The resource named by the first `rel: up` link.
    static func upLink(_ resource: JSONValue) -> PayPalReference? {
        for link in resource["links"]?.arrayValue ?? [] where link["rel"]?.stringValue?.lowercased() == "up" {
            if let href = link["href"]?.stringValue, let target = PayPalEvent.reference(href: href) { return target }
        }
        return nil
    }

    /// `{"currency_code": …, "value": "…"}` in the order's currency → minor units.
    static func money(_ v: JSONValue?, _ field: String, _ currency: Currency) throws(ProviderMappingError) -> Int64 {
        let r = reader
        guard let v, v.objectMembers != nil else { throw r.fail(field, v, v == nil ? "missing" : "expected an amount object") }
        let code = try r.string(v["currency_code"], "\(field).currency_code")
        guard code == currency.code else {
            throw r.fail("\(field).currency_code", v["currency_code"], "differs from the order's currency \(currency.code)")
        }
        // PayPal's decimals (HUF, TWD: none), then ISO minor units.
        let units = try r.amount(v["value"], "\(field).value", exponent: PayPalCurrencies.exponent(currency))
        guard let minor = PayPalCurrencies.isoMinorUnits(units, currency) else {
            throw r.fail("\(field).value", v["value"], "does not fit in 64-bit minor units")
        }
        return minor
    }

    /// `{"currency_code": …, "value": "…"}` in whatever currency it names (a receivable amount) → that currency and
    /// its minor units.
    static func anyMoney(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> (currency: Currency, amount: Int64) {
        let r = reader
        guard let v, v.objectMembers != nil else { throw r.fail(field, v, v == nil ? "missing" : "expected an amount object") }
        let code = try r.string(v["currency_code"], "\(field).currency_code")
        guard let currency = Currency(code: code) else {
            throw r.fail("\(field).currency_code", v["currency_code"], "not an ISO 4217 currency")
        }
        return (currency, try money(v, field, currency))
    }

    static func sum(_ payments: [Payment], _ statuses: Set<String>) throws(ProviderMappingError) -> Int64 {
        var total: Int64 = 0
        for p in payments where statuses.contains(p.status) { total = try add(total, p.amount, "payments") }
        return total
    }

    static func add(_ a: Int64, _ b: Int64, _ field: String) throws(ProviderMappingError) -> Int64 {
        let (s, overflow) = a.addingReportingOverflow(b)
        guard !overflow else { throw reader.fail(field, nil, "sum overflows") }
        return s
    }
}
