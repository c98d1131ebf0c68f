import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Worker
import Wiring

let workCommand = Command(
    name: "work",
    summary: "Process stored deliveries: re-fetch each named transaction, reconcile, emit actions.",
    options: [
        .init(name: "--once", value: nil, help: "Exit when nothing is due (instead of waiting for new deliveries)."),
        .init(name: "--batch", value: "N", help: "Deliveries in flight at once (default 32)."),
        .init(name: "--lease", value: "DURATION", help: "Lease on a claimed delivery, renewed while working (default 60s)."),
        .init(name: "--max-attempts", value: "N", help: "Attempts before a delivery is dead (default 10)."),
    ],
    details: """
        Wakes on LISTEN/NOTIFY, polls every 5s as a fallback. Provider timeouts, 429 (Retry-After honoured) and 5xx
        are retried with exponential backoff and jitter; after the last attempt the delivery is 'dead' with its
        reason ('payrecon events list --status dead', 'payrecon events retry ID|--dead'). With
        PAYRECON_ACTIONS=execute, planned actions are also executed at the provider. SIGTERM finishes the deliveries
        in hand and exits 0.
        """
) { args in
    let env = Environment()
    let batch = try args.int("--batch", default: 32, range: 1...256)
    // Each delivery in flight needs a connection now and then (find, check, record, complete): half the batch
    // keeps them from queueing for one without holding PostgreSQL's connection slots for nothing.
    let context = try WorkerContext(env, poolSize: min(64, batch / 2 + 4), maxConcurrentRequests: batch)
    let lease = try args.value("--lease").map { try parseDuration($0, flag: "--lease") } ?? 60
    let config = QueueWorker.Configuration(
        leaseSeconds: Int(lease), batchSize: batch,
        attempt: DeliveryAttempt(maxAttempts: try args.int("--max-attempts", default: 10, range: 1...100)),
        executeActions: context.executeActions)
    let worker = QueueWorker(configuration: config, conninfo: context.url, pool: context.pool,
                             processor: DeliveryProcessor(pool: context.pool, checker: context.checker),
                             executor: context.executor)
    if !args.flag("--once") {
        Task { let s = await Signals.waitForTermination(); Log.info("stopping", ["signal": s]); worker.stop() }
    }
    let totals = await worker.run(once: args.flag("--once"))
    if args.flag("--once") {
        print("processed \(totals.done), retry scheduled \(totals.retried), dead \(totals.dead)")
    }
    context.pool.close()
    return Exit.ok
}

func parseDuration(_ text: String, flag: String) throws -> Int64 {
    do { return try DurationParser.parse(text) } catch {
        throw UsageError("\(flag) \(text) is not a duration: use a number with s, m, h or d (90s, 10m, 24h, 7d)")
    }
}
