import Reconciliation
import TextFormats

/// Paypercut's payment and refund lists (`GET /v2/payments`, `GET /v1/refunds`: `start_date` / `end_date` in RFC 3339,
/// `limit`, `last_key`; answers `{items, last_key}`) for `payrecon backfill`: a window's payments, then its refunds,
/// page by page. docs/PROVIDER-FACTS.md PAYPERCUT-29…31.
struct PaypercutTransactionSearch: TransactionSearching {
    let client: PaypercutClient
    /// The account listed (`Paypercut-Account`): nil for the key's own.
    var account: String?

    var listsPerAccount: Bool { true }

    func scoped(to account: String?) -> any TransactionSearching {
        var search = self
        search.account = account.flatMap { $0.isEmpty ? nil : $0 }
        return search
    }

    /// Paypercut publishes no limit on a list's span; windows are a UTC day at most anyway.
    var maxWindowSeconds: Int64 { 31 * 86_400 }
    /// Paypercut publishes no delay before a payment or refund is listed. Named assumption, safe if wrong: windows end
    /// an hour before now, and what is newer the next run reads.
    var listingLagSeconds: Int64 { 3_600 }
    /// 100 a page (Paypercut's maximum `limit` is not published: a shorter page with a `last_key` is followed all
    /// the same); at most 2,000 pages a window, both lists together (200,000 payments and refunds a day: a window
    /// holds what it lists in memory until its checks are made).
    static let pageSize = 100
    var maxPagesPerWindow: Int { 2_000 }

    var permissionHint: String {
        "Check that PAYPERCUT_SECRET_KEY is a secret key that may list payments and refunds (Paypercut dashboard → Developers → API keys), then run payrecon doctor"
    }

    /// The cursor says which list and where in it: `payments:<last_key>`, `refunds:` (its first page) or
    /// `refunds:<last_key>`. A platform key that must name an account (`403 account_required`) holds nothing as
    /// itself: its own list is empty (its connected accounts are listed as themselves). An account the key may not
    /// act for (`403 account_invalid`) is named, not fatal to the window. Both lists are asked from a second before the window's start to its end (whether
    /// Paypercut takes the dates as inclusive is not said: this way no transaction falls between two windows, and one
    /// listed in two is checked once a run and found once as a finding).
    func search(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<TransactionSearchPage> {
        let list: String, key: String
        switch cursor ?? "payments:" {
        case let c where c.hasPrefix("payments:"): (list, key) = ("payments", String(c.dropFirst("payments:".count)))
        case let c where c.hasPrefix("refunds:"): (list, key) = ("refunds", String(c.dropFirst("refunds:".count)))
        default: return .permanent(.notSent("page cursor \(cursor ?? "") names no Paypercut list"))
        }
        var query = [("start_date", UnixTime.iso8601(from - 1)), ("end_date", UnixTime.iso8601(to)), ("limit", String(Self.pageSize))]
        if !key.isEmpty { query.append(("last_key", key)) }
        let answer =
            list == "payments"
            ? await client.payments(query: query, account: account) : await client.refunds(query: query, account: account)
        switch answer {
        case .found(let body):
            do {
                var (items, next) = try Self.page(body, list: list)
                for i in items.indices { items[i].account = account }
                // After the payments' last page, the refunds' first.
                let following = next.map { "\(list):\($0)" } ?? (list == "payments" ? "refunds:" : nil)
                return .found(.items(items, next: following, totalPages: nil, lastRefreshed: nil))
            } catch { return .permanent(.unreadable("\(error)")) }
        case .permanent(let failure) where account == nil && failure.text.contains("account_required"):
            return .found(.items([], next: nil, totalPages: nil, lastRefreshed: nil))
        case .permanent(let failure) where account != nil && failure.text.contains("account_invalid"):
            // An order names an account the key may not act for: said once a window, the other accounts go on.
            return .found(
                .items(
                    [FoundTransaction(id: "account \(account ?? "")", unreadable: failure.text)], next: nil, totalPages: nil,
                    lastRefreshed: nil))
        case let other:
            return other.failure(as: TransactionSearchPage.self)!
        }
    }

    /// A page's items (each a payment naming its `payment_intent`, or a refund naming its `payment_intent` or
    /// `payment`) and its `last_key` (nil or empty on the last page). An item that does not read is named, not
    /// checked; the rest go on.
    static func page(_ body: JSONValue, list: String) throws(ProviderMappingError) -> ([FoundTransaction], String?) {
        let r = AnswerReader(provider: .paypercut)
        guard body.objectMembers != nil else { throw r.fail("(answer)", body, "expected a JSON object") }
        var found: [FoundTransaction] = []
        for (i, item) in try r.array(body["items"], "items").enumerated() {
            let f = "\(list) items[\(i)]"
            do {
                guard item.objectMembers != nil else { throw r.fail(f, item, "expected an object") }
                let id = try r.string(item["id"], "\(f).id")
                guard !id.isEmpty, id.utf8.count <= 255 else { throw r.fail("\(f).id", item["id"], "not an id") }
                let intent = try r.optionalString(item["payment_intent"], "\(f).payment_intent")
                let payment = try r.optionalString(item["payment"], "\(f).payment")
                guard let parent = intent ?? (list == "refunds" ? payment : nil) else {
                    throw r.fail(
                        "\(f).payment_intent", item["payment_intent"], "a \(list == "payments" ? "payment" : "refund") naming no payment")
                }
                found.append(
                    FoundTransaction(
                        id: id, eventCode: list == "payments" ? "payment" : "refund", referenceID: parent,
                        referenceType: intent != nil ? "payment_intent" : "payment",
                        at: try PaypercutMapping.created(item["created"], "\(f).created"),
                        status: item["status"]?.stringValue))
            } catch {
                found.append(FoundTransaction(id: item["id"]?.stringValue.map { "\(f) (\($0.prefix(80)))" } ?? f, unreadable: "\(error)"))
            }
        }
        guard found.count <= pageSize else { throw r.fail("items", nil, "\(found.count) items, more than the \(pageSize) asked for") }
        let key = try r.optionalString(body["last_key"], "last_key").flatMap { $0.isEmpty ? nil : $0 }
        if key != nil && found.isEmpty { throw r.fail("items", body["items"], "empty beside a last_key") }
        return (found, key)
    }

    /// Every payment and refund is an order's.
    func isOrders(_ found: FoundTransaction) -> Bool { true }

    /// Orders hold Paypercut payments by their payment intent.
    func matchReference(of found: FoundTransaction) -> String? { found.referenceType == "payment_intent" ? found.referenceID : nil }

    /// What a webhook naming it carries: its payment intent; a refund that names only its payment leads there through
    /// the payment's intent.
    func references(of found: FoundTransaction) async -> ProviderOutcome<[EventReference]> {
        guard let parent = found.referenceID else { return .found([]) }
        if found.referenceType == "payment_intent" { return .found([EventReference(transactionRef: parent, merchant: found.account)]) }
        switch await client.payment(parent, account: found.account) {
        case .found(let payment):
            guard let intent = payment["payment_intent"]?.stringValue, !intent.isEmpty else { return .found([]) }
            return .found([EventReference(transactionRef: intent, merchant: found.account)])
        case .notFound: return .found([])
        case let other: return other.failure(as: [EventReference].self)!
        }
    }
}
