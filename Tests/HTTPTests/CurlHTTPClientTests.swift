import Dispatch
import Foundation
import PayreconTesting
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import HTTP

@Suite("CurlHTTPClient")
struct CurlHTTPClientTests {
    @Test func postRoundTripSendsMethodHeadersAndBody() async throws {
        let seen = Shared<HTTPRequest?>(nil)
        try await withServer(handler: { request, responder in
            seen.set(request)
            responder.respond(.json(status: 201, bytes: Array(#"{"ok":true}"#.utf8), headers: [("Retry-After", "5")]))
        }) { _, base in
            let client = CurlHTTPClient()
            let response = try await client.send(
                .init(
                    method: "POST", url: base + "/submit?x=1", headers: [("Content-Type", "application/json"), ("Idempotency-Key", "k-1")],
                    body: Array(#"{"a":1}"#.utf8)))
            #expect(response.status == 201)
            #expect(response.headers["retry-after"] == "5")
            #expect(response.text == #"{"ok":true}"#)
            let request = try #require(seen.get())
            #expect(request.method == "POST")
            #expect(request.path == "/submit")
            #expect(request.headers["idempotency-key"] == "k-1")
            #expect(request.headers["content-type"] == "application/json")
            #expect(request.headers["expect"] == nil)
            #expect(request.body == Array(#"{"a":1}"#.utf8))
        }
    }

    @Test func getSendsNoBodyAndHeadersComeBack() async throws {
        let seen = Shared<HTTPRequest?>(nil)
        try await withServer(handler: { request, responder in
            seen.set(request)
            responder.respond(
                HTTPResponse(
                    status: 200, headers: [("X-One", "1"), ("X-Many", "a"), ("X-Many", "b")],
                    body: Array("hello".utf8)))
        }) { _, base in
            let response = try await CurlHTTPClient().send(
                .init(url: base + "/get", headers: [("Authorization", "PXP-UST1 t:1:s"), ("X-Empty", "")]))
            #expect(response.status == 200)
            #expect(response.text == "hello")
            #expect(response.headers["x-one"] == "1")
            #expect(response.headers.values(for: "x-many") == ["a", "b"])
            let request = try #require(seen.get())
            #expect(request.method == "GET")
            #expect(request.body.isEmpty)
            #expect(request.headers["authorization"] == "PXP-UST1 t:1:s")
            #expect(request.headers["x-empty"] == "")
        }
    }

    @Test(arguments: ["PUT", "PATCH", "DELETE"])
    func otherMethods(method: String) async throws {
        let seen = Shared<HTTPRequest?>(nil)
        try await withServer(handler: { request, responder in
            seen.set(request)
            responder.respond(.text("ok"))
        }) { _, base in
            let body: [UInt8]? = method == "DELETE" ? nil : Array("payload".utf8)
            let response = try await CurlHTTPClient().send(.init(method: method, url: base + "/m", body: body))
            #expect(response.status == 200)
            let request = try #require(seen.get())
            #expect(request.method == method)
            #expect(request.body == (body ?? []))
        }
    }

    @Test func binaryBodiesArriveExactlyBothWays() async throws {
        let payload: [UInt8] = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 8)) }  // includes NULs
        let seen = Shared<[UInt8]>([])
        try await withServer(handler: { request, responder in
            seen.set(request.body)
            responder.respond(HTTPResponse(status: 200, body: request.body.reversed()))
        }) { _, base in
            let response = try await CurlHTTPClient().send(.init(method: "POST", url: base + "/echo", body: payload))
            #expect(seen.get() == payload)
            #expect(response.body == Array(payload.reversed()))
        }
    }

    @Test func theClientTimeoutAppliesWhenTheRequestHasNone() async throws {
        try await withServer(
            drainTimeout: 0.1,
            handler: { _, responder in
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) { responder.respond(.text("late")) }
            }
        ) { _, base in
            let client = CurlHTTPClient(configuration: .init(timeout: .milliseconds(300)))
            let error = await #expect(throws: HTTPClientError.self) { _ = try await client.send(.init(url: base + "/slow")) }
            #expect(error == .timeout(base + "/slow"))
        }
    }

    @Test func unknownHostIsAConnectionError() async throws {
        let url = "http://payrecon-no-such-host.invalid/x"
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await CurlHTTPClient(configuration: .init(timeout: .seconds(10))).send(.init(url: url))
        }
        // A resolver that cannot answer in time is this machine's, not the client's: a timeout is fine too.
        switch error {
        case .connection(let failedURL, _)?, .timeout(let failedURL)?: #expect(failedURL == url)
        default: Issue.record("expected .connection or .timeout, got \(String(describing: error))")
        }
        #expect(error?.isTransient == true)
    }

    @Test func streamedResponseOverTheCapFails() async throws {
        // No Content-Length to refuse up front: the cap is enforced while the body streams in.
        let head = Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)
        let port = try rawServer(answers: [head + Array(repeating: 66, count: 300_000), head + Array(repeating: 67, count: 1_000)])
        let client = CurlHTTPClient(configuration: .init(timeout: .seconds(20), maxResponseBytes: 100_000))
        let url = "http://127.0.0.1:\(port)/stream"
        let error = await #expect(throws: HTTPClientError.self) { _ = try await client.send(.init(url: url)) }
        #expect(error == .responseTooLarge(url, 100_000))
        let small = try await client.send(.init(url: url))  // close-delimited, under the cap
        #expect(small.body == Array(repeating: 67, count: 1_000))
    }

    @Test func connectionsPerHostAreBounded() async throws {
        let current = Shared(0)
        let peak = Shared(0)
        try await withServer(handler: { _, responder in
            let now = current.update { value -> Int in
                value += 1
                return value
            }
            peak.update { $0 = max($0, now) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.02) {
                current.update { $0 -= 1 }
                responder.respond(.text("ok"))
            }
        }) { _, base in
            // More requests in flight than connections: curl queues them on its 2 connections.
            let client = CurlHTTPClient(configuration: .init(timeout: .seconds(20), maxConcurrentRequests: 16, maxConnectionsPerHost: 2))
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<20 { group.addTask { try await client.send(.init(url: base + "/\(index)")).status } }
                for try await status in group { #expect(status == 200) }
            }
            #expect(peak.get() <= 2)
        }
    }

    @Test func aTaskCancelledBeforeSendingNeverSends() async throws {
        let arrived = Shared(0)
        try await withServer(handler: { _, responder in
            arrived.update { $0 += 1 }
            responder.respond(.text("ok"))
        }) { _, base in
            let client = CurlHTTPClient()
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.send(.init(url: base + "/never"))
            }
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            _ = try await client.send(.init(url: base + "/after"))
            #expect(arrived.get() == 1)
        }
    }

    @Test func manyConcurrentRequestsAllComplete() async throws {
        try await withServer(
            .test(timeout: 30),
            handler: { request, responder in
                responder.respond(.text("r" + request.path))
            }
        ) { _, base in
            let client = CurlHTTPClient(configuration: .init(timeout: .seconds(60), maxConcurrentRequests: 64, maxConnectionsPerHost: 32))
            let count = 200
            try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for index in 0..<count {
                    group.addTask { (index, try await client.send(.init(url: base + "/\(index)")).text) }
                }
                var seen = Set<Int>()
                for try await (index, text) in group {
                    #expect(text == "r/\(index)")
                    seen.insert(index)
                }
                #expect(seen.count == count)
            }
        }
    }

    @Test func aDroppedClientEndsItsLoopThread() async throws {
        try await withServer(handler: { _, responder in responder.respond(.text("ok")) }) { _, base in
            for _ in 0..<20 {
                let client = CurlHTTPClient()
                let status = try await client.send(.init(url: base + "/")).status
                #expect(status == 200)
            }
            // Other tests' clients may be alive meanwhile; 20 leaked loop threads would never go away.
            #expect(await eventually(30) { loopThreads() < 20 })
        }
    }
}

/// A one-shot HTTP/1.1 server that answers each accepted connection with the next of `answers` (raw bytes, then
/// close), for responses HTTPServer does not make. Returns the port.
private func rawServer(answers: [[UInt8]]) throws -> UInt16 {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            guard bind(listener, pointer, length) == 0, listen(listener, 8) == 0 else { return -1 }
            return getsockname(listener, pointer, &length)
        }
    }
    guard bound == 0 else {
        close(listener)
        throw POSIXError(.EADDRINUSE)
    }
    Thread {
        defer { close(listener) }
        for answer in answers {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.ends(with: Array("\r\n\r\n".utf8)) {
                let count = recv(connection, &buffer, buffer.count, 0)
                if count <= 0 { break }
                request.append(contentsOf: buffer[0..<count])
            }
            var offset = 0
            while offset < answer.count {
                let sent = answer[offset...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent <= 0 { break }
                offset += sent
            }
            close(connection)
        }
    }.start()
    return UInt16(bigEndian: address.sin_port)
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

/// Threads of this process named like a CurlHTTPClient loop.
private func loopThreads() -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.hasPrefix("CurlHTTPClient") == true
    }.count
}
