import Foundation
import Providers
import Wiring
import Observability
import Reconciliation
import Store
import Worker

let reconcileCommand = Command(
    name: "reconcile",
    summary: "The nightly sweep: re-check recent orders and those with open findings or pending actions.",
    options: [
        .init(name: "--since", value: "DURATION", help: "Orders created or updated within this window (default 72h)."),
        .init(name: "--all", value: nil, help: "Every order, whatever its age."),
        .init(name: "--provider", value: "P", help: "Only pxp, paypal or paypercut orders."),
        .init(name: "--concurrency", value: "N", help: "Provider calls in flight at once (default 16)."),
    ],
    details: """
        Orders are streamed in pages (constant memory). Ends with a summary: checked, matched, discrepancies
        opened/resolved, actions emitted, errors. Exit 0 when every order was checked (whatever it found), 1 when
        some could not be (provider errors; listed), 2 on a fatal error. Each run is recorded in the runs table.
        """
) { args in
    let env = Environment()
    if args.flag("--all") && args.value("--since") != nil { throw UsageError("use either --since or --all, not both") }
    let since: Date? = args.flag("--all") ? nil
        : Date(timeIntervalSinceNow: -TimeInterval(try parseDuration(args.value("--since") ?? "72h", flag: "--since")))
    var provider: Provider?
    if let p = args.value("--provider") {
        guard let parsed = Provider(rawValue: p) else { throw UsageError("--provider must be pxp, paypal or paypercut, not '\(p)'") }
        provider = parsed
    }
    let concurrency = try args.int("--concurrency", default: 16, range: 1...1024)
    let context = try WorkerContext(env, poolSize: min(32, concurrency + 2), maxConcurrentRequests: concurrency)
    let terminal = isatty(STDERR_FILENO) == 1
    let sweep = ReconcileSweep(pool: context.pool, checker: context.checker)
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
        for e in summary.errors.prefix(50) { print("  \(e)") }
        if summary.errors.count > 50 { print("  … and \(t.errors - 50) more (see runs.error_list for run \(summary.runID))") }
    }
    if context.executeActions { _ = await context.executor.executePending() }
    context.pool.close()
    return summary.exitCode
}
