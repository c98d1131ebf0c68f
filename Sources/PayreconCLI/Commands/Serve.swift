import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Receiver
import Reconciliation
import Wiring

let serveCommand = Command(
    name: "serve",
    summary: "Receive webhooks: verify, store durably, answer 2xx only after commit.",
    options: [
        Options.listen, Options.threads, Options.portFile, serveMetricsListen,
    ],
    details: """
        Endpoints: POST /webhooks/pxp, /webhooks/paypal, /webhooks/paypercut; GET /healthz, /readyz, /metrics
        (on --metrics-listen / PAYRECON_METRICS_LISTEN when set, and then not on the webhook listener).
        A provider's endpoint is enabled when its secret is set: PXP_WEBHOOK_KEY, PAYPAL_WEBHOOK_ID,
        PAYPERCUT_WEBHOOK_SECRET. Behind a TLS proxy, name it in PAYRECON_TRUSTED_PROXIES (README: Behind a TLS
        proxy). SIGTERM or Ctrl-C drains in-flight deliveries and exits 0.
        """
) { args in
    let env = Environment()
    let url = try env.databaseURL()
    let (host, port) = try env.listenAddress(flag: args.value(Options.listen))
    let threads = try args.value(Options.threads, default: 4)
    let maxBody = try env.int("PAYRECON_MAX_BODY_BYTES", default: 1_048_576, range: 1...(64 << 20))
    let maxConnections = try env.int("PAYRECON_MAX_CONNECTIONS", default: 1000, range: 1...1_000_000)
    let commitTimeout: Int64
    do { commitTimeout = try DurationParser.parse(env["PAYRECON_COMMIT_TIMEOUT"] ?? "5s") } catch {
        throw ConfigurationError("PAYRECON_COMMIT_TIMEOUT=\(env["PAYRECON_COMMIT_TIMEOUT"] ?? ""): \(error); use e.g. 5s")
    }
    let requestTimeout: Int64
    do { requestTimeout = try DurationParser.parse(env["PAYRECON_REQUEST_TIMEOUT"] ?? "30s") } catch {
        throw ConfigurationError("PAYRECON_REQUEST_TIMEOUT=\(env["PAYRECON_REQUEST_TIMEOUT"] ?? ""): \(error); use e.g. 30s")
    }
    if requestTimeout <= commitTimeout {
        Log.warning("PAYRECON_REQUEST_TIMEOUT is not longer than PAYRECON_COMMIT_TIMEOUT: a slow commit's connection is cut before its 503",
                    ["request_timeout_s": requestTimeout, "commit_timeout_s": commitTimeout])
    }
    let maxPerIP = try env.int("PAYRECON_MAX_CONNECTIONS_PER_IP", default: 256, range: 1...1_000_000)
    let maxBodyBuffer = try env.int("PAYRECON_MAX_BODY_BUFFER", default: Receiver.defaultMaxBodyBuffer, range: (1 << 20)...(1 << 40))
    if maxBodyBuffer < maxBody {
        throw ConfigurationError("PAYRECON_MAX_BODY_BUFFER=\(maxBodyBuffer) is smaller than PAYRECON_MAX_BODY_BYTES=\(maxBody): no delivery "
            + "of the largest size could ever be held; raise PAYRECON_MAX_BODY_BUFFER")
    }
    let trustedProxies = try env.trustedProxies()
    let metricsAddress = try env.serveMetricsAddress(flag: args.value(serveMetricsListen))
    let endpoints = try webhookEndpoints(env)
    let pool = PostgresPool(conninfo: url, size: 8, acquireTimeout: 5)
    if !pool.healthy() {
        Log.warning("database not reachable at start; deliveries get 503 until it is", [:])
    }
    let receiver = Receiver(configuration: .init(host: host, port: port, maxBodyBytes: maxBody, threads: threads,
                                                 maxConnections: maxConnections, maxConnectionsPerIP: maxPerIP,
                                                 commitTimeoutSeconds: Double(commitTimeout),
                                                 requestTimeoutSeconds: Double(requestTimeout), trustedProxies: trustedProxies,
                                                 maxBodyBuffer: maxBodyBuffer, metricsHost: metricsAddress?.host,
                                                 metricsPort: metricsAddress?.port ?? 0),
                            endpoints: endpoints, pool: pool)
    let bound: UInt16
    do { bound = try receiver.start() } catch { throw FatalError("\(error)") }
    if let file = try args.value(Options.portFile) { try? "\(bound)\n".write(toFile: file, atomically: true, encoding: .utf8) }
    let signal = await Signals.waitForTermination()
    Log.info("draining", ["signal": signal])
    receiver.shutdown()
    pool.close()
    return Exit.ok
}


private let serveMetricsListen = OptionKey<String>("--metrics-listen", "HOST:PORT",
    "Answer /metrics, /readyz and /healthz here, not on the webhook listener (default PAYRECON_METRICS_LISTEN; the webhook listener).")
