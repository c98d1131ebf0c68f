import Foundation
import Providers
import Wiring
import Observability
import Reconciliation
import Store
import Worker

private let reconcileSince = OptionKey<Int64>("--since", "DURATION", "Re-check orders created or updated within DURATION (default 72h), plus every order with an open discrepancy or a pending action (report --since picks discrepancies instead).") {
    (v: String) throws(UsageError) -> Int64 in try Options.duration(v, flag: "--since")
}

let reconcileCommand = Command(
    name: "reconcile",
    summary: "The nightly sweep: re-check recent orders and those with open findings or pending actions.",
    options: [
        reconcileSince, Options.all, Options.provider.help("Only \(Options.names(Provider.self)) orders."), Options.concurrency,
        Options.databaseURL,
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
) { args in
    let env = try args.environment()
    let window = try args.value(reconcileSince)
    if args.flag(Options.all) && window != nil { throw UsageError("use either --since or --all, not both") }
    let since: Date? = args.flag(Options.all) ? nil : Date(timeIntervalSinceNow: -TimeInterval(window ?? 72 * 3600))
    let provider = try args.value(Options.provider)
    let concurrency = try args.value(Options.concurrency, default: 16)
    let deadline = try env.duration("PAYRECON_SETTLEMENT_DEADLINE", default: "3d")
    let backfills = try env.backfill()
    let reread = try env.duration("PAYRECON_BACKFILL_REREAD", default: "3d")
    let context = try WorkerContext(env, poolSize: min(32, concurrency + 2), maxConcurrentRequests: concurrency)
    let terminal = isatty(STDERR_FILENO) == 1
    let sweep = ReconcileSweep(pool: context.pool, checker: context.checker, logger: context.logger)
    // PAYRECON_BACKFILL: what the providers' own records hold that no webhook said, first (so the sweep sees it too).
    var backfillFailed = false
    // PAYRECON_RETAIN matters here only to a backfill (how far back events are listed).
    var deliveriesKept: Int64?
    if !backfills.isEmpty {
        do { deliveriesKept = try RetentionPolicy.parse(env["PAYRECON_RETAIN"]).deliveriesSeconds } catch { throw UsageError("\(error)") }
    }
    for (backfillProvider, seconds) in backfills where provider == nil || provider == backfillProvider {
        let now = Int64(Date().timeIntervalSince1970)
        do {
            let b = try await Backfill(pool: context.pool, checker: context.checker, concurrency: concurrency)
                .run(.init(provider: backfillProvider, from: now - seconds, to: now,
                           deliveriesKeptSeconds: deliveriesKept, rereadSeconds: reread), log: context.logger)
            let events = b.eventRequests > 0 ? "; \(b.eventsListed) webhook events listed, \(b.eventsStored) payrecon had not stored (stored now for payrecon work)" : ""
            print("backfill \(backfillProvider.rawValue): \(b.windowsRead) windows read (\(b.windowsReread) again), \(b.found) transactions listed, \(b.new) new or changed, \(b.ordersChecked) orders re-checked, \(b.unknown) no order holds\(events)")
            for problem in b.problems + b.notChecked.map({ "not checked: " + $0 }) { print("  \(problem.terminalSafe)") }
            for why in b.refused { FileHandle.standardError.write(Data("payrecon: PAYRECON_BACKFILL \(backfillProvider.rawValue): a list was refused and skipped: \(why)\n".utf8)) }
            if !b.problems.isEmpty || !b.notChecked.isEmpty || !b.refused.isEmpty { backfillFailed = true }
        } catch let failure as Backfill.Failure {
            backfillFailed = true
            switch failure {
            case .unsupported(let why), .refused(let why):
                FileHandle.standardError.write(Data("payrecon: PAYRECON_BACKFILL \(backfillProvider.rawValue) skipped: \(why)\n".utf8))
            }
        } catch {
            // A database error in the backfill: said, and the sweep runs all the same (its own errors stop it).
            backfillFailed = true
            FileHandle.standardError.write(Data("payrecon: PAYRECON_BACKFILL \(backfillProvider.rawValue) stopped: \(error); the sweep runs anyway\n".utf8))
        }
    }
    let started = Date()
    let summary: ReconcileSweep.Summary
    do {
        summary = try await sweep.run(.init(since: since, provider: provider, concurrency: concurrency)) { t in
            guard terminal else { return }
            let rate = Double(t.checked) / max(0.001, Date().timeIntervalSince(started))
            FileHandle.standardError.write(Data("\r\u{1B}[Kchecked \(t.checked)  matched \(t.matched)  opened \(t.opened)  resolved \(t.resolved)  actions \(t.actionsEmitted)  errors \(t.errors)  (\(Int(rate))/s)".utf8))
        }
    } catch {
        throw FatalError("reconcile stopped: \(error)")
    }
    if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    let t = summary.totals
    let seconds = Date().timeIntervalSince(started)
    print("reconcile run \(summary.runID): checked \(t.checked), matched \(t.matched), discrepancies opened \(t.opened), resolved \(t.resolved), actions emitted \(t.actionsEmitted), errors \(t.errors) in \(String(format: "%.1f", seconds))s")
    if !summary.errors.isEmpty {
        print("not checked:")
        for e in summary.errors.prefix(50) { print("  \(e.terminalSafe)") }   // a provider's words, one line each
        if summary.errors.count > 50 { print("  … and \(t.errors - 50) more (see runs.error_list for run \(summary.runID))") }
    }
    if context.executeActions { _ = await context.executor.executePending() }
    // Settlement as a whole, after the checks refreshed what payrecon knows: captures and refunds past
    // PAYRECON_SETTLEMENT_DEADLINE that no imported file shows (nothing happens before a first file is imported).
    var settlementFailed = false
    for definition in ProviderRegistry.definitions where definition.settlementReports != nil && (provider == nil || provider == definition.provider) {
        do {
            let evaluated = try await context.pool.run { conn in
                try conn.transaction { tx in
                    // Behind an import that holds the settlement lock, wait at most a minute: the next run evaluates.
                    _ = try tx.execute("SET LOCAL lock_timeout = '60s'")
                    return try SettlementStore.evaluate(provider: definition.provider, now: Date(), deadlineSeconds: deadline, on: tx)
                }
            }
            let opened = evaluated.opened.values.reduce(0, +)
            if opened + evaluated.resolved > 0 {
                print("settlement (\(definition.provider.rawValue)): opened \(opened), resolved \(evaluated.resolved)")
            }
        } catch {
            settlementFailed = true
            FileHandle.standardError.write(Data("payrecon: settlement (\(definition.provider.rawValue)) was not evaluated: \(error); the next run tries again\n".utf8))
        }
    }
    context.pool.close()
    return summary.exitCode == Exit.ok && (settlementFailed || backfillFailed) ? Exit.finding : summary.exitCode
}
