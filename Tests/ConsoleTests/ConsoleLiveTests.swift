import Foundation
import Reporting
import Synchronization
import Testing

@testable import Console

/// The overview's long poll: a page waiting on a stamp is answered when it moves, at once when it moved already, and
/// with the same stamp when the wait runs out or too many wait (in all, or for one session).
@Suite struct ConsoleLiveTests {
    /// Waits (yielding, at most 10 s) until `condition` holds: a test that would otherwise spin forever fails instead.
    static func until(_ condition: () -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() && ContinuousClock.now < deadline { await Task.yield() }
        #expect(condition(), "did not come about within 10 s")
    }

    static func figures(open: Int) -> OverviewFigures {
        OverviewFigures(
            summary: ReportSummary(open: open), actions: (0, 0, 0), hours: [], history: [], lastSweep: nil, lastBackfill: nil,
            lastSettlement: nil, now: Date())
    }

    @Test func aWaitingPageIsAnsweredWhenTheStampMoves() async {
        let live = ConsoleLive()
        live.publish(Self.figures(open: 1))
        let first = live.current
        async let answer = live.wait(since: first, key: "s", timeout: .seconds(30))
        await Self.until { !(live.waiting == 0) }
        // The same figures read again (another moment): nobody is woken.
        live.publish(Self.figures(open: 1))
        #expect(live.waiting == 1 && live.current == first)
        live.publish(Self.figures(open: 2))
        let moved = await answer
        #expect(moved != first && moved == live.current)
        #expect(live.waiting == 0)
    }

    @Test func aPageBehindIsAnsweredAtOnceAndAWaitRunsOut() async {
        let live = ConsoleLive()
        live.publish(Self.figures(open: 3))
        #expect(await live.wait(since: "older", key: "s", timeout: .seconds(30)) == live.current)
        let clock = ContinuousClock()
        let started = clock.now
        #expect(await live.wait(since: live.current, key: "s", timeout: .milliseconds(50)) == live.current)
        #expect(started.duration(to: clock.now) < .seconds(10))
        #expect(live.waiting == 0)
    }

    @Test func pastTheLimitsAPageIsAnsweredAtOnce() async {
        let live = ConsoleLive()
        live.publish(Self.figures(open: 4))
        let stamp = live.current
        await withTaskGroup(of: String.self) { group in
            for i in 0..<ConsoleLive.maxWaiters { group.addTask { await live.wait(since: stamp, key: "s\(i)", timeout: .seconds(30)) } }
            await Self.until { !(live.waiting < ConsoleLive.maxWaiters) }
            #expect(await live.wait(since: stamp, key: "another", timeout: .seconds(30)) == stamp, "one more is answered at once")
            live.releaseAll()
            var answered = 0
            for await answer in group where answer == stamp { answered += 1 }
            #expect(answered == ConsoleLive.maxWaiters)
        }
        #expect(await live.wait(since: stamp, key: "late", timeout: .seconds(30)) == stamp, "a stopping console answers at once")
        // One session may hold only a few waits.
        let other = ConsoleLive()
        other.publish(Self.figures(open: 4))
        await withTaskGroup(of: String.self) { group in
            for _ in 0..<ConsoleLive.maxWaitersPerKey {
                group.addTask { await other.wait(since: stamp, key: "one", timeout: .seconds(30)) }
            }
            await Self.until { !(other.waiting < ConsoleLive.maxWaitersPerKey) }
            #expect(await other.wait(since: stamp, key: "one", timeout: .seconds(30)) == stamp)
            #expect(other.waiting == ConsoleLive.maxWaitersPerKey)
            other.releaseAll()
            for await _ in group {}
        }
    }

    /// Figures just read serve the pages that ask within the window; older ones are read again.
    @Test func recentFiguresAreKeptAShortWhile() async throws {
        let live = ConsoleLive()
        let reads = Mutex(0)
        let read: @Sendable () async throws -> OverviewFigures = {
            let n = reads.withLock {
                $0 += 1; return $0
            }
            return Self.figures(open: n)
        }
        #expect(try await live.figures(maxAge: .seconds(5), read: read).summary.open == 1)
        #expect(try await live.figures(maxAge: .seconds(5), read: read).summary.open == 1, "kept")
        try await Task.sleep(for: .milliseconds(20))
        #expect(try await live.figures(maxAge: .milliseconds(10), read: read).summary.open == 2, "read again")
        #expect(live.current == ConsoleLive.stamp(Self.figures(open: 2)))
    }

    /// However many pages ask at once, one read serves them all.
    @Test func pagesAskingAtOnceShareOneRead() async throws {
        let live = ConsoleLive()
        let reads = Mutex(0)
        let gate = AsyncStream<Void>.makeStream()
        let read: @Sendable () async throws -> OverviewFigures = {
            reads.withLock { $0 += 1 }
            for await _ in gate.stream { break }  // held until all have asked
            return Self.figures(open: 7)
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 { group.addTask { try await live.figures(maxAge: .zero, read: read).summary.open } }
            try await Task.sleep(for: .milliseconds(100))
            gate.continuation.yield()
            var answers: [Int] = []
            for try await open in group { answers.append(open) }
            #expect(answers == Array(repeating: 7, count: 10))
        }
        #expect(reads.withLock { $0 } == 1)
    }

    /// A read begun before a write is shown to whoever asked, never kept: the next page reads again.
    @Test func aReadBegunBeforeAWriteIsNotKept() async throws {
        let live = ConsoleLive()
        let gate = AsyncStream<Void>.makeStream()
        async let before = live.figures(maxAge: .seconds(60)) {
            for await _ in gate.stream { break }
            return Self.figures(open: 1)
        }
        try await Task.sleep(for: .milliseconds(50))
        live.forgetFigures()  // a write landed while the read was under way
        gate.continuation.yield()
        #expect(try await before.summary.open == 1)
        #expect(try await live.figures(maxAge: .seconds(60)) { Self.figures(open: 2) }.summary.open == 2)
    }
}
