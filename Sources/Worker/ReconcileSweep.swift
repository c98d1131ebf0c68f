import Foundation
import Observability
import Postgres
import Reconciliation
import Store
import Synchronization

/// `payrecon reconcile`: re-checks the orders created or updated within the window plus those with open
/// discrepancies or pending actions. Orders stream in keyset pages (constant memory, no long transaction) and
/// are checked with at most `concurrency` provider calls in flight, so throughput is bound by the provider's
/// latency and the concurrency, not by payrecon.
public struct ReconcileSweep: Sendable {
    public struct Options: Sendable {
        /// nil = every order (`--all`).
        public var since: Date?
        public var provider: Provider?
        public var concurrency: Int
        public var pageSize: Int
        public init(since: Date?, provider: Provider?, concurrency: Int = 16, pageSize: Int = 500) {
            self.since = since; self.provider = provider; self.concurrency = concurrency; self.pageSize = pageSize
        }
    }

    public struct Summary: Sendable, Equatable {
        public var totals = RunStore.Totals()
        /// Orders that could not be checked, with why (at most 1000 kept).
        public var errors: [String] = []
        public var runID: Int64 = 0
        /// 0 every order checked, 1 some could not be.
        public var exitCode: Int32 { totals.errors == 0 ? 0 : 1 }
    }

    let pool: PostgresPool
    let checker: OrderChecker

    let logger: Logger

    public init(pool: PostgresPool, checker: OrderChecker, logger: Logger) {
        self.pool = pool; self.checker = checker; self.logger = logger
    }

    /// Runs the sweep; `progress` is called now and then with the totals so far (for a terminal).
    public func run(_ options: Options, progress: (@Sendable (RunStore.Totals) -> Void)? = nil) async throws -> Summary {
        let optionsJSON = Self.optionsJSON(options)
        let runID = try await pool.run { try RunStore.start(options: optionsJSON, on: $0) }
        let log = logger.with(["run_id": runID])
        let state = Locked(Summary())
        var cursor: (provider: Provider, orderID: String)?
        // Checks in hand: the provider calls in flight are capped at `concurrency` by the transport (sized from it,
        // `maxConcurrentRequests`), and as many checks again may be recording meanwhile. Holding a call's slot while
        // its check was recorded cost the sweep at 200 ms / 256 a sixth of its rate.
        let inHand = max(1, options.concurrency) * 2
        var lastProgress = DispatchTime.now()

        try await withThrowingTaskGroup(of: Void.self) { group in
            var inFlight = 0
            pages: while true {
                let after = cursor
                let page = try await pool.run { conn in
                    try OrderStore.page(after: after, since: options.since, provider: options.provider, limit: options.pageSize, on: conn)
                }
                if page.isEmpty { break pages }
                cursor = (page.last!.provider, page.last!.orderID)
                let known = try await known(of: page)
                for order in page {
                    let orderKnown = known[order.provider]?[order.orderID]
                    if inFlight >= inHand { try await group.next(); inFlight -= 1 }
                    inFlight += 1
                    group.addTask {
                        let result = await CheckContext.$current.withValue(CheckContext(source: .sweep, deliveryID: nil)) {
                            await checker.check(order, known: orderKnown, logger: log)
                        }
                        state.withLock { Self.tally(result, of: order, into: &$0) }
                    }
                    if let progress, DispatchTime.now().uptimeNanoseconds - lastProgress.uptimeNanoseconds > 500_000_000 {
                        lastProgress = DispatchTime.now()
                        progress(state.withLock { $0.totals })
                    }
                }
                if page.count < options.pageSize { break pages }
            }
            try await group.waitForAll()
        }
        var summary = state.withLock { $0 }
        summary.runID = runID
        try await finish(summary, log: log)
        return summary
    }

    /// What is known of a page's orders, in a few queries rather than two per order.
    private func known(of page: [Order]) async throws -> [Provider: [String: OrderChecker.Known]] {
        var known: [Provider: [String: OrderChecker.Known]] = [:]
        for provider in Set(page.map(\.provider)) {
            let ids = page.filter { $0.provider == provider }.map(\.orderID)
            known[provider] = try await pool.run { try OrderChecker.known(provider: provider, orderIDs: ids, on: $0) }
        }
        return known
    }

    /// One check's result in the run's totals (and, when it could not be made, why, up to 1,000 of them).
    static func tally(_ result: OrderChecker.Result, of order: Order, into s: inout Summary) {
        switch result {
        case .checked(let o, let matched):
            s.totals.checked += 1
            if matched { s.totals.matched += 1 }
            s.totals.opened += o.opened
            s.totals.resolved += o.resolved
            s.totals.actionsEmitted += o.actionsEmitted
        case .transient(let t): notChecked(t.reason)
        case .failed(let reason), .unreadable(let reason): notChecked(reason)
        }
        func notChecked(_ reason: String) {
            s.totals.errors += 1
            if s.errors.count < 1000 { s.errors.append("\(order.provider.rawValue) \(order.orderID): \(reason)") }
        }
    }

    /// The run's record, and a line saying how it went.
    private func finish(_ summary: Summary, log: Logger) async throws {
        let runID = summary.runID
        try await pool.run { [summary] conn in
            try RunStore.finish(id: runID, totals: summary.totals, errors: summary.errors, exitCode: summary.exitCode, on: conn)
        }
        let fields: [String: any Sendable] = [
            "checked": summary.totals.checked, "matched": summary.totals.matched,
            "opened": summary.totals.opened, "resolved": summary.totals.resolved,
            "actions_emitted": summary.totals.actionsEmitted, "errors": summary.totals.errors
        ]
        // A run that could not check orders is not routine: an error when it checked none, a warning when some.
        if summary.totals.errors > 0 && summary.totals.checked == 0 {
            log.error("reconcile finished without checking any order", fields)
        } else if summary.totals.errors > 0 {
            log.warning("reconcile finished; some orders could not be checked", fields)
        } else {
            log.info("reconcile finished", fields)
        }
    }

    final class Locked<T: Sendable>: Sendable {
        private let mutex: Mutex<T>
        init(_ value: T) { mutex = Mutex(value) }
        func withLock<R>(_ body: (inout T) -> R) -> R { mutex.withLock { body(&$0) } }
    }

    static func optionsJSON(_ o: Options) -> String {
        var parts = ["\"concurrency\":\(o.concurrency)"]
        if let since = o.since {
            parts.append("\"since\":\"\(ISO8601DateFormatter().string(from: since))\"")
        } else {
            parts.append("\"all\":true")
        }
        if let p = o.provider { parts.append("\"provider\":\"\(p.rawValue)\"") }
        return "{" + parts.joined(separator: ",") + "}"
    }
}
