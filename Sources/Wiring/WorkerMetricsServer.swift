import HTTP
import Observability

/// `payrecon work --metrics-listen H:P`: the worker's own `/metrics` (Prometheus text: processed deliveries by
/// provider and outcome, and whatever else this process counts) and `/healthz`, since `work` runs without `serve`.
/// Rendering reads counters in memory only: a scrape never touches the database.
public final class WorkerMetricsServer: Sendable {
    let server: HTTPServer

    public init(host: String, port: UInt16, metrics: Metrics = .shared) {
        server = HTTPServer(
            configuration: .init(
                host: host, port: port, threads: 1, maxBodyBytes: 0, connectionTimeoutSeconds: 10,
                connectionLimit: 32)
        ) { request, responder in
            guard request.method == "GET" || request.method == "HEAD" else {
                return responder.respond(
                    .error(status: 405, code: "method_not_allowed", message: "use GET", headers: [("Allow", "GET, HEAD")]))
            }
            switch request.path {
            case "/metrics":
                responder.respond(
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                        body: Array(metrics.render().utf8)))
            case "/healthz": responder.respond(.json(bytes: Array(#"{"status":"ok"}"#.utf8)))
            default:
                responder.respond(
                    .error(
                        status: 404, code: "not_found",
                        message: "no such endpoint: \(request.path) (the worker serves /metrics and /healthz)"))
            }
        }
    }

    /// Binds and serves; the port actually bound (useful with port 0).
    public func start() throws -> UInt16 {
        try server.start()
        return server.port
    }

    public func stop() { server.shutdown(drainTimeout: 1) }
}
