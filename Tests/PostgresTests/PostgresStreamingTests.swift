@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresStreamingTests {
    @Test func streamsOneHundredThousandRowsInConstantMemory() throws {
        let conn = try connect()
        var count = 0
        var sum: Int64 = 0
        var baseline = 0
        var peak = 0
        // ~2 KB per row: materialised, 100k rows would take over 200 MB. Other tests run in parallel in this
        // process, so the bound leaves room for their allocations.
        try conn.forEachRow("SELECT g AS n, repeat('x', 2000) AS pad FROM generate_series(1, $1) AS g", [.int64(100_000)]) { row in
            count += 1
            sum += try row.int64("n")
            if count == 1 {
                #expect(try row.string("pad").count == 2000)
                baseline = residentBytes()
            }
            if count % 10_000 == 0 { peak = max(peak, residentBytes()) }
        }
        #expect(count == 100_000)
        #expect(sum == 100_000 * 100_001 / 2)
        #expect(peak - baseline < 96 * 1024 * 1024, "resident memory grew by \(peak - baseline) bytes while streaming")
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func throwingFromTheBodyCancelsTheQuery() throws {
        let conn = try connect()
        var seen = 0
        let start = ContinuousClock.now
        #expect(throws: TestFailure(message: "enough")) {
            // Streams from the first row on (generate_series in the select list is not materialised).
            try conn.forEachRow("SELECT generate_series(1, 200000000) AS n") { _ in
                seen += 1
                if seen == 1000 { throw TestFailure(message: "enough") }
            }
        }
        #expect(seen == 1000)
        #expect(start.duration(to: .now) < .seconds(30))
        #expect(try conn.query("SELECT 2 AS two")[0].int32("two") == 2)
    }

    @Test func aServerErrorMidStreamIsThrownAfterTheRowsBeforeIt() throws {
        let conn = try connect()
        var seen = 0
        let error = postgresError {
            try conn.forEachRow("SELECT 1 / (5000 - g) AS x FROM generate_series(1, 10000) AS g") { _ in seen += 1 }
        }
        #expect(error?.sqlState == "22012")
        #expect(seen == 4999)
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func emptyResultsAndCommandsCallTheBodyNever() throws {
        let conn = try connect()
        var calls = 0
        try conn.forEachRow("SELECT 1 AS n WHERE false") { _ in calls += 1 }
        try conn.forEachRow("SET application_name TO 'stream'") { _ in calls += 1 }
        #expect(calls == 0)
        #expect(postgresError { try conn.forEachRow("SELEC") { _ in } }?.sqlState == "42601")
    }

    @Test func theBodyCannotUseTheBusyConnection() throws {
        let conn = try connect()
        var inner: PostgresError?
        try conn.forEachRow("SELECT generate_series(1, 3) AS n") { _ in
            do { try conn.query("SELECT 1") } catch let error as PostgresError { inner = error }
        }
        #expect(inner?.description.contains("already in use") == true)
    }
}
