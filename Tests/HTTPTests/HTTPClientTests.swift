import Dispatch
import Foundation
import PayreconTesting
import Synchronization
import Testing

@testable import HTTP

/// The two provider transports (libcurl's multi interface, the default; FoundationNetworking's URLSession) hold the
/// same promises: every test here runs over both. What only one of them does is in CurlHTTPClientTests.
enum Transport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case curl, urlsession

    func client(_ configuration: URLSessionHTTPClient.Configuration = .init()) -> any HTTPSending {
        switch self {
        case .curl: CurlHTTPClient(configuration: configuration)
        case .urlsession: URLSessionHTTPClient(configuration: configuration)
        }
    }

    var testDescription: String { rawValue }
}

@Suite("HTTP clients")
struct HTTPClientTests {
    @Test(arguments: Transport.allCases)
    func postRoundTripSendsMethodHeadersAndBody(transport: Transport) async throws {
        let seen = Shared<HTTPRequest?>(nil)
        try await withServer(handler: { request, responder in
            seen.set(request)
            responder.respond(.json(status: 201, bytes: Array(#"{"ok":true}"#.utf8), headers: [("Retry-After", "5")]))
        }) { _, base in
            let client = transport.client()
            let response = try await client.send(
                .init(
                    method: "POST", url: base + "/submit", headers: [("Content-Type", "application/json"), ("Idempotency-Key", "k-1")],
                    body: Array(#"{"a":1}"#.utf8)))
            #expect(response.status == 201)
            #expect(response.headers["retry-after"] == "5")
            #expect(response.text == #"{"ok":true}"#)
            let request = try #require(seen.get())
            #expect(request.method == "POST")
            #expect(request.headers["idempotency-key"] == "k-1")
            #expect(request.body == Array(#"{"a":1}"#.utf8))
        }
    }

    @Test(arguments: Transport.allCases)
    func errorStatusesAreResponsesNotErrors(transport: Transport) async throws {
        try await withServer(handler: { _, responder in
            responder.respond(.error(status: 503, code: "storage_unavailable", message: "down"))
        }) { _, base in
            let response = try await transport.client().send(.init(url: base + "/"))
            #expect(response.status == 503)
        }
    }

    @Test(arguments: Transport.allCases)
    func redirectsAreNotFollowed(transport: Transport) async throws {
        try await withServer(handler: { request, responder in
            if request.path == "/from" {
                responder.respond(HTTPResponse(status: 302, headers: [("Location", "/to")]))
            } else {
                responder.respond(.text("followed"))
            }
        }) { _, base in
            let response = try await transport.client().send(.init(url: base + "/from"))
            #expect(response.status == 302)
            #expect(response.headers["location"] == "/to")
        }
    }

    @Test(arguments: Transport.allCases)
    func slowServerGivesTimeout(transport: Transport) async throws {
        try await withServer(
            drainTimeout: 0.1,
            handler: { _, responder in
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) { responder.respond(.text("late")) }
            }
        ) { _, base in
            let client = transport.client(.init(timeout: .seconds(10)))
            let started = Date()
            let error = await #expect(throws: HTTPClientError.self) {
                _ = try await client.send(.init(url: base + "/slow", timeout: .milliseconds(300)))
            }
            #expect(error == .timeout(base + "/slow"))
            #expect(error?.isTransient == true)
            #expect(Date().timeIntervalSince(started) < 20)  // well before the answer at 30 s, however loaded the machine
        }
    }

    @Test(arguments: Transport.allCases)
    func connectionRefused(transport: Transport) async throws {
        let url = "http://127.0.0.1:\(unusedPort())/x"
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await transport.client(.init(timeout: .seconds(5))).send(.init(url: url))
        }
        guard case .connection(let failedURL, _) = error else {
            Issue.record("expected .connection, got \(String(describing: error))")
            return
        }
        #expect(failedURL == url)
    }

    @Test(arguments: Transport.allCases, ["", "not a url", "ftp://example.com/file", "/relative/path", "http://", "file:///etc/passwd"])
    func invalidURL(transport: Transport, url: String) async throws {
        let error = await #expect(throws: HTTPClientError.self) { _ = try await transport.client().send(.init(url: url)) }
        #expect(error == .invalidURL(url))
    }

    @Test(arguments: Transport.allCases)
    func responseOverTheCapFails(transport: Transport) async throws {
        try await withServer(handler: { _, responder in
            responder.respond(HTTPResponse(status: 200, body: Array(repeating: 65, count: 50_000)))
        }) { server, base in
            let client = transport.client(.init(maxResponseBytes: 10_000))
            let error = await #expect(throws: HTTPClientError.self) { _ = try await client.send(.init(url: base + "/big")) }
            #expect(error == .responseTooLarge(base + "/big", 10_000))
            // Under the cap is fine.
            let roomy = transport.client(.init(maxResponseBytes: 50_000))
            let body = try await roomy.send(.init(url: base + "/big")).body
            #expect(body.count == 50_000)
            _ = server
        }
    }

    @Test(arguments: Transport.allCases)
    func inFlightRequestsAreBounded(transport: Transport) async throws {
        let current = Shared(0)
        let peak = Shared(0)
        try await withServer(handler: { _, responder in
            let now = current.update { value -> Int in
                value += 1
                return value
            }
            peak.update { $0 = max($0, now) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                current.update { $0 -= 1 }
                responder.respond(.text("ok"))
            }
        }) { _, base in
            let client = transport.client(.init(timeout: .seconds(20), maxConcurrentRequests: 4, maxConnectionsPerHost: 16))
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<24 { group.addTask { try await client.send(.init(url: base + "/\(index)")).status } }
                for try await status in group { #expect(status == 200) }
            }
            #expect(peak.get() <= 4)
            #expect(peak.get() >= 2)
        }
    }

    @Test(arguments: Transport.allCases)
    func cancellingTheTaskCancelsTheRequest(transport: Transport) async throws {
        let arrived = Shared(0)
        try await withServer(
            drainTimeout: 0.1,
            handler: { _, responder in
                arrived.update { $0 += 1 }
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) { responder.respond(.text("late")) }
            }
        ) { _, base in
            let client = transport.client(.init(timeout: .seconds(60), maxConcurrentRequests: 1))
            let task = Task { try await client.send(.init(url: base + "/slow")) }
            #expect(await eventually(20) { arrived.get() == 1 })
            task.cancel()
            let started = Date()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            #expect(Date().timeIntervalSince(started) < 20)  // well before the answer at 30 s
            // The cancelled request gave its permit back: the only permit serves the next request.
            let next = Task { try await client.send(.init(url: base + "/again", timeout: .milliseconds(300))) }
            let error = await #expect(throws: HTTPClientError.self) { _ = try await next.value }
            #expect(error == .timeout(base + "/again"))
        }
    }

    @Test(arguments: Transport.allCases)
    func sendBlockingFromAForeignThread(transport: Transport) async throws {
        try await withServer(handler: { request, responder in responder.respond(.text("blocking \(request.path)")) }) { _, base in
            let client = transport.client()
            let result = Shared<String?>(nil)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread {
                    let text = (try? client.sendBlocking(.init(url: base + "/b")))?.text
                    result.set(text)
                    done.resume()
                }.start()
            }
            #expect(result.get() == "blocking /b")

            let failure = Shared<HTTPClientError?>(nil)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread {
                    do { _ = try client.sendBlocking(.init(url: "nope")) } catch { failure.set(error as? HTTPClientError) }
                    done.resume()
                }.start()
            }
            #expect(failure.get() == .invalidURL("nope"))
        }
    }
}
