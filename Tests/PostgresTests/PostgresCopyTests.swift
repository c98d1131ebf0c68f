@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

/// `COPY … FROM STDIN` through libpq: values round-trip whatever bytes they hold, a body that throws leaves nothing
/// copied and the connection usable, and a statement that is no COPY is refused.
@Suite struct PostgresCopyTests {
    @Test func valuesRoundTripWhateverTheyHold() throws {
        let conn = try connect()
        let table = uniqueName("copy")
        _ = try conn.execute("CREATE TEMPORARY TABLE \(table) (n bigint, t text, b boolean)")
        let texts: [String?] = [
            "plain", "a\ttab", "a\nnewline", "a\r\nreturn", "back\\slash", "\\N", "", nil, "é ünïcode ✓", "nul\u{0}byte"
        ]
        var rows = CopyRows(capacity: 64)
        let copied = try conn.copyIn("COPY \(table) (n, t, b) FROM STDIN") { sender in
            for (i, t) in texts.enumerated() {
                rows.int(i == 3 ? -Int64(i) : Int64(i)); rows.text(t); rows.bool(i % 2 == 0); rows.end()
                // Several sends: a row never spans two, but the server reads them as one stream.
                if i % 3 == 0 { try sender.send(&rows) }
            }
            try sender.send(&rows)
        }
        #expect(copied == texts.count)
        let back = try conn.query("SELECT n, t, b FROM \(table) ORDER BY abs(n)")
        for (i, row) in back.enumerated() {
            #expect(try row.int64("n") == (i == 3 ? -Int64(i) : Int64(i)))
            // A NUL cannot be in PostgreSQL text: it arrives as U+FFFD.
            #expect(try row.optionalString("t") == texts[i].map { $0.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") }, "row \(i)")
            #expect(try row.bool("b") == (i % 2 == 0))
        }
        #expect(Int64.min != 0)  // the extremes below
        _ = try conn.execute("TRUNCATE \(table)")
        var extremes = CopyRows()
        try conn.copyIn("COPY \(table) (n) FROM STDIN") { sender in
            extremes.int(.min); extremes.end(); extremes.int(.max); extremes.end(); extremes.int(0); extremes.end()
            try sender.send(&extremes)
        }
        #expect(try conn.query("SELECT n FROM \(table) ORDER BY n").map { try $0.int64("n") } == [.min, 0, .max])
    }

    @Test func aBodyThatThrowsCopiesNothingAndTheConnectionStaysUsable() throws {
        let conn = try connect()
        let table = uniqueName("copy")
        _ = try conn.execute("CREATE TABLE \(table) (n bigint)")
        defer { _ = try? conn.execute("DROP TABLE \(table)") }
        var rows = CopyRows()
        #expect(throws: TestFailure.self) {
            try conn.copyIn("COPY \(table) (n) FROM STDIN") { sender in
                rows.int(1); rows.end()
                try sender.send(&rows)
                throw TestFailure(message: "the file was cut short")
            }
        }
        #expect(try conn.query("SELECT count(*) AS n FROM \(table)")[0].int64("n") == 0)
        // A row the server refuses fails the COPY with its error.
        let refused = postgresError {
            try conn.copyIn("COPY \(table) (n) FROM STDIN") { sender in
                var bad = CopyRows(); bad.text("not a number"); bad.end()
                try sender.send(&bad)
            }
        }
        #expect(refused.map { "\($0)".contains("invalid input syntax") } == true, "\(String(describing: refused))")
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
        // A statement that is no COPY FROM STDIN is refused, and leaves the connection usable.
        #expect(postgresError { try conn.copyIn("SELECT 1") { _ in } } != nil)
        #expect(try conn.query("SELECT 2 AS two")[0].int32("two") == 2)
    }
}
