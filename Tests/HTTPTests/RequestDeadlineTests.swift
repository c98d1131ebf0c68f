import Foundation
import PayreconTesting
import Synchronization
import Testing
@testable import HTTP

#if canImport(Glibc)
import Glibc
#endif

/// The whole-request deadline as a value: the clock is handed in, nothing sleeps.
@Suite struct RequestDeadlinesTests {
    let second: UInt64 = 1_000_000_000

    func timedOut(_ fd: Int32) -> RequestDeadlines.Cut { .init(fd: fd, requestTimedOut: true) }
    func idle(_ fd: Int32) -> RequestDeadlines.Cut { .init(fd: fd, requestTimedOut: false) }

    @Test func aConnectionIsCutOnceItsDeadlinePasses() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 100 * second)
        #expect(deadlines.expire(now: 129 * second).isEmpty)
        #expect(deadlines.expire(now: 130 * second) == [timedOut(7)])
        #expect(deadlines.expire(now: 200 * second).isEmpty, "each connection is cut once")
    }

    @Test func theFirstRequestsClockRunsFromTheConnectionNotFromItsLine() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 0)
        deadlines.requestStarted(1, now: 20 * second)  // a request line trickled for 20 s
        #expect(deadlines.expire(now: 30 * second) == [timedOut(7)])
    }

    @Test func eachRequestOnAKeepAliveConnectionGetsTheWholeTimeFromItsLine() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 0)
        deadlines.requestCompleted(1, now: 25 * second)
        deadlines.requestStarted(1, now: 40 * second)  // idle 15 s, then the next request
        #expect(deadlines.expire(now: 69 * second).isEmpty)
        #expect(deadlines.expire(now: 70 * second) == [timedOut(7)])
    }

    @Test func aKeepAliveConnectionIdleThatLongIsCutButNoRequestTimedOut() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 0)
        deadlines.requestCompleted(1, now: 25 * second)
        #expect(deadlines.expire(now: 54 * second).isEmpty)
        #expect(deadlines.expire(now: 55 * second) == [idle(7)])
    }

    @Test func aCutConnectionIsNotRevivedByItsRequestCompleting() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 0)
        #expect(deadlines.expire(now: 31 * second) == [timedOut(7)])
        deadlines.requestCompleted(1, now: 31 * second)  // MHD completes the cut request
        deadlines.requestStarted(1, now: 31 * second)
        #expect(deadlines.expire(now: 100 * second).isEmpty)
    }

    @Test func aClosedConnectionIsForgottenAndItsNumberCanBeReused() {
        var deadlines = RequestDeadlines(timeoutNanoseconds: 30 * second)
        deadlines.opened(1, fd: 7, now: 0)
        deadlines.opened(2, fd: 8, now: 10 * second)
        deadlines.closed(1)
        deadlines.opened(3, fd: 7, now: 20 * second)  // the kernel hands out 7 again
        #expect(deadlines.expire(now: 40 * second) == [timedOut(8)])
        #expect(deadlines.expire(now: 50 * second) == [timedOut(7)])
        #expect(deadlines.entries.count == 2)
    }
}

/// The deadline against a real server and a real slow sender.
@Suite struct RequestDeadlineServerTests {
    static let slowRequest =
        "POST /slow HTTP/1.1\r\nHost: x\r\nX-Padding: " + String(repeating: "a", count: 200) + "\r\nContent-Length: 100\r\n\r\n"
        + String(repeating: "b", count: 100)

    /// A 1 s request deadline (MHD's idle timeout 5 s), `onCut` called for each request cut off.
    static func oneSecondDeadline(onCut: @escaping @Sendable () -> Void) -> HTTPServer.Configuration {
        HTTPServer.Configuration(port: 0, threads: 2, connectionTimeoutSeconds: 5, requestTimeout: .seconds(1), onRequestTimeout: onCut)
    }

    @Test func aTricklingSenderIsCutOffAtTheDeadlineWhileOthersAreServed() async throws {
        let cut = Atomic<Int>(0)
        let configuration = Self.oneSecondDeadline { cut.add(1, ordering: .relaxed) }
        try await withServer(configuration, handler: { _, responder in responder.respond(.text("ok")) }) { server, base in
            let socket = try RawSocket(port: server.port)
            // 20 bytes a second: never idle for MHD's 5 s, and the whole request would take 15 s.
            let result = try await offload { socket.trickle(Self.slowRequest, interval: 0.05, limit: 10) }
            #expect(result.closed, "the trickling connection was never cut")
            #expect(result.seconds < 4, "cut after \(result.seconds) s against a 1 s deadline")
            #expect(cut.load(ordering: .relaxed) == 1)
            let response = try await URLSessionHTTPClient().send(.init(url: base + "/other"))
            #expect(response.status == 200)
        }
    }

    @Test func anIdleKeepAliveConnectionIsClosedAtTheDeadlineButNotCountedAsATimeout() async throws {
        let cut = Atomic<Int>(0)
        let configuration = Self.oneSecondDeadline { cut.add(1, ordering: .relaxed) }
        try await withServer(configuration, handler: { _, responder in responder.respond(.text("ok")) }) { server, _ in
            let socket = try RawSocket(port: server.port)
            let closedAfter: Double? = try await offload {
                socket.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
                guard socket.receive(timeout: 3)?.isEmpty == false else { return nil }
                let answered = Date()
                guard socket.receive(timeout: 4)?.isEmpty == true else { return nil }
                return Date().timeIntervalSince(answered)
            }
            let seconds = try #require(closedAfter, "the idle connection was not closed by the deadline")
            #expect(seconds < 3)
            #expect(cut.load(ordering: .relaxed) == 0, "an idle keep-alive connection counted as a timed-out request")
        }
    }

    @Test func withoutADeadlineTheSameTrickleHoldsItsConnection() async throws {
        // The reason for the deadline: MHD's idle timeout (here 1 s) restarts on each byte.
        try await withServer(.test(timeout: 1), handler: { _, responder in responder.respond(.text("ok")) }) { server, _ in
            let socket = try RawSocket(port: server.port)
            let result = try await offload { socket.trickle(Self.slowRequest, interval: 0.05, limit: 3) }
            #expect(!result.closed, "MHD cut the trickle itself after \(result.seconds) s")
        }
    }

    @Test func aRequestWithinTheDeadlineAndTheNextOnTheSameConnectionAreAnswered() async throws {
        let configuration = HTTPServer.Configuration(port: 0, threads: 2, connectionTimeoutSeconds: 5, requestTimeout: .milliseconds(1500))
        try await withServer(configuration, handler: { _, responder in responder.respond(.text("ok")) }) { server, _ in
            let socket = try RawSocket(port: server.port)
            let answers: Int = try await offload {
                var answered = 0
                for _ in 0..<3 {
                    // Each request takes ~1 s: three in a row exceed the deadline only if it did not restart.
                    usleep(900_000)
                    socket.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
                    guard let answer = socket.receive(timeout: 3), !answer.isEmpty else { break }
                    if String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200") { answered += 1 }
                }
                return answered
            }
            #expect(answers == 3)
        }
    }
}
