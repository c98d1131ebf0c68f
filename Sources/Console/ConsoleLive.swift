import Crypto
import Foundation
import Synchronization

/// What the overview shows, as a stamp that moves when a figure does, and the pages waiting for it to move (`GET
/// /live?since=STAMP`, a long poll: answered when the stamp differs from `since`, or after `timeout` with the same).
/// One watcher publishes it for every browser, so the database is read once per change, not once per open page.
final class ConsoleLive: Sendable {
    private struct State {
        var stamp = ""
        var waiters: [Int: CheckedContinuation<String, Never>] = [:]
        /// Waits whose time ran out before they were registered (answered as they register).
        var expired: Set<Int> = []
        var next = 0
    }
    private let state = Mutex(State())
    /// Pages waiting at once; past this a page is answered at once (it waits a little and asks again).
    static let maxWaiters = 200

    var current: String { state.withLock { $0.stamp } }
    /// Pages waiting now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Puts a new stamp in place and answers every page waiting, when it moved.
    func publish(_ stamp: String) {
        let woken = state.withLock { s -> [CheckedContinuation<String, Never>] in
            guard s.stamp != stamp else { return [] }
            s.stamp = stamp
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in woken { waiter.resume(returning: stamp) }
    }

    /// The stamp once it differs from `since`, or the same after `timeout`.
    func wait(since: String, timeout: Duration) async -> String {
        let id = state.withLock { s -> Int? in
            guard s.stamp == since, s.waiters.count < Self.maxWaiters else { return nil }
            s.next += 1
            return s.next
        }
        guard let id else { return current }
        let expiry = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }  // cancelled: answered already
            self.expire(id)
        }
        defer { expiry.cancel() }
        return await withCheckedContinuation { continuation in
            // Published between the check above and here: answered at once.
            let moved = state.withLock { s -> String? in
                guard s.stamp == since, s.expired.remove(id) == nil else { return s.stamp }
                s.waiters[id] = continuation
                return nil
            }
            if let moved { continuation.resume(returning: moved) }
        }
    }

    /// Answers every waiting page now (the console is stopping).
    func releaseAll() {
        let (all, stamp) = state.withLock { s in
            defer { s.waiters = [:] }
            return (Array(s.waiters.values), s.stamp)
        }
        for waiter in all { waiter.resume(returning: stamp) }
    }

    private func expire(_ id: Int) {
        let (waiter, stamp) = state.withLock { s in
            let waiter = s.waiters.removeValue(forKey: id)
            // Not registered yet (or answered a moment ago: then the entry is never read; a few are dropped at once).
            if waiter == nil { s.expired = s.expired.count < 1024 ? s.expired.union([id]) : [id] }
            return (waiter, s.stamp)
        }
        waiter?.resume(returning: stamp)
    }

    /// The stamp of what the overview shows: a digest of its figures (not of the clock).
    static func stamp(_ figures: OverviewFigures) -> String {
        String(SHA256.hex(Array(figures.signature.utf8)).prefix(16))
    }
}
