import Reconciliation

/// PayPal's Transaction Search (`GET /v1/reporting/transactions`, reporting_transactions_v1.json) for `payrecon
/// backfill`: windows of at most 31 days, pages of 500, `RESULTSET_TOO_LARGE` when a window holds more than PayPal
/// lists at once (then its halves are searched), transactions listed up to 3 hours after they happen, and the
/// answer's `last_refreshed_datetime` as how far its data reaches (docs/PROVIDER-FACTS.md PAYPAL-54…).
struct PayPalTransactionSearch: TransactionSearching {
    let client: PayPalClient

    var maxWindowSeconds: Int64 { 31 * 86_400 }
    var listingLagSeconds: Int64 { 3 * 3_600 }

    func search(from: Int64, to: Int64, page: Int) async -> ProviderOutcome<TransactionSearchPage> {
        // end_date is inclusive: the window's last second, so adjacent windows never list a transaction twice.
        switch await client.searchTransactions(start: UnixTime.iso8601(from), end: UnixTime.iso8601(to - 1), page: page) {
        case .found(let body):
            do { return .found(try Self.page(body)) } catch { return .permanent(status: 0, body: "\(error)") }
        case .permanent(let status, let body) where status == 400 && body.contains("RESULTSET_TOO_LARGE"):
            return .found(.tooLarge)
        case .permanent(let status, let body) where status == 400 && body.lowercased().contains("not available"):
            return .found(.notYetAvailable)
        case let other:
            return other.failure(as: TransactionSearchPage.self)!
        }
    }

    /// The answer's transactions (`transaction_details[].transaction_info`), pages and reach.
    static func page(_ body: JSONValue) throws(ProviderMappingError) -> TransactionSearchPage {
        let r = AnswerReader(provider: "paypal")
        guard body.objectMembers != nil else { throw r.fail("(answer)", body, "expected a JSON object") }
        var items: [FoundTransaction] = []
        for (i, detail) in (body["transaction_details"]?.arrayValue ?? []).enumerated() {
            let f = "transaction_details[\(i)].transaction_info"
            guard let info = detail["transaction_info"], info.objectMembers != nil else { throw r.fail(f, detail["transaction_info"], "missing") }
            items.append(FoundTransaction(
                id: try r.string(info["transaction_id"], "\(f).transaction_id"),
                eventCode: try r.optionalString(info["transaction_event_code"], "\(f).transaction_event_code"),
                referenceID: try r.optionalString(info["paypal_reference_id"], "\(f).paypal_reference_id"),
                referenceType: try r.optionalString(info["paypal_reference_id_type"], "\(f).paypal_reference_id_type"),
                invoiceID: try r.optionalString(info["invoice_id"], "\(f).invoice_id"),
                customField: try r.optionalString(info["custom_field"], "\(f).custom_field"),
                at: try r.timestamp(info["transaction_initiation_date"], "\(f).transaction_initiation_date")))
        }
        let pages = body["total_pages"]?.numberLiteral.flatMap { Int($0) } ?? 1
        return .items(items, totalPages: max(1, pages), lastRefreshed: try r.timestamp(body["last_refreshed_datetime"], "last_refreshed_datetime"))
    }

    /// A capture (T00xx) leads to its order; a refund, reversal or chargeback (T11xx, T12xx) to its capture's order
    /// (a refund made in PayPal's dashboard is then seen by the order's check); a v1 sale is looked for as itself,
    /// by its billing agreement and parent payment. What PayPal cannot trace to an order is named as it is (no order
    /// holds it: `unknown_order`).
    func references(of found: FoundTransaction) async -> ProviderOutcome<[EventReference]> {
        let code = found.eventCode?.uppercased() ?? ""
        let moneyBack = code.hasPrefix("T11") || code.hasPrefix("T12")
        let fetched = moneyBack ? await client.refund(found.id) : await client.capture(found.id)
        switch fetched {
        case .found(let resource):
            switch await client.orderID(resourceType: moneyBack ? "refund" : "capture", resource: resource) {
            case .found(let order): return .found([EventReference(transactionRef: order)])
            case .notFound: return .found([EventReference(transactionRef: found.id)])
            case let other: return other.failure(as: [EventReference].self)!
            }
        case .notFound:
            if moneyBack, let parent = found.referenceID {
                return .found([EventReference(transactionRef: parent)])   // a sale's refund: its sale
            }
            // Not an Orders v2 payment: a v1 sale, or a transaction an order names itself.
            switch await client.sale(found.id) {
            case .found(let sale):
                let alternatives = [sale["billing_agreement_id"]?.stringValue, sale["parent_payment"]?.stringValue].compactMap { $0 }
                return .found([EventReference(transactionRef: found.id, alternatives: alternatives, learned: [PayPalProvider.API.saleLink(found.id)])])
            case .notFound: return .found([EventReference(transactionRef: found.id)])
            case let other: return other.failure(as: [EventReference].self)!
            }
        case let other:
            return other.failure(as: [EventReference].self)!
        }
    }
}
