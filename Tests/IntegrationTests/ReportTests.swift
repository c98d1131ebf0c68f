import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Testing
import TextFormats

/// `payrecon report` and `payrecon actions list` run as processes against a seeded schema.
@Suite("Report CLI", .serialized)
struct ReportTests {
    /// Open: amount_mismatch 25.00 USD (pxp, seen now), over_captured 500 JPY (paypal, an id with markup),
    /// unknown_order 1.250 BHD (pxp, last seen 3 days ago). Resolved: state_mismatch 9.99 USD (pxp).
    /// Rejected in 24 h: 2 invalid_signature (pxp), 1 stale_timestamp (paypal); one older, not counted.
    static func seeded() throws -> TestDatabase {
        let db = try TestDatabase.create()
        let conn = try db.connect(); defer { conn.close() }
        let insert = """
            INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, status, expected, actual, detail,
                                       amount_at_risk_minor, currency, occurrences, first_seen, last_seen, resolved_at)
            VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, now() - make_interval(days => $12::int),
                    now() - make_interval(days => $13::int), CASE WHEN $5 = 'resolved' THEN now() END)
            """
        let rows: [[PostgresValue]] = [
            [
                .text("pxp"), .text("ORD-1"), .text("tx-1"), .text("amount_mismatch"), .text("open"), .jsonb(#"{"amount":"25.00"}"#),
                .jsonb(#"{"amount":"0.00"}"#), .text("captured less, \"much\" less"), .int64(2500), .text("USD"), .int64(2), .int64(2),
                .int64(0)
            ],
            [
                .text("paypal"), .text("<script>alert(1)</script>"), .text("PP-2"), .text("over_captured"), .text("open"),
                .jsonb(#"{"captured":"1000"}"#),
                .jsonb(#"{"captured":"1500"}"#), .text("over"), .int64(500), .text("JPY"), .int64(1), .int64(1), .int64(0)
            ],
            [
                .text("pxp"), .null, .text("tx-unknown"), .text("unknown_order"), .text("open"), .jsonb("{}"),
                .jsonb(#"{"amount":"1.250"}"#), .text("no stored order"), .int64(1250), .text("BHD"), .int64(1), .int64(5), .int64(3)
            ],
            [
                .text("pxp"), .text("ORD-4"), .text("tx-4"), .text("state_mismatch"), .text("resolved"), .jsonb(#"{"state":"captured"}"#),
                .jsonb(#"{"state":"voided"}"#), .text("was voided"), .int64(999), .text("USD"), .int64(3), .int64(4), .int64(1)
            ]
        ]
        for r in rows { _ = try conn.execute(insert, r) }
        _ = try conn.execute(
            """
            INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes, received_at) VALUES
            ('pxp', 'invalid_signature', 'bad', '[]', '', 0, now()), ('pxp', 'invalid_signature', 'bad', '[]', '', 0, now() - interval '1 hour'),
            ('paypal', 'stale_timestamp', 'old', '[]', '', 0, now()), ('pxp', 'malformed_body', 'x', '[]', '', 0, now() - interval '2 days')
            """)
        // The counts the report reads (every rejection, sampled or not).
        _ = try conn.execute(
            """
            INSERT INTO rejection_counts (provider, reason, source, hour, count) VALUES
            ('pxp', 'invalid_signature', '10.0.0.1', date_trunc('hour', now()), 1),
            ('pxp', 'invalid_signature', '10.0.0.2', date_trunc('hour', now() - interval '1 hour'), 1),
            ('paypal', 'stale_timestamp', '10.0.0.3', date_trunc('hour', now()), 1),
            ('pxp', 'malformed_body', '10.0.0.1', date_trunc('hour', now() - interval '2 days'), 1)
            """)
        _ = try conn.execute(
            """
            INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, idempotency_key, status, last_error) VALUES
            ('pxp', 'ORD-1', 'capture', 2500, 'USD', 2500, 'pxp:ORD-1:capture:2500', 'pending', NULL),
            ('paypal', 'ORD-9', 'refund', 1250, 'BHD', 1250, 'paypal:ORD-9:refund:1250', 'failed', '422 UNPROCESSABLE_ENTITY'),
            ('pxp', 'ORD-7', 'void', 1000, 'JPY', 0, 'pxp:ORD-7:void:0', 'superseded', NULL)
            """)
        return db
    }

    func report(_ db: TestDatabase, _ args: String...) async throws -> PayreconProcess.Result { try await report(db, args) }
    func report(_ db: TestDatabase, _ args: [String]) async throws -> PayreconProcess.Result {
        try await PayreconProcess.launch(["report"] + args, databaseURL: db.url)
    }

    @Test func tableSummaryFirstThenGroups() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let r = try await report(db)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("Open discrepancies: 3"))
        #expect(r.stdout.contains("USD        25.00") && r.stdout.contains("JPY          500") && r.stdout.contains("BHD        1.250"))
        #expect(r.stdout.contains("Rejected deliveries (last 24 h): 3"))
        #expect(r.stdout.contains("invalid_signature      2"))
        #expect(
            r.stdout.contains("unknown_order (1)") && r.stdout.contains("amount_mismatch (1)") && r.stdout.contains("over_captured (1)"))
        #expect(!r.stdout.contains("state_mismatch (1)"))  // resolved: not listed by default
        #expect(!r.stdout.contains("\u{1B}["))  // not a terminal: no colour
    }

    /// An order's findings that name the same money are counted once in the summary (an 80.00 payment under dispute
    /// and the 20.00 refund it holds put 80.00 at risk, not 100.00); each finding keeps its own amount in the list.
    @Test func moneyAtRiskCountsEachOrderOnce() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute(
            """
            INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, status, expected, actual, detail, amount_at_risk_minor, currency)
            VALUES ('paypal', 'ORD-2008', 'PP-D', 'disputed', 'open', '{}', '{}', 'd', 8000, 'USD'),
                   ('paypal', 'ORD-2008', 'PP-D', 'action_not_allowed', 'open', '{}', '{}', 'held', 2000, 'USD')
            """)
        let r = try await report(db, "--format", "json")
        let doc = try JSONValue.parse(r.stdoutBytes)
        #expect(doc["summary"]?["amount_at_risk"]?["USD"]?.stringValue == "105.00", "25.00 (ORD-1) + 80.00 (ORD-2008, once)")
        let amounts = (doc["discrepancies"]?.arrayValue ?? []).filter { $0["order_id"]?.stringValue == "ORD-2008" }.compactMap {
            $0["amount_at_risk"]?.stringValue
        }
        #expect(amounts.sorted() == ["20.00", "80.00"])
    }

    @Test func jsonHasTheContractShape() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let r = try await report(db, "--format", "json")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try JSONValue.parse(r.stdoutBytes)
        let generated = try #require(doc["generated_at"]?.stringValue)
        #expect(generated.hasSuffix("Z") && generated.count == 20)
        #expect(doc["summary"]?["open"]?.numberLiteral == "3")
        #expect(
            doc["summary"]?["by_kind"]
                == .object([("unknown_order", .number("1")), ("amount_mismatch", .number("1")), ("over_captured", .number("1"))]))
        #expect(
            doc["summary"]?["amount_at_risk"] == .object([("BHD", .string("1.250")), ("JPY", .string("500")), ("USD", .string("25.00"))]))
        #expect(doc["summary"]?["rejected_24h"] == .object([("invalid_signature", .number("2")), ("stale_timestamp", .number("1"))]))
        let list = try #require(doc["discrepancies"]?.arrayValue)
        #expect(list.count == 3)
        let first = list[0]
        #expect(first["provider"]?.stringValue == "pxp" && first["order_id"]?.stringValue == "ORD-1")
        #expect(first["kind"]?.stringValue == "amount_mismatch" && first["status"]?.stringValue == "open")
        #expect(first["expected"] == .object([("amount", .string("25.00"))]))
        #expect(first["occurrences"]?.numberLiteral == "2")
        #expect(first["detail"]?.stringValue == "captured less, \"much\" less")
        #expect(list[2]["order_id"]?.isNull == true)
        #expect(list[2]["transaction_ref"]?.stringValue == "tx-unknown")
        for d in list { for key in ["id", "transaction_ref", "actual", "first_seen", "last_seen"] { #expect(d[key] != nil) } }
    }

    @Test func filters() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        func kinds(_ args: String...) async throws -> [String] {
            let r = try await report(db, ["--format", "json"] + args)
            #expect(r.status == 0, "\(r.stderr)")
            return try JSONValue.parse(r.stdoutBytes)["discrepancies"]?.arrayValue?.compactMap { $0["kind"]?.stringValue } ?? []
        }
        #expect(try await kinds("--status", "resolved") == ["state_mismatch"])
        #expect(try await kinds("--status", "all").count == 4)
        #expect(try await kinds("--provider", "paypal") == ["over_captured"])
        #expect(try await kinds("--kind", "unknown_order") == ["unknown_order"])
        #expect(try await kinds("--since", "1d") == ["amount_mismatch", "over_captured"])  // unknown_order last seen 3 days ago
        #expect(try await kinds("--provider", "paypercut").isEmpty)
        // The summary counts what is open under the same provider filter.
        let r = try await report(db, "--format", "json", "--provider", "pxp")
        let doc = try JSONValue.parse(r.stdoutBytes)
        #expect(doc["summary"]?["open"]?.numberLiteral == "2")
        #expect(doc["summary"]?["amount_at_risk"] == .object([("BHD", .string("1.250")), ("USD", .string("25.00"))]))
        #expect(doc["summary"]?["rejected_24h"] == .object([("invalid_signature", .number("2"))]))
    }

    @Test func failOnOpen() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let open = try await report(db, "--fail-on-open")
        #expect(open.status == 1)
        #expect(open.stdout.contains("Open discrepancies: 3"))  // printed before failing
        #expect(try await report(db, "--fail-on-open", "--provider", "paypercut").status == 0)
        #expect(try await report(db, "--fail-on-open", "--status", "resolved").status == 0)
        #expect(try await report(db, "--fail-on-open", "--kind", "over_captured", "--format", "json").status == 1)
        #expect(try await report(db).status == 0)
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute("UPDATE discrepancies SET status = 'resolved', resolved_at = now()")
        #expect(try await report(db, "--fail-on-open").status == 0)
    }

    @Test(
        "bad input is a usage error (exit 2) that says what to do",
        arguments: [
            (["--kind", "amount_mismatchh"], "--kind must be one of missing_at_provider"),
            (["--status", "closed"], "--status must be one of open, acknowledged, resolved, all"),
            (["--format", "pdf"], "--format must be one of table, json, csv, html"),
            (["--provider", "stripe"], "--provider must be one of pxp, paypal, paypercut"),
            (["--since", "7"], "--since: duration '7' has no unit"),
            (["--since", "1w"], "--since: duration '1w' has an unknown unit"),
            (["--output"], "--output needs a value"),
            (["--colour"], "unknown option --colour")
        ])
    func usageErrors(args: [String], message: String) async throws {
        let r = try await PayreconProcess.launch(["report"] + args, databaseURL: "postgresql://postgres@127.0.0.1:1/none")
        #expect(r.status == 2)
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func withoutDatabaseURLSaysWhatToSet() async throws {
        let r = try await PayreconProcess.launch(["report"], databaseURL: nil)
        #expect(r.status == 2)
        #expect(r.stderr.contains("DATABASE_URL is not set"))
    }

    @Test func outputFileCSVAndHTML() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("report-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }

        let csvPath = dir.appendingPathComponent("report.csv").path
        let csv = try await report(db, "--format", "csv", "--status", "all", "--output", csvPath)
        #expect(csv.status == 0 && csv.stdout.isEmpty)
        let csvText = try String(contentsOfFile: csvPath, encoding: .utf8)
        #expect(csvText.hasPrefix("id,provider,order_id,transaction_ref,kind,status,amount_at_risk,currency,"))
        #expect(csvText.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 5)
        #expect(csvText.contains(#""captured less, ""much"" less""#))
        #expect(csvText.contains(",9.99,USD,"))

        let htmlPath = dir.appendingPathComponent("report.html").path
        let html = try await report(db, "--format", "html", "--output", htmlPath)
        #expect(html.status == 0)
        let page = try String(contentsOfFile: htmlPath, encoding: .utf8)
        #expect(page.contains("25.00") && page.contains("1.250") && page.contains("<svg"))
        #expect(!page.contains("<script>alert(1)"))
        #expect(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        // No temp files left.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["report.csv", "report.html"])

        let unwritable = try await report(db, "--output", dir.appendingPathComponent("missing/dir/x.txt").path)
        #expect(unwritable.status == 2 && unwritable.stderr.contains("cannot write"))
    }

    @Test func actionsListJSON() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let r = try await PayreconProcess.launch(["actions", "list", "--format", "json"], databaseURL: db.url)
        #expect(r.status == 0, "\(r.stderr)")
        let list = try #require(try JSONValue.parse(r.stdoutBytes).arrayValue)
        #expect(list.count == 3)
        let a = list[0]
        for key in ["id", "provider", "order_id", "action", "amount", "currency", "status", "idempotency_key", "created_at"] {
            #expect(a[key] != nil, "missing \(key)")
        }
        #expect(a["id"]?.numberLiteral != nil)
        #expect(a["amount"]?.stringValue == "25.00" && a["currency"]?.stringValue == "USD")
        #expect(a["idempotency_key"]?.stringValue == "pxp:ORD-1:capture:2500")
        #expect(list[1]["amount"]?.stringValue == "1.250" && list[1]["last_error"]?.stringValue == "422 UNPROCESSABLE_ENTITY")
        #expect(list[2]["amount"]?.stringValue == "1000")

        let failed = try await PayreconProcess.launch(["actions", "list", "--status", "failed", "--format", "json"], databaseURL: db.url)
        #expect(try JSONValue.parse(failed.stdoutBytes).arrayValue?.compactMap { $0["order_id"]?.stringValue } == ["ORD-9"])
        let limited = try await PayreconProcess.launch(["actions", "list", "--limit", "2", "--format", "json"], databaseURL: db.url)
        #expect(try JSONValue.parse(limited.stdoutBytes).arrayValue?.compactMap { $0["order_id"]?.stringValue } == ["ORD-9", "ORD-7"])
        #expect(limited.stderr.contains("more than 2 actions match"))

        let table = try await PayreconProcess.launch(["actions", "list"], databaseURL: db.url)
        #expect(table.status == 0)
        #expect(table.stdout.split(separator: "\n").count == 4)
        #expect(table.stdout.contains("pxp:ORD-7:void:0"))

        let bad = try await PayreconProcess.launch(["actions", "list", "--status", "done"], databaseURL: db.url)
        #expect(bad.status == 2 && bad.stderr.contains("--status must be one of pending, succeeded, failed, superseded"))
    }
}
