import CivilTime
import Dispatch
import Foundation
import Observability
import Synchronization

/// A fixed-size pool of connections, dialled lazily.
///
/// - `withConnection` runs a blocking body on the caller's thread (for threads that may block: libmicrohttpd's,
///   the pool's own, a CLI's main thread).
/// - `run` is for async code: the body runs on one of the pool's own threads (never Swift's cooperative pool) and
///   the caller resumes when it is done.
///
/// A connection whose body failed with ``PostgresError/isConnectionFailure`` is discarded, and an idle connection
/// is checked (without a round trip) before it is handed out, so after a server restart the pool re-dials by itself.
/// A statement that fails because its connection broke is not retried (it may have had effects): the caller sees
/// the error and the next call gets a fresh connection. A transaction left open by a body is rolled back.
public final class PostgresPool: Sendable {
    /// Most connections open at once, and number of threads serving `run`.
    public var size: Int { core.size }
    /// How long a caller waits for a free connection before `.connection("... busy ...")`.
    public var acquireTimeout: Duration { core.acquireTimeout }

    private let core: PoolCore

    /// - Parameters:
    ///   - conninfo: URI or key=value connection string (see ``PostgresConnection/init(conninfo:)``).
    ///   - size: connections (and `run` threads), at least 1.
    ///   - acquireTimeout: how long to wait for a free connection.
    ///   - prepareStatements: let each session prepare the statements it runs often (``PreparedStatements``), where
    ///     it reaches PostgreSQL itself; a session through a pooler, or whose route cannot be told, never does.
    public init(conninfo: String, size: Int = 8, acquireTimeout: Duration = .seconds(5), prepareStatements: Bool = true) {
        core = PoolCore(conninfo: conninfo, size: max(1, size), acquireTimeout: acquireTimeout, prepareStatements: prepareStatements)
    }

    deinit {
        core.close()
    }

    /// Runs `body` with a connection on the calling thread, waiting up to `acquireTimeout` for a free one.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try core.withConnection(timeout: core.acquireTimeout, body)
    }

    /// Same, with its own wait limit.
    public func withConnection<T>(timeout: Duration, _ body: (PostgresConnection) throws -> T) throws -> T {
        try core.withConnection(timeout: timeout, body)
    }

    /// Runs `body` on one of the pool's threads and returns its result. Jobs wait in FIFO order; the wait for a
    /// connection is bounded by `acquireTimeout`. Cancelling the task before the job starts fails it with
    /// `CancellationError`; once started, the body runs to completion.
    public func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let cancelled = CancellationFlag()
        let core = self.core
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                let enqueued = ContinuousClock.now
                core.enqueue { poolClosed in
                    if poolClosed {
                        continuation.resume(throwing: PostgresError.connection("the connection pool is closed"))
                        return
                    }
                    if cancelled.isSet {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    let waited = enqueued.duration(to: .now)
                    let remaining = max(.zero, core.acquireTimeout - waited)
                    continuation.resume(with: Result { try core.withConnection(timeout: remaining, body) })
                }
            }
        } onCancel: {
            cancelled.set()
        }
    }

    /// Quick readiness check for `/readyz`: `SELECT 1` on a pooled connection within `timeout`.
    public func healthy(timeout: Duration = .seconds(2)) -> Bool {
        probe(timeout: timeout) == nil
    }

    /// `SELECT 1` on a pooled connection within `timeout`: nil when it answered, else why not, in libpq's words
    /// (a wrong database name reads differently from a server that is down).
    public func probe(timeout: Duration = .seconds(2)) -> String? {
        do {
            let answered = try core.withConnection(timeout: timeout) { try $0.query("SELECT 1").rowCount == 1 }
            return answered ? nil : "SELECT 1 returned no row"
        } catch {
            return String(describing: error)
        }
    }

    /// Connections currently open (idle or in use).
    public var openConnections: Int { core.openConnections }

    /// Open and idle connections, and `run` jobs waiting for one (`payrecon_db_*` metrics).
    public var statistics: (open: Int, idle: Int, waiting: Int) { core.statistics }

    /// Closes idle connections, fails queued `run` jobs and stops the pool's threads. Connections in use close when
    /// returned. Later calls throw `.connection`.
    public func close() {
        core.close()
    }
}

/// Shared state of a pool; the worker threads hold this, not the pool, so dropping the pool stops them.
final class PoolCore: Sendable {
    typealias Job = @Sendable (_ poolClosed: Bool) -> Void

    struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var jobs: [Job] = []
        var jobHead = 0
        var threadsStarted = false
        var closed = false
    }

    let conninfo: String
    let size: Int
    let acquireTimeout: Duration
    private let slots: DispatchSemaphore
    let prepareStatements: Bool
    private let jobsReady = DispatchSemaphore(value: 0)
    private let state = Mutex(State())
    private static let poolCounter = Atomic<Int>(0)
    private let poolNumber: Int

    init(conninfo: String, size: Int, acquireTimeout: Duration, prepareStatements: Bool) {
        self.conninfo = conninfo
        self.prepareStatements = prepareStatements
        self.size = size
        self.acquireTimeout = acquireTimeout
        slots = DispatchSemaphore(value: size)
        poolNumber = Self.poolCounter.add(1, ordering: .relaxed).newValue
    }

    var openConnections: Int { state.withLock { $0.open } }
    var statistics: (open: Int, idle: Int, waiting: Int) { state.withLock { ($0.open, $0.idle.count, $0.jobs.count - $0.jobHead) } }

    func withConnection<T>(timeout: Duration, _ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire(timeout: timeout)
        let value: T
        do {
            value = try body(connection)
        } catch {
            release(connection, after: error)
            throw error
        }
        release(connection, after: nil)
        return value
    }

    private func acquire(timeout: Duration) throws -> PostgresConnection {
        guard !state.withLock({ $0.closed }) else { throw PostgresError.connection("the connection pool is closed") }
        let deadline = DispatchTime.now() + .milliseconds(Int(max(0, timeout.inSeconds) * 1000))
        guard slots.wait(timeout: deadline) == .success else {
            throw PostgresError.connection(
                "no free database connection within \(timeout.inSeconds)s: all \(size) connections of the pool are busy "
                    + "(look for slow queries, or raise the pool size)")
        }
        // Most recently used first: it is the most likely to be alive and warm.
        while let candidate = state.withLock({ $0.idle.popLast() }) {
            if candidate.isAliveWhenIdle() { return candidate }
            candidate.close()
            state.withLock { $0.open -= 1 }
        }
        do {
            let connection = try PostgresConnection(conninfo: conninfo)
            if prepareStatements { connection.preparesStatements = (try? connection.looksPooled()) == false }
            state.withLock { $0.open += 1 }
            return connection
        } catch {
            slots.signal()
            throw error
        }
    }

    private func release(_ connection: PostgresConnection, after error: Error?) {
        let broken = (error as? PostgresError)?.isConnectionFailure ?? false
        let keep = !broken && connection.prepareForReuse()
        let stored = state.withLock { state -> Bool in
            guard keep, !state.closed else {
                state.open -= 1
                return false
            }
            state.idle.append(connection)
            return true
        }
        if !stored { connection.close() }
        slots.signal()
    }

    /// Queues a job for the pool's threads (started on first use).
    func enqueue(_ job: @escaping Job) {
        let (accepted, startThreads) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.jobs.append(job)
            let start = !state.threadsStarted
            state.threadsStarted = true
            return (true, start)
        }
        guard accepted else {
            job(true)
            return
        }
        if startThreads {
            for index in 0..<size {
                let name = "pgpool-\(poolNumber)-\(index)"  // Linux thread names hold 15 bytes
                Thread { [self] in
                    ThreadName.set(name)
                    workerLoop()
                }.start()
            }
        }
        jobsReady.signal()
    }

    private func workerLoop() {
        while true {
            jobsReady.wait()
            let next = state.withLock { state -> (job: Job?, exit: Bool) in
                if state.jobHead < state.jobs.count {
                    let job = state.jobs[state.jobHead]
                    state.jobHead += 1
                    if state.jobHead > 64, state.jobHead * 2 > state.jobs.count {
                        state.jobs.removeFirst(state.jobHead)
                        state.jobHead = 0
                    }
                    return (job, false)
                }
                return (nil, state.closed)
            }
            if let job = next.job { job(false) }
            if next.exit { return }
        }
    }

    func close() {
        let (idle, pending, threads) = state.withLock { state -> ([PostgresConnection], [Job], Bool) in
            guard !state.closed else { return ([], [], false) }
            state.closed = true
            let idle = state.idle
            state.open -= idle.count
            state.idle = []
            let pending = Array(state.jobs[state.jobHead...])
            state.jobs = []
            state.jobHead = 0
            return (idle, pending, state.threadsStarted)
        }
        idle.forEach { $0.close() }
        pending.forEach { $0(true) }
        if threads {
            for _ in 0..<size { jobsReady.signal() }
        }
    }
}

/// Set once from a cancellation handler, read on a pool thread.
final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
