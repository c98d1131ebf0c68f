import Foundation
import Reporting
import Testing

@testable import Console

/// The overview's long poll: a page waiting on a stamp is answered when it moves, at once when it moved already, and
/// with the same stamp when the wait runs out or too many wait (in all, or for one session).
@Suite struct ConsoleLiveTests {
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
        while live.waiting == 0 { await Task.yield() }
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
            while live.waiting < ConsoleLive.maxWaiters { await Task.yield() }
            #expect(await live.wait(since: stamp, key: "another", timeout: .seconds(30)) == stamp, "one more is answered at once")
            live.releaseAll()
            var answered = 0
            for await answer in group where answer == stamp { answered += 1 }
            #expect(answered == ConsoleLive.maxWaiters)
        }
        // One session may hold only a few waits.
        await withTaskGroup(of: String.self) { group in
            for _ in 0..<ConsoleLive.maxWaitersPerKey { group.addTask { await live.wait(since: stamp, key: "one", timeout: .seconds(30)) } }
            while live.waiting < ConsoleLive.maxWaitersPerKey { await Task.yield() }
            #expect(await live.wait(since: stamp, key: "one", timeout: .seconds(30)) == stamp)
            #expect(live.waiting == ConsoleLive.maxWaitersPerKey)
            live.releaseAll()
            for await _ in group {}
        }
    }

    /// Figures just read serve the pages that ask within the window; older ones do not.
    @Test func recentFiguresAreKeptAShortWhile() async throws {
        let live = ConsoleLive()
        #expect(live.figures(youngerThan: .seconds(5)) == nil)
        live.publish(Self.figures(open: 5))
        #expect(live.figures(youngerThan: .seconds(5))?.summary.open == 5)
        try await Task.sleep(for: .milliseconds(20))
        #expect(live.figures(youngerThan: .milliseconds(10)) == nil)
    }
}
