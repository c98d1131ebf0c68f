import CivilTime
import Foundation
import Observability
import Synchronization

/// A thread of its own that runs closures in order, now or at a deadline.
///
/// The receiver's background work (group commits, the commit deadline, the rejection lane, the storage probe) runs on
/// these rather than on GCD's shared pool. That pool is small on these machines and grows slowly when its threads
/// block: work blocked on the database — exactly when the database hangs — would hold up the commit deadline that
/// exists for that case, and a PayPal verification waiting on a certificate fetch held up every PXP delivery's commit
/// (scripts/chaos 5 before this: genuine deliveries delayed up to 3.9 s while the flood's first fetches were made).
final class DedicatedThread: Sendable {
    private struct Timer {
        var deadline: UInt64
        var order: UInt64
        var work: @Sendable () -> Void
    }
    private struct State {
        var ready: [@Sendable () -> Void] = []
        /// Sorted by (deadline, order) from `head` on; entries before `head` have run. The commit deadline adds one per
        /// delivery, all the same length, so they arrive in order: adding is an append and running pops the front —
        /// thousands pending cost nothing per delivery (a sorted insert scanning them all did, on the HTTP threads).
        var timers: [Timer] = []
        var head = 0
        var order: UInt64 = 0
        var stopped = false
    }
    private let state = Mutex(State())
    /// How late a timer may run so that those due together run in one wake-up.
    static let slackNanoseconds: UInt64 = 10_000_000
    /// Wakes the thread; its count may run ahead of the work (a spurious wake-up just re-checks).
    private let wake = DispatchSemaphore(value: 0)

    init(name: String) {
        let thread = Thread { [self] in
            ThreadName.set(name)
            run()
        }
        thread.start()
    }

    /// Runs `work` on the thread, after what was queued before it.
    func async(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.ready.append(work) }
        wake.signal()
    }

    /// Runs `work` on the thread `delay` from now (at once for a delay of nothing or less; at most about 31 years on).
    func after(_ delay: Duration, _ work: @escaping @Sendable () -> Void) {
        let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(min(max(0, delay.inSeconds), 1e9) * 1e9)
        // The thread is woken only when this timer is now the first due: one that goes behind others is found when
        // they have run (a wake-up per delivery was a tenth of the receiver's CPU, per perf).
        let first: Bool = state.withLock { s in
            s.order &+= 1
            let timer = Timer(deadline: deadline, order: s.order, work: work)
            if s.timers.count == s.head || s.timers[s.timers.count - 1].deadline <= deadline {
                s.timers.append(timer)
                return s.timers.count - 1 == s.head
            } else {
                // Out of order: binary search among the pending ones (order breaks ties, so later adds go after).
                var low = s.head, high = s.timers.count
                while low < high {
                    let mid = (low + high) / 2
                    if s.timers[mid].deadline <= deadline { low = mid + 1 } else { high = mid }
                }
                s.timers.insert(timer, at: low)
                return low == s.head
            }
        }
        if first { wake.signal() }
    }

    /// Lets the thread end once what is queued now has run; timers not yet due are dropped.
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func run() {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            let (batch, next, stopped): ([@Sendable () -> Void], UInt64?, Bool) = state.withLock { s in
                var batch = s.ready
                s.ready = []
                while s.head < s.timers.count, s.timers[s.head].deadline <= now {
                    batch.append(s.timers[s.head].work)
                    s.head += 1
                }
                // Drop what has run once it is most of the array (amortised O(1) per timer).
                if s.head > 1024, s.head * 2 > s.timers.count {
                    s.timers.removeFirst(s.head)
                    s.head = 0
                }
                return (batch, s.head < s.timers.count ? s.timers[s.head].deadline : nil, s.stopped)
            }
            for work in batch { work() }
            if !batch.isEmpty { continue }
            if stopped { return }
            if let next {
                // A little late on purpose: the timers due within `slack` of the first run in the same wake-up.
                _ = wake.wait(timeout: DispatchTime(uptimeNanoseconds: next &+ Self.slackNanoseconds))
            } else {
                wake.wait()
            }
        }
    }
}
