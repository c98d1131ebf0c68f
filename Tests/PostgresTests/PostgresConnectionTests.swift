@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresConnectTests {
    /// Every connection starts with TCP keepalives and a user timeout, so a network that drops packets is noticed in
    /// about a minute rather than the kernel's quarter of an hour; a connection string's own values win.
    @Test func connectionsStartWithKeepalivesAndTheStringMayOverrideThem() throws {
        let conn = try connect()
        #expect(
            conn.connectionOption("keepalives") == "1" && conn.connectionOption("keepalives_idle") == "30"
                && conn.connectionOption("keepalives_interval") == "10" && conn.connectionOption("keepalives_count") == "3"
                && conn.connectionOption("tcp_user_timeout") == "60000")
        let separator = databaseURL.contains("?") ? "&" : "?"
        let own = try PostgresConnection(conninfo: databaseURL + separator + "keepalives_idle=45&tcp_user_timeout=5000")
        #expect(own.connectionOption("keepalives_idle") == "45" && own.connectionOption("tcp_user_timeout") == "5000")
        #expect(try own.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func connectsAndConfiguresTheSession() throws {
        let conn = try connect()
        let row = try conn.query(
            "SELECT current_setting('TimeZone') AS tz, current_setting('DateStyle') AS style, "
                + "current_setting('bytea_output') AS bytea, current_setting('client_encoding') AS encoding, "
                + "current_setting('application_name') AS app")[0]
        #expect(try row.string("tz") == "UTC")
        #expect(try row.string("style") == "ISO, MDY")
        #expect(try row.string("bytea") == "hex")
        #expect(try row.string("encoding") == "UTF8")
        #expect(try row.string("app") == "payrecon")
        #expect(conn.backendPID > 0)
        #expect(conn.isOpen)
        #expect(conn.target.contains("54329") || !databaseURL.contains("54329"))
    }

    @Test func appliesDefaultConnectTimeoutUnlessGiven() throws {
        #expect(try connect().connectionOption("connect_timeout") == String(PostgresConnection.defaultConnectTimeout))
        let separator = databaseURL.contains("?") ? "&" : "?"
        let custom = try PostgresConnection(conninfo: databaseURL + separator + "connect_timeout=2")
        #expect(custom.connectionOption("connect_timeout") == "2")
    }

    @Test func refusedPortNamesTargetAndHidesPassword() throws {
        let error = postgresError { _ = try PostgresConnection(conninfo: "postgresql://postgres:s3cr3t-pw@127.0.0.1:1/h_postgres") }
        let text = try #require(error).description
        #expect(error?.isConnectionFailure == true)
        #expect(text.contains("host=127.0.0.1"))
        #expect(text.contains("port=1"))
        #expect(text.contains("dbname=h_postgres"))
        #expect(text.contains("user=postgres"))
        #expect(text.contains("Connection refused"))
        #expect(!text.contains("s3cr3t-pw"))
    }

    @Test func missingDatabaseIsNamed() throws {
        let database = uniqueName("no_such_db")
        let url = "host=127.0.0.1 port=54329 user=postgres password=hunter2 dbname=\(database)"
        let text = try #require(postgresError { _ = try PostgresConnection(conninfo: url) }).description
        #expect(text.contains(database))
        #expect(text.contains("does not exist"))
        #expect(!text.contains("hunter2"))
    }

    @Test(arguments: [
        ("host=127.0.0.1 password=hunter2 bogus", "missing \"=\" after \"bogus\""),
        ("host=127.0.0.1 password=hunter2 nosuchoption=1", "invalid connection option \"nosuchoption\""),
        ("postgresql://postgres:hunter2@127.0.0.1:54329/h_postgres?bogus=1", "invalid URI query parameter"),
        ("postgresql://postgres:hunter2@127.0.0.1:notaport/h_postgres", "invalid integer value \"notaport\"")
    ])
    func malformedConninfoSaysWhyWithoutPassword(conninfo: String, reason: String) throws {
        let text = try #require(postgresError { _ = try PostgresConnection(conninfo: conninfo) }).description
        #expect(text.contains(reason), "\(text)")
        #expect(!text.contains("hunter2"), "\(text)")
    }

    @Test func closedConnectionThrowsConnectionError() throws {
        let conn = try connect()
        conn.close()
        conn.close()
        #expect(!conn.isOpen)
        let error = postgresError { try conn.query("SELECT 1") }
        #expect(error?.isConnectionFailure == true)
        #expect(error?.description.contains("closed") == true)
        try conn.reset()
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func executeScriptRunsSeveralStatements() throws {
        let conn = try connect()
        let table = uniqueName("script")
        try conn.executeScript("CREATE TEMP TABLE \(table) (n int); INSERT INTO \(table) VALUES (1), (2); INSERT INTO \(table) VALUES (3)")
        #expect(try conn.query("SELECT sum(n) AS s FROM \(table)")[0].int64("s") == 6)
        #expect(postgresError { try conn.executeScript("SELECT 1; SELEC 2") }?.sqlState == "42601")
    }

    @Test func executeReturnsAffectedRows() throws {
        let conn = try connect()
        let table = uniqueName("affected")
        try conn.execute("CREATE TEMP TABLE \(table) (n int)")
        #expect(try conn.execute("INSERT INTO \(table) SELECT generate_series(1, 7)") == 7)
        #expect(try conn.execute("UPDATE \(table) SET n = n + 1 WHERE n > $1", [.int32(4)]) == 3)
        #expect(try conn.execute("DELETE FROM \(table) WHERE n = $1", [.int64(99)]) == 0)
        let rows = try conn.query("SELECT n FROM \(table) ORDER BY n")
        #expect(rows.rowCount == 7)
        #expect(rows.commandTag == "SELECT 7")
        #expect(rows.columns == ["n"])
        #expect(try rows.map { try $0.int32("n") } == [1, 2, 3, 4, 6, 7, 8])
    }
}

@Suite struct PostgresValueRoundTripTests {
    @Test(arguments: ["", "plain", "ünïcödé ✓ 🚀 家族 👩‍👩‍👧", "quote ' \" \\ back", "line\nbreak\ttab"])
    func text(value: String) throws {
        let row = try connect().query("SELECT $1 AS v, octet_length($2::text) AS n", [.text(value), .text(value)])[0]
        #expect(try row.string("v") == value)
        #expect(try row.int64("n") == Int64(value.utf8.count))
    }

    @Test func longText() throws {
        let value = String(repeating: "xü", count: 100_000)
        #expect(try connect().query("SELECT $1::text AS v", [.text(value)])[0].string("v") == value)
    }

    @Test func textTakesTheTypeTheStatementGivesIt() throws {
        let conn = try connect()
        let row = try conn.query(
            "SELECT $1::uuid AS u, $2::varchar(5) AS v, $3::numeric AS n",
            [.text("6b1e4b0e-2c3a-4e8e-9b7d-2f1d8f3c0a11"), .text("abc"), .text("12.50")])[0]
        #expect(try row.string("u") == "6b1e4b0e-2c3a-4e8e-9b7d-2f1d8f3c0a11")
        #expect(try row.string("v") == "abc")
        #expect(try row.string("n") == "12.50")
    }

    @Test func textWithNULIsRefusedInsteadOfTruncated() throws {
        let conn = try connect()
        let error = postgresError { try conn.query("SELECT $1 AS v", [.text("before\u{0}after")]) }
        #expect(error?.description.contains("NUL") == true)
        #expect(postgresError { try conn.query("SELECT $1 AS v", [.textArray(["a\u{0}"])]) } != nil)
        #expect(postgresError { try conn.query("SELECT $1 AS v", [.jsonb("\"\u{0}\"")]) } != nil)
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test(arguments: [0, 1, -1, Int64.min, Int64.max, -9_007_199_254_740_993])
    func int64(value: Int64) throws {
        let row = try connect().query("SELECT $1 AS v, pg_typeof($1)::text AS t, -$1::numeric AS neg", [.int64(value)])[0]
        #expect(try row.int64("v") == value)
        #expect(try row.string("t") == "bigint")
        let negated = value == 0 ? "0" : value < 0 ? String(String(value).dropFirst()) : "-\(value)"
        #expect(try row.string("neg") == negated)
    }

    @Test(arguments: [0, -1, Int32.min, Int32.max])
    func int32(value: Int32) throws {
        let row = try connect().query("SELECT $1 AS v, pg_typeof($1)::text AS t", [.int32(value)])[0]
        #expect(try row.int32("v") == value)
        #expect(try row.int64("v") == Int64(value))
        #expect(try row.string("t") == "integer")
    }

    @Test(arguments: [true, false])
    func bool(value: Bool) throws {
        let row = try connect().query("SELECT $1 AS v, NOT $1 AS inverse", [.bool(value)])[0]
        #expect(try row.bool("v") == value)
        #expect(try row.bool("inverse") == !value)
    }

    @Test(arguments: [
        (0..<256).map { UInt8($0) },
        [],
        [0, 0, 0],
        [0x5C, 0x78, 0x30, 0x30],  // the text "\x00": must stay 4 bytes
        [0xFF, 0xFE, 0xC3, 0x28, 0x00, 0x80],  // invalid UTF-8 with a NUL inside
        (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    ])
    func bytea(value: [UInt8]) throws {
        let conn = try connect()
        let row = try conn.query("SELECT $1 AS v, length($1) AS n, md5($1) AS digest", [.bytea(value)])[0]
        #expect(try row.bytes("v") == value)
        #expect(try row.int64("n") == Int64(value.count))
        let table = uniqueName("blob")
        try conn.execute("CREATE TEMP TABLE \(table) (body bytea NOT NULL)")
        try conn.execute("INSERT INTO \(table) (body) VALUES ($1)", [.bytea(value)])
        #expect(try conn.query("SELECT body FROM \(table)")[0].bytes("body") == value)
    }

    @Test func jsonb() throws {
        let conn = try connect()
        let row = try conn.query(
            "SELECT $1 AS v, $1->>'a' AS a, jsonb_typeof($1->'b') AS kind",
            [.jsonb(#"{"b": [1, 2], "a": "ü \"q\""}"#)])[0]
        #expect(try row.string("a") == "ü \"q\"")
        #expect(try row.string("kind") == "array")
        let decoded = try JSONSerialization.jsonObject(with: Data(try row.string("v").utf8)) as? [String: Any]
        #expect(decoded?["a"] as? String == "ü \"q\"")
        let error = postgresError { try conn.query("SELECT $1 AS v", [.jsonb("{not json")]) }
        #expect(error?.sqlState == "22P02")
    }

    @Test(arguments: [1_795_967_386.123456, 0, -1.5, 951_782_400.000001, 4_102_444_799.999999])
    func timestamptz(seconds: Double) throws {
        let date = Date(timeIntervalSince1970: seconds)
        let row = try connect().query(
            "SELECT $1 AS v, pg_typeof($1)::text AS t, extract(epoch FROM $1)::text AS epoch",
            [.timestamptz(date)])[0]
        #expect(abs(try row.date("v").timeIntervalSince1970 - seconds) < 1e-6)
        #expect(try row.string("t") == "timestamp with time zone")
        #expect(abs(Double(try row.string("epoch"))! - seconds) < 1e-6)
    }

    /// A `Duration` arrives as an interval of whole microseconds: finer parts rounded half away from zero, negative
    /// spans kept, and one past what PostgreSQL holds refused rather than wrapped.
    @Test(arguments: [
        (Duration.seconds(90), "00:01:30", "90.000000"),
        (.milliseconds(1500), "00:00:01.5", "1.500000"),
        (.nanoseconds(1_499), "00:00:00.000001", "0.000001"),
        (.nanoseconds(499), "00:00:00", "0.000000"),
        (.seconds(-3), "-00:00:03", "-3.000000"),
        (.seconds(3 * 86_400), "72:00:00", "259200.000000"),
        (.zero, "00:00:00", "0.000000")
    ])
    func interval(value: Duration, shown: String, epoch: String) throws {
        let row = try connect().query(
            "SELECT $1::text AS v, pg_typeof($1)::text AS t, extract(epoch FROM $1)::text AS epoch", [.interval(value)])[0]
        #expect(try row.string("v") == shown)
        #expect(try row.string("t") == "interval")
        #expect(try row.string("epoch") == epoch)
    }

    @Test func anIntervalPostgreSQLCannotHoldIsRefused() throws {
        #expect(throws: PostgresError.self) { try connect().query("SELECT $1::text AS v", [.interval(.seconds(Int64.max / 2))]) }
    }

    @Test func timestamptzOutputFromOtherZonesAndTypes() throws {
        let conn = try connect()
        try conn.execute("SET TimeZone TO 'Asia/Kolkata'")
        let row = try conn.query(
            """
            SELECT '2026-11-29 15:49:46.123456+00'::timestamptz AS tz, '2026-11-29 15:49:46.5'::timestamp AS ts,
                   '2026-11-29'::date AS d, '2026-11-29 15:49:46.123456+00'::timestamptz::text AS shown
            """)[0]
        #expect(try row.string("shown") == "2026-11-29 21:19:46.123456+05:30")
        #expect(abs(try row.date("tz").timeIntervalSince1970 - 1_795_967_386.123456) < 1e-6)
        #expect(try row.date("ts").timeIntervalSince1970 == 1_795_967_386.5)
        #expect(try row.date("d").timeIntervalSince1970 == 1_795_910_400)
    }

    @Test func textArray() throws {
        let values = ["a", "b c", "quote\"", "back\\slash", "", "NULL", "{}", "ü,x", "'single'"]
        let rows = try connect().query("SELECT x FROM unnest($1) WITH ORDINALITY AS t(x, n) ORDER BY n", [.textArray(values)])
        #expect(try rows.map { try $0.string("x") } == values)
        let empty = try connect().query("SELECT cardinality($1) AS n, pg_typeof($1)::text AS t", [.textArray([])])[0]
        #expect(try empty.int64("n") == 0)
        #expect(try empty.string("t") == "text[]")
    }

    @Test func nullableTextArray() throws {
        let values: [String?] = ["a", nil, "NULL", "", "q\"uote"]
        let rows = try connect().query(
            "SELECT x, x IS NULL AS missing FROM unnest($1) WITH ORDINALITY AS t(x, n) ORDER BY n",
            [.nullableTextArray(values)])
        #expect(try rows.map { try $0.optionalString("x") } == values)
        #expect(try rows.map { try $0.bool("missing") } == [false, true, false, false, false], "only nil is NULL, not the text NULL")
    }

    @Test func byteaArray() throws {
        let values: [[UInt8]] = [[0, 1, 2, 255], [], Array("{\"a\",NULL}\\".utf8), [UInt8](repeating: 0x5c, count: 70_000)]
        let rows = try connect().query("SELECT x FROM unnest($1) WITH ORDINALITY AS t(x, n) ORDER BY n", [.byteaArray(values)])
        #expect(try rows.map { try $0.bytes("x") } == values)
        let empty = try connect().query("SELECT cardinality($1) AS n, pg_typeof($1)::text AS t", [.byteaArray([])])[0]
        #expect(try empty.int64("n") == 0)
        #expect(try empty.string("t") == "bytea[]")
    }

    @Test func int64Array() throws {
        let values: [Int64] = [1, -2, Int64.max, Int64.min, 0]
        let rows = try connect().query("SELECT x FROM unnest($1) WITH ORDINALITY AS t(x, n) ORDER BY n", [.int64Array(values)])
        #expect(try rows.map { try $0.int64("x") } == values)
        let row = try connect().query("SELECT 3 = ANY($1) AS hit, cardinality($2) AS n", [.int64Array([1, 3]), .int64Array([])])[0]
        #expect(try row.bool("hit"))
        #expect(try row.int64("n") == 0)
    }

    @Test func null() throws {
        let conn = try connect()
        let row = try conn.query(
            "SELECT $1::text AS s, $2::bigint AS i, $3::bytea AS b, $4::timestamptz AS d, $5::boolean AS f, $6::int AS n",
            Array(repeating: PostgresValue.null, count: 6))[0]
        #expect(try row.isNull("s"))
        #expect(try row.optionalString("s") == nil)
        #expect(try row.optionalInt64("i") == nil)
        #expect(try row.optionalBytes("b") == nil)
        #expect(try row.optionalDate("d") == nil)
        #expect(try row.optionalBool("f") == nil)
        #expect(try row.optionalInt32("n") == nil)
        let error = postgresError { _ = try row.string("s") }
        #expect(error?.description.contains("\"s\" is NULL") == true)
        let present = try conn.query("SELECT 5 AS n, 'x' AS s")[0]
        #expect(try present.optionalInt32("n") == 5)
        #expect(try !present.isNull("s"))
    }
}

@Suite struct PostgresDecodingErrorTests {
    @Test func wrongTypeNamesColumnTypeAndValue() throws {
        let row = try connect().query(
            "SELECT 'abc'::text AS label, 3000000000::bigint AS big, 5 AS five, 'infinity'::timestamptz AS forever")[0]
        let text = try #require(postgresError { _ = try row.int64("label") }).description
        #expect(text.contains("\"label\""))
        #expect(text.contains("(text)"))
        #expect(text.contains("\"abc\""))
        #expect(
            postgresError { _ = try row.int32("big") }?.description.contains("\"big\" (bigint): expected an int32, found \"3000000000\"")
                == true)
        #expect(postgresError { _ = try row.bool("five") }?.description.contains("\"five\"") == true)
        #expect(postgresError { _ = try row.date("forever") }?.description.contains("found \"infinity\"") == true)
        #expect(try row.bytes("label") == Array("abc".utf8))
    }

    @Test func unknownColumnListsTheColumns() throws {
        let row = try connect().query("SELECT 1 AS id, 2 AS amount")[0]
        let text = try #require(postgresError { _ = try row.int64("amuont") }).description
        #expect(text.contains("no column named \"amuont\""))
        #expect(text.contains("id, amount"))
    }

    @Test func longValuesAreShortenedInMessages() throws {
        let row = try connect().query("SELECT repeat('y', 500) AS long")[0]
        let text = try #require(postgresError { _ = try row.int64("long") }).description
        #expect(text.count < 200)
    }
}

@Suite struct PostgresServerErrorTests {
    @Test func syntaxErrorKeepsConnectionUsable() throws {
        let conn = try connect()
        let error = postgresError { try conn.query("SELEC 1") }
        #expect(error?.sqlState == "42601")
        #expect(error?.description.contains("syntax error") == true)
        #expect(error?.isConnectionFailure == false)
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func uniqueViolationHasDetail() throws {
        let conn = try connect()
        let table = uniqueName("uniq")
        try conn.execute("CREATE TEMP TABLE \(table) (id bigint PRIMARY KEY)")
        try conn.execute("INSERT INTO \(table) VALUES ($1)", [.int64(1)])
        let error = try #require(postgresError { try conn.execute("INSERT INTO \(table) VALUES ($1)", [.int64(1)]) })
        #expect(error.isUniqueViolation)
        guard case .server(_, _, let detail) = error else { Issue.record("not a server error: \(error)"); return }
        #expect(detail == "Key (id)=(1) already exists.")
    }

    @Test func serializationFailureIsRecognised() throws {
        let error = postgresError {
            try connect().executeScript("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
        }
        #expect(error?.isSerializationFailure == true)
        #expect(error?.isConnectionFailure == false)
    }

    @Test func copyIsRefusedAndLeavesConnectionUsable() throws {
        let conn = try connect()
        #expect(postgresError { try conn.executeScript("COPY (SELECT 1) TO STDOUT") } != nil)
        let table = uniqueName("copy")
        try conn.execute("CREATE TEMP TABLE \(table) (n int)")
        #expect(postgresError { try conn.executeScript("COPY \(table) FROM STDIN") } != nil)
        #expect(try conn.query("SELECT 1 AS one")[0].int32("one") == 1)
    }

    @Test func tooManyParametersIsAClearError() throws {
        let error = postgresError { try connect().query("SELECT 1", Array(repeating: .int32(1), count: 70_000)) }
        #expect(error?.description.contains("65535") == true)
    }
}
