import Foundation
import PayreconTesting
import Postgres
import Testing

/// Commands a cron job runs tell the truth in their exit code: against a database that cannot be reached, or was never
/// migrated, `work --once`, `actions execute` and `actions retry` exit 2 saying what to do (they used to exit 0 having
/// done nothing).
@Suite(.serialized) struct ExitCodeTests {
    static let commands: [[String]] = [["work", "--once"], ["actions", "execute"], ["actions", "retry", "--failed"]]

    @Test(arguments: commands) func anUnreachableDatabaseIsFatal(_ command: [String]) async throws {
        let r = try await PayreconProcess.launch(command, databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        #expect(r.status == 2, "\(command): \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("cannot reach the database") && r.stderr.contains("DATABASE_URL"), "\(r.stderr)")
    }

    @Test(arguments: commands) func anUnmigratedDatabaseSaysToMigrate(_ command: [String]) async throws {
        let schema = "t_exit_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let admin = try PostgresConnection(conninfo: TestDatabase.baseURL)
        defer { _ = try? admin.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE"); admin.close() }
        _ = try admin.execute("CREATE SCHEMA \(schema)")
        let r = try await PayreconProcess.launch(command, databaseURL: TestDatabase.withSearchPath(TestDatabase.baseURL, schema))
        #expect(r.status == 2, "\(command): \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("not migrated") && r.stderr.contains("payrecon migrate"), "\(r.stderr)")
    }

    /// serve never migrates: on a database that lacks migrations it refuses to start, naming `payrecon migrate` (it
    /// used to start, say ready, and answer 503 to every delivery with `relation "deliveries" does not exist`).
    @Test func serveRefusesAnUnmigratedDatabaseNamingMigrate() async throws {
        let schema = "t_exit_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let admin = try PostgresConnection(conninfo: TestDatabase.baseURL)
        defer { _ = try? admin.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE"); admin.close() }
        _ = try admin.execute("CREATE SCHEMA \(schema)")
        let r = try await PayreconProcess.launch(["serve", "--listen", "127.0.0.1:0"], databaseURL: TestDatabase.withSearchPath(TestDatabase.baseURL, schema),
                                                 environment: ["PXP_WEBHOOK_KEY": "k"])
        #expect(r.status == 2, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("lacks") && r.stderr.contains("payrecon migrate"), "\(r.stderr)")
    }

    /// `migrate` with a folder that holds no migrations is an error naming the folder (it said "up to date" and exited
    /// 0, so a wrong PAYRECON_SQL_DIR went unnoticed).
    @Test func migrateWithoutMigrationsIsAnError() async throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-no-sql-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let r = try await PayreconProcess.launch(["migrate"], databaseURL: TestDatabase.baseURL, environment: ["PAYRECON_SQL_DIR": empty.path])
        #expect(r.status == 2, "\(r.status) \(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains(empty.path) && r.stderr.contains("holds no migrations") && r.stderr.contains("PAYRECON_SQL_DIR"), "\(r.stderr)")
        #expect(!r.stdout.contains("up to date"))
    }
}
