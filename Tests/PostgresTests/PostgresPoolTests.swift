@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresPoolTests {
    @Test func thirtyTwoConcurrentTasksShareFourConnections() async throws {
        let table = uniqueName("pool")
        let admin = try connect()
        try admin.execute("CREATE TABLE \(table) (task int PRIMARY KEY, pid int NOT NULL)")
        defer { _ = try? admin.execute("DROP TABLE IF EXISTS \(table)") }
        let pool = PostgresPool(conninfo: databaseURL, size: 4)
        defer { pool.close() }
        let pids = try await withThrowingTaskGroup(of: Int32.self) { group in
            for task in 0..<32 {
                group.addTask {
                    try await pool.run { conn in
                        try conn.transaction { tx in
                            try tx.query(
                                "INSERT INTO \(table) (task, pid) VALUES ($1, pg_backend_pid()) RETURNING pid, pg_sleep(0.01)",
                                [.int32(Int32(task))])[0].int32("pid")
                        }
                    }
                }
            }
            var pids: [Int32] = []
            for try await pid in group { pids.append(pid) }
            return pids
        }
        #expect(pids.count == 32)
        #expect(Set(pids).count <= 4)
        #expect(pool.openConnections <= 4)
        #expect(try admin.query("SELECT count(*) AS n FROM \(table)")[0].int64("n") == 32)
    }

    @Test func runExecutesOnThePoolsOwnThreads() async throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 2)
        defer { pool.close() }
        // The kernel's name for the running thread, not Foundation's Thread.name.
        let name = try await pool.run { _ -> String in
            ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(name.hasPrefix("pgpool-"), "ran on \(name)")
    }

    @Test func dialsLazily() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 3)
        #expect(pool.openConnections == 0)
        #expect(pool.healthy())
        #expect(pool.openConnections == 1)
    }

    @Test func waitingForABusyPoolTimesOutWithAClearError() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1, acquireTimeout: .milliseconds(300))
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? pool.withConnection { _ in
                holding.signal()
                release.wait()
            }
            done.signal()
        }.start()
        holding.wait()
        let start = ContinuousClock.now
        let error = postgresError { try pool.withConnection { _ in } }
        #expect(start.duration(to: .now) >= .milliseconds(250))
        #expect(error?.description.contains("all 1 connections of the pool are busy") == true)
        #expect(!pool.healthy(timeout: .milliseconds(100)))
        release.signal()
        done.wait()
        #expect(try pool.withConnection { try $0.query("SELECT 1 AS one")[0].int32("one") } == 1)
    }

    @Test func aDeadIdleConnectionIsReplacedBeforeUse() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        let first = try pool.withConnection { $0.backendPID }
        try terminateBackend(first)
        // The pool checks the idle connection before handing it out: this call is transparently served by a new one.
        let second = try pool.withConnection { try $0.query("SELECT pg_backend_pid() AS pid")[0].int32("pid") }
        #expect(second != first)
        #expect(pool.openConnections == 1)
    }

    @Test func aConnectionKilledInUseFailsOnceThenThePoolRecovers() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        let first = try pool.withConnection { $0.backendPID }
        // Not retried: the statement may have had effects. The caller sees a connection failure...
        let error = postgresError {
            try pool.withConnection { conn in
                try terminateBackend(conn.backendPID)
                try conn.query("SELECT 1")
            }
        }
        #expect(error?.isConnectionFailure == true)
        #expect(pool.openConnections == 0)
        // ...and the next call gets a new connection.
        let second = try pool.withConnection { try $0.query("SELECT pg_backend_pid() AS pid")[0].int32("pid") }
        #expect(second != first)
        #expect(pool.healthy())
    }

    @Test func asyncRunRecoversAfterTheBackendIsKilled() async throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 2)
        defer { pool.close() }
        let error = await postgresError {
            _ = try await pool.run { conn in
                try terminateBackend(conn.backendPID)
                return try conn.query("SELECT 1").rowCount
            }
        }
        #expect(error?.isConnectionFailure == true)
        let value = try await pool.run { try $0.query("SELECT 41 + 1 AS n")[0].int32("n") }
        #expect(value == 42)
    }

    @Test func anUnreachableServerFailsFastWithoutLeakingSlots() throws {
        let pool = PostgresPool(conninfo: "postgresql://postgres:pw@127.0.0.1:1/h_postgres", size: 1, acquireTimeout: .seconds(1))
        for _ in 0..<3 {
            let error = postgresError { try pool.withConnection { _ in } }
            #expect(error?.description.contains("Connection refused") == true)
            #expect(error?.description.contains("busy") == false)
        }
        #expect(!pool.healthy())
        #expect(pool.openConnections == 0)
    }

    @Test func leftoverTransactionsAndListensAreCleanedUp() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        try pool.withConnection { conn in
            try conn.execute("BEGIN")
            try conn.listen(uniqueName("leftover"))
        }
        try pool.withConnection { (conn: PostgresConnection) throws in
            #expect(!conn.inTransaction)
            #expect(try conn.query("SELECT count(*) AS n FROM pg_listening_channels()")[0].int64("n") == 0)
        }
    }

    @Test func aClosedPoolRefusesWork() async throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        #expect(pool.healthy())
        pool.close()
        #expect(pool.openConnections == 0)
        #expect(postgresError { try pool.withConnection { _ in } }?.description.contains("closed") == true)
        let error = await postgresError { _ = try await pool.run { _ in 1 } }
        #expect(error?.description.contains("closed") == true)
    }

    @Test func aCancelledTaskDoesNotRunItsQueuedJob() async throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        defer { pool.close() }
        let started = DispatchSemaphore(value: 0)
        let blocker = Task {
            try await pool.run { conn in
                started.signal(); return try conn.query("SELECT pg_sleep(0.5)").rowCount
            }
        }
        await withCheckedContinuation { continuation in
            Thread {
                started.wait(); continuation.resume()
            }.start()
        }
        let ran = CancellationFlag()
        let queued = Task { try await pool.run { _ in ran.set() } }
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        _ = try await blocker.value
        #expect(!ran.isSet)
    }
}
