@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresPipelineTests {
    private func setUp() throws -> (PostgresConnection, String) {
        let conn = try connect()
        let table = uniqueName("pipe")
        try conn.execute("CREATE TEMP TABLE \(table) (id bigint PRIMARY KEY, body bytea)")
        return (conn, table)
    }

    private func ids(_ conn: PostgresConnection, _ table: String) throws -> [Int64] {
        try conn.query("SELECT id FROM \(table) ORDER BY id").map { try $0.int64("id") }
    }

    @Test func groupCommitOfFiftyInserts() throws {
        let (conn, table) = try setUp()
        let inserts = (1...50).map {
            PostgresStatement("INSERT INTO \(table) (id, body) VALUES ($1, $2)", [.int64(Int64($0)), .bytea([0, UInt8($0)])])
        }
        let results = try conn.pipeline([PostgresStatement("BEGIN")] + inserts + [PostgresStatement("COMMIT")])
        #expect(results.count == 52)
        for (index, result) in results.enumerated() {
            guard case .success(let rows) = result else { Issue.record("statement \(index) failed: \(result)"); continue }
            if (1...50).contains(index) { #expect(rows.affectedRows == 1) }
        }
        if case .success(let rows) = results[51] { #expect(rows.commandTag == "COMMIT") }
        #expect(try ids(conn, table) == Array(1...50))
        #expect(!conn.inTransaction)
        #expect(try conn.query("SELECT body FROM \(table) WHERE id = 7")[0].bytes("body") == [0, 7])
    }

    @Test func aFailingStatementCommitsNothingAndLeavesTheConnectionUsable() throws {
        let (conn, table) = try setUp()
        let results = try conn.pipeline([
            PostgresStatement("BEGIN"),
            PostgresStatement("INSERT INTO \(table) (id) VALUES ($1)", [.int64(1)]),
            PostgresStatement("INSERT INTO \(table) (id) VALUES ($1)", [.int64(2)]),
            PostgresStatement("INSERT INTO \(table) (id) VALUES ($1)", [.int64(1)]),
            PostgresStatement("INSERT INTO \(table) (id) VALUES ($1)", [.int64(3)]),
            PostgresStatement("COMMIT")
        ])
        #expect(results.count == 6)
        for index in 0...2 {
            if case .failure(let error) = results[index] { Issue.record("statement \(index) failed: \(error)") }
        }
        guard case .failure(let failure) = results[3] else { Issue.record("duplicate insert succeeded"); return }
        #expect(failure.isUniqueViolation)
        for index in 4...5 {
            guard case .failure(let error) = results[index] else { Issue.record("statement \(index) ran"); continue }
            #expect(error == .pipelineAborted(failedIndex: 3))
        }
        #expect(!conn.inTransaction)
        #expect(try ids(conn, table) == [])
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
        // A second pipeline on the same connection works.
        let again = try conn.pipeline([
            PostgresStatement("INSERT INTO \(table) (id) VALUES (9)"), PostgresStatement("SELECT count(*) AS n FROM \(table)")
        ])
        #expect(try again[1].get()[0].int64("n") == 1)
    }

    @Test func withoutBeginThePipelineIsOneImplicitTransaction() throws {
        let (conn, table) = try setUp()
        let results = try conn.pipeline([
            PostgresStatement("INSERT INTO \(table) (id) VALUES (1)"),
            PostgresStatement("INSERT INTO \(table) (id) VALUES (2)"),
            PostgresStatement("INSERT INTO \(table) (id) VALUES (1)")
        ])
        #expect((try? results[2].get()) == nil)
        #expect(try ids(conn, table) == [])
        #expect(!conn.inTransaction)
    }

    @Test func returnsRows() throws {
        let (conn, table) = try setUp()
        let insert = "INSERT INTO \(table) (id) VALUES ($1) RETURNING id * 10 AS tenfold"
        let results = try conn.pipeline([
            PostgresStatement(insert, [.int64(4)]),
            PostgresStatement(insert, [.int64(5)]),
            PostgresStatement("SELECT id FROM \(table) ORDER BY id"),
            PostgresStatement("")
        ])
        #expect(try results[0].get()[0].int64("tenfold") == 40)
        #expect(try results[2].get().map { try $0.int64("id") } == [4, 5])
        #expect(try results[3].get().rowCount == 0)
    }

    @Test func inputErrorsThrowBeforeAnythingIsSent() throws {
        let (conn, table) = try setUp()
        #expect(try conn.pipeline([SQL]()).isEmpty)
        let error = postgresError {
            _ = try conn.pipeline([
                PostgresStatement("INSERT INTO \(table) (id) VALUES (1)"), PostgresStatement("SELECT $1", [.text("\u{0}")])
            ])
        }
        #expect(error?.description.contains("NUL") == true)
        #expect(try ids(conn, table) == [])
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func aLongPipelineDoesNotDeadlock() throws {
        let (conn, table) = try setUp()
        let body = [UInt8](repeating: 0xAB, count: 1024)  // 3 MB each way: far more than the socket buffers
        let inserts = (1...3000).map {
            PostgresStatement("INSERT INTO \(table) (id, body) VALUES ($1, $2) RETURNING body", [.int64(Int64($0)), .bytea(body)])
        }
        let results = try conn.pipeline(inserts)
        #expect(results.count == 3000)
        #expect(try results[2999].get()[0].bytes("body") == body)
        #expect(try conn.query("SELECT count(*) AS n FROM \(table)")[0].int64("n") == 3000)
    }

    @Test func aBrokenConnectionThrowsAndResetRecovers() throws {
        let conn = try connect()
        try terminateBackend(conn.backendPID)
        let error = postgresError {
            _ = try conn.pipeline([PostgresStatement("BEGIN"), PostgresStatement("SELECT 1"), PostgresStatement("COMMIT")])
        }
        #expect(error?.isConnectionFailure == true)
        try conn.reset()
        let results = try conn.pipeline([PostgresStatement("SELECT 7 AS n")])
        #expect(try results[0].get()[0].int32("n") == 7)
    }

    @Test func insideATransactionAFailureFailsTheCommit() throws {
        let (conn, table) = try setUp()
        let error = postgresError {
            try conn.transaction { tx in
                let results = try tx.pipeline([
                    PostgresStatement("INSERT INTO \(table) (id) VALUES (1)"), PostgresStatement("INSERT INTO \(table) (id) VALUES (1)")
                ])
                #expect((try? results[1].get()) == nil)
            }
        }
        #expect(error != nil)
        #expect(try ids(conn, table) == [])
        #expect(!conn.inTransaction)
    }
}
