import Foundation
import Postgres

/// Applies `sql/NNNN_name.sql` in order, each once, each in its own transaction, recorded in `schema_migrations`.
/// A transaction-scoped advisory lock keeps two processes from applying the same migration.
public enum Migrator {
    public struct Migration: Sendable, Equatable {
        public var version: String   // "0001_deliveries"
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
        return try names.map { name in
            Migration(version: String(name.dropLast(4)), sql: try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
    }

    /// What the database holds against `migrations` (`payrecon doctor`): read only, no lock, nothing created.
    public struct Status: Sendable, Equatable {
        /// In `migrations`, not applied yet (in order).
        public var pending: [String]
        /// Applied, but not in `migrations`: the database was migrated by a newer payrecon.
        public var unknown: [String]
        public var applied: Int
    }

    public static func status(_ migrations: [Migration], on conn: PostgresConnection) throws -> Status {
        let exists = try conn.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").first?.bool("present") ?? false
        let done = exists ? Set(try conn.query("SELECT version FROM schema_migrations").map { try $0.string("version") }) : []
        let known = Set(migrations.map(\.version))
        return Status(pending: migrations.map(\.version).filter { !done.contains($0) }, unknown: done.subtracting(known).sorted(),
                      applied: done.intersection(known).count)
    }

    /// Applies what is missing; returns the versions applied now.
    ///
    /// Each migration runs in its own transaction under a transaction-scoped advisory lock (taken again by each),
    /// and checks inside it whether it was applied meanwhile: two processes migrating at once apply each migration
    /// once, and nothing is held on the session, so `migrate` works through PgBouncer in transaction mode too
    /// (a session lock and its unlock could land on different server connections there).
    /// Each migration waits at most `lockTimeoutMilliseconds` for a table lock (`SET LOCAL lock_timeout`): one queued
    /// behind a long reader would otherwise queue every receiver's commit behind itself (a one-line migration behind a
    /// 15 s reader made serve answer 503 for 14 s). It then fails, and is retried by running `migrate` again.
    @discardableResult
    public static func migrate(_ migrations: [Migration], on conn: PostgresConnection, lockTimeoutMilliseconds: Int = 5000) throws -> [String] {
        try conn.transaction { tx in
            _ = try tx.query("SELECT pg_advisory_xact_lock(727274)")
            _ = try tx.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """)
        }
        let done = Set(try conn.query("SELECT version FROM schema_migrations").map { try $0.string("version") })
        var applied: [String] = []
        for m in migrations where !done.contains(m.version) {
            let ran = try conn.transaction { tx -> Bool in
                _ = try tx.query("SELECT pg_advisory_xact_lock(727274)")
                guard try tx.query("SELECT 1 FROM schema_migrations WHERE version = $1", [.text(m.version)]).isEmpty else { return false }
                _ = try tx.execute("SET LOCAL lock_timeout = '\(max(1, lockTimeoutMilliseconds))ms'")
                try tx.executeScript(m.sql)
                _ = try tx.execute("INSERT INTO schema_migrations (version) VALUES ($1)", [.text(m.version)])
                return true
            }
            if ran { applied.append(m.version) }
        }
        return applied
    }
}
