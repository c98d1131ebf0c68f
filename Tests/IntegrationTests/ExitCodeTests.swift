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
}
