@_spi(Positional) import Postgres
import Foundation
import Observability
import Store
import Testing

/// `DeliveryStore.headersJSON` (pure: no database).
@Suite struct DeliveryStoreHeadersJSONTests {
    /// The format before the one-pass builder: the stored jsonb must not change shape. NUL, which jsonb refuses, is
    /// U+FFFD in both.
    static func reference(_ headers: [(String, String)]) -> String {
        func safe(_ s: String) -> String { s.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") }
        return "[" + headers.map { "[" + jsonString(safe($0.0)) + "," + jsonString(safe($0.1)) + "]" }.joined(separator: ",") + "]"
    }

    /// The JSON string the stored headers always had (RFC 8259: only what JSON requires escaped). Log lines escape
    /// more now (terminal controls), and must not change what is stored.
    static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static let cases: [[(String, String)]] = [
        [],
        [("Host", "127.0.0.1:8080")],
        [("Content-Type", "application/json"), ("X-Request-Id", "req-1"), ("x-request-id", "req-1 again")],
        [("X-Quote", #"say "hi""#), ("X-Backslash", #"C:\path\"#), ("X-Both", #"\""#)],
        [("X-Control", "a\nb\rc\td\u{0}e\u{1}f\u{1F}g\u{7F}h"), ("X-Bell\u{7}", "\u{8}\u{C}")],
        [("X-Unicode", "Ünïcødé €  😀 \u{2028}\u{2029}"), ("X-Ünï", "日本語")],
        [("", ""), ("X-Empty", "")],
        [("X-Long", String(repeating: "a\"b", count: 1000))]
    ]

    @Test(arguments: cases.indices)
    func roundTripsThroughJSONSerialization(index: Int) throws {
        let headers = Self.cases[index]
        let json = DeliveryStore.headersJSON(headers)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String]])
        #expect(parsed.count == headers.count)
        for (pair, (name, value)) in zip(parsed, headers) {
            #expect(pair == [name, value].map { $0.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") })
        }
    }

    @Test(arguments: cases.indices)
    func sameTextAsBefore(index: Int) {
        let headers = Self.cases[index]
        #expect(DeliveryStore.headersJSON(headers) == Self.reference(headers))
    }

    @Test func shapeAndEscapes() {
        #expect(DeliveryStore.headersJSON([]) == "[]")
        #expect(DeliveryStore.headersJSON([("A", "1"), ("B", "2")]) == #"[["A","1"],["B","2"]]"#)
        #expect(DeliveryStore.headersJSON([("A", "\"\\\n\r\t\u{0}\u{1F}")]) == "[[\"A\",\"\\\"\\\\\\n\\r\\t\u{FFFD}\\u001f\"]]")
        #expect(DeliveryStore.headersJSON([("A", "é")]) == "[[\"A\",\"é\"]]")
    }
}

/// The receiver's commits do not depend on the server's or the session's defaults: synchronous_commit
/// on and a statement_timeout, both SET LOCAL (nothing is left on the session for a pooler to hand on).
/// A NUL in a header (jsonb cannot hold \u0000) must not fail the commit, and with it the whole group commit batch.
@Suite struct DeliveryHeaderNULTests {
    @Test func aHeaderWithANULIsStoredWithTheNULReplaced() throws {
        let db = try TestDatabase.create(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        let stored = try DeliveryStore.commit(
            [
                NewDelivery(
                    provider: .pxp, dedupeKey: "nul-1", eventType: nil, headers: [("X-Junk", "a\u{0}b"), ("X-\u{0}Name", "v")],
                    body: Array("{}".utf8)),
                NewDelivery(provider: .pxp, dedupeKey: "nul-2", eventType: nil, headers: [("X-Ok", "fine")], body: Array("{}".utf8))
            ], on: conn)
        #expect(stored.count == 2 && stored.allSatisfy(\.inserted))
        let text = try #require(try conn.query("SELECT headers::text AS h FROM deliveries WHERE dedupe_key = 'nul-1'").first).string("h")
        #expect(text.contains("a\u{FFFD}b") && text.contains("X-\u{FFFD}Name"), "\(text)")
    }
}

@Suite struct DeliveryCommitSettingsTests {
    @Test func aSessionsOwnSettingsDoNotWeakenOrBreakTheCommit() throws {
        let db = try TestDatabase.create(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        // An insert that takes 300 ms (a trigger sleeps), on a session configured to lose commits and to cut statements
        // after 100 ms (BEGIN itself runs under the session's setting, so not something a loaded machine trips).
        _ = try conn.execute(
            """
            CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$
            """)
        _ = try conn.execute("CREATE TRIGGER slow_insert BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION slow_insert()")
        _ = try conn.execute("SET synchronous_commit = off")
        _ = try conn.execute("SET statement_timeout = '100ms'")
        _ = try conn.execute("SET lock_timeout = 0")
        // The session's 100 ms would cancel the insert; the commit's own statement_timeout (5 s) applies instead.
        let stored = try DeliveryStore.commit(
            [
                NewDelivery(
                    provider: .pxp, dedupeKey: "settings-1", eventType: nil, headers: [],
                    body: Array("{}".utf8))
            ], on: conn)
        #expect(stored.count == 1 && stored[0].inserted)
        // And the session keeps its own settings afterwards: nothing leaked out of the transaction.
        #expect(try conn.query("SHOW synchronous_commit").first?.string("synchronous_commit") == "off")
        #expect(try conn.query("SELECT current_setting('statement_timeout') AS t").first?.string("t") == "100ms")
        _ = try conn.execute("SET statement_timeout = 0")
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'settings-1'") == 1)
    }

    @Test func theCommitRunsWithSynchronousCommitOn() throws {
        let db = try TestDatabase.create(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute("SET synchronous_commit = off")
        // A trigger records the setting the insert ran under.
        _ = try conn.execute("CREATE TABLE seen_settings (sync text, timeout text)")
        _ = try conn.execute(
            """
            CREATE FUNCTION record_settings() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO seen_settings VALUES (current_setting('synchronous_commit'), current_setting('statement_timeout')); RETURN NEW; END $$
            """)
        _ = try conn.execute("CREATE TRIGGER record_settings BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION record_settings()")
        _ = try DeliveryStore.commit(
            [NewDelivery(provider: .pxp, dedupeKey: "settings-2", eventType: nil, headers: [], body: Array("{}".utf8))], on: conn)
        let row = try #require(try conn.query("SELECT sync, timeout FROM seen_settings").first)
        #expect(try row.string("sync") == "on")
        #expect(try row.string("timeout") == "5s")
    }
}

/// `rejection_counts` is bounded per hour over every receiver sharing the database (issue "strangers, round three",
/// item 6): three receivers counting 1,500 new sources each in one hour keep at most `countedSourcesPerHour` rows
/// (and one flush's worth past it); the rest count as `other`, and no rejection goes uncounted.
@Suite struct RejectionCountBoundTests {
    @Test func sourcesPerHourAreBoundedAcrossReceivers() throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        let hour = Int64(Date().timeIntervalSince1970) / 3600 * 3600
        for receiver in 0..<3 {
            for flush in 0..<6 {
                let counts = (0..<250).map { i in
                    RejectionCount(
                        provider: .pxp, reason: receiver == 0 ? "invalid_signature" : "malformed_body",
                        source: "10.\(receiver).\(flush).\(i)", hour: hour, count: 2)
                }
                try DeliveryStore.recordRejections(counts, samples: [], on: conn)
            }
        }
        let rows = try db.count("SELECT count(*) FROM rejection_counts")
        #expect(
            rows <= Int64(DeliveryStore.countedSourcesPerHour + 2), "at most the bound and one 'other' per provider and reason: \(rows)")
        #expect(try db.count("SELECT sum(count)::bigint FROM rejection_counts") == 3 * 6 * 250 * 2, "every rejection counted")
        #expect(try db.count("SELECT count(*) FROM rejection_counts WHERE source = 'other'") >= 1)
    }
}
