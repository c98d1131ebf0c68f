import PayreconTesting
import Foundation
@_spi(Positional) import Postgres
import Store

/// A throwaway schema in the test database (DATABASE_URL, set by scripts/test), migrated, dropped at the end.
/// Each test gets its own, so tests run in parallel without seeing each other's rows.
struct TestDatabase: Sendable {
    static let baseURL = ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "postgresql://postgres@127.0.0.1:54329/payrecon_test"

    let schema: String
    let url: String
    var server: String = TestDatabase.baseURL

    /// A migrated schema on `baseURL`'s server (the test database unless a test brings its own cluster).
    static func create(baseURL: String = TestDatabase.baseURL) throws -> TestDatabase {
        let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = try PostgresConnection(conninfo: baseURL)
        defer { admin.close() }
        _ = try admin.execute("CREATE SCHEMA \(schema)")
        let url = withSearchPath(baseURL, schema)
        let conn = try PostgresConnection(conninfo: url)
        defer { conn.close() }
        guard let dir = Migrator.locateDirectory() else { throw TestSetupError("sql/ not found") }
        try Migrator.migrate(try Migrator.load(from: dir), on: conn)
        return TestDatabase(schema: schema, url: url, server: baseURL)
    }

    func connect() throws -> PostgresConnection { try PostgresConnection(conninfo: url) }

    func drop() {
        guard let admin = try? PostgresConnection(conninfo: server) else { return }
        _ = try? admin.execute("DROP SCHEMA \(schema) CASCADE")
        admin.close()
    }

    /// Adds `options=-csearch_path=<schema>` to a URI or key=value conninfo.
    static func withSearchPath(_ base: String, _ schema: String) -> String {
        if base.hasPrefix("postgres://") || base.hasPrefix("postgresql://") {
            return base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        }
        return base + " options='-csearch_path=\(schema)'"
    }

    /// A count from SQL (tests only).
    func count(_ sql: String, _ params: [PostgresValue] = []) throws -> Int64 {
        let conn = try connect(); defer { conn.close() }
        let rows = try conn.query(sql, params)
        return try rows.first!.int64(rows.columns[0])
    }

    /// One text value from SQL (tests only).
    func string(_ sql: String, _ params: [PostgresValue] = []) throws -> String {
        let conn = try connect(); defer { conn.close() }
        let rows = try conn.query(sql, params)
        return try rows.first!.string(rows.columns[0])
    }
}
