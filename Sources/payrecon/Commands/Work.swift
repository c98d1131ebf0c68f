import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Worker

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

/// What `work`, `reconcile` and `actions execute` share: database, provider clients, the checker.
struct WorkerContext {
    let url: String
    let pool: PostgresPool
    let gateway: ProviderGateway
    let checker: OrderChecker
    let executor: ActionExecutor
    let executeActions: Bool

    init(_ env: Environment, poolSize: Int = 8, maxConcurrentRequests: Int = 64) throws {
        url = try env.databaseURL()
        pool = PostgresPool(conninfo: url, size: poolSize, acquireTimeout: 30)
        gateway = try providerGateway(env, maxConcurrentRequests: maxConcurrentRequests)
        checker = OrderChecker(pool: pool, gateway: gateway, pendingMaxSeconds: try env.duration("PAYRECON_PENDING_MAX", default: "24h"))
        executor = ActionExecutor(pool: pool, gateway: gateway, checker: checker)
        executeActions = try env.choice("PAYRECON_ACTIONS", ["emit", "execute"], default: "emit") == "execute"
        if gateway.pxp == nil && gateway.paypal == nil {
            Log.warning("no provider API credentials set: orders cannot be re-fetched (set PXP_* or PAYPAL_* credentials)", [:])
        }
    }
}

/// Provider API clients from the environment; a provider without credentials has none.
///
/// The HTTP client is libcurl (`CurlHTTPClient`, one curl_multi loop thread) by default;
/// `PAYRECON_HTTP_CLIENT=urlsession` selects FoundationNetworking's URLSession (`HTTPClient`) instead, with the
/// same limits (30 s timeout, `maxConcurrentRequests` in flight and per host). Measured with
/// scripts/bench-http-client (20 ms latency, concurrency 64): curl used about 2.4× less CPU per authenticated PXP
/// GET and 13× less per bare GET, and reached 0.95 of concurrency ÷ latency where URLSession reached 0.74–0.80.
func providerGateway(_ env: Environment, maxConcurrentRequests: Int) throws -> ProviderGateway {
    let limits = HTTPClient.Configuration(timeoutSeconds: 30, maxConcurrentRequests: maxConcurrentRequests,
                                          maxConnectionsPerHost: maxConcurrentRequests)
    let transport: any ProviderTransport
    switch try env.choice("PAYRECON_HTTP_CLIENT", ["curl", "urlsession"], default: "curl") {
    case "urlsession": transport = HTTPClientTransport(client: HTTPClient(configuration: limits))
    default: transport = HTTPClientTransport(client: CurlHTTPClient(configuration: limits))
    }
    var pxp: PXPClient?
    if let client = env["PXP_CLIENT_ID"], let token = env["PXP_TOKEN_ID"], let value = env["PXP_TOKEN_VALUE"] {
        pxp = PXPClient(configuration: PXPConfiguration(baseURL: env["PXP_API_BASE_URL"] ?? PXPConfiguration.sandboxBaseURL,
                                                        clientID: client, tokenID: token, tokenValue: value), transport: transport)
    }
    var paypal: PayPalClient?
    if let client = env["PAYPAL_CLIENT_ID"], let secret = env["PAYPAL_CLIENT_SECRET"] {
        paypal = PayPalClient(configuration: PayPalConfiguration(baseURL: env["PAYPAL_API_BASE_URL"] ?? PayPalConfiguration.sandboxBaseURL,
                                                                 clientID: client, secret: secret), transport: transport)
    }
    return ProviderGateway(pxp: pxp, paypal: paypal)
}

func parseDuration(_ text: String, flag: String) throws -> Int64 {
    do { return try DurationParser.parse(text) } catch {
        throw UsageError("\(flag) \(text) is not a duration: use a number with s, m, h or d (90s, 10m, 24h, 7d)")
    }
}
