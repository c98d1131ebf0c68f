import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// `payrecon backfill`: what the provider's own records list over a span of time, each transaction matched to the
/// order that holds it (by the ids payrecon knows: its movements, links and transaction refs) and that order
/// re-checked; one no order holds goes the way of a webhook naming it (linked to the order its answer names, else
/// `unknown_order`, once however often it is found). Windows are whole UTC days at most (and never longer
/// than the provider allows), end `listingLagSeconds` before now and never past what the provider's data reaches;
/// each window read to its last page is recorded, so a run reads only what no earlier run finished (a second run
/// finds nothing new; a run killed mid-window reads that window again). A window the provider finds too large is
/// read in halves. Providers list some transactions late (PayPal within about 3 hours; an eCheck, or a payment held
/// for review, once it turns balance-affecting), so every run reads again the windows of its last `rereadSeconds`
/// even if read before; of what they list, only a transaction no run handled yet (or listed with another status
/// since) is handled (`backfill_listed`), so a re-read re-checks and opens nothing twice. A dry run reads and
/// matches as a run would, and lists what it would store or open, storing nothing.
public struct Backfill: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker
    let processor: DeliveryProcessor
    /// Checks in flight at once (as the sweep's `--concurrency`).
    let concurrency: Int

    public init(pool: PostgresPool, checker: OrderChecker, concurrency: Int = 16) {
        self.pool = pool; self.checker = checker; self.processor = DeliveryProcessor(pool: pool, checker: checker)
        self.concurrency = max(1, concurrency)
    }

    public struct Options: Sendable {
        public var provider: Provider
        /// Unix seconds.
        public var from: Int64, to: Int64
        public var dryRun: Bool
        /// How long `payrecon prune` keeps a processed delivery (`PAYRECON_RETAIN deliveries=`): events older than that
        /// are not listed, since their deliveries may have been pruned and they would be stored and processed again.
        public var deliveriesKeptSeconds: Int64?
        /// The windows of the last `rereadSeconds` before now are read again every run (`PAYRECON_BACKFILL_REREAD`,
        /// default 3d), even if an earlier run read them to their end.
        public var rereadSeconds: Int64
        public static let defaultRereadSeconds: Int64 = 3 * 86_400
        public init(
            provider: Provider, from: Int64, to: Int64, dryRun: Bool = false, deliveriesKeptSeconds: Int64? = nil,
            rereadSeconds: Int64 = Options.defaultRereadSeconds
        ) {
            self.provider = provider; self.from = from; self.to = to; self.dryRun = dryRun;
            self.deliveriesKeptSeconds = deliveriesKeptSeconds
            self.rereadSeconds = max(0, rereadSeconds)
        }
    }

    /// What a dry run found a run would do, one line each.
    public enum Planned: Sendable, Equatable, CustomStringConvertible {
        /// An event of the provider's list no delivery brought: a run stores it for the worker.
        case storeEvent(id: String, eventType: String?)
        /// A transaction an order holds: a run re-checks that order.
        case recheck(orderID: String, transaction: String, code: String?)
        /// A transaction no order holds: a run opens unknown_order for it (`open`), or counts the one open again.
        case unknownOrder(transaction: String, code: String?, alreadyOpen: Bool)
        /// A transaction that could not be matched now (the provider's answer); a run would try it and say so.
        case unmatched(transaction: String, why: String)

        public var description: String {
            func code(_ c: String?) -> String { c.map { " (\($0))" } ?? "" }
            switch self {
            case let .storeEvent(id, type): return "store event \(id)\(code(type)): no delivery brought it"
            case let .recheck(order, transaction, c): return "re-check order \(order): it holds transaction \(transaction)\(code(c))"
            case let .unknownOrder(transaction, c, open):
                return open
                    ? "count unknown_order for transaction \(transaction)\(code(c)) again: it is open already"
                    : "open unknown_order for transaction \(transaction)\(code(c)): no order holds it"
            case let .unmatched(transaction, why): return "check transaction \(transaction): \(why)"
            }
        }
    }

    public struct Summary: Sendable, Equatable {
        /// Windows read to their end, and those an earlier run had finished; of those read, the ones read again
        /// although finished before (the last `rereadSeconds`).
        public var windowsRead = 0, windowsSkipped = 0, windowsReread = 0
        /// Transactions listed that no run had handled, or listed with another status since: what a run handles.
        public var new = 0
        /// A dry run's list of what a run would store or open (each event or transaction, one line).
        public var planned: [Planned] = []
        /// Search requests made (pages, and windows asked again in halves or up to the provider's reach).
        public var requests = 0, halved = 0
        /// Transactions listed; orders re-checked (each once); transactions no order holds.
        public var found = 0, ordersChecked = 0, unknown = 0
        /// Windows left for the next run (not recorded: a transient failure, an answer that did not add up), in words.
        public var problems: [String] = []
        /// Transactions or orders that could not be checked although their window was read (a provider's permanent
        /// answer, an answer that does not read): reported, not retried by the next run.
        public var notChecked: [String] = []
        /// Transactions whose code is no order's (withdrawals, holds, conversions, fees of the account): skipped.
        public var notAnOrders = 0
        /// How far the provider's data reached when it reached less far than asked (unix seconds).
        public var reach: Int64?
        /// The span actually read (the provider's lag and reach cut the end).
        public var readFrom: Int64 = 0, readTo: Int64 = 0
        /// The provider's list of its webhook events: windows read, requests made, events listed, and those no
        /// delivery had brought, stored now for the worker.
        public var eventWindowsRead = 0, eventWindowsSkipped = 0, eventWindowsReread = 0, eventRequests = 0, eventsListed = 0,
            eventsStored = 0
        /// Events are listed from here (unix seconds) when the span asked starts earlier than the provider keeps them
        /// or than payrecon keeps deliveries; and which of the two.
        public var eventsFrom: Int64?, eventsFromWhy: String?
        /// What the provider refused (HTTP 401 or 403), per list, in words: the run goes on with its other list, and
        /// exits 2.
        public var refused: [String] = []

        /// A window left for the next run, in words (the first 50).
        mutating func leave(_ list: String, _ from: Int64, _ to: Int64, _ why: String) {
            if problems.count < 50 {
                problems.append("\(list)\(UnixTime.iso8601(from))–\(UnixTime.iso8601(to)): \(why); left for the next run")
            } else if problems.count == 50 {
                problems.append("… and more windows left for the next run")
            }
        }
    }

    public enum Failure: Error, Equatable {
        /// The provider publishes no search payrecon reads.
        case unsupported(String)
        /// The provider refused the search: the app lacks the permission (403), or the credentials.
        case refused(String)
    }

    static let source = "transactions"

    public func run(
        _ o: Options, now: Int64 = Int64(Date().timeIntervalSince1970), logger log: Logger,
        progress: @Sendable (Summary) -> Void = { _ in }
    ) async throws -> Summary {
        let api = checker.gateway[o.provider]
        let search = api.transactionSearch, events = api.eventList
        guard search != nil || events != nil else {
            if api.isConfigured || ProviderRegistry.definition(o.provider).backfillReads == nil {
                throw Failure.unsupported(
                    "\(o.provider.rawValue) publishes no transaction search payrecon reads: its transactions are checked as orders and webhooks name them"
                )
            }
            throw Failure.unsupported("no \(o.provider.rawValue) API client: set \(ProviderRegistry.definition(o.provider).apiVariables)")
        }
        var summary = Summary()
        summary.readFrom = o.from; summary.readTo = o.from
        var checked = Set<String>()
        // Each list on its own: one the provider refuses (a permission not granted yet) does not keep the other unread.
        if let search {
            do {
                try await readTransactions(search, o, now: now, checked: &checked, summary: &summary, logger: log, progress: progress)
            } catch Failure.refused(let why) { summary.refused.append(why) }
        }
        if let events {
            do { try await readEventList(events, o, now: now, summary: &summary, progress: progress) } catch Failure.refused(let why) {
                summary.refused.append(why)
            }
        }
        if !o.dryRun { try await forgetListed(provider: o.provider, before: now - o.rereadSeconds - 2 * 86_400) }
        return summary
    }

    /// The transaction search's windows of the span not read yet (and those read again).
    private func readTransactions(
        _ search: any TransactionSearching, _ o: Options, now: Int64, checked: inout Set<String>, summary: inout Summary,
        logger log: Logger, progress: @Sendable (Summary) -> Void
    ) async throws {
        let end = min(o.to, now - search.listingLagSeconds)
        summary.readTo = max(summary.readTo, end)
        // A provider that lists per account: the key's own, then each account payrecon's orders name, each with
        // windows of its own (an account first named later is read from the start of the span then).
        var scopes: [String?] = [nil]
        if search.listsPerAccount {
            scopes += try await pool.run { conn in
                try conn.query(
                    "SELECT DISTINCT merchant FROM orders WHERE provider = \(.text(o.provider.rawValue)) AND merchant <> '' ORDER BY merchant"
                ).map { try $0.string("merchant") }
            }
        }
        for scope in scopes {
            let source = scope.map { "\(Self.source):\($0)" } ?? Self.source, scoped = search.scoped(to: scope)
            for window in try await pending(
                source, from: o.from, to: end, maxWindow: search.maxWindowSeconds, provider: o.provider,
                rereadFrom: now - o.rereadSeconds)
            {
                guard let (gaps, again) = window else { summary.windowsSkipped += 1; progress(summary); continue }
                if again { summary.windowsReread += 1 }
                for (from, to) in gaps {
                    try await read(
                        from: from, to: to, search: scoped, source: source, options: o, checked: &checked, summary: &summary, logger: log)
                    progress(summary)
                }
            }
        }
    }

    /// The webhook event list's windows of the span not read yet (and those read again), from what the provider and
    /// PAYRECON_RETAIN keep.
    private func readEventList(
        _ events: any EventListing, _ o: Options, now: Int64, summary: inout Summary,
        progress: @Sendable (Summary) -> Void
    ) async throws {
        let end = min(o.to, now - events.listingLagSeconds)
        summary.readTo = max(summary.readTo, end)
        var from = o.from
        if let history = events.historySeconds, now - history > from {
            from = now - history; summary.eventsFromWhy = "\(o.provider.rawValue) keeps webhook events about \(history / 86_400 + 1) days"
        }
        if let kept = o.deliveriesKeptSeconds, now - kept > from {
            from = now - kept; summary.eventsFromWhy = "payrecon prune keeps processed deliveries \(kept / 86_400) days (PAYRECON_RETAIN)"
        }
        if from > o.from { summary.eventsFrom = from }
        for window in try await pending(
            Self.eventsSource, from: from, to: end, maxWindow: events.maxWindowSeconds, provider: o.provider,
            rereadFrom: now - o.rereadSeconds)
        {
            guard let (gaps, again) = window else { summary.eventWindowsSkipped += 1; progress(summary); continue }
            if again { summary.eventWindowsReread += 1 }
            for (from, to) in gaps {
                try await readEvents(from: from, to: to, list: events, options: o, summary: &summary)
                progress(summary)
            }
        }
    }

    /// What no run reads again is forgotten: made before the re-read span, with two days to spare (a window is a whole
    /// day, and a provider that lists by date lists its whole day when part of it is read again).
    private func forgetListed(provider: Provider, before forgetBefore: Int64) async throws {
        try await pool.run { conn in
            _ = try conn.execute(
                """
                DELETE FROM backfill_listed WHERE provider = \(.text(provider.rawValue))
                  AND (made_at < to_timestamp(\(.int64(forgetBefore))::bigint) OR (made_at IS NULL AND listed_at < to_timestamp(\(.int64(forgetBefore))::bigint)))
                """)
        }
    }

    static let eventsSource = "events"

    /// [from, end) as whole UTC days (no longer than `maxWindow`), each as what no earlier run of `source` finished
    /// of it (nil: all of it was), and whether part of it is read again: what runs finished from `rereadFrom` on
    /// counts as not finished.
    private func pending(
        _ source: String, from: Int64, to end: Int64, maxWindow: Int64, provider: Provider, rereadFrom: Int64
    ) async throws
        -> [(gaps: [(Int64, Int64)], again: Bool)?]
    {
        guard end > from else { return [] }
        var windows: [(Int64, Int64)] = []
        var dayStart = from - ((from % 86_400) + 86_400) % 86_400
        while dayStart < end {
            let a = max(dayStart, from), b = min(dayStart + 86_400, end, a + maxWindow)
            if b > a { windows.append((a, b)) }
            dayStart += 86_400
        }
        let finished = try await pool.run { conn in
            try conn.query(
                """
                SELECT extract(epoch FROM window_start)::bigint AS a, extract(epoch FROM window_end)::bigint AS b FROM backfill_windows
                WHERE provider = \(.text(provider.rawValue)) AND source = \(.text(source)) AND window_end > to_timestamp(\(.int64(from))::bigint) AND window_start < to_timestamp(\(.int64(end))::bigint)
                ORDER BY window_start
                """
            ).map { (try $0.int64("a"), try $0.int64("b")) }
        }
        let stillFinished = finished.map { ($0.0, min($0.1, rereadFrom)) }.filter { $0.1 > $0.0 }
        return windows.map { window in
            let gaps = Self.uncovered(window.0, window.1, by: stillFinished)
            guard !gaps.isEmpty else { return nil }
            let length = { (g: [(Int64, Int64)]) in g.reduce(Int64(0)) { $0 + ($1.1 - $1.0) } }
            return (gaps, length(gaps) > length(Self.uncovered(window.0, window.1, by: finished)))
        }
    }

    /// Reads the provider's events made in [from, to) to the last page, storing as it goes each one no delivery
    /// brought (as a delivery of it: the worker checks what it names; an event already stored is left as it is), and
    /// records the window finished after its last page. A run killed mid-window reads it again and stores nothing
    /// twice.
    private func readEvents(from: Int64, to: Int64, list: any EventListing, options o: Options, summary: inout Summary) async throws {
        var cursor: String?, seen = Set<String>(), pages = 0, listed = 0
        func leave(_ why: String) { summary.leave("events ", from, to, why) }
        let provider = o.provider
        let source = "backfill: \(list.name), \(UnixTime.iso8601(from))–\(UnixTime.iso8601(to))"
        reading: while true {
            summary.eventRequests += 1
            switch await list.events(from: from, to: to, cursor: cursor) {
            case .found(let page):
                pages += 1
                listed += page.events.count
                summary.eventsListed += page.events.count
                for event in page.events where event.unreadable != nil && summary.notChecked.count < 50 {
                    summary.notChecked.append("event \(event.id): \(event.unreadable ?? "")")
                }
                let events = page.events.filter { $0.unreadable == nil }.map { (id: $0.id, eventType: $0.eventType, body: $0.body) }
                if o.dryRun && !events.isEmpty {
                    // What a run would store: the events no delivery brought.
                    let stored = try await pool.run { try DeliveryStore.storedKeys(provider: provider, among: events.map(\.id), on: $0) }
                    for event in events where !stored.contains(event.id) {
                        summary.eventsStored += 1
                        summary.planned.append(.storeEvent(id: event.id, eventType: event.eventType))
                    }
                } else if !events.isEmpty {
                    summary.eventsStored += try await pool.run {
                        try DeliveryStore.insertListed(provider: provider, events: events, source: source, on: $0)
                    }
                }
                guard let next = page.next else { break reading }
                if pages >= list.maxPagesPerWindow { return leave("more than \(list.maxPagesPerWindow) pages") }
                guard seen.insert(next).inserted else { return leave("the provider named a page it had listed already") }
                cursor = next
            case .notFound:
                return leave("the provider answered 404 for \(list.name) (check the API base URL)")
            case .transient(let t):
                return leave(t.reason)
            case .permanent(let failure):
                if let status = failure.status, status == 401 || status == 403 {
                    throw Failure.refused(
                        "\(o.provider.rawValue) refused \(list.name) (HTTP \(status)): \(failure.text.prefix(200)). Check \(ProviderRegistry.definition(o.provider).apiVariables) and the app's permissions, then run payrecon doctor"
                    )
                }
                return leave(failure.words(for: o.provider.rawValue, bodyLimit: 200))
            }
        }
        summary.eventWindowsRead += 1
        guard !o.dryRun else { return }
        try await recordRead(provider: provider, source: Self.eventsSource, from: from, to: to, found: listed, requests: pages)
    }

    /// Records [from, to) of `source` read to its end: a later run reads only what no run finished.
    private func recordRead(provider: Provider, source: String, from: Int64, to: Int64, found: Int, requests: Int) async throws {
        try await pool.run { conn in
            _ = try conn.execute(
                """
                INSERT INTO backfill_windows (provider, source, window_start, window_end, found, requests)
                VALUES (\(.text(provider.rawValue)), \(.text(source)), to_timestamp(\(.int64(from))::bigint), to_timestamp(\(.int64(to))::bigint), \(.int64(Int64(found))), \(.int64(Int64(requests))))
                ON CONFLICT (provider, source, window_start) DO UPDATE SET window_end = greatest(backfill_windows.window_end, EXCLUDED.window_end),
                    found = EXCLUDED.found, requests = EXCLUDED.requests, finished_at = now()
                """)
        }
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

    /// Reads [from, to) to its last page (in halves when too large), handles what it lists, and records it finished
    /// only when every page came back and they add up.
    private func read(
        from: Int64, to requested: Int64, search: any TransactionSearching, source: String, options o: Options, checked: inout Set<String>,
        summary: inout Summary, logger log: Logger
    ) async throws {
        var to = requested
        var items: [FoundTransaction] = []
        var cursor: String?, pages = 0, counted: Int?, clamped = false, seen = Set<String>()
        func leave(_ why: String) { summary.leave("", from, to, why) }
        reading: while true {
            summary.requests += 1
            switch await search.search(from: from, to: to, cursor: cursor) {
            case .found(.tooLarge):
                guard pages == 0 else { return leave("the provider found it too large on page \(pages + 1) only") }
                guard to - from >= 120 else { return leave("the provider finds even two minutes too large to list") }
                summary.halved += 1
                let middle = from + (to - from) / 2
                try await read(
                    from: from, to: middle, search: search, source: source, options: o, checked: &checked, summary: &summary, logger: log)
                try await read(
                    from: middle, to: to, search: search, source: source, options: o, checked: &checked, summary: &summary, logger: log)
                return
            case .found(.notYetAvailable):
                summary.reach = min(summary.reach ?? from, from)
                return  // not listed yet: a later run reads it
            case .found(.items(let listed, let next, let totalPages, let lastRefreshed)):
                if pages == 0, let reach = lastRefreshed, reach < to {
                    // The provider's data reaches only so far: read up to there, once (an answer that keeps moving
                    // its reach back is not followed further), and leave the rest for a later run.
                    summary.reach = min(summary.reach ?? reach, reach)
                    guard !clamped else { return leave("the provider's data reach moved back again (to \(UnixTime.iso8601(reach)))") }
                    guard reach > from else { return }
                    clamped = true
                    to = reach
                    continue
                }
                pages += 1
                if let why = Self.pageRefusal(
                    pages: pages, next: next, totalPages: totalPages, counted: &counted, seen: &seen, search: search)
                {
                    return leave(why)
                }
                items += listed
                cursor = next
                if next == nil { break reading }
            case .notFound:
                return leave("the provider answered 404 for the search (check the API base URL)")
            case .transient(let t):
                return leave(t.reason)
            case .permanent(let failure):
                return leave(try Self.reason(failure, provider: o.provider, search: search))
            }
        }
        try await handleWindow(
            items, from: from, to: to, requests: pages, search: search, source: source, options: o, checked: &checked,
            summary: &summary, logger: log)
    }

    /// Why the read stops at this page (the provider's page count out of bounds or changed, too many pages, or a page
    /// named twice), or nil to take it. The first page's count is kept in `counted`, each next page's cursor in `seen`.
    private static func pageRefusal(
        pages: Int, next: String?, totalPages: Int?, counted: inout Int?, seen: inout Set<String>, search: any TransactionSearching
    ) -> String? {
        if pages == 1, let totalPages {
            guard (1...search.maxPagesPerWindow).contains(totalPages) else {
                return "the provider counts \(totalPages) pages (at most \(search.maxPagesPerWindow))"
            }
            counted = totalPages
        } else if let counted, totalPages != counted {
            return "the provider's page count changed from \(counted) to \(totalPages.map(String.init) ?? "none") while it was read"
        }
        if next != nil && pages >= search.maxPagesPerWindow {
            return "more than \(search.maxPagesPerWindow) pages"
        }
        if let next, !seen.insert(next).inserted { return "the provider named a page it had listed already" }
        return nil
    }

    /// Why a window is left, from the search's permanent failure; credentials or a permission refused stop the list.
    static func reason(_ failure: ProviderFailure, provider: Provider, search: any TransactionSearching) throws -> String {
        if failure.status == 401 {
            throw Failure.refused(
                "\(provider.rawValue) refused the credentials (HTTP 401): \(failure.text.prefix(200)). Check \(ProviderRegistry.definition(provider).apiVariables)"
            )
        }
        if failure.status == 403 {
            throw Failure.refused(
                "\(provider.rawValue) refused the transaction search (HTTP 403): \(failure.text.prefix(200)). \(search.permissionHint)")
        }
        return failure.words(for: provider.rawValue, bodyLimit: 200)
    }

    /// What a window listed, read to its end: handled (or, in a dry run, said), then the window recorded as read.
    private func handleWindow(
        _ items: [FoundTransaction], from: Int64, to: Int64, requests pages: Int, search: any TransactionSearching,
        source: String, options o: Options, checked: inout Set<String>, summary: inout Summary,
        logger log: Logger
    ) async throws {
        summary.found += items.count { $0.unreadable == nil }
        // Only what no run handled yet, or what is listed with another status since: a window read again re-checks
        // and opens nothing twice.
        let fresh = try await unhandled(items.filter { $0.unreadable == nil }, provider: o.provider)
        summary.new += fresh.count
        let unreadable = items.filter { $0.unreadable != nil }
        if o.dryRun {
            try await plan(fresh, search: search, provider: o.provider, checked: &checked, summary: &summary)
            summary.windowsRead += 1  // read to its end, not recorded
            return
        }
        let failed = try await handle(
            fresh + unreadable, search: search, provider: o.provider, checked: &checked, summary: &summary, logger: log)
        if failed { return summary.leave("", from, to, "a check could not be made now (listed)") }
        summary.windowsRead += 1
        try await recordHandled(fresh, provider: o.provider)
        try await recordRead(provider: o.provider, source: source, from: from, to: to, found: items.count, requests: pages)
    }

    /// The rows no run handled yet: (id, event code, status) not in `backfill_listed`, each once.
    private func unhandled(_ items: [FoundTransaction], provider: Provider) async throws -> [FoundTransaction] {
        var seen = Set<String>()
        let distinct = items.filter { seen.insert(Self.listedKey($0)).inserted }
        guard !distinct.isEmpty else { return [] }
        let handled: Set<String> = try await pool.run { conn in
            var out = Set<String>()
            for row in try conn.query(
                """
                SELECT l.transaction_id, l.event_code, l.status FROM backfill_listed l
                JOIN unnest(\(.textArray(distinct.map(\.id)))::text[], \(.textArray(distinct.map { $0.eventCode ?? "" }))::text[], \(.textArray(distinct.map { $0.status ?? "" }))::text[]) AS u(id, code, status)
                  ON l.transaction_id = u.id AND l.event_code = u.code AND l.status = u.status
                WHERE l.provider = \(.text(provider.rawValue))
                """)
            {
                out.insert(try row.string("transaction_id") + "\u{0}" + row.string("event_code") + "\u{0}" + row.string("status"))
            }
            return out
        }
        return distinct.filter { !handled.contains(Self.listedKey($0)) }
    }

    /// The readable rows that are an order's (one per id: a payment listed under a second code is one transaction),
    /// counting the ids that are no order's (withdrawals, holds) in `summary`. An id listed both as an order's and
    /// under another code is the order's: which row came first does not decide it.
    static func ordersRows(_ items: [FoundTransaction], search: any TransactionSearching, summary: inout Summary) -> [FoundTransaction] {
        let readable = items.filter { $0.unreadable == nil }
        var seen = Set<String>(), rows: [FoundTransaction] = []
        for item in readable where search.isOrders(item) && seen.insert(item.id).inserted { rows.append(item) }
        summary.notAnOrders += Set(readable.map(\.id)).subtracting(seen).count
        return rows
    }

    static func listedKey(_ item: FoundTransaction) -> String { item.id + "\u{0}" + (item.eventCode ?? "") + "\u{0}" + (item.status ?? "") }

    /// Records rows handled: a later read of their window passes them by.
    private func recordHandled(_ items: [FoundTransaction], provider: Provider) async throws {
        guard !items.isEmpty else { return }
        try await pool.run { conn in
            _ = try conn.execute(
                """
                INSERT INTO backfill_listed (provider, transaction_id, event_code, status, made_at)
                SELECT \(.text(provider.rawValue)), u.id, u.code, u.status, to_timestamp(u.at::bigint) FROM unnest(\(.textArray(items.map(\.id)))::text[], \(.textArray(items.map { $0.eventCode ?? "" }))::text[], \(.textArray(items.map { $0.status ?? "" }))::text[], \(.nullableTextArray(items.map { $0.at.map(String.init) }))::text[]) AS u(id, code, status, at)
                ON CONFLICT DO NOTHING
                """)
        }
    }

    /// A dry run's matching: each fresh row's order, as a run would find it (the ids payrecon knows, then what the
    /// provider's answer names), read only; listed as what a run would re-check or open.
    private func plan(
        _ items: [FoundTransaction], search: any TransactionSearching, provider: Provider, checked: inout Set<String>,
        summary: inout Summary
    ) async throws {
        let list = Self.ordersRows(items, search: search, summary: &summary)
        let owners = try await self.owners(list, search: search, provider: provider)
        var unknown: [FoundTransaction] = []
        for item in list {
            if let orderID = owners[item.id] {
                if checked.insert(orderID).inserted {
                    summary.planned.append(.recheck(orderID: orderID, transaction: item.id, code: item.eventCode))
                }
            } else if checked.insert("transaction:" + item.id).inserted {
                unknown.append(item)
            }
        }
        let found = await Self.concurrently(unknown, limit: concurrency) { item in (item, await search.references(of: item)) }
        for (item, outcome) in found.sorted(by: { $0.0.id < $1.0.id }) {
            switch outcome {
            case .found(let references):
                let refs = references.flatMap { [$0.transactionRef].compactMap { $0 } + $0.alternatives }
                let (holder, open): (String?, Bool) = try await pool.run { conn in
                    for ref in refs {
                        if let order = try OrderStore.find(provider: provider, transactionRef: ref, on: conn).first {
                            return (order.orderID, false)
                        }
                    }
                    let open =
                        try conn.query(
                            """
                            SELECT 1 FROM discrepancies WHERE provider = \(.text(provider.rawValue)) AND kind = 'unknown_order' AND status IN ('open', 'acknowledged')
                              AND transaction_ref = ANY(\(.textArray(refs + [item.id]))) LIMIT 1
                            """
                        ).first != nil
                    return (nil, open)
                }
                if let holder {
                    if checked.insert(holder).inserted {
                        summary.planned.append(.recheck(orderID: holder, transaction: item.id, code: item.eventCode))
                    }
                } else {
                    summary.unknown += 1
                    summary.planned.append(.unknownOrder(transaction: item.id, code: item.eventCode, alreadyOpen: open))
                }
            case .notFound:
                summary.planned.append(
                    .unmatched(transaction: item.id, why: "\(provider.rawValue) does not know it (404): nothing to check"))
            case .transient(let t):
                summary.planned.append(.unmatched(transaction: item.id, why: "\(t.reason) (a run tries it and reads its window again)"))
            case .permanent(let failure):
                summary.planned.append(.unmatched(transaction: item.id, why: failure.words(for: provider.rawValue, bodyLimit: 120)))
            }
        }
    }

    /// The order that holds each row, by the ids payrecon knows: movements, links and transaction refs (the row's own
    /// id, or its reference when that names a transaction or an order).
    private func owners(_ list: [FoundTransaction], search: any TransactionSearching, provider: Provider) async throws -> [String: String] {
        try await pool.run { conn in
            var out: [String: String] = [:]
            for row in try conn.query(
                """
                SELECT k.id, o.order_id FROM unnest(\(.textArray(list.map(\.id)))::text[], \(.textArray(list.map { search.matchReference(of: $0) ?? "" }))::text[]) AS k(id, reference)
                JOIN LATERAL (
                    SELECT 1 AS rank, order_id FROM movements WHERE provider = \(.text(provider.rawValue)) AND movement_id IN (k.id, k.reference)
                    UNION ALL SELECT 2, order_id FROM transaction_links WHERE provider = \(.text(provider.rawValue)) AND external_id IN (k.id, k.reference) AND order_id IS NOT NULL
                    UNION ALL SELECT 3, order_id FROM orders WHERE provider = \(.text(provider.rawValue)) AND transaction_ref IN (k.id, k.reference)
                    UNION ALL SELECT 4, order_id FROM order_transactions WHERE provider = \(.text(provider.rawValue)) AND transaction_ref IN (k.id, k.reference)
                    ORDER BY 1, 2 LIMIT 1) o ON true
                """)
            {
                out[try row.string("id")] = try row.string("order_id")
            }
            return out
        }
    }

    /// Each listed transaction's order re-checked (once per run), or the transaction checked as a webhook naming it
    /// would be. Returns whether something failed in a way worth reading the window again for.
    private func handle(
        _ items: [FoundTransaction], search: any TransactionSearching, provider: Provider, checked: inout Set<String>,
        summary: inout Summary, logger log: Logger
    ) async throws -> Bool {
        // The ids payrecon knows, in one query: movements, links and transaction refs (the row's own id, or its
        // reference when that names a transaction or an order). A row matched by nothing else goes the way of a
        // webhook naming it, which links it to the order its answer names (purchase unit reference or custom id):
        // matching the merchant's invoice id here would hide a second payment under an order that already has one.
        for item in items where item.unreadable != nil && summary.notChecked.count < 50 {
            summary.notChecked.append("transaction \(item.id): \(item.unreadable ?? "")")
        }
        let list = Self.ordersRows(items, search: search, summary: &summary)
        let owners = try await self.owners(list, search: search, provider: provider)
        // The orders to re-check (each once per run), loaded in one trip, then checked `concurrency` at a time, as the
        // sweep checks them; then the transactions no order is known to hold, the same way.
        var orderIDs: [String] = [], unknown: [FoundTransaction] = []
        for item in list {
            if let orderID = owners[item.id] {
                if checked.insert(orderID).inserted { orderIDs.append(orderID) }
            } else if checked.insert("transaction:" + item.id).inserted {
                unknown.append(item)
            }
        }
        // Only what may work on a later try keeps the window open; the rest is reported, and the window recorded.
        let ordersFailed = try await recheck(orderIDs, provider: provider, summary: &summary, logger: log)
        let unknownFailed = await checkUnheld(
            unknown, search: search, provider: provider, checked: &checked, summary: &summary, logger: log)
        return ordersFailed || unknownFailed
    }

    /// Notes a check's result in the summary; true when it may work on a later try (its window is read again).
    static func note(_ result: OrderChecker.Result, _ what: String, summary: inout Summary) -> Bool {
        switch result {
        case .checked: return false
        case .transient(let t):
            if summary.notChecked.count < 50 { summary.notChecked.append("\(what): \(t.reason) (its window is read again next run)") }
            return true
        case .failed(let reason), .unreadable(let reason):
            if summary.notChecked.count < 50 { summary.notChecked.append("\(what): \(reason)") }
            return false
        }
    }

    /// The orders re-checked, `concurrency` at a time, as the sweep checks them; true when one may work on a later try.
    private func recheck(_ orderIDs: [String], provider: Provider, summary: inout Summary, logger log: Logger) async throws -> Bool {
        // With what the checks read before they fetch (stored snapshot, links, actions), in the same trip, as the sweep
        // loads a page: a check that loads its own makes its round trips one order at a time.
        let toLoad = orderIDs
        let (orders, known): ([Order], [String: OrderChecker.Known]) = try await pool.run { conn in
            let orders = try OrderStore.find(provider: provider, orderIDs: toLoad, on: conn)
            return (orders, try OrderChecker.known(provider: provider, orderIDs: orders.map(\.orderID), on: conn))
        }
        summary.ordersChecked += orders.count
        let checker = self.checker
        var failed = false
        for (orderID, result) in await Self.concurrently(
            orders, limit: concurrency,
            { order in
                (order.orderID, await checker.check(order, known: known[order.orderID], logger: log))
            })
        {
            if Self.note(result, "order \(orderID)", summary: &summary) { failed = true }
        }
        return failed
    }

    /// Each listed transaction no order is known to hold, checked as a webhook naming it would be; true when one may
    /// work on a later try.
    private func checkUnheld(
        _ unknown: [FoundTransaction], search: any TransactionSearching, provider: Provider, checked: inout Set<String>,
        summary: inout Summary, logger log: Logger
    ) async -> Bool {
        var failed = false
        enum Outcome: Sendable { case steps([DeliveryProcessor.Step]), transient(String), permanent(String) }
        let processor = self.processor
        let outcomes = await Self.concurrently(unknown, limit: concurrency) { item -> (String, Outcome) in
            let (found, answers) = await AnswerLog.collecting { await search.references(of: item) }
            switch found {
            case .found(let references):
                var steps: [DeliveryProcessor.Step] = []
                for reference in references {
                    steps += await processor.check(reference, provider: provider, deliveryID: 0, answers: answers, logger: log)
                }
                return (item.id, .steps(steps))
            case .notFound: return (item.id, .steps([]))
            case .transient(let t): return (item.id, .transient(t.reason))
            case .permanent(let failure): return (item.id, .permanent(failure.words(for: provider.rawValue, bodyLimit: 120)))
            }
        }
        for (id, outcome) in outcomes {
            switch outcome {
            case .transient(let reason):
                failed = true
                if summary.notChecked.count < 50 {
                    summary.notChecked.append("transaction \(id): \(reason) (its window is read again next run)")
                }
            case .permanent(let why):
                if summary.notChecked.count < 50 { summary.notChecked.append("transaction \(id): \(why)") }
            case .steps(let steps):
                for step in steps {
                    switch step {
                    case .checked(let orderID, let result):
                        if checked.insert(orderID).inserted { summary.ordersChecked += 1 }
                        if Self.note(result, "order \(orderID)", summary: &summary) { failed = true }
                    case .unknown(let ref, let result):
                        summary.unknown += 1
                        if Self.note(result, "transaction \(ref)", summary: &summary) { failed = true }
                    case .unfound(let result):
                        if Self.note(result, "transaction \(id)", summary: &summary) { failed = true }
                    case .ignored: break
                    }
                }
            }
        }
        return failed
    }

    /// `body` over `items`, at most `limit` at a time; the results in no particular order.
    static func concurrently<T: Sendable, R: Sendable>(_ items: [T], limit: Int, _ body: @escaping @Sendable (T) async -> R) async -> [R] {
        await withTaskGroup(of: R.self) { group in
            var results: [R] = []
            results.reserveCapacity(items.count)
            var next = 0
            while next < items.count && next < limit { let item = items[next]; group.addTask { await body(item) }; next += 1 }
            while let result = await group.next() {
                results.append(result)
                if next < items.count { let item = items[next]; group.addTask { await body(item) }; next += 1 }
            }
            return results
        }
    }
}
