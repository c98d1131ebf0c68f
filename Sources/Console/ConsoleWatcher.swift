import CivilTime
import Foundation
import Observability
import Postgres
import Store
import Synchronization

/// Keeps `ConsoleLive`'s stamp current on a thread of its own while a page waits on it: woken by PostgreSQL's NOTIFY (a
/// delivery stored, a console write) when it has a direct connection to LISTEN on, and on a timer either way (a sweep,
/// the worker's findings, or a database behind a pooler, which loses LISTEN). Each wake reads the overview's figures
/// once, at most every `minimumGap`, and not at all while no page waits.
final class ConsoleWatcher: Sendable {
    /// What a console write notifies, so every console's pages refresh.
    static let channel = "payrecon_console"
    let live: ConsoleLive
    /// A fresh read of the figures (shared with pages asking at the same time), which it publishes.
    let read: @Sendable () async throws -> OverviewFigures
    let listenURL: String?
    let logger: Logger
    /// The longest the stamp may lag a change nobody notifies (a sweep, an acknowledgement by `payrecon discrepancies
    /// ack`), and how often it is read with no LISTEN at all.
    let interval: Duration
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(
        live: ConsoleLive, listenURL: String?, interval: Duration, logger: Logger,
        read: @escaping @Sendable () async throws -> OverviewFigures
    ) {
        self.live = live; self.read = read; self.listenURL = listenURL; self.interval = interval; self.logger = logger
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

    /// The shortest time between two reads of the figures, however often deliveries arrive.
    static let minimumGap: Duration = .seconds(5)

    private func run() {
        var listener: PostgresConnection?
        defer { listener?.close() }
        var lastRead = ContinuousClock.now - Self.minimumGap
        while !stopped.load(ordering: .relaxed) {
            // Read only for a page waiting (nobody looking, nothing read); at most once per `minimumGap`.
            let gap = ContinuousClock.now - lastRead
            if gap < Self.minimumGap { Thread.sleep(forTimeInterval: (Self.minimumGap - gap).inSeconds) }
            if live.waiting > 0 {
                refresh()
                lastRead = ContinuousClock.now
            }
            if listener == nil, let listenURL {
                do {
                    let conn = try PostgresConnection(conninfo: listenURL)
                    listener = conn
                    try conn.listen(DeliveryStore.channel)
                    try conn.listen(Self.channel)
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
                    logger.warning("console: the LISTEN connection was lost; connecting again", ["error": String(describing: error)])
                    listener?.close()
                    listener = nil
                }
            }
        }
    }

    private func refresh() {
        do {
            // On this thread of its own, waiting for the concurrent reads is what it is for.
            let outcome = Mutex<Result<OverviewFigures, any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let read = read
            Task {
                let result: Result<OverviewFigures, any Error>
                do { result = .success(try await read()) } catch { result = .failure(error) }
                outcome.withLock { $0 = result }
                done.signal()
            }
            done.wait()
            _ = try outcome.withLock { $0! }.get()
        } catch {
            logger.warning("console: the overview could not be read for its refresh", ["error": String(describing: error)])
        }
    }
}
