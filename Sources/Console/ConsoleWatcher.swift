import Foundation
import Observability
import Postgres
import Store
import Synchronization

/// Keeps `ConsoleLive`'s stamp current on a thread of its own: woken by PostgreSQL's NOTIFY (a delivery stored, a
/// console write) when it has a direct connection to LISTEN on, and on a timer either way (a sweep, the worker's
/// findings, or a database behind a pooler, which loses LISTEN). Each wake reads the overview's figures once.
final class ConsoleWatcher: Sendable {
    /// What a console write notifies, so every console's pages refresh.
    static let channel = "payrecon_console"
    let live: ConsoleLive
    let pool: PostgresPool
    let listenURL: String?
    let logger: Logger
    /// The longest the stamp may lag a change nobody notifies (a sweep, an acknowledgement by `payrecon discrepancies
    /// ack`), and how often it is read with no LISTEN at all.
    let interval: Duration
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(live: ConsoleLive, pool: PostgresPool, listenURL: String?, interval: Duration, logger: Logger) {
        self.live = live; self.pool = pool; self.listenURL = listenURL; self.interval = interval; self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in
            run()
            done.signal()
        }
        thread.name = "payrecon.console.watcher"
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        _ = done.wait(timeout: .now() + .seconds(15))
    }

    private func run() {
        var listener: PostgresConnection?
        defer { listener?.close() }
        while !stopped.load(ordering: .relaxed) {
            refresh()
            if listener == nil, let listenURL {
                listener = try? PostgresConnection(conninfo: listenURL)
                do {
                    try listener?.listen(DeliveryStore.channel)
                    try listener?.listen(Self.channel)
                } catch {
                    logger.warning("console: cannot LISTEN; its pages refresh on a timer", ["error": String(describing: error)])
                    listener?.close()
                    listener = nil
                }
            }
            // Wait in short steps so a stop is seen within a second.
            let deadline = ContinuousClock.now + interval
            while !stopped.load(ordering: .relaxed), ContinuousClock.now < deadline {
                guard let conn = listener else {
                    Thread.sleep(forTimeInterval: 0.5)
                    continue
                }
                do {
                    if try !conn.waitForNotifications(timeout: .seconds(1)).isEmpty {
                        // A delivery was stored: give the worker a moment to check it, then read once for the burst.
                        Thread.sleep(forTimeInterval: 0.5)
                        _ = try? conn.waitForNotifications(timeout: .zero)
                        break
                    }
                } catch {
                    listener?.close()
                    listener = nil
                }
            }
        }
    }

    private func refresh() {
        do {
            let figures = try pool.withConnection { try ConsoleQueries.overview(on: $0) }
            live.publish(ConsoleLive.stamp(figures))
        } catch {
            logger.warning("console: the overview could not be read for its refresh", ["error": String(describing: error)])
        }
    }
}
