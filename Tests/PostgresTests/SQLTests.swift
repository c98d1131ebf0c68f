import Foundation
import Postgres
import Testing

/// `SQL`: a statement written as one interpolated string, its values bound in order.
@Suite struct SQLTests {
    @Test func eachValueBecomesTheNextPlaceholderInOrder() {
        let status = "open", after: Int64 = 7
        let sql: SQL = "SELECT id FROM t WHERE status = \(.text(status)) AND id > \(.int64(after)) AND ok = \(.bool(true))"
        #expect(sql.text == "SELECT id FROM t WHERE status = $1 AND id > $2 AND ok = $3")
        #expect(sql.binds == [.text("open"), .int64(7), .bool(true)])
    }

    /// A fragment's values are numbered where it lands, whatever came before it, with no text renumbered: a `$1`
    /// inside a string literal of the fragment stays as written.
    @Test func fragmentsAreNumberedWhereTheyLand() {
        let filter: SQL = "kind = \(.text("a")) AND note <> '$1'"
        let head: SQL = "SELECT 1 FROM t WHERE provider = \(.text("paypal")) AND "
        let joined = head + filter + " LIMIT \(.int64(5))"
        #expect(joined.text == "SELECT 1 FROM t WHERE provider = $1 AND kind = $2 AND note <> '$1' LIMIT $3")
        #expect(joined.binds == [.text("paypal"), .text("a"), .int64(5)])
        let nested: SQL = "WITH e AS (\(filter)) SELECT \(.int64(9))"
        #expect(nested.text == "WITH e AS (kind = $1 AND note <> '$1') SELECT $2")
        #expect(nested.binds == [.text("a"), .int64(9)])
    }

    @Test func joinedPutsTheSeparatorBetweenParts() {
        let parts: [SQL] = ["a = \(.int64(1))", "b = \(.int64(2))", "c IS NULL"]
        let where_ = SQL.joined(parts, separator: " AND ")
        #expect(where_.text == "a = $1 AND b = $2 AND c IS NULL")
        #expect(where_.binds == [.int64(1), .int64(2)])
        #expect(SQL.joined([], separator: ", ").text.isEmpty)
    }

    /// Trusted text and constant numbers go into the text; nothing else does.
    @Test func unescapedTextAndNumbersAreWrittenAsText() {
        let columns = "id, status"
        let sql: SQL = "SELECT \(unescaped: columns) FROM t LIMIT \(unescaped: 50) OFFSET \(.int64(3))"
        #expect(sql.text == "SELECT id, status FROM t LIMIT 50 OFFSET $1")
        #expect(sql.binds == [.int64(3)])
    }

    /// Printing a statement (a log line, an error) shows no value: values may be secrets or personal data.
    @Test func descriptionShowsNoValue() {
        let sql: SQL = "UPDATE t SET secret = \(.text("hunter2"))"
        #expect(!sql.description.contains("hunter2"))
        #expect(sql.description.contains("$1"))
    }

    /// The server sees what the text says: a value with quotes, a `$1` and a semicolon arrives as data.
    @Test func valuesReachTheServerAsDataNotText() throws {
        let conn = try connect()
        let hostile = "x'); DROP TABLE t; -- $1"
        let part: SQL = "\(.text(hostile))::text AS a"
        let rows = try conn.query(
            "SELECT \(part), \(.int64(41))::bigint + 1 AS b, \(.text(hostile))::text = \(.text(hostile))::text AS same")
        #expect(try rows[0].string("a") == hostile)
        #expect(try rows[0].int64("b") == 42)
        #expect(try rows[0].bool("same"))
        let results = try conn.pipeline(["SELECT \(.int64(1))::bigint AS n", "SELECT \(.text("two"))::text AS t"])
        #expect(try results[0].get()[0].int64("n") == 1)
        #expect(try results[1].get()[0].string("t") == "two")
    }
}
