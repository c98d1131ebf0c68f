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
        thread.after(.milliseconds(300)) { seen.withLock { $0.append("late") } }
        thread.after(.milliseconds(100)) { seen.withLock { $0.append("soon") } }
        thread.async { seen.withLock { $0.append("a") } }
        thread.async { seen.withLock { $0.append("b") } }
        #expect(await eventually(5) { seen.withLock { $0.count } == 4 })
        #expect(seen.withLock { $0 } == ["a", "b", "soon", "late"])
    }

    @Test func timersAddedOutOfOrderRunByDeadlineAndTiesInTheOrderAdded() async throws {
        let thread = DedicatedThread(name: "test-order")
        defer { thread.stop() }
        let seen = Mutex<[String]>([])
        thread.after(.milliseconds(300)) { seen.withLock { $0.append("d") } }
        thread.after(.milliseconds(100)) { seen.withLock { $0.append("a") } }
        thread.after(.milliseconds(200)) { seen.withLock { $0.append("c") } }
        thread.after(.milliseconds(100)) { seen.withLock { $0.append("b") } }
        #expect(await eventually(5) { seen.withLock { $0.count } == 4 })
        #expect(seen.withLock { $0 } == ["a", "b", "c", "d"])
    }

    /// The commit deadline adds one timer per delivery: many thousands pending, each run once, in order.
    @Test func manyPendingTimersEachRunOnceInOrder() async throws {
        let thread = DedicatedThread(name: "test-many")
        defer { thread.stop() }
        let ran = Mutex<[Int]>([])
        for i in 0..<20_000 { thread.after(.milliseconds(50) + .microseconds(10 * i)) { ran.withLock { $0.append(i) } } }
        #expect(await eventually(10) { ran.withLock { $0.count } == 20_000 })
        #expect(ran.withLock { $0 } == Array(0..<20_000))
    }

    @Test func stoppedThreadRunsWhatWasQueuedAndDropsTimersNotYetDue() async throws {
        let thread = DedicatedThread(name: "test-stop")
        let seen = Mutex<[String]>([])
        thread.after(.milliseconds(500)) { seen.withLock { $0.append("timer") } }
        thread.async { seen.withLock { $0.append("queued") } }
        thread.stop()
        try await Task.sleep(for: .milliseconds(800))
        #expect(seen.withLock { $0 } == ["queued"])
    }
}
