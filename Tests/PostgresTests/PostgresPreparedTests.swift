import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresPreparedTests {
    @Test func preparesOnceAndRunsManyTimes() throws {
        let conn = try connect()
        try conn.prepare(name: "add", sql: "SELECT $1::bigint + $2::bigint AS sum")
        try conn.prepare(name: "add", sql: "SELECT $1::bigint + $2::bigint AS sum")  // same SQL again: no-op
        for (a, b) in [(1, 2), (-5, 5), (Int64.max - 1, 1)] as [(Int64, Int64)] {
            #expect(try conn.queryPrepared(name: "add", params: [.int64(a), .int64(b)])[0].int64("sum") == a + b)
        }
        let count = try conn.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE name = 'add'")[0].int64("n")
        #expect(count == 1)
        #expect(conn.preparedStatementNames == ["add"])
    }

    @Test func byteaAndNullParametersInPreparedStatements() throws {
        let conn = try connect()
        try conn.prepare(name: "echo", sql: "SELECT $1::bytea AS b, $2::text AS t")
        let bytes = (0..<256).map { UInt8($0) }
        let row = try conn.queryPrepared(name: "echo", params: [.bytea(bytes), .null])[0]
        #expect(try row.bytes("b") == bytes)
        #expect(try row.optionalString("t") == nil)
    }

    @Test func preparingANameWithNewSQLReplacesIt() throws {
        let conn = try connect()
        try conn.prepare(name: "value", sql: "SELECT 1 AS v")
        try conn.prepare(name: "value", sql: "SELECT 2 AS v")
        #expect(try conn.queryPrepared(name: "value")[0].int32("v") == 2)
    }

    @Test func unknownNameAndBadSQLAreClearErrors() throws {
        let conn = try connect()
        #expect(postgresError { try conn.queryPrepared(name: "nope") }?.description.contains("no statement prepared as \"nope\"") == true)
        #expect(postgresError { try conn.prepare(name: "broken", sql: "SELEC 1") }?.sqlState == "42601")
        #expect(postgresError { try conn.queryPrepared(name: "broken") }?.description.contains("no statement prepared") == true)
        #expect(postgresError { try conn.queryPrepared(name: "nope") }?.isConnectionFailure == false)
    }

    @Test func statementsArePreparedAgainAfterReset() throws {
        let conn = try connect()
        try conn.prepare(name: "pid", sql: "SELECT pg_backend_pid() AS pid")
        let before = try conn.queryPrepared(name: "pid")[0].int32("pid")
        try conn.reset()
        let after = try conn.queryPrepared(name: "pid")[0].int32("pid")
        #expect(before != after)
        #expect(after == conn.backendPID)
        #expect(try conn.query("SELECT current_setting('TimeZone') AS tz")[0].string("tz") == "UTC")
    }

    @Test func afterTheBackendIsKilledTheNextCallFailsAndResetRecovers() throws {
        let conn = try connect()
        try conn.prepare(name: "one", sql: "SELECT 1 AS one")
        try terminateBackend(conn.backendPID)
        let error = postgresError { try conn.queryPrepared(name: "one") }
        #expect(error?.isConnectionFailure == true)
        #expect(!conn.isOpen)
        try conn.reset()
        #expect(try conn.queryPrepared(name: "one")[0].int32("one") == 1)
    }
}
