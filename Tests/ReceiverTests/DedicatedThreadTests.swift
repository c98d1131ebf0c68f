import Foundation
import PayreconTesting
import Synchronization
import Testing
@testable import Receiver

/// The receiver's background thread: order, timers, stopping. (It is a Thread of its own, not GCD's shared pool; a test
/// that blocked GCD's threads to show it would stall every other suite in the process, Swift's own timers included.)
@Suite struct DedicatedThreadTests {
    @Test func runsWorkInOrderAndTimersByDeadline() async throws {
        let thread = DedicatedThread(name: "test")
        defer { thread.stop() }
        let seen = Mutex<[String]>([])
        thread.after(0.3) { seen.withLock { $0.append("late") } }
        thread.after(0.1) { seen.withLock { $0.append("soon") } }
        thread.async { seen.withLock { $0.append("a") } }
        thread.async { seen.withLock { $0.append("b") } }
        #expect(await eventually(5) { seen.withLock { $0.count } == 4 })
        #expect(seen.withLock { $0 } == ["a", "b", "soon", "late"])
    }

    @Test func timersAddedOutOfOrderRunByDeadlineAndTiesInTheOrderAdded() async throws {
        let thread = DedicatedThread(name: "test-order")
        defer { thread.stop() }
        let seen = Mutex<[String]>([])
        thread.after(0.30) { seen.withLock { $0.append("d") } }
        thread.after(0.10) { seen.withLock { $0.append("a") } }
        thread.after(0.20) { seen.withLock { $0.append("c") } }
        thread.after(0.10) { seen.withLock { $0.append("b") } }
        #expect(await eventually(5) { seen.withLock { $0.count } == 4 })
        #expect(seen.withLock { $0 } == ["a", "b", "c", "d"])
    }

    /// The commit deadline adds one timer per delivery: many thousands pending, each run once, in order.
    @Test func manyPendingTimersEachRunOnceInOrder() async throws {
        let thread = DedicatedThread(name: "test-many")
        defer { thread.stop() }
        let ran = Mutex<[Int]>([])
        for i in 0..<20_000 { thread.after(0.05 + Double(i) * 0.000_01) { ran.withLock { $0.append(i) } } }
        #expect(await eventually(10) { ran.withLock { $0.count } == 20_000 })
        #expect(ran.withLock { $0 } == Array(0..<20_000))
    }

    @Test func stoppedThreadRunsWhatWasQueuedAndDropsTimersNotYetDue() async throws {
        let thread = DedicatedThread(name: "test-stop")
        let seen = Mutex<[String]>([])
        thread.after(0.5) { seen.withLock { $0.append("timer") } }
        thread.async { seen.withLock { $0.append("queued") } }
        thread.stop()
        try await Task.sleep(for: .milliseconds(800))
        #expect(seen.withLock { $0 } == ["queued"])
    }
}
