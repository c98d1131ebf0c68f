import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Testing
import TextFormats

/// `open_discrepancies` (sql/0021): what a group of checks reads, under its locks, to know what each check decides.
/// A PL/pgSQL function so that each server process plans it once; a kept plan must stay an index probe per key
/// however small the table was when it was made.
@Suite struct OpenDiscrepanciesTests {
    static let call =
        "SELECT * FROM open_discrepancies($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) ORDER BY kind, transaction_ref"
    static let excluded = PostgresValue.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue))

    /// The order's open and acknowledged discrepancies of the kinds checks raise, and the unknown_order ones of the
    /// transactions named; never a resolved one, a settlement kind, another order's, another provider's or an unknown
    /// transaction not named.
    @Test func readsTheOrdersAndItsTransactionsUnknownOrders() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            _ = try conn.query(
                """
                INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, status, expected, actual) VALUES
                    ('pxp', 'A', 'TX-A', 'amount_mismatch', 'open', '{"amount":"10.00"}', '{"captured":"9.00"}'),
                    ('pxp', 'A', 'TX-A', 'state_mismatch', 'acknowledged', '{}', '{}'),
                    ('pxp', NULL, 'TX-A3', 'unknown_order', 'acknowledged', '{}', '{}'),
                    ('pxp', 'A', 'TX-A', 'over_captured', 'resolved', '{}', '{}'),
                    ('pxp', 'A', 'TX-A', 'settlement_missing', 'open', '{}', '{}'),
                    ('pxp', NULL, 'TX-A2', 'unknown_order', 'open', '{}', '{}'),
                    ('pxp', NULL, 'TX-Z', 'unknown_order', 'open', '{}', '{}'),
                    ('pxp', 'B', 'TX-B', 'amount_mismatch', 'open', '{}', '{}'),
                    ('paypal', 'A', 'TX-A', 'amount_mismatch', 'open', '{}', '{}'),
                    ('paypal', NULL, 'TX-A2', 'unknown_order', 'open', '{}', '{}')
                """, [])
            // The acknowledged one was recorded with evidence: not bare.
            _ = try conn.query("UPDATE discrepancies SET evidence_id = 7 WHERE kind = 'state_mismatch'", [])
            let rows = try conn.query(
                Self.call,
                [
                    .textArray(["pxp"]), .textArray(["A"]), .textArray(["pxp", "pxp", "pxp"]),
                    .textArray(["TX-A", "TX-A2", "TX-A3"]), Self.excluded
                ])
            let got = try rows.map {
                "\(try $0.string("provider")) \(try $0.optionalString("order_id") ?? "-") \(try $0.string("transaction_ref")) \(try $0.string("kind")) \(try $0.string("status")) \(try $0.bool("bare"))"
            }
            #expect(
                got == [
                    "pxp A TX-A amount_mismatch open true", "pxp A TX-A state_mismatch acknowledged false",
                    "pxp - TX-A2 unknown_order open true", "pxp - TX-A3 unknown_order acknowledged true"
                ])
            #expect(try rows.first?.string("expected") == #"{"amount": "10.00"}"#)
            // Keys named twice are read once; nothing named, nothing read.
            #expect(
                try conn.query(
                    Self.call, [.textArray(["pxp", "pxp"]), .textArray(["A", "A"]), .textArray([]), .textArray([]), Self.excluded]
                ).count == 2)
            #expect(try conn.query(Self.call, [.textArray([]), .textArray([]), .textArray([]), .textArray([]), Self.excluded]).isEmpty)
            // No list of kinds to leave out is a mistake, never "nothing open".
            #expect(throws: PostgresError.self) {
                try conn.query(Self.call, [.textArray(["pxp"]), .textArray(["A"]), .textArray([]), .textArray([]), .null])
            }
        }
    }

    /// Planned while the table was empty and analysed as such (a fresh install), the plan a server process keeps must
    /// not scan the table once it has grown: each key stays an index probe on both of its columns. The function's own
    /// query and settings (read back from pg_proc) are prepared, planned against the empty table, and that kept plan
    /// is shown after the table has grown.
    @Test func aPlanMadeAgainstAnEmptyTableStaysAnIndexProbePerKey() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            // No autovacuum meanwhile: new statistics would have the plan made again against the grown table.
            _ = try conn.query("ALTER TABLE discrepancies SET (autovacuum_enabled = off)", [])
            _ = try conn.query("VACUUM ANALYZE discrepancies", [])
            guard
                let function = try conn.query(
                    "SELECT prosrc, array_to_json(proconfig)::text AS config FROM pg_proc WHERE proname = 'open_discrepancies'", []
                ).first,
                let config = try JSONValue.parse(try function.string("config")).arrayValue
            else {
                Issue.record("open_discrepancies has no settings"); return
            }
            let settings = config.compactMap(\.stringValue)
            #expect(settings.contains("enable_seqscan=off") && settings.contains("plan_cache_mode=force_generic_plan"))
            for setting in settings {
                let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
                _ = try conn.query("SELECT set_config($1, $2, false)", [.text(parts[0]), .text(parts[1])])
            }
            // The body's query, its arguments as parameters.
            let source = try function.string("prosrc")
            guard let start = source.range(of: "RETURN QUERY"),
                let end = source.range(of: ";", options: .backwards, range: start.upperBound..<source.endIndex)
            else {
                Issue.record("no RETURN QUERY in \(source)"); return
            }
            var query = String(source[start.upperBound..<end.lowerBound])
            for (n, name) in ["order_providers", "order_ids", "ref_providers", "refs", "excluded_kinds"].enumerated() {
                query = query.replacingOccurrences(of: "\\b\(name)\\b", with: "\\$\(n + 1)", options: .regularExpression)
            }
            _ = try conn.query("PREPARE probe(text[], text[], text[], text[], text[]) AS \(query)", [])
            let explain = "EXPLAIN EXECUTE probe('{pxp,pxp}', '{O-7,O-8}', '{pxp}', '{TX-U7}', '{settlement_missing}')"
            _ = try conn.query(explain, [])  // the generic plan, made now against the empty table and kept
            _ = try conn.query(
                """
                INSERT INTO discrepancies (provider, order_id, transaction_ref, kind)
                SELECT 'pxp', CASE WHEN i % 2 = 0 THEN 'O-' || i END, 'TX-U' || i, 'amount_mismatch' FROM generate_series(1, 5000) AS i
                """, [])
            let plan = try conn.query(explain, []).map { try $0.string("QUERY PLAN") }.joined(separator: "\n")
            #expect(!plan.contains("Seq Scan"), "\(plan)")
            let conditions = plan.split(separator: "\n").filter { $0.contains("Index Cond") }.map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            #expect(
                conditions == [
                    "Index Cond: ((provider = o.provider) AND (order_id = o.order_id))",
                    "Index Cond: ((provider = r.provider) AND (transaction_ref = r.ref))"
                ], "\(plan)")
            // And the function itself, planned the same way, finds the two rows.
            let rows = try conn.query(
                Self.call,
                [.textArray(["pxp", "pxp"]), .textArray(["O-7", "O-8"]), .textArray(["pxp"]), .textArray(["TX-U7"]), Self.excluded])
            #expect(try rows.map { try $0.optionalString("order_id") ?? $0.string("transaction_ref") } == ["TX-U7", "O-8"])
        }
    }
}
