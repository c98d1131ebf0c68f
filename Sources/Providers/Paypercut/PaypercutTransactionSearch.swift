import Reconciliation

/// Paypercut's payment and refund lists (`GET /v2/payments`, `GET /v1/refunds`: `start_date` / `end_date` in RFC 3339,
/// `limit`, `last_key`; answers `{items, last_key}`) for `payrecon backfill`: a window's payments, then its refunds,
/// page by page. docs/PROVIDER-FACTS.md PAYPERCUT-29…31.
struct PaypercutTransactionSearch: TransactionSearching {
    let client: PaypercutClient
    /// The accounts listed, one after another: nil (the key's own), then each connected account payrecon's orders
    /// name as their merchant (`Paypercut-Account`).
    var accounts: [String?] = [nil]

    var listsPerAccount: Bool { true }

    func scoped(to accounts: [String]) -> any TransactionSearching {
        var search = self
        search.accounts = [nil] + accounts.filter { !$0.isEmpty }
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

    /// The cursor says which account, which list and where in it: `<n>|payments:<last_key>`, `<n>|refunds:` (its
    /// first page) or `<n>|refunds:<last_key>`, `n` the account's place in `accounts`; after the refunds' last page,
    /// the next account's payments. A platform key that must name an account (`403 account_required`) lists the
    /// connected accounts only. Both lists are asked from a second before the window's start to its end (whether
    /// Paypercut takes the dates as inclusive is not said: this way no transaction falls between two windows, and one
    /// listed in two is checked once a run and found once as a finding).
    func search(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<TransactionSearchPage> {
        var scope = 0, rest = cursor ?? "payments:"
        if let cursor, let bar = cursor.firstIndex(of: "|") {
            guard let n = Int(cursor[..<bar]), accounts.indices.contains(n) else {
                return .permanent(status: 0, body: "page cursor \(cursor) names no account listed")
            }
            scope = n; rest = String(cursor[cursor.index(after: bar)...])
        }
        let list: String, key: String
        switch rest {
        case let c where c.hasPrefix("payments:"): (list, key) = ("payments", String(c.dropFirst("payments:".count)))
        case let c where c.hasPrefix("refunds:"): (list, key) = ("refunds", String(c.dropFirst("refunds:".count)))
        default: return .permanent(status: 0, body: "page cursor \(cursor ?? "") names no Paypercut list")
        }
        let account = accounts[scope]
        let nextScope = scope + 1 < accounts.count ? "\(scope + 1)|payments:" : nil
        var query = [("start_date", UnixTime.iso8601(from - 1)), ("end_date", UnixTime.iso8601(to)), ("limit", String(Self.pageSize))]
        if !key.isEmpty { query.append(("last_key", key)) }
        let answer = list == "payments" ? await client.payments(query: query, account: account) : await client.refunds(query: query, account: account)
        switch answer {
        case .found(let body):
            do {
                var (items, next) = try Self.page(body, list: list)
                for i in items.indices { items[i].account = account }
                // After the payments' last page, the refunds' first; after those, the next account's.
                let following = next.map { "\(scope)|\(list):\($0)" } ?? (list == "payments" ? "\(scope)|refunds:" : nextScope)
                return .found(.items(items, next: following, totalPages: nil, lastRefreshed: nil))
            } catch { return .permanent(status: 0, body: "\(error)") }
        case .permanent(_, let body) where account == nil && accounts.count > 1 && body.contains("account_required"):
            // A platform key lists nothing as itself: on to the connected accounts.
            return .found(.items([], next: nextScope, totalPages: nil, lastRefreshed: nil))
        case let other:
            return other.failure(as: TransactionSearchPage.self)!
        }
    }

    /// A page's items (each a payment naming its `payment_intent`, or a refund naming its `payment_intent` or
    /// `payment`) and its `last_key` (nil or empty on the last page). An item that does not read is named, not
    /// checked; the rest go on.
    static func page(_ body: JSONValue, list: String) throws(ProviderMappingError) -> ([FoundTransaction], String?) {
        let r = AnswerReader(provider: "paypercut")
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
                    throw r.fail("\(f).payment_intent", item["payment_intent"], "a \(list == "payments" ? "payment" : "refund") naming no payment")
                }
                found.append(FoundTransaction(id: id, eventCode: list == "payments" ? "payment" : "refund", referenceID: parent,
                                              referenceType: intent != nil ? "payment_intent" : "payment",
                                              at: try PaypercutMapping.created(item["created"], "\(f).created")))
            } catch {
                found.append(FoundTransaction(id: item["id"]?.stringValue.map { "\(f) (\($0.prefix(80)))" } ?? f, unreadable: "\(error)"))
            }
        }
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
