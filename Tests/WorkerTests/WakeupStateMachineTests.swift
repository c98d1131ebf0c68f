import Testing
@testable import Worker

/// The worker's wake-up, transition by transition: no threads, no sleeps.
@Suite("WakeupStateMachine")
struct WakeupStateMachineTests {
    @Test func aWaitWithoutSignalSuspendsAndItsOwnTimerEndsIt() {
        var m = WakeupStateMachine()
        #expect(m.beginWait() == .suspend(id: 1))
        #expect(m.timerFired(id: 1) == .resume(id: 1))
        #expect(m.state == .idle(signalled: false))
    }

    /// The defect of issue 14: a wait ended by a signal left its timer to signal the next wait, so every later
    /// wait returned at once. A timer is never a signal.
    @Test func theTimerOfAWaitThatEndedEarlyDoesNotEndTheNextWait() {
        var m = WakeupStateMachine()
        #expect(m.beginWait() == .suspend(id: 1))
        #expect(m.signal() == .resume(id: 1))
        #expect(m.timerFired(id: 1) == .none)  // the first wait's timer fires (or is cancelled) late
        #expect(m.state == .idle(signalled: false))
        #expect(m.beginWait() == .suspend(id: 2))  // the next wait sleeps
        #expect(m.timerFired(id: 1) == .none)
        #expect(m.timerFired(id: 2) == .resume(id: 2))
    }

    @Test func aSignalBeforeTheWaitIsKeptForIt() {
        var m = WakeupStateMachine()
        #expect(m.signal() == .none)
        #expect(m.signal() == .none)  // signals do not pile up
        #expect(m.beginWait() == .returnNow)
        #expect(m.beginWait() == .suspend(id: 1))
    }

    @Test func aSignalWakesTheSuspendedWaitOnce() {
        var m = WakeupStateMachine()
        _ = m.beginWait()
        #expect(m.signal() == .resume(id: 1))
        #expect(m.state == .idle(signalled: false))
        #expect(m.signal() == .none)  // no one waits now: remembered for the next wait
        #expect(m.state == .idle(signalled: true))
    }

    @Test func stopResumesTheWaiterAndEveryLaterWaitReturnsAtOnce() {
        var m = WakeupStateMachine()
        _ = m.beginWait()
        #expect(m.stop() == .resume(id: 1))
        #expect(m.beginWait() == .returnNow)
        #expect(m.beginWait() == .returnNow)
        #expect(m.signal() == .none)
        #expect(m.timerFired(id: 1) == .none)
        #expect(m.isStopped)
    }

    @Test func stopWhenIdleResumesNothing() {
        var m = WakeupStateMachine()
        #expect(m.stop() == .none)
        #expect(m.beginWait() == .returnNow)
    }

    @Test func waitNumbersGrowSoAStaleTimerNeverMatches() {
        var m = WakeupStateMachine()
        var ids: [UInt64] = []
        for _ in 0..<5 {
            if case .suspend(let id) = m.beginWait() { ids.append(id) }
            _ = m.signal()
        }
        #expect(ids == [1, 2, 3, 4, 5])
    }
}
