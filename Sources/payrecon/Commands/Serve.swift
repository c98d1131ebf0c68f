import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Receiver
import Wiring

let serveCommand = Command(
    name: "serve",
    summary: "Receive webhooks: verify, store durably, answer 2xx only after commit.",
    options: [
        .init(name: "--listen", value: "HOST:PORT", help: "Override PAYRECON_LISTEN (default 127.0.0.1:8080)."),
        .init(name: "--threads", value: "N", help: "HTTP worker threads (default: 4)."),
        .init(name: "--port-file", value: "FILE", help: "Write the bound port here once listening (useful with port 0)."),
    ],
    details: """
        Endpoints: POST /webhooks/pxp, /webhooks/paypal, /webhooks/paypercut; GET /healthz, /readyz, /metrics.
        A provider's endpoint is enabled when its secret is set: PXP_WEBHOOK_KEY, PAYPAL_WEBHOOK_ID,
        PAYPERCUT_WEBHOOK_SECRET. SIGTERM or Ctrl-C drains in-flight deliveries and exits 0.
        """
) { args in
    let env = Environment()
    let url = try env.databaseURL()
    let (host, port) = try env.listenAddress(flag: args.value("--listen"))
    let threads = try args.int("--threads", default: 4, range: 1...256)
    let maxBody = try env.int("PAYRECON_MAX_BODY_BYTES", default: 1_048_576, range: 1...(64 << 20))
    let endpoints = try webhookEndpoints(env)
    let pool = PostgresPool(conninfo: url, size: 8, acquireTimeout: 5)
    if !pool.healthy() {
        Log.warning("database not reachable at start; deliveries get 503 until it is", [:])
    }
    let receiver = Receiver(configuration: .init(host: host, port: port, maxBodyBytes: maxBody, threads: threads),
                            endpoints: endpoints, pool: pool)
    let bound: UInt16
    do { bound = try receiver.start() } catch { throw FatalError("\(error)") }
    if let file = args.value("--port-file") { try? "\(bound)\n".write(toFile: file, atomically: true, encoding: .utf8) }
    let signal = await Signals.waitForTermination()
    Log.info("draining", ["signal": signal])
    receiver.shutdown()
    pool.close()
    return Exit.ok
}

