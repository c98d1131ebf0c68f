import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// The nightly run (`payrecon reconcile`), in the order each part needs the one before:
/// 1. backfill (PAYRECON_BACKFILL): what each provider's own records hold that no webhook said, so the sweep sees it;
/// 2. the sweep: every order in the window, and every one with an open finding or a pending action, checked again;
/// 3. the actions the checks planned, when this process executes them;
/// 4. settlement as a whole, after the checks refreshed what payrecon knows (nothing before a first file is imported).
/// A backfill or a settlement evaluation that fails is reported and the run goes on; a sweep that stops ends it.
public struct NightlyJob: Sendable {
    public struct Options: Sendable {
        public var sweep: ReconcileSweep.Options
        /// PAYRECON_BACKFILL: the providers to read and how far back.
        public var backfills: [(provider: Provider, seconds: Int64)]
        /// PAYRECON_BACKFILL_REREAD.
        public var rereadSeconds: Int64
        /// How long deliveries are kept (PAYRECON_RETAIN): a backfill lists no event older.
        public var deliveriesKeptSeconds: Int64?
        /// PAYRECON_SETTLEMENT_DEADLINE.
        public var settlementDeadlineSeconds: Int64
        public init(
            sweep: ReconcileSweep.Options, backfills: [(provider: Provider, seconds: Int64)] = [], rereadSeconds: Int64 = 3 * 86_400,
            deliveriesKeptSeconds: Int64? = nil, settlementDeadlineSeconds: Int64 = 3 * 86_400
        ) {
            self.sweep = sweep; self.backfills = backfills; self.rereadSeconds = rereadSeconds
            self.deliveriesKeptSeconds = deliveriesKeptSeconds; self.settlementDeadlineSeconds = settlementDeadlineSeconds
        }
    }

    /// What one provider's backfill came to.
    public enum BackfillResult: Sendable, Equatable {
        case ran(Backfill.Summary)
        /// The provider cannot be backfilled, or refused the list: nothing read.
        case skipped(String)
        /// A database error stopped it part way.
        case stopped(String)

        /// Whether it left something undone (which makes the run's exit 1).
        public var failed: Bool {
            guard case .ran(let b) = self else { return true }
            return !b.problems.isEmpty || !b.notChecked.isEmpty || !b.refused.isEmpty
        }
    }

    public struct BackfillRun: Sendable, Equatable {
        public var provider: Provider
        public var result: BackfillResult
    }

    /// What one provider's settlement evaluation came to.
    public enum SettlementResult: Sendable, Equatable {
        case evaluated(opened: Int, resolved: Int)
        case notEvaluated(String)
    }

    public struct Report: Sendable, Equatable {
        /// In the order they ran (PAYRECON_BACKFILL may name a provider twice: each run is its own).
        public var backfills: [BackfillRun] = []
        public var sweep = ReconcileSweep.Summary()
        public var sweepSeconds: Double = 0
        public var actions: ActionExecutor.Totals?
        public var settlement: [Provider: SettlementResult] = [:]

        /// 0 when everything was checked and every part ran; 1 when some order could not be checked, a backfill left
        /// something or a settlement evaluation failed.
        public var exitCode: Int32 {
            let partFailed =
                backfills.contains(where: \.result.failed)
                || settlement.values.contains(where: { if case .notEvaluated = $0 { true } else { false } })
            return sweep.exitCode == 0 && partFailed ? 1 : sweep.exitCode
        }
    }

    let pool: PostgresPool
    let checker: OrderChecker
    /// nil: this process does not execute actions (another does, or none may).
    let executor: ActionExecutor?
    let logger: Logger

    public init(pool: PostgresPool, checker: OrderChecker, executor: ActionExecutor?, logger: Logger) {
        self.pool = pool; self.checker = checker; self.executor = executor; self.logger = logger
    }

    /// Runs the job. `backfilled` is told each backfill's result as it ends (so it is said before the sweep runs),
    /// `progress` the sweep's totals now and then (for a terminal). Throws when the sweep itself stopped (the
    /// database went away): nothing after it runs.
    public func run(
        _ options: Options, now: @Sendable () -> Date = { Date() },
        backfilled: @Sendable (Provider, BackfillResult) -> Void = { _, _ in },
        progress: (@Sendable (RunStore.Totals) -> Void)? = nil
    ) async throws -> Report {
        var report = Report()
        for (provider, seconds) in options.backfills where options.sweep.provider == nil || options.sweep.provider == provider {
            let result = await backfill(provider, seconds: seconds, options, now: Int64(now().timeIntervalSince1970))
            backfilled(provider, result)
            report.backfills.append(BackfillRun(provider: provider, result: result))
        }
        let started = DispatchTime.now()
        report.sweep = try await ReconcileSweep(pool: pool, checker: checker, logger: logger).run(options.sweep, progress: progress)
        report.sweepSeconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        if let executor { report.actions = await executor.executePending() }
        for definition in ProviderRegistry.definitions
        where definition.settlementReports != nil && (options.sweep.provider == nil || options.sweep.provider == definition.provider) {
            report.settlement[definition.provider] = await evaluateSettlement(definition.provider, options, now: now())
        }
        return report
    }

    private func backfill(_ provider: Provider, seconds: Int64, _ options: Options, now: Int64) async -> BackfillResult {
        do {
            let summary = try await Backfill(pool: pool, checker: checker, concurrency: options.sweep.concurrency)
                .run(
                    .init(
                        provider: provider, from: now - seconds, to: now, deliveriesKeptSeconds: options.deliveriesKeptSeconds,
                        rereadSeconds: options.rereadSeconds), now: now, logger: logger)
            return .ran(summary)
        } catch let failure as Backfill.Failure {
            switch failure {
            case .unsupported(let why), .refused(let why): return .skipped(why)
            }
        } catch {
            return .stopped(String(describing: error))
        }
    }

    private func evaluateSettlement(_ provider: Provider, _ options: Options, now: Date) async -> SettlementResult {
        do {
            let evaluated = try await pool.run { conn in
                try conn.transaction { tx in
                    // Behind an import that holds the settlement lock, wait at most a minute: the next run evaluates.
                    _ = try tx.execute("SET LOCAL lock_timeout = '60s'")
                    return try SettlementStore.evaluate(
                        provider: provider, now: now, deadlineSeconds: options.settlementDeadlineSeconds, on: tx)
                }
            }
            return .evaluated(opened: evaluated.opened.values.reduce(0, +), resolved: evaluated.resolved)
        } catch {
            return .notEvaluated(String(describing: error))
        }
    }
}
