import Foundation
import Observability
import PayreconTesting
@_spi(Positional) import Postgres
import Providers
import Store
import Testing
import Worker

/// An idle `payrecon work` sleeps: its transactions are bounded by its poll interval, and a NOTIFY still wakes it.
///
/// These run in a database of their own, because `pg_stat_database.xact_commit` counts per database and the other
/// suites share the test database; and in a test target of their own, because a LISTEN backend commits a transaction
/// each time PostgreSQL signals it about NOTIFY traffic, including other databases' (it must advance its place in
/// the cluster-wide queue), which would count here as the worker's.
@Suite(.serialized) struct IdleWorkerTests {
    @Test func idleWorkerTransactionRateIsBoundedByItsPollInterval() async throws {
        try await OwnDatabase.with { db in
            let poll = 0.5, window = 4.0
            let worker = db.worker(poll: .milliseconds(500))
            let run = Task { await worker.run(once: false) }
            // Let it start (LISTEN connection, first claim) before counting.
            try await Task.sleep(for: .seconds(1))
            // An autovacuum worker visiting the database commits transactions of its own: a window in which one ran
            // is measured again.
            var made: Int64 = 0
            for _ in 0..<3 {
                let before = try await offload { try db.committedTransactions() }
                var autovacuumRan = false
                let end = Date().addingTimeInterval(window)
                while Date() < end {  // the measurement window, sampled, not an assertion
                    if try await offload({ try db.autovacuumIsRunning() }) { autovacuumRan = true }
                    try await Task.sleep(for: .milliseconds(100))
                }
                made = try await offload { try db.committedTransactions() } - before
                if !autovacuumRan { break }
            }
            worker.stop()
            _ = await run.value

            // Per poll an idle worker claims deliveries, claims actions (it executes them) and asks when the next delivery
            // is due: three statements, each its own transaction (log_statement shows exactly these). The database's
            // counter runs ahead of them by 10–20 in such a window (statistics flushed up to a second late per
            // backend at both ends, and commits that are not the worker's statements), hence two seconds' worth of
            // polls and two dozen of slack: a few per poll interval, where the busy loop made thousands a second.
            let polls = (window + 2) / poll
            let bound = Int64((polls * 3).rounded(.up)) + 24
            #expect(made <= bound, "an idle worker made \(made) transactions in \(window) s (poll \(poll) s); at most \(bound) expected")
        }
    }

    @Test func notifyWakesAnIdleWorkerLongBeforeItsPollInterval() async throws {
        try await OwnDatabase.with { db in
            let worker = db.worker(poll: .seconds(60))
            let run = Task { await worker.run(once: false) }
            defer { worker.stop() }
            #expect(
                try await eventually(10) { try await offload { try db.listening() } },
                "the worker never listened on \(DeliveryStore.channel)")
            // A PXP event that names no transaction: processed (ignored, with its reason) without a provider call.
            let stored = Date()
            let id = try await offload {
                let conn = try db.connect(); defer { conn.close() }
                return try DeliveryStore.commit(
                    [
                        NewDelivery(
                            provider: .pxp, dedupeKey: "idle-1", eventType: "Authentication", headers: [],
                            body: Array(#"{"eventCode":"Authentication"}"#.utf8))
                    ], on: conn)[0].id
            }
            #expect(
                try await eventually(10) { try await offload { try db.status(of: id) } == "ignored" },
                "a NOTIFY did not wake the idle worker")
            #expect(Date().timeIntervalSince(stored) < 10)
            worker.stop()
            _ = await run.value
        }
    }
}

/// A migrated database of its own on the test server, dropped afterwards.
private struct OwnDatabase: Sendable {
    let name: String
    let url: String
    let admin: String
    let pool: PostgresPool

    static func with(_ body: (OwnDatabase) async throws -> Void) async throws {
        let db = try await offload { try OwnDatabase.create() }
        do { try await body(db) } catch { await offload { db.drop() }; throw error }
        await offload { db.drop() }
    }

    static func create() throws -> OwnDatabase {
        let base = ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "postgresql://postgres@127.0.0.1:54329/payrecon_test"
        let name = "payrecon_idle_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let admin = ProcessInfo.processInfo.environment["PAYRECON_TEST_ADMIN_URL"] ?? replacingDatabase(base, with: "postgres")
        let conn = try PostgresConnection(conninfo: admin); defer { conn.close() }
        _ = try conn.execute("CREATE DATABASE \(name)")
        let url = replacingDatabase(base, with: name)
        let migrate = try PostgresConnection(conninfo: url); defer { migrate.close() }
        guard let dir = Migrator.locateDirectory() else { throw TestSetupError("sql/ not found") }
        try Migrator.migrate(try Migrator.load(from: dir), on: migrate)
        return OwnDatabase(name: name, url: url, admin: admin, pool: PostgresPool(conninfo: url, size: 4, acquireTimeout: .seconds(30)))
    }

    /// `postgresql://u@h:p/db?x` with another database; key=value conninfo gets a later dbname (the last one wins).
    static func replacingDatabase(_ conninfo: String, with name: String) -> String {
        guard conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://") else { return conninfo + " dbname=\(name)" }
        let (head, query) = conninfo.firstIndex(of: "?").map { (String(conninfo[..<$0]), String(conninfo[$0...])) } ?? (conninfo, "")
        let authority = head.range(of: "://")!.upperBound
        let path = head[authority...].firstIndex(of: "/") ?? head.endIndex
        return String(head[..<path]) + "/" + name + query
    }

    func connect() throws -> PostgresConnection { try PostgresConnection(conninfo: url) }

    func worker(poll: Duration) -> QueueWorker {
        let gateway = ProviderGateway(ConfiguredProviders(apis: [:]))  // no credentials: nothing to fetch
        let checker = OrderChecker(pool: pool, gateway: gateway, pendingMaxSeconds: 86_400)
        return QueueWorker(
            configuration: .init(
                owner: "idle-" + UUID().uuidString.prefix(8), lease: .seconds(30), batchSize: 8,
                poll: poll, executeActions: true),
            conninfo: url, pool: pool, processor: DeliveryProcessor(pool: pool, checker: checker),
            executor: ActionExecutor(pool: pool, gateway: gateway, checker: checker, logger: Logger()), logger: Logger())
    }

    /// Transactions committed in this database, read from another one so the reading does not count.
    func committedTransactions() throws -> Int64 {
        let conn = try PostgresConnection(conninfo: admin); defer { conn.close() }
        _ = try conn.query("SELECT pg_stat_clear_snapshot()")
        return try conn.query("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", [.text(name)]).first!.int64("xact_commit")
    }

    func autovacuumIsRunning() throws -> Bool {
        let conn = try PostgresConnection(conninfo: admin); defer { conn.close() }
        return try conn.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'autovacuum worker'",
            [.text(name)]
        ).first!.int64("n") > 0
    }

    func listening() throws -> Bool {
        let conn = try PostgresConnection(conninfo: admin); defer { conn.close() }
        return try conn.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'",
            [.text(name)]
        ).first!.int64("n") > 0
    }

    func status(of id: Int64) throws -> String? {
        let conn = try connect(); defer { conn.close() }
        return try DeliveryQueue.find(id: id, on: conn)?.status
    }

    func drop() {
        pool.close()
        guard let conn = try? PostgresConnection(conninfo: admin) else { return }
        _ = try? conn.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        conn.close()
    }
}
