import Crypto
import Foundation
import Synchronization

/// What the overview shows, as a stamp that moves when a figure does, and the pages waiting for it to move (`GET
/// /live?since=STAMP`, a long poll: answered when the stamp differs from `since`, or after `timeout` with the same).
/// One watcher publishes it for every browser, and the figures it read are kept a few seconds for the pages that then
/// ask for them: the database is read once per change, not once per open page.
final class ConsoleLive: Sendable {
    private struct Waiter {
        var key: String
        var continuation: CheckedContinuation<String, Never>
        var expiry: Task<Void, Never>?
    }
    private struct State {
        var stamp = ""
        var figures: (OverviewFigures, at: ContinuousClock.Instant)?
        var waiters: [Int: Waiter] = [:]
        var next = 0
    }
    private let state = Mutex(State())
    /// Pages waiting at once, and per session; past these a page is answered at once (it waits a little and asks again).
    static let maxWaiters = 200
    static let maxWaitersPerKey = 4

    var current: String { state.withLock { $0.stamp } }
    /// Pages waiting now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Puts new figures in place and answers every page waiting, when their stamp moved.
    func publish(_ figures: OverviewFigures) {
        let stamp = Self.stamp(figures)
        let woken = state.withLock { s -> [Waiter] in
            s.figures = (figures, ContinuousClock.now)
            guard s.stamp != stamp else { return [] }
            s.stamp = stamp
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in woken {
            waiter.expiry?.cancel()
            waiter.continuation.resume(returning: stamp)
        }
    }

    /// Forgets the figures kept (a write changed them): the next overview reads them again.
    func forgetFigures() { state.withLock { $0.figures = nil } }

    /// The figures last published, if they are younger than `age`.
    func figures(youngerThan age: Duration) -> OverviewFigures? {
        state.withLock { s in s.figures.flatMap { ContinuousClock.now - $0.at < age ? $0.0 : nil } }
    }

    /// The stamp once it differs from `since`, or the same after `timeout`. `key` (a session) may have only a few
    /// waits at once.
    func wait(since: String, key: String, timeout: Duration) async -> String {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { s -> String? in
                guard s.stamp == since, s.waiters.count < Self.maxWaiters,
                    s.waiters.values.filter({ $0.key == key }).count < Self.maxWaitersPerKey
                else { return s.stamp }
                s.next += 1
                let id = s.next
                // Registered first, then timed: the expiry always finds it, unless the stamp moved and answered it.
                s.waiters[id] = Waiter(key: key, continuation: continuation, expiry: nil)
                s.waiters[id]?.expiry = Task {
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }  // cancelled: answered already
                    self.expire(id)
                }
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Answers every waiting page now (the console is stopping).
    func releaseAll() {
        let (all, stamp) = state.withLock { s in
            defer { s.waiters = [:] }
            return (Array(s.waiters.values), s.stamp)
        }
        for waiter in all {
            waiter.expiry?.cancel()
            waiter.continuation.resume(returning: stamp)
        }
    }

    private func expire(_ id: Int) {
        let (waiter, stamp) = state.withLock { s in (s.waiters.removeValue(forKey: id), s.stamp) }
        waiter?.continuation.resume(returning: stamp)
    }

    /// The stamp of what the overview shows: a digest of its figures (not of the clock).
    static func stamp(_ figures: OverviewFigures) -> String {
        String(SHA256.hex(Array(figures.signature.utf8)).prefix(16))
    }
}
