import Foundation
import Testing
@testable import Postgres

/// Pure parts: no database.
@Suite struct PostgresTimestampTests {
    @Test(arguments: [
        ("2026-11-29 15:49:46.123456+00", 1_795_967_386.123456),
        ("2026-11-29 15:49:46+00", 1_795_967_386.0),
        ("2026-11-29 15:49:46.1+00", 1_795_967_386.1),
        ("2026-11-29 21:19:46.5+05:30", 1_795_967_386.5),
        ("2026-11-29 07:49:46-08", 1_795_967_386.0),
        ("2026-11-29 15:49:46+00:00:00", 1_795_967_386.0),
        ("2026-11-29T15:49:46.123456Z", 1_795_967_386.123456),
        ("2026-11-29 15:49:46.123456", 1_795_967_386.123456),  // timestamp without time zone: UTC
        ("2026-11-29", 1_795_910_400.0),  // date: midnight UTC
        ("1970-01-01 00:00:00+00", 0.0),
        ("1969-12-31 23:59:58.5+00", -1.5),
        ("2000-02-29 00:00:00+00", 951_782_400.0),
        ("0001-01-01 00:00:00+00", -62_135_596_800.0),
        ("9999-12-31 23:59:59.999999+00", 253_402_300_799.999999)
    ])
    func parsesPostgreSQLOutput(text: String, seconds: Double) throws {
        let date = try #require(PostgresTimestamp.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) <= max(1e-6, abs(seconds) * 1e-15))
    }

    @Test(arguments: [
        "", "infinity", "-infinity", "2026-13-01 00:00:00+00", "2026-02-30 00:00:00+00", "2026-11-29 25:00:00+00",
        "2026-11-29 15:49:46.+00", "2026-11-29 15:49:46+0", "0044-03-15 12:00:00+00 BC", "2026/11/29", "not a date",
        "2026-11-29 15:49:46+00 trailing"
    ])
    func rejectsAnythingElse(text: String) {
        #expect(PostgresTimestamp.parse(text) == nil)
    }

    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00.000000Z"),
        (1_795_967_386.123456, "2026-11-29T15:49:46.123456Z"),
        (-1.5, "1969-12-31T23:59:58.500000Z"),
        (951_782_400.0000004, "2000-02-29T00:00:00.000000Z"),
        (-62_135_596_800.0, "0001-01-01T00:00:00.000000Z")
    ])
    func formatsISO8601WithMicroseconds(seconds: Double, text: String) throws {
        #expect(try PostgresTimestamp.format(Date(timeIntervalSince1970: seconds)) == text)
    }

    @Test func formatRejectsYearsOutsidePostgreSQLsPlainRange() {
        #expect(throws: PostgresError.self) { try PostgresTimestamp.format(Date(timeIntervalSince1970: -62_135_596_801)) }
        #expect(throws: PostgresError.self) { try PostgresTimestamp.format(Date(timeIntervalSince1970: 253_402_300_800)) }
        #expect(throws: PostgresError.self) { try PostgresTimestamp.format(Date(timeIntervalSince1970: .nan)) }
    }

    @Test func formatThenParseIsIdentityToTheMicrosecond() throws {
        for seconds in stride(from: -2_000_000_000.0, to: 4_000_000_000.0, by: 123_456_789.987654) {
            let date = Date(timeIntervalSince1970: seconds)
            let back = try #require(PostgresTimestamp.parse(try PostgresTimestamp.format(date)))
            #expect(abs(back.timeIntervalSince1970 - seconds) < 1e-6)
        }
    }
}

@Suite struct PostgresByteaTextTests {
    @Test func decodesHexOutput() {
        #expect(PostgresRow.decodeBytea("\\x") == [])
        #expect(PostgresRow.decodeBytea("\\x00ff7F0a") == [0x00, 0xFF, 0x7F, 0x0A])
    }

    @Test func decodesEscapeOutput() {
        #expect(PostgresRow.decodeBytea("abc") == Array("abc".utf8))
        #expect(PostgresRow.decodeBytea("a\\\\b\\000\\377") == [0x61, 0x5C, 0x62, 0x00, 0xFF])
    }
}

@Suite struct PostgresIdentifierTests {
    @Test(arguments: [
        ("events", "\"events\""),
        ("Mixed Case", "\"Mixed Case\""),
        ("quo\"te", "\"quo\"\"te\""),
        ("ünï", "\"ünï\""),
        ("", "\"\"")
    ])
    func quotesIdentifiers(name: String, quoted: String) throws {
        #expect(try quoteIdentifier(name) == quoted)
    }

    @Test func rejectsNUL() {
        #expect(throws: PostgresError.self) { try quoteIdentifier("a\u{0}b") }
    }
}

@Suite struct PostgresErrorTests {
    @Test(arguments: [
        (PostgresError.connection("x"), true, false, false),
        (.server(sqlState: "08006", message: "connection failure", detail: nil), true, false, false),
        (.server(sqlState: "08P01", message: "protocol violation", detail: nil), true, false, false),
        (.server(sqlState: "57P01", message: "admin shutdown", detail: nil), true, false, false),
        (.server(sqlState: "57P02", message: "crash shutdown", detail: nil), true, false, false),
        (.server(sqlState: "57P03", message: "cannot connect now", detail: nil), true, false, false),
        (.server(sqlState: "57014", message: "query canceled", detail: nil), false, false, false),
        (.server(sqlState: "23505", message: "duplicate key", detail: nil), false, true, false),
        (.server(sqlState: "23503", message: "foreign key", detail: nil), false, false, false),
        (.server(sqlState: "40001", message: "serialization", detail: nil), false, false, true),
        (.server(sqlState: "40P01", message: "deadlock", detail: nil), false, false, true),
        (.decoding("x"), false, false, false),
        (.protocolViolation("x"), false, false, false),
        (.pipelineAborted(failedIndex: 1), false, false, false)
    ])
    func classifies(error: PostgresError, connection: Bool, unique: Bool, serialization: Bool) {
        #expect(error.isConnectionFailure == connection)
        #expect(error.isUniqueViolation == unique)
        #expect(error.isSerializationFailure == serialization)
    }

    @Test func describesServerErrorsWithStateAndDetail() {
        let error = PostgresError.server(
            sqlState: "23505", message: "duplicate key value violates unique constraint \"t_pkey\"",
            detail: "Key (id)=(1) already exists.")
        #expect(
            error.description
                == "PostgreSQL error 23505: duplicate key value violates unique constraint \"t_pkey\" (Key (id)=(1) already exists.)")
        #expect(PostgresError.pipelineAborted(failedIndex: 2).description.contains("statement 2"))
    }
}

@Suite struct ConnInfoSecretsTests {
    @Test(arguments: [
        ("postgresql://app:s3cr%40t@db:5432/x", ["s3cr%40t", "s3cr@t"]),
        ("postgres://app:plain@db/x?sslmode=disable", ["plain"]),
        ("host=db password=hunter2 dbname=x", ["hunter2"]),
        ("host=db password = 'two words\\'q' dbname=x", ["two words'q"]),
        ("postgresql://db/x?user=app&password=qp%21&sslmode=disable", ["qp%21", "qp!"]),
        ("host=db password=hunter2 bogus", ["hunter2"])
    ])
    func findsPasswords(conninfo: String, expected: [String]) {
        let found = ConnInfoSecrets.candidates(in: conninfo)
        for secret in expected { #expect(found.contains(secret), "\(secret) not in \(found)") }
    }

    @Test func redactsLongestFirst() {
        let text = ConnInfoSecrets.redact("failed for pw and pw2", secrets: ["pw", "pw2"])
        #expect(text == "failed for ******** and ********")
        #expect(ConnInfoSecrets.candidates(in: "host=db dbname=x").isEmpty)
    }
}
