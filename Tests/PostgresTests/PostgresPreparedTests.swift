@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

/// Statements a pooled session runs often are parsed once and run by name: what is prepared, when, and what happens
/// when the server can no longer use a statement it holds.
@Suite struct PreparedStatementsRulesTests {
    @Test(arguments: [
        ("SELECT 1", true), ("  select $1::int", true), ("\n\tWITH x AS (SELECT 1) SELECT * FROM x", true),
        ("INSERT INTO t VALUES ($1)", true), ("update t SET a = 1", true), ("DELETE FROM t", true), ("VALUES (1)", true),
        ("-- the order's row\nSELECT * FROM orders", true), ("-- only a comment", false),
        ("BEGIN", false), ("COMMIT", false), ("SET LOCAL lock_timeout = '1s'", false), ("LISTEN x", false),
        ("CREATE TABLE t (a int)", false), ("", false), ("SELECTED", false), ("copy t FROM STDIN", false)
    ])
    func onlyWhatPostgreSQLPlansIsPrepared(sql: String, plannable: Bool) {
        #expect(PreparedStatements.isPlannable(sql) == plannable)
    }

    @Test func aStatementIsPreparedTheSecondTimeItIsSeenAndRunByNameAfter() {
        var cache = PreparedStatements(enabled: true)
        let key = PreparedStatements.Key(sql: "SELECT $1::int", types: [23])
        #expect(cache.lookup(key) == .unnamed)
        guard case .prepare(let name) = cache.lookup(key) else { Issue.record("not prepared when seen twice"); return }
        cache.remember(key, as: name)
        #expect(cache.lookup(key) == .prepared(name))
        // The same text with other parameter types is another statement.
        let other = PreparedStatements.Key(sql: "SELECT $1::int", types: [0])
        #expect(cache.lookup(other) == .unnamed)
        // Forgotten (its plan could not serve a changed table): seen twice again before it is prepared again, by a new name.
        cache.forget(key)
        #expect(cache.lookup(key) == .unnamed)
        guard case .prepare(let again) = cache.lookup(key) else { Issue.record("not prepared again"); return }
        #expect(again != name)
    }

    @Test func offItPreparesNothing() {
        var cache = PreparedStatements(enabled: false)
        let key = PreparedStatements.Key(sql: "SELECT 1", types: [])
        for _ in 0..<3 { #expect(cache.lookup(key) == .unnamed) }
    }

    @Test func aSessionHoldsAtMostTheLimit() {
        var cache = PreparedStatements(enabled: true)
        for i in 0..<PreparedStatements.limit {
            let key = PreparedStatements.Key(sql: "SELECT \(i)", types: [])
            _ = cache.lookup(key)
            guard case .prepare(let name) = cache.lookup(key) else { Issue.record("statement \(i) not prepared"); return }
            cache.remember(key, as: name)
        }
        let past = PreparedStatements.Key(sql: "SELECT 'past'", types: [])
        for _ in 0..<3 { #expect(cache.lookup(past) == .unnamed) }
        #expect(cache.names.count == PreparedStatements.limit)
    }

    @Test(arguments: [
        ("0A000", "cached plan must not change result type", true), ("0A000", "unsupported feature", false),
        ("26000", "prepared statement \"payrecon_1\" does not exist", true), ("23505", "duplicate key", false)
    ])
    func whichErrorsForgetTheName(sqlState: String, message: String, forgets: Bool) {
        #expect(PreparedStatements.invalidates(.server(sqlState: sqlState, message: message, detail: nil)) == forgets)
        #expect(!PreparedStatements.invalidates(.connection("lost")))
    }

    /// A session whose names keep going stale stops preparing, and the names it forgot wait to be deallocated.
    @Test func aSessionThatKeepsForgettingStopsPreparing() {
        var cache = PreparedStatements(enabled: true)
        for i in 0..<PreparedStatements.forgetLimit {
            let key = PreparedStatements.Key(sql: "SELECT \(i)", types: [])
            _ = cache.lookup(key)
            guard case .prepare(let name) = cache.lookup(key) else { Issue.record("not prepared"); return }
            #expect(name.hasPrefix("payrecon_") && name.split(separator: "_").count == 3)
            cache.remember(key, as: name)
            cache.forget(key)
        }
        #expect(cache.stale.count == PreparedStatements.forgetLimit)
        #expect(!cache.enabled)
        #expect(cache.lookup(PreparedStatements.Key(sql: "SELECT 'more'", types: [])) == .unnamed)
    }
}

@Suite struct PostgresPreparedTests {
    func held(_ conn: PostgresConnection) throws -> Int64 {
        try conn.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'payrecon\\_%'")[0].int64("n")
    }

    @Test func aPoolSessionReachingPostgreSQLPreparesWhatItRunsTwice() throws {
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        defer { pool.close() }
        try pool.withConnection { conn throws in
            #expect(conn.preparesStatements)
            for i in 1...4 {
                #expect(try conn.query("SELECT $1::int + 1 AS n", [.int32(Int32(i))])[0].int32("n") == Int32(i) + 1)
            }
            #expect(conn.preparedCount == 1)
            #expect(try held(conn) == 1)
        }
        // A connection of one's own prepares nothing unless told to.
        let own = try connect(); defer { own.close() }
        #expect(!own.preparesStatements)
        for _ in 0..<3 { _ = try own.query("SELECT $1::int AS n", [.int32(1)]) }
        #expect(try held(own) == 0)
        // A pool told not to prepares nothing either.
        let plain = PostgresPool(conninfo: databaseURL, size: 1, prepareStatements: false)
        defer { plain.close() }
        try plain.withConnection { conn throws in
            #expect(!conn.preparesStatements)
            for _ in 0..<3 { _ = try conn.query("SELECT $1::int AS n", [.int32(1)]) }
            #expect(try held(conn) == 0)
        }
    }

    /// A table changed under a prepared `SELECT *` (a migration while the worker runs): the server refuses the old
    /// plan. Outside a transaction the statement is run again as written and answers with the new columns; inside one
    /// the caller gets the error (its transaction is aborted), and the next call is prepared afresh.
    @Test func aTableChangedUnderAPreparedStatementIsReadAsItIsNow() throws {
        let table = uniqueName("prepared")
        let admin = try connect(); defer { admin.close() }
        try admin.execute("CREATE TABLE \(table) (a int)")
        try admin.execute("INSERT INTO \(table) VALUES (1)")
        defer { _ = try? admin.execute("DROP TABLE IF EXISTS \(table)") }
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        defer { pool.close() }
        try pool.withConnection { conn throws in
            let sql = "SELECT * FROM \(table) WHERE a = $1"
            for _ in 0..<3 { #expect(try conn.query(sql, [.int32(1)]).count == 1) }
            #expect(conn.preparedCount == 1)
            try admin.execute("ALTER TABLE \(table) ADD COLUMN b int DEFAULT 7")
            let rows = try conn.query(sql, [.int32(1)])
            #expect(try rows[0].int32("b") == 7)

            for _ in 0..<2 { _ = try conn.query(sql, [.int32(1)]) }
            #expect(conn.preparedCount == 1)
            try admin.execute("ALTER TABLE \(table) ADD COLUMN c int DEFAULT 8")
            let error = postgresError { try conn.transaction { tx in _ = try tx.query(sql, [.int32(1)]) } }
            #expect(error?.sqlState == "0A000")
            #expect(conn.preparedCount == 0)
            #expect(try conn.query(sql, [.int32(1)])[0].int32("c") == 8)
        }
    }

    /// A name forgotten (its plan refused) is deallocated once the session is idle again: the server does not keep it.
    @Test func aForgottenNameIsDeallocated() throws {
        let table = uniqueName("prepared_stale")
        let admin = try connect(); defer { admin.close() }
        try admin.execute("CREATE TABLE \(table) (a int)")
        defer { _ = try? admin.execute("DROP TABLE IF EXISTS \(table)") }
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        defer { pool.close() }
        try pool.withConnection { conn throws in
            let sql = "SELECT * FROM \(table)"
            for _ in 0..<3 { _ = try conn.query(sql) }
            #expect(try held(conn) == 1)
            try admin.execute("ALTER TABLE \(table) ADD COLUMN b int")
            _ = try conn.query(sql)  // refused by name, run unnamed, its name forgotten
            _ = try conn.query("SELECT $1::int AS n", [.int32(1)])
            let left = try conn.query("SELECT statement FROM pg_prepared_statements").map { try $0.string("statement") }
            #expect(left.isEmpty, "the forgotten name was deallocated: \(left)")
        }
    }

    @Test func aPipelineRunsPreparedStatementsAndStillNamesTheOneThatFailed() throws {
        let table = uniqueName("prepared_pipe")
        let admin = try connect(); defer { admin.close() }
        try admin.execute("CREATE TABLE \(table) (id int PRIMARY KEY)")
        defer { _ = try? admin.execute("DROP TABLE IF EXISTS \(table)") }
        let pool = PostgresPool(conninfo: databaseURL, size: 1)
        defer { pool.close() }
        try pool.withConnection { conn throws in
            func batch(_ ids: [Int32]) throws -> [Result<PostgresRows, PostgresError>] {
                try conn.pipeline(
                    [PostgresStatement("BEGIN")]
                        + ids.map { PostgresStatement("INSERT INTO \(table) (id) VALUES ($1)", [.int32($0)]) }
                        + [PostgresStatement("SELECT count(*) AS n FROM \(table)"), PostgresStatement("COMMIT")])
            }
            for round in Int32(0)..<3 {
                let results = try batch([round * 2, round * 2 + 1])
                #expect(try results[3].get()[0].int64("n") == Int64(round * 2 + 2))
            }
            // The INSERT, sent twice in each pipeline, was parsed once; the SELECT once.
            #expect(conn.preparedCount == 2)
            #expect(try held(conn) == 2)
            // A duplicate key in the middle: that statement's own error, the rest not run, nothing kept.
            let results = try batch([100, 0, 101])
            guard case .failure(let failure) = results[2] else { Issue.record("the duplicate was not refused"); return }
            #expect(failure.isUniqueViolation)
            guard case .failure(.pipelineAborted(let index)) = results[3] else { Issue.record("the statement after ran"); return }
            #expect(index == 2)
            #expect(try admin.query("SELECT count(*) AS n FROM \(table)")[0].int64("n") == 6)
            #expect(try conn.query("SELECT count(*) AS n FROM \(table) WHERE id >= $1", [.int32(0)])[0].int64("n") == 6)
        }
    }
}
