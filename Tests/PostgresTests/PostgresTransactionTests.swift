@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresTransactionTests {
    private func setUp() throws -> (PostgresConnection, String) {
        let conn = try connect()
        let table = uniqueName("tx")
        try conn.execute("CREATE TEMP TABLE \(table) (id bigint PRIMARY KEY)")
        return (conn, table)
    }

    private func count(_ conn: PostgresConnection, _ table: String) throws -> Int64 {
        try conn.query("SELECT count(*) AS n FROM \(table)")[0].int64("n")
    }

    @Test func commitsAndReturnsTheBodysValue() throws {
        let (conn, table) = try setUp()
        let inserted = try conn.transaction { tx in
            #expect(tx.inTransaction)
            return try tx.execute("INSERT INTO \(table) VALUES ($1), ($2)", [.int64(1), .int64(2)])
        }
        #expect(inserted == 2)
        #expect(!conn.inTransaction)
        #expect(try count(conn, table) == 2)
    }

    @Test func rollsBackWhenTheBodyThrows() throws {
        let (conn, table) = try setUp()
        #expect(throws: TestFailure(message: "boom")) {
            try conn.transaction { tx in
                try tx.execute("INSERT INTO \(table) VALUES ($1)", [.int64(1)])
                throw TestFailure(message: "boom")
            }
        }
        #expect(!conn.inTransaction)
        #expect(try count(conn, table) == 0)
    }

    @Test func rollsBackWhenAStatementFails() throws {
        let (conn, table) = try setUp()
        let error = postgresError {
            try conn.transaction { tx in
                try tx.execute("INSERT INTO \(table) VALUES (1)")
                try tx.execute("INSERT INTO \(table) VALUES (1)")
            }
        }
        #expect(error?.isUniqueViolation == true)
        #expect(!conn.inTransaction)
        #expect(try count(conn, table) == 0)
    }

    @Test func nestedTransactionUsesASavepoint() throws {
        let (conn, table) = try setUp()
        try conn.transaction { tx in
            try tx.execute("INSERT INTO \(table) VALUES (1)")
            #expect(throws: TestFailure.self) {
                try tx.transaction { inner in
                    try inner.execute("INSERT INTO \(table) VALUES (2)")
                    throw TestFailure(message: "inner")
                }
            }
            try tx.transaction { inner in try inner.execute("INSERT INTO \(table) VALUES (3)") }
        }
        #expect(try conn.query("SELECT id FROM \(table) ORDER BY id").map { try $0.int64("id") } == [1, 3])
    }

    @Test func aSwallowedErrorMakesCommitThrow() throws {
        let (conn, table) = try setUp()
        let error = postgresError {
            try conn.transaction { tx in
                try tx.execute("INSERT INTO \(table) VALUES (1)")
                _ = try? tx.query("SELECT 1 / 0")
            }
        }
        #expect(error?.description.contains("COMMIT rolled back") == true)
        #expect(!conn.inTransaction)
        #expect(try count(conn, table) == 0)
    }

    @Test func isolationLevelIsApplied() throws {
        let conn = try connect()
        let level = try conn.transaction(isolation: .serializable) { tx in
            try tx.query("SHOW transaction_isolation")[0].string("transaction_isolation")
        }
        #expect(level == "serializable")
        #expect(try conn.query("SHOW transaction_isolation")[0].string("transaction_isolation") == "read committed")
    }

    @Test func refusesToStartInsideAnAbortedTransaction() throws {
        let conn = try connect()
        try conn.execute("BEGIN")
        _ = try? conn.query("SELECT 1 / 0")
        let error = postgresError { try conn.transaction { _ in } }
        #expect(error?.description.contains("aborted") == true)
        try conn.execute("ROLLBACK")
    }
}
