import Foundation
import HTTP
import Observability

/// The simulator behind the project's libmicrohttpd `HTTPServer`.
///
/// Dropping a connection without an answer (`drop_rate`) cannot be expressed through `HTTPServer` (a responder
/// always answers), so a dropped request gets `503` with `Connection: close` and an empty body.
public final class PaysimServer: Sendable {
    public let simulator: Simulator
    let server: HTTPServer

    public init(simulator: Simulator, host: String = "127.0.0.1", port: UInt16 = 0, threads: Int = 4) {
        self.simulator = simulator
        let configuration = HTTPServer.Configuration(
            host: host, port: port, threads: threads, maxBodyBytes: 64 * 1024 * 1024, connectionTimeoutSeconds: 30,
            connectionLimit: 4096,
            errorLog: { line in
                // libmicrohttpd complains about its own option order on every start; not actionable here.
                if line.contains("EXTERNAL_LOGGER is not the first option") { return }
                Log.warning("libmicrohttpd", ["detail": line])
            })
        server = HTTPServer(configuration: configuration) { [simulator] request, responder in
            Task {
                responder.respond(await PaysimServer.answer(simulator, request))
            }
        }
    }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        try server.start()
        return server.port
    }

    public var port: UInt16 { server.port }

    public func shutdown(drainTimeout: Double = 5) async {
        await server.shutdown(drainTimeout: drainTimeout)
    }

    static func answer(_ simulator: Simulator, _ request: HTTPRequest) async -> HTTPResponse {
        if request.bodyTooLarge {
            return .error(status: 413, code: "body_too_large", message: "request body too large")
        }
        let simRequest = SimRequest(
            method: request.method, path: request.path, query: request.query,
            headers: request.headers.lowercasedDictionary, body: request.body)
        let response = await simulator.respond(simRequest)
        if response.drop {
            return HTTPResponse(status: response.status, headers: [("Connection", "close")], body: [])
        }
        return HTTPResponse(status: response.status, headers: response.headers, body: response.body)
    }
}
