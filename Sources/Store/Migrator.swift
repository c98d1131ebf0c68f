import Foundation
import Postgres

/// Applies `sql/NNNN_name.sql` in order, each once, each in its own transaction, recorded in `schema_migrations`.
/// A transaction-scoped advisory lock keeps two processes from applying the same migration.
public enum Migrator {
    /// The migrations this build of payrecon needs, in order: compiled in, so whether a database is migrated never
    /// depends on which sql/ folder a host points at (an upgrade that kept an older PAYRECON_SQL_DIR read the old
    /// folder and called the database up to date). A test keeps it equal to sql/.
    public static let shippedVersions = [
        "0001_deliveries", "0002_orders", "0003_reconciliation", "0004_lookup_indexes", "0005_transaction_links",
        "0006_one_pending_action", "0007_events_accounted", "0008_order_transactions", "0009_transmission_ids",
        "0010_rejection_counts", "0011_active_discrepancy_indexes", "0012_order_transaction_refs",
        "0013_snapshot_open_findings", "0014_actions_in_doubt", "0015_webhook_material_and_transmissions",
        "0016_acknowledged_by", "0017_evidence", "0018_movements", "0019_settlement", "0020_backfill",
        "0021_open_discrepancies_function", "0022_learned_transactions", "0023_webhook_material_saved_at", "0024_billing_periods",
        "0025_settlement_account_rows", "0026_backfill_listed", "0027_settlement_accounts",
        "0028_discrepancy_evidence_follows_detail", "0029_settlement_evidence",
        "0030_actions_failed_index", "0031_console", "0032_console_reads", "0033_settlement_lines_unchecked_file"
    ]

    /// The transaction-scoped advisory lock migrations (and serve's grants) are applied under, one process at a time.
    static let advisoryLock: Int64 = 727_274

    /// A folder that lacks migrations this payrecon ships: an older payrecon's.
    public struct OlderMigrations: Error, CustomStringConvertible {
        public let directory: String
        public let missing: [String]
        public var description: String {
            "\(directory) lacks \(missing.count) migration(s) this payrecon ships (first \(missing[0])): it is an older payrecon's "
                + "sql/ folder. Point PAYRECON_SQL_DIR at this one's (scripts/install puts it in PREFIX/share/payrecon/sql)"
        }
    }

    /// A migration the database refused: its file, those applied before it in this run, and PostgreSQL's error. Nothing
    /// of it was applied (each runs in a transaction of its own).
    public struct Failed: Error, CustomStringConvertible {
        public var file: String
        public var applied: [String]
        public var error: PostgresError
        public var description: String {
            "migration \(file) failed: \(error); its transaction was rolled back"
                + (applied.isEmpty ? "" : " (applied before it: \(applied.joined(separator: ", ")))")
        }
    }

    public struct Migration: Sendable, Equatable {
        public var version: String  // "0001_deliveries"
        public var sql: String
        public init(version: String, sql: String) { self.version = version; self.sql = sql }
    }

    /// Where the migrations are: `PAYRECON_SQL_DIR`, else `sql/` in the checkout the executable was built in
    /// (walking up from it), else `share/payrecon/sql` beside the installed executable's `bin/` (scripts/install),
    /// else `./sql`, else `/usr/share/payrecon/sql`.
    public static func locateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let dir = environment["PAYRECON_SQL_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        var candidates: [URL] = []
        var url = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent()
        let installed = url.deletingLastPathComponent().appendingPathComponent("share/payrecon/sql")
        for _ in 0..<6 { candidates.append(url.appendingPathComponent("sql")); url.deleteLastPathComponent() }
        candidates.append(installed)
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("sql"))
        candidates.append(URL(fileURLWithPath: "/usr/share/payrecon/sql"))
        return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("0001_deliveries.sql").path) }
    }

    /// A folder without the migrations (empty, or another one): `migrate` must not say "up to date" over it.
    public struct NoMigrations: Error, CustomStringConvertible {
        public let directory: String
        public var description: String {
            "\(directory) holds no migrations (NNNN_name.sql, starting with 0001_deliveries.sql): point PAYRECON_SQL_DIR at the "
                + "sql/ folder payrecon ships (scripts/install puts it in PREFIX/share/payrecon/sql)"
        }
    }

    /// The migrations in `directory`, in order; throws `NoMigrations` when it holds none, or not the first.
    public static func load(from directory: URL) throws -> [Migration] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".sql") && $0.first?.isNumber == true }.sorted()
        guard names.first == "0001_deliveries.sql" else { throw NoMigrations(directory: directory.path) }
        let migrations = try names.map { name in
            Migration(
                version: String(name.dropLast(4)), sql: try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
        let present = Set(migrations.map(\.version))
        let missing = shippedVersions.filter { !present.contains($0) }
        guard missing.isEmpty else { throw OlderMigrations(directory: directory.path, missing: missing) }
        return migrations
    }

    /// What the database holds against `migrations` (`payrecon doctor`): read only, no lock, nothing created.
    public struct Status: Sendable, Equatable {
        /// In `migrations`, not applied yet (in order).
        public var pending: [String]
        /// Applied, but not in `migrations`: the database was migrated by a newer payrecon.
        public var unknown: [String]
        public var applied: Int
    }

    /// How far the database is from `versions` (`shippedVersions`, or those of the migrations `load` read).
    public static func status(_ versions: [String], on conn: PostgresConnection) throws -> Status {
        let exists = try conn.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").first?.bool("present") ?? false
        let done = exists ? Set(try conn.query("SELECT version FROM schema_migrations").map { try $0.string("version") }) : []
        let known = Set(versions)
        return Status(
            pending: versions.filter { !done.contains($0) }, unknown: done.subtracting(known).sorted(),
            applied: done.intersection(known).count)
    }

    /// Applies what is missing; returns the versions applied now.
    ///
    /// Each migration runs in its own transaction under a transaction-scoped advisory lock (taken again by each),
    /// and checks inside it whether it was applied meanwhile: two processes migrating at once apply each migration
    /// once, and nothing is held on the session, so `migrate` works through PgBouncer in transaction mode too
    /// (a session lock and its unlock could land on different server connections there).
    /// Each migration waits at most `lockTimeoutMilliseconds` (1 s) for each table lock (`SET LOCAL lock_timeout`):
    /// one queued behind a long reader queues every receiver's commit behind itself (a one-line migration behind a
    /// 15 s reader made serve answer 503 for 14 s), so it gives up within a second — well inside the receivers'
    /// PAYRECON_COMMIT_TIMEOUT — and is tried again after 1, 2, 4 and 8 s before `migrate` fails. (A lock it holds is
    /// held until it commits: a migration that rewrites a large table still holds that table meanwhile.)
    @discardableResult
    public static func migrate(
        _ migrations: [Migration], on conn: PostgresConnection, lockTimeoutMilliseconds: Int = 1000,
        attempts: Int = 5
    ) throws -> [String] {
        try conn.transaction { tx in
            _ = try tx.query("SELECT pg_advisory_xact_lock(\(unescaped: advisoryLock))")
            _ = try tx.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """)
        }
        let done = Set(try conn.query("SELECT version FROM schema_migrations").map { try $0.string("version") })
        var applied: [String] = []
        for m in migrations where !done.contains(m.version) {
            // Behind a long query the lock wait times out (55P03) and nothing of the migration is applied: try again a
            // few times, waiting longer each time, before giving up.
            var attempt = 1
            while true {
                do {
                    if try apply(m, on: conn, lockTimeoutMilliseconds: lockTimeoutMilliseconds) { applied.append(m.version) }; break
                } catch let error as PostgresError where error.sqlState == "55P03" && attempt < attempts {
                    Thread.sleep(forTimeInterval: Double(1 << (attempt - 1)))
                    attempt += 1
                } catch let error as PostgresError where error.sqlState != "55P03" {
                    throw Failed(file: m.version + ".sql", applied: applied, error: error)
                }
            }
        }
        return applied
    }

    /// Applies `m` in a transaction of its own unless it was applied meanwhile; whether it ran.
    static func apply(_ m: Migration, on conn: PostgresConnection, lockTimeoutMilliseconds: Int) throws -> Bool {
        try conn.transaction { tx -> Bool in
            _ = try tx.query("SELECT pg_advisory_xact_lock(\(unescaped: advisoryLock))")
            guard try tx.query("SELECT 1 FROM schema_migrations WHERE version = \(.text(m.version))").isEmpty else { return false }
            _ = try tx.execute("SET LOCAL lock_timeout = '\(unescaped: max(1, lockTimeoutMilliseconds))ms'")
            try tx.executeScript(m.sql)
            _ = try tx.execute("INSERT INTO schema_migrations (version) VALUES (\(.text(m.version)))")
            return true
        }
    }
}
