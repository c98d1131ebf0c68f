import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Worker
import Wiring

private let metricsListenOption = OptionKey<String>(
    "--metrics-listen", "HOST:PORT",
    "Serve the worker's own /metrics here (default PAYRECON_WORK_METRICS_LISTEN; none).")
private let apiListenOption = OptionKey<String>(
    "--api-listen", "HOST:PORT",
    "Serve the verdict API here (default PAYRECON_API_LISTEN; none), for PAYRECON_API_TOKEN holders.")

struct WorkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "work",
        summary: "Process stored deliveries: re-fetch each named transaction, reconcile, emit actions.",
        options: [
            Options.once, Options.batch, Options.lease, Options.maxAttempts, metricsListenOption, apiListenOption, Options.databaseURL
        ],
        details: """
            Wakes on LISTEN/NOTIFY (on PAYRECON_LISTEN_DATABASE_URL when set, else DATABASE_URL unless that is a pooler
            such as PgBouncer, which loses notifications: then it polls), polls every 5s as a fallback. Provider timeouts, 429 (Retry-After honoured) and 5xx
            are retried with exponential backoff and jitter; after the last attempt the delivery is 'dead' with its
            reason ('payrecon events list --status dead', 'payrecon events retry ID|--dead'). With
            PAYRECON_ACTIONS=execute, planned actions are also executed at the provider. SIGTERM finishes the deliveries
            in hand and exits 0. Each delivery ends done (with the orders it re-checked), ignored (it names no payment;
            the reason is kept) or dead. --metrics-listen (PAYRECON_WORK_METRICS_LISTEN) serves the worker's own
            /metrics: payrecon_deliveries_processed_total{provider,outcome}. --api-listen (PAYRECON_API_LISTEN) serves
            GET /v1/orders/{provider}/{order_id}/verdict for the merchant's fulfilment system, with Authorization: Bearer
            PAYRECON_API_TOKEN (or PAYRECON_API_TOKEN_FILE): the verdict of a fresh check, as payrecon check gives it.
            """
    )

    /// --once: exit when nothing is due.
    var once: Bool
    var batch: Int
    var lease: Duration
    var maxAttempts: Int
    /// --metrics-listen (else PAYRECON_WORK_METRICS_LISTEN).
    var metricsListen: String?
    /// --api-listen: the verdict API (else PAYRECON_API_LISTEN).
    var apiListen: String?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        once = args.flag(Options.once)
        batch = try args.value(Options.batch, default: 32)
        lease = try args.value(Options.lease, default: .seconds(60))
        maxAttempts = try args.value(Options.maxAttempts, default: 10)
        metricsListen = try args.value(metricsListenOption)
        apiListen = try args.value(apiListenOption)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        // SIGHUP re-reads secrets once working; until then it is ignored, never the default (which ends the process).
        signal(SIGHUP, SIG_IGN)
        let env = Environment(databaseURL: databaseURL)
        // Each delivery in flight needs a connection now and then (find, check, complete); checks are recorded in
        // groups on at most two. A quarter of the batch (at most 32): at --batch 256, 64 connections held 7 MiB more
        // than 36 for the same rate (scripts/bench-reconcile, worker 0.86-0.88 of the ideal either way).
        let context = try WorkerContext(env, poolSize: min(32, batch / 4 + 4), maxConcurrentRequests: batch, logger: logger)
        try context.requireReadyDatabase(env)
        let config = QueueWorker.Configuration(
            // Provider calls in flight are capped at --batch by the transport; twice as many deliveries are in hand, so a
            // delivery waiting for its check to be recorded holds no call's place (as the sweep does with --concurrency).
            lease: lease, batchSize: batch * 2,
            attempt: DeliveryAttempt(maxAttempts: maxAttempts),
            executeActions: context.executeActions)
        let worker = QueueWorker(
            configuration: config, conninfo: once ? nil : context.listenURL(env), pool: context.pool,
            processor: DeliveryProcessor(pool: context.pool, checker: context.checker),
            executor: context.executor, logger: context.logger)
        if !once { stopAndReload(worker, context, logger: logger) }
        // payrecon_database_up, and one line when the database goes out of reach and one when it is back.
        let probe: Task<Void, Never>? =
            once
            ? nil : try DatabaseProbe(pool: context.pool, process: "work", environment: env, logger: logger).start()
        defer { probe?.cancel() }
        let metrics = try startMetrics(env, context, logger: logger)
        let verdictServer = try startVerdictAPI(env, context, logger: logger)
        let totals = await worker.run(once: once)
        verdictServer?.stop()
        metrics?.refresher.cancel()
        metrics?.server.stop()
        if once {
            print("processed \(totals.done), retry scheduled \(totals.retried), dead \(totals.dead)")
        }
        context.pool.close()
        return Exit.ok
    }
}

extension WorkCommand {
    /// SIGTERM stops the worker once the deliveries in hand are finished; SIGHUP reads the provider API secrets given
    /// as files (NAME_FILE) again (calls under way finish with the old ones; a secret that cannot be read keeps the
    /// ones in use, and says why).
    func stopAndReload(_ worker: QueueWorker, _ context: WorkerContext, logger: Logger) {
        Task {
            let s = await Signals.waitForTermination(); logger.info("stopping", ["signal": s]); worker.stop()
        }
        Signals.onHangup {
            do { try context.reloadProviders(Environment()) } catch {
                logger.error(
                    "SIGHUP: the provider API secrets were not re-read; the ones in use stay", ["error": String(describing: error)])
                return
            }
            // What waited out a backoff for a cause now fixed (a refused secret) is retried at once.
            Task {
                do {
                    let due = try await context.pool.run { try DeliveryQueue.dueNow(on: $0) }
                    if due > 0 { logger.info("SIGHUP: deliveries waiting for a retry are due now", ["deliveries": due]) }
                } catch {
                    logger.warning(
                        "SIGHUP: deliveries waiting for a retry could not be made due now; they keep their backoff",
                        ["error": String(describing: error)])
                }
            }
        }
    }

    /// The worker's own /metrics (--metrics-listen), and the task that refreshes what it reads from the database.
    func startMetrics(
        _ env: Environment, _ context: WorkerContext, logger: Logger
    ) throws -> (
        server: WorkerMetricsServer, refresher: Task<Void, Never>
    )? {
        guard let address = try env.workMetricsAddress(flag: metricsListen) else { return nil }
        WorkerMetrics.register()
        WorkerMetrics.executes.set(context.executeActions ? 1 : 0)
        ProcessMetrics.register(version: CLI.version)
        PoolMetrics.register(context.pool)
        // The queue, open discrepancies, money at risk and the last sweep: read in the background, never by a scrape.
        let refresher = Task { [pool = context.pool] in
            while !Task.isCancelled {
                do { try await pool.run { try WorkerMetrics.refresh(on: $0) } } catch {
                    logger.warning("cannot refresh the worker's metrics", ["error": String(describing: error)])
                }
                try? await Task.sleep(for: .seconds(15))
            }
        }
        let server = WorkerMetricsServer(host: address.host, port: address.port)
        do { logger.info("worker metrics listening", ["port": Int(try server.start())]) } catch {
            throw ConfigurationError("cannot serve the worker's /metrics on \(address.host):\(address.port): \(error)")
        }
        return (server, refresher)
    }

    /// The verdict API (--api-listen), for PAYRECON_API_TOKEN holders; none with --once. The worker serves it since it
    /// holds the provider credentials (serve must not).
    func startVerdictAPI(_ env: Environment, _ context: WorkerContext, logger: Logger) throws -> VerdictServer? {
        guard let address = try env.apiAddress(flag: apiListen), !once else { return nil }
        guard let token = try env.secret("PAYRECON_API_TOKEN"), token.utf8.count >= 16 else {
            throw ConfigurationError(
                "the verdict API (\(address.host):\(address.port)) needs PAYRECON_API_TOKEN (or PAYRECON_API_TOKEN_FILE), "
                    + "at least 16 characters: generate one, e.g. openssl rand -hex 32")
        }
        // Verdict checks take at most half the provider calls in flight (--batch): the worker keeps the other half.
        let server = VerdictServer(
            host: address.host, port: address.port, token: Array(token.utf8),
            service: VerdictService(
                pool: context.pool, checker: context.checker, maxChecks: min(batch, max(4, batch / 2)),
                logger: context.logger))
        do { logger.info("verdict API listening", ["port": Int(try server.start())]) } catch {
            throw ConfigurationError("cannot serve the verdict API on \(address.host):\(address.port): \(error)")
        }
        return server
    }
}
