import Foundation
import Observability
import Synchronization
import Postgres
import Providers

/// Whether this process reaches PostgreSQL, probed every 15 s (`SELECT 1` through its pool) and exported as
/// `payrecon_database_up` (1 or 0), so an outage on a quiet night, with no delivery to fail, still raises
/// PayreconDatabaseDown. An outage is logged once, with libpq's reason, and its end once, with how long it lasted.
public final class DatabaseProbe: Sendable {
    static let up = Metrics.shared.gauge(
        "payrecon_database_up",
        help: "1 when this process's last probe of PostgreSQL (SELECT 1 through its pool, every 15 s) answered, else 0")

    private let pool: PostgresPool
    private let interval: Duration
    private let process: String

    private let logger: Logger

    public init(pool: PostgresPool, process: String, interval: Duration = .seconds(15), logger: Logger) {
        self.pool = pool; self.process = process; self.interval = interval; self.logger = logger
    }

    /// With the interval `PAYRECON_DB_PROBE_INTERVAL` sets (default 15s).
    public convenience init(pool: PostgresPool, process: String, environment: Environment, logger: Logger) throws {
        self.init(
            pool: pool, process: process, interval: .seconds(try environment.duration("PAYRECON_DB_PROBE_INTERVAL", default: "15s")),
            logger: logger)
    }

    /// Exports `payrecon_database_up` (0 until the first probe answers).
    public static func register() { up.set(0) }

    /// Registers the gauge and probes until the task is cancelled; the first probe runs at once.
    public func start() -> Task<Void, Never> {
        Self.register()
        let pool = self.pool, interval = self.interval, process = self.process, logger = self.logger
        return Task.detached {
            var state = ProbeState()
            // A probe still waiting (a network that drops packets holds a query until the kernel gives up, minutes
            // later): none is started beside it, and the database reads as out of reach meanwhile.
            let running = Flag()
            while !Task.isCancelled {
                let failure: String? = await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
                    let answered = Flag()
                    let answer: @Sendable (String?) -> Void = { value in if answered.set() { done.resume(returning: value) } }
                    guard running.set() else { return answer("the last probe has not answered yet") }
                    // libpq blocks: off the cooperative pool, raced against a deadline.
                    DispatchQueue.global().async {
                        let result = pool.probe(timeout: .seconds(5))
                        running.clear()
                        answer(result)
                    }
                    DispatchQueue.global().asyncAfter(deadline: .now() + 10) { answer("no answer within 10 s") }
                }
                Self.up.set(failure == nil ? 1 : 0)
                switch state.observe(failure: failure, at: Date()) {
                case .none: break
                case .lost(let reason):
                    logger.warning(
                        "database out of reach; probing it until it answers, and saying when it is back",
                        ["error": reason, "process": process])
                case .back(let seconds):
                    logger.info("database reachable again", ["after_seconds": Int(seconds), "process": process])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

/// What a sequence of probes says worth a log line: the first failure of an outage, and the first success after one.
struct ProbeState {
    enum Event: Equatable { case none, lost(String), back(Double) }
    private var since: Date?

    mutating func observe(failure: String?, at now: Date) -> Event {
        switch (failure, since) {
        case (let reason?, nil): since = now; return .lost(reason)
        case (nil, let start?): since = nil; return .back(now.timeIntervalSince(start))
        default: return .none
        }
    }
}

/// A flag set once until cleared, from any thread.
final class Flag: Sendable {
    private let value = Mutex(false)
    /// Sets it; whether it was clear.
    func set() -> Bool {
        value.withLock { was in
            defer { was = true }; return !was
        }
    }
    func clear() { value.withLock { $0 = false } }
}
