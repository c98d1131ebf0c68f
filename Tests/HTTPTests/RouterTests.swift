import Foundation
import Testing

@testable import HTTP

@Suite("Router")
struct RouterTests {
    static var router: Router {
        var router = Router()
        router.on("GET", "/healthz") { _, responder in responder.respond(.text("ok")) }
        router.on("POST", "/webhooks/pxp") { request, responder in
            responder.respond(.json(["received": request.body.count]))
        }
        router.on("PUT", "/webhooks/pxp") { _, responder in responder.respond(.text("put")) }
        router.on("GET", "/async", async: { _ in .text("async ok") })
        return router
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var method: String
        var path: String
        var status: Int
        var code: String?
        var allow: String?
        var testDescription: String { "\(method) \(path) → \(status)" }
    }

    @Test(arguments: [
        Case(method: "GET", path: "/healthz", status: 200),
        Case(method: "POST", path: "/webhooks/pxp", status: 200),
        Case(method: "GET", path: "/async", status: 200),
        Case(method: "GET", path: "/nope", status: 404, code: "not_found"),
        Case(method: "GET", path: "/healthz/", status: 404, code: "not_found"),
        Case(method: "POST", path: "/healthz", status: 405, code: "method_not_allowed", allow: "GET"),
        Case(method: "DELETE", path: "/webhooks/pxp", status: 405, code: "method_not_allowed", allow: "POST, PUT"),
    ])
    func routes(_ testCase: Case) async throws {
        try await withServer(handler: Self.router.handler) { _, base in
            let body: [UInt8]? = testCase.method.uppercased() == "GET" ? nil : [1, 2]
            let response = try await HTTPClient().send(.init(method: testCase.method, url: base + testCase.path, body: body))
            #expect(response.status == testCase.status)
            if let code = testCase.code {
                let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                let error = object?["error"] as? [String: Any]
                #expect(error?["code"] as? String == code)
                #expect((error?["message"] as? String)?.isEmpty == false)
                #expect(response.headers["content-type"] == "application/json")
            }
            #expect(response.headers["allow"] == testCase.allow)
        }
    }

    /// Methods are case-sensitive tokens (RFC 9110): `get` is not `GET`. (URLSession upper-cases, so raw.)
    @Test func methodMatchIsCaseSensitive() async throws {
        try await withServer(handler: Self.router.handler) { server, _ in
            let socket = try RawSocket(port: server.port)
            socket.send("get /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let (text, _) = socket.readUntilClosed(timeout: 5)
            #expect(text.hasPrefix("HTTP/1.1 405"))
            #expect(text.contains("Allow: GET"))
            #expect(text.contains("method_not_allowed"))
        }
    }
}
