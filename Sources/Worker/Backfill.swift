import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// `payrecon backfill`: what the provider's own records list over a span of time, each transaction matched to the
/// order that holds it (by the ids payrecon knows: its movements, links and transaction refs, then the merchant's
/// invoice id or custom field as an order id) and that order re-checked; one no order holds goes the way of a webhook
/// naming it (`unknown_order`, once however often it is found). Windows are whole UTC days at most (and never longer
/// than the provider allows), end `listingLagSeconds` before now and never past what the provider's data reaches;
/// each window read to its last page is recorded, so a run reads only what no earlier run finished (a second run
/// finds nothing new; a run killed mid-window reads that window again). A window the provider finds too large is
/// read in halves.
public struct Backfill: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker
    let processor: DeliveryProcessor

    public init(pool: PostgresPool, checker: OrderChecker) {
        self.pool = pool; self.checker = checker; self.processor = DeliveryProcessor(pool: pool, checker: checker)
    }

    public struct Options: Sendable {
        public var provider: Provider
        /// Unix seconds.
        public var from: Int64, to: Int64
        public var dryRun: Bool
        public init(provider: Provider, from: Int64, to: Int64, dryRun: Bool = false) {
            self.provider = provider; self.from = from; self.to = to; self.dryRun = dryRun
        }
    }

    public struct Summary: Sendable, Equatable {
        /// Windows read to their end, and those an earlier run had finished.
        public var windowsRead = 0, windowsSkipped = 0
        /// Search requests made (pages, and windows asked again in halves or up to the provider's reach).
        public var requests = 0, halved = 0
        /// Transactions listed; orders re-checked (each once); transactions no order holds.
        public var found = 0, ordersChecked = 0, unknown = 0
        /// What could not be done (a check that failed, a window left for the next run), in words.
        public var problems: [String] = []
        /// The span actually read (the provider's lag and reach cut the end).
        public var readFrom: Int64 = 0, readTo: Int64 = 0
    }

    public enum Failure: Error, Equatable {
        /// The provider publishes no search payrecon reads.
        case unsupported(String)
        /// The provider refused the search: the app lacks the permission (403), or the credentials.
        case refused(String)
    }

    static let source = "transactions"

    public func run(_ o: Options, now: Int64 = Int64(Date().timeIntervalSince1970), log: Logger = Logger(),
                    progress: @Sendable (Summary) -> Void = { _ in }) async throws -> Summary {
        guard let search = checker.gateway[o.provider].transactionSearch else {
            throw Failure.unsupported("\(o.provider.rawValue) publishes no transaction search payrecon reads: its transactions are checked as orders and webhooks name them")
        }
        var summary = Summary()
        let end = min(o.to, now - search.listingLagSeconds)
        summary.readFrom = o.from; summary.readTo = max(o.from, end)
        guard end > o.from else { return summary }
        // Whole UTC days, each cut by what earlier runs finished.
        var windows: [(Int64, Int64)] = []
        var dayStart = o.from - ((o.from % 86_400) + 86_400) % 86_400
        while dayStart < end {
            let a = max(dayStart, o.from), b = min(dayStart + 86_400, end, a + search.maxWindowSeconds)
            if b > a { windows.append((a, b)) }
            dayStart += 86_400
        }
        let finished = try await pool.run { conn in
            try conn.query("""
                SELECT extract(epoch FROM window_start)::bigint AS a, extract(epoch FROM window_end)::bigint AS b FROM backfill_windows
                WHERE provider = $1 AND source = $2 AND window_end > to_timestamp($3::bigint) AND window_start < to_timestamp($4::bigint)
                ORDER BY window_start
                """, [.text(o.provider.rawValue), .text(Self.source), .int64(o.from), .int64(end)]).map { (try $0.int64("a"), try $0.int64("b")) }
        }
        var checked = Set<String>()
        for (a, b) in windows {
            let gaps = Self.uncovered(a, b, by: finished)
            if gaps.isEmpty { summary.windowsSkipped += 1; progress(summary); continue }
            for (from, to) in gaps {
                try await read(from: from, to: to, search: search, options: o, checked: &checked, summary: &summary, log: log)
                progress(summary)
            }
        }
        return summary
    }

    /// [a, b) less the intervals already finished (sorted by start).
    static func uncovered(_ a: Int64, _ b: Int64, by finished: [(Int64, Int64)]) -> [(Int64, Int64)] {
        var gaps: [(Int64, Int64)] = []
        var cursor = a
        for (s, e) in finished where e > cursor && s < b {
            if s > cursor { gaps.append((cursor, min(s, b))) }
            cursor = max(cursor, e)
            if cursor >= b { break }
        }
        if cursor < b { gaps.append((cursor, b)) }
        return gaps
    }

    /// Reads [from, to) to its last page (in halves when too large), handles what it lists, and records it finished.
    private func read(from: Int64, to requested: Int64, search: any TransactionSearching, options o: Options, checked: inout Set<String>,
                      summary: inout Summary, log: Logger) async throws {
        var to = requested
        var items: [FoundTransaction] = []
        var page = 1, pages = 1
        while page <= pages {
            summary.requests += 1
            switch await search.search(from: from, to: to, page: page) {
            case .found(.tooLarge):
                guard to - from >= 120 else {
                    summary.problems.append("\(UnixTime.iso8601(from)): the provider finds even a minute too large to list; left for the next run")
                    return
                }
                summary.halved += 1
                let middle = from + (to - from) / 2
                try await read(from: from, to: middle, search: search, options: o, checked: &checked, summary: &summary, log: log)
                try await read(from: middle, to: to, search: search, options: o, checked: &checked, summary: &summary, log: log)
                return
            case .found(.notYetAvailable):
                return   // not yet listed: a later run reads it
            case .found(.items(let listed, let totalPages, let lastRefreshed)):
                // The provider's data reaches only so far: read up to there, and leave the rest for a later run.
                if page == 1, let reach = lastRefreshed, reach < to {
                    guard reach > from else { return }
                    to = reach
                    continue
                }
                items += listed
                pages = totalPages
                page += 1
            case .notFound:
                pages = 0
            case .transient(let reason, _):
                summary.problems.append("\(UnixTime.iso8601(from))–\(UnixTime.iso8601(to)): \(reason); left for the next run")
                return
            case .permanent(let status, let body):
                if status == 401 || status == 403 {
                    throw Failure.refused("\(o.provider.rawValue) refused the transaction search (HTTP \(status)): \(body.prefix(200))")
                }
                summary.problems.append("\(UnixTime.iso8601(from))–\(UnixTime.iso8601(to)): \(o.provider.rawValue) answered \(status): \(body.prefix(200)); left for the next run")
                return
            }
        }
        summary.found += items.count
        var failed = false
        if !o.dryRun {
            failed = try await handle(items, provider: o.provider, checked: &checked, summary: &summary, log: log)
        }
        guard !failed, !o.dryRun else { return }
        summary.windowsRead += 1
        let (windowEnd, count, requests) = (to, Int64(items.count), Int64(pages))
        try await pool.run { conn in
            _ = try conn.execute("""
                INSERT INTO backfill_windows (provider, source, window_start, window_end, found, requests)
                VALUES ($1, $2, to_timestamp($3::bigint), to_timestamp($4::bigint), $5, $6)
                ON CONFLICT (provider, source, window_start) DO UPDATE SET window_end = greatest(backfill_windows.window_end, EXCLUDED.window_end),
                    found = EXCLUDED.found, requests = EXCLUDED.requests, finished_at = now()
                """, [.text(o.provider.rawValue), .text(Self.source), .int64(from), .int64(windowEnd), .int64(count), .int64(requests)])
        }
    }

    /// Each listed transaction's order re-checked (once per run), or the transaction checked as a webhook naming it
    /// would be. Returns whether something failed in a way worth reading the window again for.
    private func handle(_ items: [FoundTransaction], provider: Provider, checked: inout Set<String>, summary: inout Summary,
                        log: Logger) async throws -> Bool {
        // The ids payrecon knows, in one query: movements, links and transaction refs, then the merchant's invoice id
        // or custom field as an order id.
        let distinct = Dictionary(items.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let list = Array(distinct.values)
        let owners: [String: String] = try await pool.run { conn in
            var out: [String: String] = [:]
            for row in try conn.query("""
                SELECT k.id, o.order_id FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS k(id, reference, invoice, custom)
                JOIN LATERAL (
                    SELECT order_id FROM movements WHERE provider = $1 AND movement_id IN (k.id, k.reference)
                    UNION ALL SELECT order_id FROM transaction_links WHERE provider = $1 AND external_id IN (k.id, k.reference) AND order_id IS NOT NULL
                    UNION ALL SELECT order_id FROM orders WHERE provider = $1 AND transaction_ref IN (k.id, k.reference)
                    UNION ALL SELECT order_id FROM order_transactions WHERE provider = $1 AND transaction_ref IN (k.id, k.reference)
                    UNION ALL SELECT order_id FROM orders WHERE provider = $1 AND order_id IN (k.invoice, k.custom)
                    LIMIT 1) o ON true
                """, [.text(provider.rawValue), .textArray(list.map(\.id)), .textArray(list.map { $0.referenceID ?? "" }),
                      .textArray(list.map { $0.invoiceID ?? "" }), .textArray(list.map { $0.customField ?? "" })]) {
                out[try row.string("id")] = try row.string("order_id")
            }
            return out
        }
        var failed = false
        func note(_ result: OrderChecker.Result, _ what: String) {
            switch result {
            case .checked: break
            case .transient(let reason, _), .failed(let reason), .unreadable(let reason):
                failed = true
                if summary.problems.count < 50 { summary.problems.append("\(what): \(reason)") }
            }
        }
        for item in list {
            if let orderID = owners[item.id] {
                guard checked.insert(orderID).inserted else { continue }
                guard let order = try await pool.run({ conn in try OrderStore.find(provider: provider, orderID: orderID, on: conn) }) else { continue }
                summary.ordersChecked += 1
                note(await checker.check(order, log: log), "order \(orderID)")
                continue
            }
            guard checked.insert("transaction:" + item.id).inserted else { continue }
            let references: [EventReference]
            switch await checker.gateway[provider].transactionSearch!.references(of: item) {
            case .found(let refs): references = refs
            case .notFound: continue
            case .transient(let reason, _): failed = true; summary.problems.append("transaction \(item.id): \(reason)"); continue
            case .permanent(let status, let body): summary.problems.append("transaction \(item.id): \(provider.rawValue) answered \(status): \(body.prefix(120))"); continue
            }
            for reference in references {
                for step in await processor.check(reference, provider: provider, deliveryID: 0, log: log) {
                    switch step {
                    case .checked(let orderID, let result):
                        if checked.insert(orderID).inserted { summary.ordersChecked += 1 }
                        note(result, "order \(orderID)")
                    case .unknown(let ref, let result):
                        summary.unknown += 1
                        note(result, "transaction \(ref)")
                    case .ignored: break
                    }
                }
            }
        }
        return failed
    }
}
