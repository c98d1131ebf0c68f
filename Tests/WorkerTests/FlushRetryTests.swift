import Foundation
import Testing
@testable import Worker

/// Completions the database would not take are retried with backoff, by the flusher (not on its 50 ms timer), and an
/// outage is said once (a trial saw "could not record completed deliveries; will retry" 165 times in 8 s, then no
/// retry: 49 deliveries waited for their leases to run out and were processed a second time).
@Suite struct FlushRetryTests {
    @Test func anOutageIsSaidOnceAndRetriedWithBackoff() {
        var r = FlushRetry()
        let t0 = Date(timeIntervalSince1970: 1_000)
        #expect(r.due(at: t0))
        // The first failure: said; nothing is tried for a second.
        let first = r.failed(at: t0)
        #expect(first)
        #expect(!r.due(at: t0.addingTimeInterval(0.05)) && !r.due(at: t0.addingTimeInterval(0.99)) && r.due(at: t0.addingTimeInterval(1)))
        // Each retry that fails waits twice as long, up to 30 s, and is not said again.
        var waits: [Double] = []
        var now = t0.addingTimeInterval(1)
        for _ in 0..<7 {
            let said = r.failed(at: now)
            #expect(!said)
            let next = r.nextAt!
            waits.append(next.timeIntervalSince(now))
            now = next
        }
        #expect(waits == [2, 4, 8, 16, 30, 30, 30])
        // Recorded again: the outage's start, for the "back" line; then nothing waits.
        let since = r.succeeded(), none = r.succeeded()
        #expect(since == t0 && none == nil && r.due(at: now))
        // The next outage starts over at 1 s, and is said.
        let again = r.failed(at: now)
        #expect(again)
        #expect(r.nextAt == now.addingTimeInterval(1))
    }
}
