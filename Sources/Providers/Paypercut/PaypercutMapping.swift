import Reconciliation
import TextFormats

/// Paypercut payment intent (+ its latest payment) → `Snapshot`.
///
/// Intent from `capture_method` (manual → authorisation, automatic → purchase). Currency `currency.iso` (upper-cased;
/// its `scale` must equal the currency table's exponent, else the check fails naming both); amounts are already
/// minor units. A = `amount_capturable` + `amount_received`; C = the payment's `amount_captured`, else
/// `amount_received`; R = the payment's `amount_refunded`, else 0. State: requires_capture → authorised; succeeded
/// → refunded (R ≥ C > 0), partially_refunded (R > 0), else captured; requires_action → action_required;
/// requires_confirmation, processing, and requires_payment_method with no failed payment → pending;
/// requires_payment_method whose latest payment failed → failed; canceled → voided when C = 0 (with money captured,
/// by R against C as for succeeded). Creation time `created`, ISO 8601 or unix seconds. The merchant is the
/// account the intent was fetched under (`Paypercut-Account`), since the answer does not name it.
///
/// Paypercut's documents do not say whether `amount_refunded` includes refunds still `pending`, so R is the larger of
/// the two readings: `amount_refunded` plus the pending refunds payrecon knows of the intent (those it made, recorded
/// from their answers), and all the refunds it knows (none Paypercut answered `failed` or `canceled`): a pending
/// refund counts as moved, never planned again, and the raw state says so (`succeeded/refund_pending`).
public enum PaypercutMapping {
    static let reader = AnswerReader(provider: .paypercut)

    public static func snapshot(
        intent p: JSONValue, payment: JSONValue?, account: String?,
        links: [TransactionLink] = []
    ) throws(ProviderMappingError) -> Snapshot {
        let r = reader
        guard p.objectMembers != nil else { throw r.fail("(answer)", p, "expected a JSON object") }
        let id = try r.string(p["id"], "id")
        let intent = try readIntent(p)

        let currency = try readCurrency(p["currency"])

        let value = try r.amount(p["amount"], "amount", exponent: 0)
        let capturable = try optionalAmount(p["amount_capturable"], "amount_capturable")
        let received = try optionalAmount(p["amount_received"], "amount_received")
        let (authorised, overflow) = capturable.addingReportingOverflow(received)
        guard !overflow else { throw r.fail("amount_capturable", p["amount_capturable"], "A overflows") }

        var captured = received, refunded: Int64 = 0
        var paymentFailed = false
        var paymentMethod: String?
        if let payment, !payment.isNull {
            paymentMethod = try r.optionalString(payment["payment_method"], "payment.payment_method")?.lowercased()
            if let c = payment["amount_captured"], !c.isNull { captured = try r.amount(c, "payment.amount_captured", exponent: 0) }
            if let rf = payment["amount_refunded"], !rf.isNull { refunded = try r.amount(rf, "payment.amount_refunded", exponent: 0) }
            paymentFailed = try r.optionalString(payment["status"], "payment.status")?.lowercased() == "failed"
        }

        let known = try knownRefunds(of: id, in: links)
        let pendingRefund = known.pending > 0
        // Whether amount_refunded counts pending refunds is not documented: the bound that makes a refund smaller is
        // the larger of the two readings (it leaves them out: add those payrecon knows; it counts them: as it is).
        let (withPending, tooLarge) = refunded.addingReportingOverflow(known.pending)
        refunded = max(tooLarge ? .max : withPending, known.total)

        let status = try r.string(p["status"], "status")
        guard let state = state(status, captured: captured, refunded: refunded, paymentFailed: paymentFailed) else {
            throw r.fail("status", p["status"], "unknown payment intent status")
        }

        var snapshot = Snapshot(
            provider: .paypercut, transactionRef: id, merchant: account, site: nil, intent: intent, currency: currency,
            value: value, authorised: authorised,
            captured: captured, refunded: refunded, state: state,
            rawState: pendingRefund ? status + "/refund_pending" : status,
            createdAt: try created(p["created"]),
            capabilities: PaypercutProvider.capabilities(paymentIntentID: id, rawState: status), method: paymentMethod)
        snapshot.refundPending = pendingRefund
        if let named = p["metadata"]?["order_id"]?.stringValue, !named.isEmpty {
            snapshot.orderReferences = [named]
            snapshot.orderReferenceFields = [named: "Paypercut metadata.order_id"]
        }
        if let payment, !payment.isNull, captured > 0 || refunded > 0 {
            snapshot.movements = try movements(payment: payment, captured: captured, refunded: refunded, currency: currency)
        }
        return snapshot
    }

    /// The intent from `capture_method`: manual takes a capture (an authorisation), automatic captures at once.
    static func readIntent(_ p: JSONValue) throws(ProviderMappingError) -> Intent {
        let r = reader
        let method = try r.string(p["capture_method"], "capture_method")
        let intent: Intent
        switch method.lowercased() {
        case "manual": intent = .authorisation
        case "automatic", "automatic_async": intent = .purchase
        default: throw r.fail("capture_method", p["capture_method"], "expected manual or automatic")
        }
        return intent
    }

    /// `currency`: `{iso, scale}`, `iso` in any case; `scale` must equal the currency table's exponent.
    static func readCurrency(_ v: JSONValue?) throws(ProviderMappingError) -> Currency {
        let r = reader
        let iso = try r.string(v?["iso"], "currency.iso").uppercased()
        guard let currency = Currency(code: iso) else { throw r.fail("currency.iso", v?["iso"], "unknown currency") }
        if let scaleValue = v?["scale"], !scaleValue.isNull {
            guard let scale = scaleValue.numberLiteral.flatMap({ Int64($0) }) else {
                throw r.fail("currency.scale", scaleValue, "expected an integer")
            }
            guard scale == Int64(currency.exponent) else {
                throw r.fail(
                    "currency.scale", scaleValue, "Paypercut's scale \(scale) differs from \(currency.code)'s exponent \(currency.exponent)"
                )
            }
        }
        return currency
    }

    /// The intent's status as a state (by R against C where money was captured); nil for a status not documented.
    static func state(_ status: String, captured: Int64, refunded: Int64, paymentFailed: Bool) -> TransactionState? {
        let byMoney: TransactionState = captured > 0 && refunded >= captured ? .refunded : refunded > 0 ? .partiallyRefunded : .captured
        switch status.lowercased() {
        case "requires_capture": return .authorised
        case "succeeded": return byMoney
        case "requires_action": return .actionRequired
        case "requires_confirmation", "processing": return .pending
        case "requires_payment_method": return paymentFailed ? .failed : .pending
        case "canceled", "cancelled": return captured == 0 ? .voided : byMoney
        default: return nil
        }
    }

    /// The payment's money: its capture, with the fee and net of its `balance_transaction` {amount, fee, net,
    /// currency, created} (documented on the v2 Payment; amounts in minor units like every Paypercut amount), and
    /// its refunds as one movement of `amount_refunded` (a payment's answer lists no refund: their fees and days are
    /// not known; the day is when payrecon first saw it). A balance transaction in another currency than the
    /// intent's (`exchange_rate`) is left out, since its amounts are not the payment's: the capture then states no fee.
    static func movements(
        payment: JSONValue, captured: Int64, refunded: Int64, currency: Currency
    ) throws(ProviderMappingError) -> [Movement] {
        let r = reader
        let id = try r.string(payment["id"], "payment.id")
        var fee: Int64?, net: Int64?
        var at = try created(payment["created"], "payment.created")
        if let bt = payment["balance_transaction"], !bt.isNull {
            guard bt.objectMembers != nil else { throw r.fail("payment.balance_transaction", bt, "expected an object") }
            // `currency`: an ISO code, or {iso, scale} as on the intent (its shape on a balance transaction is not shown).
            let code = (bt["currency"]?.stringValue ?? bt["currency"]?["iso"]?.stringValue)?.uppercased()
            if code == nil || code == currency.code {
                if let f = bt["fee"], !f.isNull { fee = try r.amount(f, "payment.balance_transaction.fee", exponent: 0) }
                if let n = bt["net"], !n.isNull { net = try r.amount(n, "payment.balance_transaction.net", exponent: 0) }
                if let t = try created(bt["created"], "payment.balance_transaction.created") { at = t }
            }
        }
        var out: [Movement] = []
        if captured > 0 {
            out.append(
                Movement(
                    id: id, kind: .capture, at: at, currency: currency, gross: captured, fee: fee,
                    net: fee == nil && net == nil ? nil : Movement.net(gross: captured, fee: fee, stated: net)))
        }
        if refunded > 0 { out.append(Movement(id: id, kind: .refund, at: nil, currency: currency, gross: refunded)) }
        return out
    }

    /// The refunds payrecon knows of intent `id`, each once: their total (failed and canceled ones moved nothing) and
    /// what of it is still pending.
    static func knownRefunds(of id: String, in links: [TransactionLink]) throws(ProviderMappingError) -> (total: Int64, pending: Int64) {
        var total: Int64 = 0, pending: Int64 = 0
        var counted = Set<String>()
        for link in links where link.kind == .refund && link.parentExternalID == id && counted.insert(link.externalID).inserted {
            let state = link.state?.lowercased() ?? "succeeded"
            guard state != "failed", state != "canceled", state != "cancelled", let amount = link.amount, amount > 0 else { continue }
            let (sum, overflow) = total.addingReportingOverflow(amount)
            guard !overflow else { throw reader.fail("refunds", nil, "sum overflows") }
            total = sum
            if state == "pending" || state == "requires_action" { pending = min(pending &+ amount, total) }
        }
        return (total, pending)
    }

    static func optionalAmount(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> Int64 {
        guard let v, !v.isNull else { return 0 }
        return try reader.amount(v, field, exponent: 0)
    }

    /// `created`: ISO 8601 text or unix seconds.
    static func created(_ v: JSONValue?, _ field: String = "created") throws(ProviderMappingError) -> Int64? {
        guard let v, !v.isNull else { return nil }
        if let literal = v.numberLiteral {
            guard let seconds = Int64(literal) else { throw reader.fail(field, v, "expected unix seconds or an ISO 8601 date-time") }
            return seconds
        }
        return try reader.timestamp(v, field)
    }
}
