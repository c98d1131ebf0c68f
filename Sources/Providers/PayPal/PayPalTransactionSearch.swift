import Reconciliation
import TextFormats

/// PayPal's Transaction Search (`GET /v1/reporting/transactions`, reporting_transactions_v1.json) for `payrecon
/// backfill`: windows of at most 31 days, pages of 500, `RESULTSET_TOO_LARGE` when a window holds more than PayPal
/// lists at once (then its halves are searched), transactions listed up to 3 hours after they happen, and the
/// answer's `last_refreshed_datetime` as how far its data reaches (docs/PROVIDER-FACTS.md PAYPAL-54…).
struct PayPalTransactionSearch: TransactionSearching {
    let client: PayPalClient

    var maxWindowSeconds: Int64 { 31 * 86_400 }
    var listingLagSeconds: Int64 { 3 * 3_600 }
    /// PayPal lists at most 10,000 transactions a window, 500 a page.
    var maxPagesPerWindow: Int { 20 }

    /// The cursor is the page number: PayPal pages by `page`, and counts them in `total_pages`.
    func search(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<TransactionSearchPage> {
        guard let page = cursor.map({ Int($0) }) ?? 1, page >= 1 else {
            return .permanent(.notSent("page cursor \(cursor ?? "") is no page number"))
        }
        switch await client.searchTransactions(start: UnixTime.iso8601(from), end: Self.inclusiveEnd(to), page: page) {
        case .found(let body):
            do { return .found(try Self.page(body, page: page)) } catch { return .permanent(.unreadable("\(error)")) }
        case .permanent(.refused(400, let body)) where body.contains("RESULTSET_TOO_LARGE"):
            return .found(.tooLarge)
        case .permanent(.refused(400, let body)) where body.lowercased().contains("data for the given start date is not available"):
            return .found(.notYetAvailable)
        case let other:
            return other.failure(as: TransactionSearchPage.self)!
        }
    }

    /// PayPal's end times are inclusive: a window [from, to) ends at its last instant (…:59.999), so adjacent windows
    /// neither list a thing twice nor miss one made within the last second.
    static func inclusiveEnd(_ to: Int64) -> String { String(UnixTime.iso8601(to - 1).dropLast()) + ".999Z" }

    /// The answer's transactions (`transaction_details[].transaction_info`), pages and reach.
    static func page(_ body: JSONValue, page: Int = 1) throws(ProviderMappingError) -> TransactionSearchPage {
        let r = AnswerReader(provider: .paypal)
        guard body.objectMembers != nil else { throw r.fail("(answer)", body, "expected a JSON object") }
        var items: [FoundTransaction] = []
        for (i, detail) in (body["transaction_details"]?.arrayValue ?? []).enumerated() {
            let f = "transaction_details[\(i)].transaction_info"
            // A row that does not read is named, not checked; the rest go on.
            do {
                guard let info = detail["transaction_info"], info.objectMembers != nil else {
                    throw r.fail(f, detail["transaction_info"], "missing")
                }
                items.append(
                    FoundTransaction(
                        id: try r.string(info["transaction_id"], "\(f).transaction_id"),
                        eventCode: try r.optionalString(info["transaction_event_code"], "\(f).transaction_event_code"),
                        referenceID: try r.optionalString(info["paypal_reference_id"], "\(f).paypal_reference_id"),
                        referenceType: try r.optionalString(info["paypal_reference_id_type"], "\(f).paypal_reference_id_type"),
                        invoiceID: try r.optionalString(info["invoice_id"], "\(f).invoice_id"),
                        customField: try r.optionalString(info["custom_field"], "\(f).custom_field"),
                        at: try r.timestamp(info["transaction_initiation_date"], "\(f).transaction_initiation_date"),
                        status: try r.optionalString(info["transaction_status"], "\(f).transaction_status")))
            } catch {
                let id = detail["transaction_info"]?["transaction_id"]?.stringValue
                items.append(FoundTransaction(id: id.map { "\(f) (\($0.prefix(80)))" } ?? f, unreadable: "\(error)"))
            }
        }
        // An empty window may leave the count out; a window with transactions must say how many pages it has.
        guard let pages = body["total_pages"]?.numberLiteral.flatMap({ Int($0) }) ?? (items.isEmpty ? 1 : nil) else {
            throw r.fail("total_pages", body["total_pages"], "missing beside \(items.count) transactions")
        }
        let total = max(1, pages)
        guard items.count <= 500 else {
            throw r.fail("transaction_details", nil, "\(items.count) transactions on one page, more than the 500 asked for")
        }
        // A page before the last that holds fewer than 500 does not add up: the window is read again by a later run.
        if page < total && items.count < 500 {
            throw r.fail("transaction_details", nil, "page \(page) of \(total) lists \(items.count) transactions, not 500")
        }
        return .items(
            items, next: page < total ? String(page + 1) : nil, totalPages: total,
            lastRefreshed: try r.timestamp(body["last_refreshed_datetime"], "last_refreshed_datetime"))
    }

    var permissionHint: String {
        "Give the app the Transaction Search permission in PayPal's developer dashboard (Apps & Credentials → the app → Features: Transaction search; it can take hours to apply), then run payrecon doctor"
    }

    /// The reference of a refund, reversal or chargeback (TXN: its capture) or of a payment (ODR: its order).
    func matchReference(of found: FoundTransaction) -> String? {
        ["TXN", "ODR"].contains(found.referenceType?.uppercased() ?? "") ? found.referenceID : nil
    }

    /// A capture (T00xx) leads to its order; a refund, reversal or chargeback (T11xx, T12xx) to its capture's order
    /// (a refund made in PayPal's dashboard is then seen by the order's check); a v1 sale is looked for as itself,
    /// by its billing agreement and parent payment. What PayPal cannot trace to an order is named as it is (no order
    /// holds it: `unknown_order`).
    /// A payment (T00xx) or the money back of one (T1106 reversal, T1107 refund, T1201 chargeback): the codes the
    /// settlement reader takes as an order's (PAYPAL-52). A row without a code is looked at.
    func isOrders(_ found: FoundTransaction) -> Bool {
        guard let code = found.eventCode?.uppercased(), !code.isEmpty else { return true }
        return PayPalSettlementReport.role(eventCode: code) != .other
    }

    func references(of found: FoundTransaction) async -> ProviderOutcome<[EventReference]> {
        let code = found.eventCode?.uppercased() ?? ""
        // A reversal or chargeback is no refund resource: its reference (TXN) is the capture it took money from.
        if code == "T1106" || code == "T1201", let capture = found.referenceID {
            switch await client.capture(capture) {
            case .found(let resource):
                switch await client.orderID(resourceType: "capture", resource: resource) {
                case .found(let order): return .found([EventReference(transactionRef: order)])
                case .notFound: return .found([EventReference(transactionRef: capture)])
                case let other: return other.failure(as: [EventReference].self)!
                }
            case .notFound: return .found([EventReference(transactionRef: capture)])
            case let other: return other.failure(as: [EventReference].self)!
            }
        }
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
                return .found([EventReference(transactionRef: parent)])  // a sale's refund: its sale
            }
            // Not an Orders v2 payment: a v1 sale, or a transaction an order names itself.
            switch await client.sale(found.id) {
            case .found(let sale):
                let alternatives = [sale["billing_agreement_id"]?.stringValue, sale["parent_payment"]?.stringValue].compactMap { $0 }
                // As a sale's event: its agreement, and the billing period its creation falls in, from its own answer.
                let reference = EventReference(
                    transactionRef: found.id, alternatives: alternatives, learned: [PayPalProvider.API.saleLink(found.id)])
                return .found([PayPalProvider.API.described(reference, by: sale)])
            case .notFound: return .found([EventReference(transactionRef: found.id)])
            case let other: return other.failure(as: [EventReference].self)!
            }
        case let other:
            return other.failure(as: [EventReference].self)!
        }
    }
}
