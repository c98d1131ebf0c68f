import Foundation
import Observability
import Postgres
import Synchronization

/// Wakes the worker when the receiver commits deliveries (LISTEN payrecon_deliveries on its own connection and
/// thread); polling is the fallback, so a lost notification or a dropped connection only delays work.
///
/// The decisions are `WakeupStateMachine`'s; this class only holds the suspended continuation and its timer, and
/// executes what the machine returns.
final class Wakeup: Sendable {
    private struct Locked {
        var machine = WakeupStateMachine()
        var waiter: CheckedContinuation<Void, Never>?
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(Locked())

    /// Wakes the current (or next) `wait`.
    func signal() {
        execute { $0.signal() }
    }

    /// Returns when signalled, when stopped, or after `timeout` (at least a millisecond), whichever comes first.
    func wait(for timeout: Duration) async {
        let duration = max(timeout, .milliseconds(1))
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let action = state.withLock { s -> WakeupStateMachine.WaitAction in
                let action = s.machine.beginWait()
                if case .suspend = action { s.waiter = c }
                return action
            }
            guard case .suspend(let id) = action else { c.resume(); return }
            let timer = Task { [self] in
                // Cancelled means the wait already ended another way: a cancelled timer does nothing.
                do { try await Task.sleep(for: duration) } catch { return }
                execute { $0.timerFired(id: id) }
            }
            let stillWaiting = state.withLock { s -> Bool in
                guard s.machine.state == .waiting(id: id) else { return false }
                s.timer = timer
                return true
            }
            if !stillWaiting { timer.cancel() }
        }
    }

    /// Runs one transition and its resume action outside the lock.
    private func execute(_ transition: (inout WakeupStateMachine) -> WakeupStateMachine.ResumeAction) {
        let (waiter, timer) = state.withLock { s -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            guard case .resume = transition(&s.machine) else { return (nil, nil) }
            defer { s.waiter = nil; s.timer = nil }
            return (s.waiter, s.timer)
        }
        timer?.cancel()
        waiter?.resume()
    }

    /// Listens on `channel` in a background thread until `stop()`.
    func listen(conninfo: String, channel: String, logger: Logger) {
        let thread = Thread { [self] in
            ThreadName.set("payrecon-listen")
            var conn: PostgresConnection?
            while !state.withLock({ $0.machine.isStopped }) {
                do {
                    if conn == nil {
                        let c = try PostgresConnection(conninfo: conninfo)
                        try c.listen(channel)
                        conn = c
                        signal()  // anything committed while we were not listening
                    }
                    if try !conn!.waitForNotifications(timeout: .milliseconds(1000)).isEmpty { signal() }
                } catch {
                    logger.warning("LISTEN connection lost; polling until it is back", ["error": String(describing: error)])
                    conn?.close(); conn = nil
                    Thread.sleep(forTimeInterval: 2)
                }
            }
            conn?.close()
        }
        thread.start()
    }

    func stop() {
        execute { $0.stop() }
    }
}
