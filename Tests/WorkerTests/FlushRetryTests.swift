import Foundation
import Testing
@testable import Worker

/// Completions the database would not take are retried on their own with backoff, one retry at a time, and an outage
/// is said once (a trial saw "could not record completed deliveries; will retry" 165 times in 8 s, then no retry: 49
/// deliveries waited for their leases to run out and were processed a second time).
@Suite struct FlushRetryTests {
    @Test func anOutageIsSaidOnceAndRetriedWithBackoff() {
        var r = FlushRetry()
        let t0 = Date(timeIntervalSince1970: 1_000)
        // The first failure: said, a retry in 1 s.
        #expect(r.failed(at: t0) == (first: true, retryAfter: 1))
        // Failures of other flushes while that retry waits: not said again, no second retry.
        for i in 1...5 { #expect(r.failed(at: t0.addingTimeInterval(Double(i))) == (first: false, retryAfter: nil)) }
        // Each retry that fails schedules the next, doubling to 30 s.
        var delays: [Int?] = []
        for _ in 0..<8 { r.retrying(); delays.append(r.failed(at: t0.addingTimeInterval(60)).retryAfter) }
        #expect(delays == [2, 4, 8, 16, 30, 30, 30, 30])
        // Recorded again: the outage's start, for the "back" line; then nothing was failing.
        #expect(r.succeeded() == t0)
        #expect(r.succeeded() == nil)
        // The next outage starts over at 1 s, and is said.
        r.retrying()
        #expect(r.failed(at: t0.addingTimeInterval(500)) == (first: true, retryAfter: 1))
    }
}
