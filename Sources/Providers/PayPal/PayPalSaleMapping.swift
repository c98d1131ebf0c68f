import Reconciliation
import TextFormats

/// PayPal v1 sales (GET /v1/payments/sale/{id}: PayPal Subscriptions and the classic Payments API) → `Snapshot`,
/// as below. An order holds one sale (its transaction_ref is the sale id or its `parent_payment`) or every
/// sale of a billing agreement its events named; the sales are summed.
///
/// Per sale, by `state`: completed → C = `amount.total`; pending → pending (raw state `pending/<reason_code>`);
/// denied → failed; refunded → C = R = total; partially_refunded → C = total, R = the `PAYMENT.SALE.REFUNDED`
/// amounts seen for the sale (links of kind refund whose parent is the sale); reversed → C = V = total. Intent
/// purchase; the merchant is not compared (a sale does not carry it). The state of the whole: all denied → failed;
/// nothing captured and one pending → pending; then R ≥ C > 0 → refunded, R > 0 → partially_refunded, C > 0 →
/// captured. Refunds act on the sales holding money, in order (POST /v1/payments/sale/{id}/refund); a sale cannot be
/// captured, voided or incremented.
public enum PayPalSaleMapping {
    static let reader = AnswerReader(provider: .paypal)
    static let states: Set = ["completed", "partially_refunded", "pending", "refunded", "denied", "reversed"]

    /// `unreadableDisputes`: disputes PayPal refused to show (403), with the sale each names: that sale's refunds
    /// are held as if disputed.
    public static func snapshot(
        sales: [JSONValue], refunds: [TransactionLink], transactionRef: String,
        disputes: [JSONValue] = [], unreadableDisputes: [(dispute: String, capture: String)] = []
    ) throws(ProviderMappingError) -> Snapshot {
        let r = reader
        guard let first = sales.first else { throw r.fail("(answer)", nil, "no sale to map") }
        // (`first` only gives the currency every sale must share.)
        let currency = try r.currency(first["amount"]?["currency"], "sale \(first["id"]?.stringValue ?? "?").amount.currency")
        // Oldest first (then by id), so refunds take from the sales in the order they were made, whatever order the
        // events that named them arrived in.
        let ordered = sales.sorted { a, b in
            let ta = a["create_time"]?.stringValue.flatMap { ISO8601.unixSeconds(from: $0) } ?? 0,
                tb = b["create_time"]?.stringValue.flatMap { ISO8601.unixSeconds(from: $0) } ?? 0
            return ta != tb ? ta < tb : (a["id"]?.stringValue ?? "") < (b["id"]?.stringValue ?? "")
        }
        var t = Totals()
        // A sale PayPal shows refunded is a chargeback (V) only when a dispute PayPal's disputes API shows resolved in
        // the buyer's favour names it; a PAYMENT.SALE.REVERSED event alone decides nothing (a body is a hint).
        let lostToBuyer = Set(
            disputes.filter(Self.resolvedForBuyer).flatMap { d in
                (d["disputed_transactions"]?.arrayValue ?? []).compactMap { $0["seller_transaction_id"]?.stringValue }
            })
        for sale in ordered { try add(sale, refunds: refunds, lostToBuyer: lostToBuyer, currency: currency, to: &t) }
        let (state, rawState) = t.state

        let noAuthorization = "a PayPal sale is captured when it is made: there is no authorization to "
        let unit = PayPalCurrencies.unit(currency)
        let capabilities = Capabilities(
            capture: .denied(noAuthorization + "capture"), void: .denied(noAuthorization + "void"),
            increment: .unsupported("paypal does not support incremental authorisation"),
            refund: t.unaccounted.isEmpty
                ? .spread(t.sources, sources: "PayPal sales")
                : .denied(
                    "PayPal shows sale \(t.unaccounted.joined(separator: ", ")) partially refunded by refunds payrecon does not know "
                        + "(no PAYMENT.SALE.REFUNDED event and none it made): what is left to refund cannot be known"),
            amountUnit: unit,
            amountUnitNote: unit > 1 ? "PayPal takes \(currency.code) without decimals" : nil)
        let (D, notes) = try disputeHold(disputes, unreadable: unreadableDisputes, sales: ordered, currency: currency)
        var snapshot = Snapshot(
            provider: .paypal, transactionRef: transactionRef, merchant: nil, site: nil, reportsMerchant: false,
            intent: .purchase, currency: currency, value: t.C, authorised: t.C, captured: t.C, refunded: t.R, state: state,
            rawState: rawState, createdAt: t.createdAt, capabilities: capabilities, method: "paypal", reversed: t.V,
            disputed: D)
        snapshot.notes = notes
        snapshot.refundPending = t.pendingRefund
        // The refunds events named (a v1 sale's answer lists none): their amounts, fees unknown.
        var seen = Set<String>()
        for link in refunds
        where link.kind == .refund && seen.insert(link.externalID).inserted
            && ordered.contains(where: { $0["id"]?.stringValue == link.parentExternalID })
        {
            if let amount = link.amount, amount > 0 {
                t.movements.append(Movement(id: link.externalID, kind: .refund, at: nil, currency: currency, gross: amount))
            }
        }
        snapshot.movements = t.movements
        return snapshot
    }

    /// The sales summed as they are read.
    struct Totals {
        var C: Int64 = 0, R: Int64 = 0, V: Int64 = 0
        var states: [String] = []
        var pendingRaw: String?
        var createdAt: Int64?
        var sources: [RefundSource] = []
        var unaccounted: [String] = []
        var movements: [Movement] = []
        var pendingRefund = false

        /// The state of the whole, and its raw state (`…/refund_pending` while a refund payrecon knows is pending).
        var state: (TransactionState, String) {
            var raw = states.count == 1 ? states[0] : states.joined(separator: ",")
            let state: TransactionState
            if states.allSatisfy({ $0 == "denied" }) {
                state = .failed
            } else if C == 0, let pendingRaw {
                state = .pending; raw = pendingRaw
            } else if C > 0 && R >= C {
                state = .refunded
            } else if R > 0 {
                state = .partiallyRefunded
            } else if C > 0 {
                state = .captured
            } else {
                state = .failed
            }
            return (state, pendingRefund ? raw + "/refund_pending" : raw)
        }
    }

    /// One sale read into the totals: its money by its state (see the type's comment) and the refunds payrecon knows.
    /// A dispute PayPal shows RESOLVED with the outcome RESOLVED_BUYER_FAVOUR (customer_disputes_v1.json `outcome_code`).
    static func resolvedForBuyer(_ d: JSONValue) -> Bool {
        d["status"]?.stringValue == "RESOLVED" && d["dispute_outcome"]?["outcome_code"]?.stringValue == "RESOLVED_BUYER_FAVOUR"
    }

    static func add(
        _ sale: JSONValue, refunds: [TransactionLink], lostToBuyer: Set<String>, currency: Currency,
        to t: inout Totals
    ) throws(ProviderMappingError) {
        let r = reader
        let id = try r.string(sale["id"], "sale.id")
        let f = "sale \(id)"
        let state = try r.string(sale["state"], "\(f).state")
        guard Self.states.contains(state) else { throw r.fail("\(f).state", sale["state"], "unknown sale state") }
        let code = try r.string(sale["amount"]?["currency"], "\(f).amount.currency")
        guard code == currency.code else {
            throw r.fail("\(f).amount.currency", sale["amount"]?["currency"], "differs from \(currency.code)")
        }
        let total = try amount(sale["amount"]?["total"], "\(f).amount.total", currency)
        if let at = try r.timestamp(sale["create_time"], "\(f).create_time") { t.createdAt = min(t.createdAt ?? at, at) }
        t.states.append(state)
        if state != "pending" && state != "denied" { t.movements.append(try movement(sale, id: id, total: total, currency: currency)) }
        var refunded: Int64 = 0
        switch state {
        case "completed":
            // A refund PayPal accepted and has not completed leaves the sale completed: it counts as moved all the
            // same, so nothing plans that money again.
            t.C = try add(t.C, total)
            refunded = min(try knownRefunds(of: id, in: refunds, pendingOnly: true), total)
            if refunded > 0 { t.pendingRefund = true }
        case "pending": t.pendingRaw = t.pendingRaw ?? ("pending" + (sale["reason_code"]?.stringValue.map { "/" + $0 } ?? ""))
        case "refunded" where lostToBuyer.contains(id):
            // A chargeback: PayPal's v1 sale states have no reversed, so the sale reads refunded; the dispute PayPal
            // shows resolved for the buyer says the money was taken back, not refunded (V, not R).
            t.C = try add(t.C, total)
            var known: Int64 = 0
            for link in refunds where link.kind == .refund && link.parentExternalID == id { known = try add(known, link.amount ?? 0) }
            refunded = min(known, total)
            t.V = try add(t.V, total - refunded)
        case "refunded": t.C = try add(t.C, total); refunded = total
        case "partially_refunded":
            t.C = try add(t.C, total)
            refunded = try knownRefunds(of: id, in: refunds, pendingOnly: false)
            if refunds.contains(where: { $0.kind == .refund && $0.parentExternalID == id && $0.state?.lowercased() == "pending" }) {
                t.pendingRefund = true
            }
            // PayPal says part is refunded but payrecon knows of no refund: never a refund planned blind.
            if refunded == 0 { t.unaccounted.append(id) }
        case "reversed": t.C = try add(t.C, total); t.V = try add(t.V, total)
        default: break  // denied
        }
        t.R = try add(t.R, refunded)
        if state == "completed" || state == "partially_refunded", total > refunded {
            t.sources.append(RefundSource(id: id, amount: total, refunded: refunded))
        }
    }

    /// A sale's money with its `transaction_fee` (v1 `currency` {currency, value}, in the sale's currency); the net is
    /// gross − fee (its receivable_amount is in the receiving account's currency).
    static func movement(_ sale: JSONValue, id: String, total: Int64, currency: Currency) throws(ProviderMappingError) -> Movement {
        let r = reader, f = "sale \(id)"
        var fee: Int64?
        if let tf = sale["transaction_fee"], !tf.isNull {
            let feeCode = try r.string(tf["currency"], "\(f).transaction_fee.currency")
            guard feeCode == currency.code else {
                throw r.fail("\(f).transaction_fee.currency", tf["currency"], "differs from \(currency.code)")
            }
            fee = try amount(tf["value"], "\(f).transaction_fee.value", currency)
        }
        return Movement(
            id: id, kind: .capture, at: try r.timestamp(sale["create_time"], "\(f).create_time"), currency: currency,
            gross: total, fee: fee, net: Movement.net(gross: total, fee: fee, stated: nil))
    }

    /// D, and a note for each dispute PayPal refused to show: its sale's refunds are held as if disputed.
    static func disputeHold(
        _ disputes: [JSONValue], unreadable: [(dispute: String, capture: String)], sales: [JSONValue],
        currency: Currency
    ) throws(ProviderMappingError) -> (Int64, [String]) {
        var D = try PayPalMapping.disputed(disputes, currency: currency)
        var notes: [String] = []
        for (dispute, saleID) in unreadable {
            var held: Int64 = 0
            if let sale = sales.first(where: { $0["id"]?.stringValue == saleID }) {
                held = try amount(sale["amount"]?["total"], "sale \(saleID).amount.total", currency)
            }
            D = try add(D, held)
            notes.append(
                "dispute \(dispute) on sale \(saleID) could not be read: PayPal answered 403; give the app the disputes "
                    + "permission (https://uri.paypal.com/services/disputes/read-seller), meanwhile its refunds are held")
        }
        return (D, notes)
    }

    /// The refunds payrecon knows of sale `id` (those it made, recorded from their answers, and those events named),
    /// each once: every one PayPal has not said failed or was cancelled (a pending one counts as moved), or only the
    /// pending ones (`pendingOnly`, for a sale PayPal still shows completed).
    static func knownRefunds(of id: String, in links: [TransactionLink], pendingOnly: Bool) throws(ProviderMappingError) -> Int64 {
        var total: Int64 = 0
        var counted = Set<String>()
        for link in links where link.kind == .refund && link.parentExternalID == id && counted.insert(link.externalID).inserted {
            let state = link.state?.lowercased() ?? "completed"
            if pendingOnly ? state != "pending" : (state == "failed" || state == "cancelled" || state == "canceled") { continue }
            total = try add(total, link.amount ?? 0)
        }
        return total
    }

    /// A v1 amount string (`"20.00"`) in PayPal's decimals for the currency → ISO minor units.
    public static func amount(_ v: JSONValue?, _ field: String, _ currency: Currency) throws(ProviderMappingError) -> Int64 {
        let units = try reader.amount(v, field, exponent: PayPalCurrencies.exponent(currency))
        guard let minor = PayPalCurrencies.isoMinorUnits(units, currency) else {
            throw reader.fail(field, v, "does not fit in 64-bit minor units")
        }
        return minor
    }

    static func add(_ a: Int64, _ b: Int64) throws(ProviderMappingError) -> Int64 {
        let (s, overflow) = a.addingReportingOverflow(b)
        guard !overflow else { throw reader.fail("sales", nil, "sum overflows") }
        return s
    }
}
