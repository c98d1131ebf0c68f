import Reconciliation

/// Where a PayPal resource points for its order.
public enum PayPalResourceLink: Sendable, Hashable {
    case order(String)
    case authorization(String)
    case capture(String)
}

/// PayPal order answer (GET /v2/checkout/orders/{id}) → `Snapshot`, per contract §6.
///
/// Intent CAPTURE = purchase, AUTHORIZE = authorisation. Merchant = `purchase_units[0].payee.merchant_id`,
/// currency from `purchase_units[0].amount`, value = the purchase units' amounts (all in that currency).
/// Over the payments of every purchase unit: A = authorizations CREATED, PARTIALLY_CAPTURED or CAPTURED;
/// C = captures COMPLETED, PARTIALLY_REFUNDED or REFUNDED; R = refunds COMPLETED.
/// State, first match: order VOIDED, or authorizations all VOIDED (or EXPIRED, which older answers use) with C = 0
/// → voided; captures all DECLINED/FAILED with C = 0, or authorizations all DENIED → failed; a capture PENDING with
/// C = 0 → pending; no payments and order CREATED/SAVED/APPROVED → pending, PAYER_ACTION_REQUIRED → action_required;
/// R ≥ C > 0 → refunded; R > 0 → partially_refunded; an authorization PARTIALLY_CAPTURED → authorised (with C > 0);
/// C > 0 → captured; A > 0 → authorised. What is left (payments
/// that hold nothing: e.g. voided and denied authorizations) is pending when an authorization is PENDING, else failed;
/// an order COMPLETED without any payment is a mapping error.
public enum PayPalMapping {
    static let reader = AnswerReader(provider: "paypal")

    static let orderStatuses: Set = ["CREATED", "SAVED", "APPROVED", "VOIDED", "COMPLETED", "PAYER_ACTION_REQUIRED"]
    static let authorizationStatuses: Set = ["CREATED", "CAPTURED", "DENIED", "PARTIALLY_CAPTURED", "VOIDED", "PENDING", "EXPIRED"]
    static let captureStatuses: Set = ["COMPLETED", "DECLINED", "PARTIALLY_REFUNDED", "PENDING", "REFUNDED", "FAILED"]
    static let refundStatuses: Set = ["CANCELLED", "FAILED", "PENDING", "COMPLETED"]

    struct Payment {
        var id: String
        var status: String
        var amount: Int64
        var up: PayPalResourceLink?
    }

    public static func snapshot(order o: JSONValue) throws(ProviderMappingError) -> Snapshot {
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

        var value: Int64 = 0
        var auths: [Payment] = [], captures: [Payment] = [], refunds: [Payment] = []
        for (u, unit) in units.enumerated() {
            let p = "purchase_units[\(u)]"
            value = try add(value, try money(unit["amount"], "\(p).amount", currency), "\(p).amount")
            auths += try payments(unit["payments"]?["authorizations"], "\(p).payments.authorizations", authorizationStatuses, currency)
            captures += try payments(unit["payments"]?["captures"], "\(p).payments.captures", captureStatuses, currency)
            refunds += try payments(unit["payments"]?["refunds"], "\(p).payments.refunds", refundStatuses, currency)
        }

        let A = try sum(auths, ["CREATED", "PARTIALLY_CAPTURED", "CAPTURED"])
        let C = try sum(captures, ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"])
        let R = try sum(refunds, ["COMPLETED"])
        let noPayments = auths.isEmpty && captures.isEmpty && refunds.isEmpty

        let state: TransactionState
        if status == "VOIDED" || (!auths.isEmpty && auths.allSatisfy({ $0.status == "VOIDED" || $0.status == "EXPIRED" }) && C == 0) {
            state = .voided
        } else if (!captures.isEmpty && captures.allSatisfy({ $0.status == "DECLINED" || $0.status == "FAILED" }) && C == 0)
                    || (!auths.isEmpty && auths.allSatisfy({ $0.status == "DENIED" })) {
            state = .failed
        } else if captures.contains(where: { $0.status == "PENDING" }) && C == 0 {
            state = .pending
        } else if noPayments && ["CREATED", "SAVED", "APPROVED"].contains(status) {
            state = .pending
        } else if noPayments && status == "PAYER_ACTION_REQUIRED" {
            state = .actionRequired
        } else if C > 0 && R >= C {
            state = .refunded
        } else if R > 0 {
            state = .partiallyRefunded
        } else if auths.contains(where: { $0.status == "PARTIALLY_CAPTURED" }) {
            state = .authorised  // still holds an open authorization, with C > 0
        } else if C > 0 {
            state = .captured
        } else if A > 0 {
            state = .authorised
        } else if auths.contains(where: { $0.status == "PENDING" }) {
            state = .pending
        } else if !noPayments {
            state = .failed
        } else {
            throw r.fail("status", o["status"], "no payments to derive a state from")
        }

        return Snapshot(
            provider: .paypal, transactionRef: orderID, merchant: merchant, site: nil, intent: intent, currency: currency,
            value: value, authorised: A, captured: C, refunded: R, state: state, rawState: status,
            createdAt: try r.timestamp(o["create_time"], "create_time"),
            capabilities: capabilities(auths: auths, captures: captures, refunds: refunds, currency: currency))
    }

    /// The authorization still open for capture/void, and the captures still holding unrefunded money. Completed
    /// refunds count against the capture their `up` link names; refunds that link nowhere known are attributed to
    /// captures in order, filling each one's remaining amount.
    static func capabilities(auths: [Payment], captures: [Payment], refunds: [Payment], currency: Currency) -> Capabilities {
        let open = auths.first(where: { $0.status == "CREATED" || $0.status == "PARTIALLY_CAPTURED" })
        let countable = captures.filter { ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"].contains($0.status) }
        var refunded = [Int64](repeating: 0, count: countable.count)
        var unlinked: [Int64] = []
        for refund in refunds where refund.status == "COMPLETED" {
            if case .capture(let id)? = refund.up, let i = countable.firstIndex(where: { $0.id == id }) {
                refunded[i] += refund.amount
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
        return PayPalProvider.capabilities(authorizationID: open?.id, authorizationStatus: open?.status, refundableCaptures: refs,
                                           currency: currency)
    }

    /// Where a webhook resource points for its order: an order's own id; `supplementary_data.related_ids`
    /// (order_id, then authorization_id, then capture_id); else the `up` link. Nil when nothing links.
    public static func orderReference(resourceType: String, resource: JSONValue) -> PayPalResourceLink? {
        if resourceType == "checkout-order" || resourceType == "order", let id = resource["id"]?.stringValue { return .order(id) }
        let related = resource["supplementary_data"]?["related_ids"]
        if let id = related?["order_id"]?.stringValue, !id.isEmpty { return .order(id) }
        if let up = upLink(resource) { return up }
        if let id = related?["authorization_id"]?.stringValue, !id.isEmpty, resourceType != "authorization" { return .authorization(id) }
        if let id = related?["capture_id"]?.stringValue, !id.isEmpty, resourceType != "capture" { return .capture(id) }
        return nil
    }

    /// The resource named by the first `rel: up` link.
    static func upLink(_ resource: JSONValue) -> PayPalResourceLink? {
        for link in resource["links"]?.arrayValue ?? [] where link["rel"]?.stringValue == "up" {
            if let href = link["href"]?.stringValue, let target = linkTarget(href) { return target }
        }
        return nil
    }

    /// `…/v2/checkout/orders/{id}`, `…/v2/payments/authorizations/{id}`, `…/v2/payments/captures/{id}[/…]`.
    public static func linkTarget(_ href: String) -> PayPalResourceLink? {
        var path = Substring(href)
        if let scheme = path.range(of: "://") { path = path[scheme.upperBound...].drop(while: { $0 != "/" }) }
        if let q = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<q] }
        let segments = path.split(separator: "/").map(String.init)
        for (i, s) in segments.enumerated() where i + 1 < segments.count {
            let id = segments[i + 1]
            switch s {
            case "orders": return .order(id)
            case "authorizations": return .authorization(id)
            case "captures": return .capture(id)
            default: continue
            }
        }
        return nil
    }

    // MARK: Reading

    static func payments(_ v: JSONValue?, _ field: String, _ statuses: Set<String>, _ currency: Currency) throws(ProviderMappingError)
        -> [Payment] {
        let r = reader
        var out: [Payment] = []
        for (i, p) in try r.array(v, field).enumerated() {
            let f = "\(field)[\(i)]"
            let status = try r.string(p["status"], "\(f).status")
            guard statuses.contains(status) else { throw r.fail("\(f).status", p["status"], "unknown status") }
            out.append(Payment(id: try r.string(p["id"], "\(f).id"), status: status,
                               amount: try money(p["amount"], "\(f).amount", currency), up: upLink(p)))
        }
        return out
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
