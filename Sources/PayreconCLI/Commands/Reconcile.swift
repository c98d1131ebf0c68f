import Foundation
import Providers
import Wiring
import Observability
import Reconciliation
import Store
import Worker

private let reconcileSince = OptionKey<Int64>(
    "--since", "DURATION",
    "Re-check orders created or updated within DURATION (default 72h), plus every order with an open discrepancy or a pending action (report --since picks discrepancies instead)."
) {
    (v: String) throws(UsageError) -> Int64 in try Options.duration(v, flag: "--since")
}

struct ReconcileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "reconcile",
        summary: "The nightly sweep: re-check recent orders and those with open findings or pending actions.",
        options: [
            reconcileSince, Options.all, Options.provider.help("Only \(Options.names(Provider.self)) orders."), Options.concurrency,
            Options.databaseURL
        ],
        details: """
            Orders are streamed in pages (constant memory). Ends with a summary: checked, matched, discrepancies
            opened/resolved, actions emitted, errors. Exit 0 when every order was checked (whatever it found), 1 when
            some could not be (provider errors; listed), 2 on a fatal error. Each run is recorded in the runs table.
            With PAYRECON_BACKFILL=paypal=3d it first reads the provider's own records over that span (payrecon backfill
            --help); a backfill that could not run or left something is reported and makes the exit 1. Then settlement is
            evaluated as a whole, once a settlement file has been imported: see payrecon settlement
            import --help (settlement_missing comes due as PAYRECON_SETTLEMENT_DEADLINE passes).
            """
    )

    /// --since, in seconds (default 72h).
    var since: Int64?
    /// --all: every order, whatever its age.
    var all: Bool
    var provider: Provider?
    var concurrency: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        since = try args.value(reconcileSince)
        all = args.flag(Options.all)
        provider = try args.value(Options.provider)
        concurrency = try args.value(Options.concurrency, default: 16)
        databaseURL = try args.value(Options.databaseURL)
    }

    func validate() throws(UsageError) {
        if all && since != nil { throw UsageError("use either --since or --all, not both") }
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment(databaseURL: databaseURL)
        let since: Date? = all ? nil : Date(timeIntervalSinceNow: -TimeInterval(self.since ?? 72 * 3600))
        let backfills = try env.backfill()
        var options = NightlyJob.Options(
            sweep: .init(since: since, provider: provider, concurrency: concurrency),
            backfills: backfills.map { (provider: $0.0, seconds: $0.1) },
            rereadSeconds: try env.duration("PAYRECON_BACKFILL_REREAD", default: "3d"),
            settlementDeadlineSeconds: try env.duration("PAYRECON_SETTLEMENT_DEADLINE", default: "3d"))
        // PAYRECON_RETAIN matters here only to a backfill (how far back events are listed).
        if !backfills.isEmpty {
            do { options.deliveriesKeptSeconds = try RetentionPolicy.parse(env["PAYRECON_RETAIN"]).deliveriesSeconds } catch {
                throw UsageError("\(error)")
            }
        }
        let context = try WorkerContext(env, poolSize: min(32, concurrency + 2), maxConcurrentRequests: concurrency, logger: logger)
        defer { context.pool.close() }
        let terminal = isatty(STDERR_FILENO) == 1
        let job = NightlyJob(
            pool: context.pool, checker: context.checker, executor: context.executeActions ? context.executor : nil,
            logger: context.logger)
        let started = Date()
        let report: NightlyJob.Report
        do {
            report = try await job.run(
                options,
                backfilled: { provider, result in
                    if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                    NightlyReportPrinter.print(backfill: result, of: provider)
                },
                progress: { t in
                    guard terminal else { return }
                    let rate = Double(t.checked) / max(0.001, Date().timeIntervalSince(started))
                    FileHandle.standardError.write(
                        Data(
                            "\r\u{1B}[Kchecked \(t.checked)  matched \(t.matched)  opened \(t.opened)  resolved \(t.resolved)  actions \(t.actionsEmitted)  errors \(t.errors)  (\(Int(rate))/s)"
                                .utf8))
                })
        } catch {
            throw FatalError("reconcile stopped: \(error)")
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        NightlyReportPrinter.print(report)
        return report.exitCode
    }
}

/// What a nightly run prints: each backfill's lines as it ends, then the sweep's summary, then settlement.
enum NightlyReportPrinter {
    /// One backfill's lines, said as it ends (before the sweep runs).
    static func print(backfill result: NightlyJob.BackfillResult, of provider: Provider) {
        switch result {
        case .ran(let b):
            let events =
                b.eventRequests > 0
                ? "; \(b.eventsListed) webhook events listed, \(b.eventsStored) payrecon had not stored (stored now for payrecon work)" : ""
            Swift.print(
                "backfill \(provider.rawValue): \(b.windowsRead) windows read (\(b.windowsReread) again), \(b.found) transactions listed, \(b.new) new or changed, \(b.ordersChecked) orders re-checked, \(b.unknown) no order holds\(events)"
            )
            for problem in b.problems + b.notChecked.map({ "not checked: " + $0 }) { Swift.print("  \(problem.terminalSafe)") }
            for why in b.refused { stderr("payrecon: PAYRECON_BACKFILL \(provider.rawValue): a list was refused and skipped: \(why)") }
        case .skipped(let why): stderr("payrecon: PAYRECON_BACKFILL \(provider.rawValue) skipped: \(why)")
        case .stopped(let why): stderr("payrecon: PAYRECON_BACKFILL \(provider.rawValue) stopped: \(why); the sweep runs anyway")
        }
    }

    /// The sweep's summary, then settlement (the backfills were said as they ended).
    static func print(_ report: NightlyJob.Report) {
        let summary = report.sweep, t = summary.totals
        Swift.print(
            "reconcile run \(summary.runID): checked \(t.checked), matched \(t.matched), discrepancies opened \(t.opened), resolved \(t.resolved), actions emitted \(t.actionsEmitted), errors \(t.errors) in \(String(format: "%.1f", report.sweepSeconds))s"
        )
        if !summary.errors.isEmpty {
            Swift.print("not checked:")
            for e in summary.errors.prefix(50) { Swift.print("  \(e.terminalSafe)") }  // a provider's words, one line each
            if summary.errors.count > 50 { Swift.print("  … and \(t.errors - 50) more (see runs.error_list for run \(summary.runID))") }
        }
        for (provider, result) in report.settlement.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            switch result {
            case .evaluated(let opened, let resolved) where opened + resolved > 0:
                Swift.print("settlement (\(provider.rawValue)): opened \(opened), resolved \(resolved)")
            case .evaluated: break
            case .notEvaluated(let why):
                stderr("payrecon: settlement (\(provider.rawValue)) was not evaluated: \(why); the next run tries again")
            }
        }
    }

    private static func stderr(_ line: String) { FileHandle.standardError.write(Data((line.terminalSafe + "\n").utf8)) }
}
