import Testing

@testable import Console

/// The overview's long poll: a page waiting on a stamp is answered when it moves, at once when it moved already, and
/// with the same stamp when the wait runs out or too many wait.
@Suite struct ConsoleLiveTests {
    @Test func aWaitingPageIsAnsweredWhenTheStampMoves() async {
        let live = ConsoleLive()
        live.publish("a")
        async let answer = live.wait(since: "a", timeout: .seconds(30))
        // Published again unchanged: nobody is woken.
        while live.waiting == 0 { await Task.yield() }
        live.publish("a")
        #expect(live.waiting == 1)
        live.publish("b")
        #expect(await answer == "b")
        #expect(live.waiting == 0)
    }

    @Test func aPageBehindIsAnsweredAtOnceAndAWaitRunsOut() async {
        let live = ConsoleLive()
        live.publish("b")
        #expect(await live.wait(since: "a", timeout: .seconds(30)) == "b")
        let clock = ContinuousClock()
        let started = clock.now
        #expect(await live.wait(since: "b", timeout: .milliseconds(50)) == "b")
        #expect(started.duration(to: clock.now) < .seconds(10))
        #expect(live.waiting == 0)
    }

    @Test func pastTheLimitAPageIsAnsweredAtOnce() async {
        let live = ConsoleLive()
        live.publish("s")
        await withTaskGroup(of: String.self) { group in
            for _ in 0..<ConsoleLive.maxWaiters { group.addTask { await live.wait(since: "s", timeout: .seconds(30)) } }
            while live.waiting < ConsoleLive.maxWaiters { await Task.yield() }
            #expect(await live.wait(since: "s", timeout: .seconds(30)) == "s", "one more is answered at once")
            live.releaseAll()
            var answered = 0
            for await stamp in group where stamp == "s" { answered += 1 }
            #expect(answered == ConsoleLive.maxWaiters)
        }
    }
}
