import Foundation
import Crypto
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
        /// The read under way, which every page asking meanwhile shares; and the generation it began in.
        var reading: (task: Task<OverviewFigures, any Error>, generation: Int)?
        /// Moves with each write: a read begun before it is shown to whoever asked, never kept.
        var generation = 0
        var waiters: [Int: Waiter] = [:]
        var next = 0
        var stopping = false
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
        let woken = state.withLock { s in Self.keep(figures, in: &s) }
        for waiter in woken {
            waiter.expiry?.cancel()
            waiter.continuation.resume(returning: Self.stamp(figures))
        }
    }

    private static func keep(_ figures: OverviewFigures, in s: inout State) -> [Waiter] {
        let stamp = Self.stamp(figures)
        s.figures = (figures, ContinuousClock.now)
        guard s.stamp != stamp else { return [] }
        s.stamp = stamp
        defer { s.waiters = [:] }
        return Array(s.waiters.values)
    }

    /// Forgets the figures kept and any read under way (a write changed them): the next overview reads them again.
    func forgetFigures() {
        state.withLock { s in
            s.figures = nil
            s.reading = nil
            s.generation += 1
        }
    }

    /// Figures read within `maxAge`, else those of the read under way, else those of a new read (`read`), which then
    /// serve every page: however many ask at once, the database is read once. A read begun before a write is returned
    /// to whoever shared it, but not kept.
    func figures(maxAge: Duration, read: @escaping @Sendable () async throws -> OverviewFigures) async throws -> OverviewFigures {
        let (kept, reading) = state.withLock { s -> (OverviewFigures?, (task: Task<OverviewFigures, any Error>, generation: Int)?) in
            if let kept = s.figures, ContinuousClock.now - kept.at < maxAge { return (kept.0, nil) }
            if let reading = s.reading { return (nil, reading) }
            let started = (task: Task { try await read() }, generation: s.generation)
            s.reading = started
            return (nil, started)
        }
        if let kept { return kept }
        guard let reading else { preconditionFailure("a read is kept or under way") }
        do {
            let figures = try await reading.task.value
            let woken = state.withLock { s -> [Waiter] in
                // The first of those sharing the read keeps it, if no write came since it began.
                guard s.reading?.task == reading.task else { return [] }
                s.reading = nil
                return s.generation == reading.generation ? Self.keep(figures, in: &s) : []
            }
            for waiter in woken {
                waiter.expiry?.cancel()
                waiter.continuation.resume(returning: Self.stamp(figures))
            }
            return figures
        } catch {
            state.withLock { s in if s.reading?.task == reading.task { s.reading = nil } }
            throw error
        }
    }

    /// The stamp once it differs from `since`, or the same after `timeout`. `key` (a session) may have only a few
    /// waits at once.
    func wait(since: String, key: String, timeout: Duration) async -> String {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { s -> String? in
                guard !s.stopping, s.stamp == since, s.waiters.count < Self.maxWaiters,
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

    /// Answers every waiting page now, and any that asks from now on at once (the console is stopping).
    func releaseAll() {
        let (all, stamp) = state.withLock { s in
            s.stopping = true
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
