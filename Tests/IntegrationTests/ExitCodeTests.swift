import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Store
import Testing

/// Commands a cron job runs tell the truth in their exit code: against a database that cannot be reached, or was never
/// migrated, `work --once`, `actions execute` and `actions retry` exit 2 saying what to do, never 0 having done
/// nothing.
@Suite(.serialized) struct ExitCodeTests {
    static let commands: [[String]] = [["work", "--once"], ["actions", "execute"], ["actions", "retry", "--failed"]]

    @Test(arguments: commands) func anUnreachableDatabaseIsFatal(_ command: [String]) async throws {
        let r = try await PayreconProcess.launch(command, databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        #expect(r.status == 2, "\(command): \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("cannot reach the database") && r.stderr.contains("DATABASE_URL"), "\(r.stderr)")
    }

    /// Every command that reaches the database, against one that cannot be reached: exit 2 (fatal), saying what to
    /// check — never 0 having done nothing, never a crash. (serve starts anyway and answers 503 until the database is
    /// back; doctor reports it as its first failed check, and exits 2 too.)
    static let everyDatabaseCommand: [[String]] = [
        ["work", "--once"], ["reconcile", "--all"], ["report"],
        ["orders", "import", PayreconProcess.packageRoot.appendingPathComponent("demo/orders.csv").path], ["actions", "list"],
        ["actions", "execute"], ["actions", "retry", "--failed"], ["events", "list"], ["events", "show", "1"],
        ["events", "retry", "--dead"],
        ["rejections", "list"], ["rejections", "show", "1"], ["discrepancies", "list"], ["discrepancies", "show", "1"],
        ["discrepancies", "ack", "1"], ["explain", "1"], ["prune", "--dry-run"], ["migrate"], ["settlement", "import", "/dev/null"]
    ]

    @Test(arguments: everyDatabaseCommand) func everyCommandExitsTwoWhenTheDatabaseCannotBeReached(_ command: [String]) async throws {
        let r = try await PayreconProcess.launch(command, databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        #expect(r.status == 2, "\(command): \(r.status) \(r.stdout) \(r.stderr)")
        #expect(
            r.stderr.contains("DATABASE_URL") || r.stderr.contains("PostgreSQL") || r.stderr.contains("database"), "\(command): \(r.stderr)"
        )
    }

    /// --database-url wins over DATABASE_URL in every command that reaches the database: with DATABASE_URL naming one
    /// server and the flag another (neither reachable, so nothing is touched), what the command says is about the
    /// flag's.
    @Test(arguments: everyDatabaseCommand) func theFlagWinsOverTheEnvironment(_ command: [String]) async throws {
        let r = try await PayreconProcess.launch(
            command + ["--database-url", "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2"],
            databaseURL: "postgresql://postgres@127.0.0.1:2/none?connect_timeout=2")
        #expect(r.status == 2, "\(command): \(r.status) \(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains("port 1 failed") && !r.stderr.contains("port 2"), "\(command): \(r.stderr)")
    }

    @Test func doctorSaysTheDatabaseIsDownAndExitsTwo() async throws {
        let r = try await PayreconProcess.launch(["doctor"], databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        #expect(
            r.status == 2 && r.stdout.contains("FAIL database reachable") && r.stdout.contains("check DATABASE_URL"),
            "\(r.status) \(r.stdout) \(r.stderr)")
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

    /// serve never migrates: on a database that lacks migrations it refuses to start, naming `payrecon migrate`,
    /// rather than say ready and answer 503 to every delivery with `relation "deliveries" does not exist`.
    @Test func serveRefusesAnUnmigratedDatabaseNamingMigrate() async throws {
        let schema = "t_exit_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let admin = try PostgresConnection(conninfo: TestDatabase.baseURL)
        defer { _ = try? admin.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE"); admin.close() }
        _ = try admin.execute("CREATE SCHEMA \(schema)")
        let r = try await PayreconProcess.launch(
            ["serve", "--listen", "127.0.0.1:0"], databaseURL: TestDatabase.withSearchPath(TestDatabase.baseURL, schema),
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
        let r = try await PayreconProcess.launch(
            ["migrate"], databaseURL: TestDatabase.baseURL, environment: ["PAYRECON_SQL_DIR": empty.path])
        #expect(r.status == 2, "\(r.status) \(r.stdout) \(r.stderr)")
        #expect(
            r.stderr.contains(empty.path) && r.stderr.contains("holds no migrations") && r.stderr.contains("PAYRECON_SQL_DIR"),
            "\(r.stderr)")
        #expect(!r.stdout.contains("up to date"))
    }
}

/// `events list` shows what is failing now for a delivery that fails again after an earlier success (it showed the
/// old success), and how it ended for one that is done.
@Suite(.serialized) struct EventsListTests {
    @Test func aDeliveryFailingAgainShowsItsFailureNotItsOldSuccess() async throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute(
            """
            INSERT INTO deliveries (provider, dedupe_key, headers, body, status, attempts, outcome, last_error) VALUES
              ('pxp', 'k-done', '[]', '\\x7b7d', 'done', 1, 're-checked pxp order ORD-1', NULL),
              ('pxp', 'k-again', '[]', '\\x7b7d', 'pending', 2, 're-checked pxp order ORD-2', 'PXP answered 503 Service Unavailable')
            """)
        let r = try await PayreconProcess.launch(["events", "list"], databaseURL: db.url)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        let done = try #require(lines.first { $0.contains(" done ") })
        let again = try #require(lines.first { $0.contains(" pending ") })
        #expect(done.contains("re-checked pxp order ORD-1"))
        #expect(again.contains("failing: PXP answered 503") && !again.contains("re-checked pxp order ORD-2"), "\(again)")
    }
}

/// Re-importing an unchanged file says so (it reported "2 updated"), and leaves the orders' updated_at alone, so the
/// nightly window does not take them for changed; a changed order is counted as updated.
@Suite(.serialized) struct OrderReimportTests {
    @Test func anUnchangedFileIsReportedUnchanged() async throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        let header = "provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n"
        try (header + "paypal,R-1,,,PP-R-1,purchase,10.00,USD,fulfilled,0\npaypal,R-2,,,PP-R-2,purchase,20.00,USD,open,0\n")
            .write(to: file, atomically: true, encoding: .utf8)
        let first = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: db.url)
        #expect(first.status == 0 && first.stdout.contains("2 new, 0 updated, 0 unchanged"), "\(first.stdout) \(first.stderr)")
        let stamp = try db.count("SELECT (extract(epoch FROM max(updated_at)) * 1000000)::bigint FROM orders")
        let again = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: db.url)
        #expect(again.status == 0 && again.stdout.contains("0 new, 0 updated, 2 unchanged"), "\(again.stdout)")
        #expect(try db.count("SELECT (extract(epoch FROM max(updated_at)) * 1000000)::bigint FROM orders") == stamp)
        try (header + "paypal,R-1,,,PP-R-1,purchase,10.00,USD,fulfilled,0\npaypal,R-2,,,PP-R-2,purchase,20.00,USD,fulfilled,0\n")
            .write(to: file, atomically: true, encoding: .utf8)
        let changed = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: db.url)
        #expect(changed.status == 0 && changed.stdout.contains("0 new, 1 updated, 1 unchanged"), "\(changed.stdout)")
    }
}

/// The migrations a build needs are compiled in (`Migrator.shippedVersions`), equal to sql/; `migrate` refuses a
/// folder of an older payrecon instead of calling the database up to date (an upgrade that kept an old
/// PAYRECON_SQL_DIR did).
@Suite(.serialized) struct ShippedMigrationsTests {
    @Test func theCompiledListIsSql() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: PayreconProcess.packageRoot.appendingPathComponent("sql").path)
            .filter { $0.hasSuffix(".sql") }.map { String($0.dropLast(4)) }.sorted()
        #expect(Migrator.shippedVersions == files)
    }

    @Test func migrateRefusesAnOlderFolder() async throws {
        let old = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-old-sql-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: old, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: old) }
        let sql = PayreconProcess.packageRoot.appendingPathComponent("sql")
        for name in ["0001_deliveries.sql", "0002_orders.sql"] {
            try FileManager.default.copyItem(at: sql.appendingPathComponent(name), to: old.appendingPathComponent(name))
        }
        let r = try await PayreconProcess.launch(
            ["migrate"], databaseURL: TestDatabase.baseURL, environment: ["PAYRECON_SQL_DIR": old.path])
        #expect(r.status == 2 && r.stderr.contains("older payrecon") && r.stderr.contains("0003_reconciliation"), "\(r.stderr)")
    }

    /// A migration the database refuses names its file (before, only PostgreSQL's error: which of 30 files?), and
    /// nothing of it is applied.
    @Test func aMigrationThatFailsNamesItsFile() async throws {
        try await WorkerHarness.with { h in
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sql-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let shipped = PayreconProcess.packageRoot.appendingPathComponent("sql")
            for name in try FileManager.default.contentsOfDirectory(atPath: shipped.path) where name.hasSuffix(".sql") {
                try FileManager.default.copyItem(at: shipped.appendingPathComponent(name), to: dir.appendingPathComponent(name))
            }
            try "CREATE TABLE broken_half (n int);\nSELECT no_such_column FROM deliveries;\n".write(
                to: dir.appendingPathComponent("9999_broken.sql"), atomically: true, encoding: .utf8)
            let r = try await PayreconProcess.launch(["migrate"], databaseURL: h.database.url, environment: ["PAYRECON_SQL_DIR": dir.path])
            #expect(
                r.status == 2 && r.stderr.contains("migration 9999_broken.sql failed") && r.stderr.contains("no_such_column")
                    && r.stderr.contains("its transaction was rolled back"), "\(r.stderr)")
            #expect(try h.database.count("SELECT count(*) FROM pg_tables WHERE tablename = 'broken_half'") == 0)
        }
    }
}
