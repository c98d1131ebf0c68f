import Foundation
import Observability
import Postgres
import Synchronization

/// Wakes the worker when the receiver commits deliveries (LISTEN payrecon_deliveries on its own connection and
/// thread); polling is the fallback, so a lost notification or a dropped connection only delays work.
final class Wakeup: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        var stopped = false
    }
    private let state = Mutex(State())

    /// Wakes the current (or next) `wait`.
    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.signalled = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns when signalled or after `seconds`.
    func wait(seconds: Double) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: .milliseconds(Int(max(0.001, seconds) * 1000)))
            signal()
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.signalled || s.stopped { s.signalled = false; return true }
                s.waiter = c
                return false
            }
            if resumeNow { c.resume() }
        }
        timer.cancel()
    }

    /// Listens on `channel` in a background thread until `stop()`.
    func listen(conninfo: String, channel: String) {
        let thread = Thread { [self] in
            var conn: PostgresConnection?
            while !state.withLock({ $0.stopped }) {
                do {
                    if conn == nil {
                        let c = try PostgresConnection(conninfo: conninfo)
                        try c.listen(channel)
                        conn = c
                        signal()   // anything committed while we were not listening
                    }
                    if try !conn!.waitForNotifications(timeout: 1.0).isEmpty { signal() }
                } catch {
                    Log.warning("LISTEN connection lost; polling until it is back", ["error": String(describing: error)])
                    conn?.close(); conn = nil
                    Thread.sleep(forTimeInterval: 2)
                }
            }
            conn?.close()
        }
        thread.name = "payrecon.listen"
        thread.start()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        signal()
    }
}
