/// A small exact-match router: (method, path) → handler.
///
/// Unknown path → 404 `not_found`; known path, other method → 405 `method_not_allowed` with `Allow`.
/// ```swift
/// var router = Router()
/// router.on("GET", "/healthz") { _, responder in responder.respond(.text("ok")) }
/// let server = HTTPServer(configuration: config, handler: router.handler)
/// ```
public struct Router: Sendable {
    private var routes: [String: [String: HTTPServer.Handler]] = [:]  // path → method → handler

    public init() {}

    /// Registers `handler` for `method` (case-sensitive token, e.g. "POST") on the exact `path`.
    public mutating func on(_ method: String, _ path: String, _ handler: @escaping HTTPServer.Handler) {
        routes[path, default: [:]][method] = handler
    }

    /// Registers an async handler (run in a `Task`).
    public mutating func on(_ method: String, _ path: String, async handler: @escaping @Sendable (HTTPRequest) async -> HTTPResponse) {
        on(method, path) { request, responder in
            Task { responder.respond(await handler(request)) }
        }
    }

    /// Routes one request.
    public func route(_ request: HTTPRequest, _ responder: HTTPResponder) {
        guard let methods = routes[request.path] else {
            responder.respond(.error(status: 404, code: "not_found", message: "no route for \(request.path)"))
            return
        }
        guard let handler = methods[request.method] else {
            let allowed = methods.keys.sorted().joined(separator: ", ")
            responder.respond(.error(
                status: 405, code: "method_not_allowed", message: "\(request.method) is not allowed on \(request.path)",
                headers: [("Allow", allowed)]))
            return
        }
        handler(request, responder)
    }

    /// The router as a server handler.
    public var handler: HTTPServer.Handler {
        let router = self
        return { request, responder in router.route(request, responder) }
    }
}
