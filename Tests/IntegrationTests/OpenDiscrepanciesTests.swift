import Foundation
import PayreconTesting
import Postgres
import Reconciliation
import Testing

/// `open_discrepancies` (sql/0021): what a group of checks reads, under its locks, to know what each check decides.
/// A PL/pgSQL function so that each server process plans it once; a kept plan must stay an index probe per key
/// however small the table was when it was made.
@Suite struct OpenDiscrepanciesTests {
    static let call = "SELECT * FROM open_discrepancies($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) ORDER BY kind, transaction_ref"
    static let excluded = PostgresValue.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue))

    /// The order's open and acknowledged discrepancies of the kinds checks raise, and the unknown_order ones of the
    /// transactions named; never a resolved one, a settlement kind, another order's, another provider's or an unknown
    /// transaction not named.
    @Test func readsTheOrdersAndItsTransactionsUnknownOrders() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            _ = try conn.query("""
                INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, status, expected, actual) VALUES
                    ('pxp', 'A', 'TX-A', 'amount_mismatch', 'open', '{"amount":"10.00"}', '{"captured":"9.00"}'),
                    ('pxp', 'A', 'TX-A', 'state_mismatch', 'acknowledged', '{}', '{}'),
                    ('pxp', 'A', 'TX-A', 'over_captured', 'resolved', '{}', '{}'),
                    ('pxp', 'A', 'TX-A', 'settlement_missing', 'open', '{}', '{}'),
                    ('pxp', NULL, 'TX-A2', 'unknown_order', 'open', '{}', '{}'),
                    ('pxp', NULL, 'TX-Z', 'unknown_order', 'open', '{}', '{}'),
                    ('pxp', 'B', 'TX-B', 'amount_mismatch', 'open', '{}', '{}'),
                    ('paypal', 'A', 'TX-A', 'amount_mismatch', 'open', '{}', '{}'),
                    ('paypal', NULL, 'TX-A2', 'unknown_order', 'open', '{}', '{}')
                """, [])
            let rows = try conn.query(Self.call, [.textArray(["pxp"]), .textArray(["A"]), .textArray(["pxp", "pxp"]), .textArray(["TX-A", "TX-A2"]),
                                                  Self.excluded])
            let got = try rows.map { "\(try $0.string("provider")) \(try $0.optionalString("order_id") ?? "-") \(try $0.string("transaction_ref")) \(try $0.string("kind")) \(try $0.string("status")) \(try $0.bool("bare"))" }
            #expect(got == ["pxp A TX-A amount_mismatch open true", "pxp A TX-A state_mismatch acknowledged true",
                            "pxp - TX-A2 unknown_order open true"])
            #expect(try rows.first?.string("expected") == #"{"amount": "10.00"}"#)
            // Keys named twice are read once; nothing named, nothing read.
            #expect(try conn.query(Self.call, [.textArray(["pxp", "pxp"]), .textArray(["A", "A"]), .textArray([]), .textArray([]), Self.excluded]).count == 2)
            #expect(try conn.query(Self.call, [.textArray([]), .textArray([]), .textArray([]), .textArray([]), Self.excluded]).isEmpty)
        }
    }

    /// Planned while the table was empty and analysed as such (a fresh install), the plan the session keeps must not
    /// scan the table once it has grown: each key stays an index probe. Measured by the scans this transaction made.
    @Test func aPlanMadeAgainstAnEmptyTableStaysAnIndexProbePerKey() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            _ = try conn.query("VACUUM ANALYZE discrepancies", [])
            let args: [PostgresValue] = [.textArray(["pxp", "pxp"]), .textArray(["O-7", "O-8"]), .textArray(["pxp"]), .textArray(["TX-U7"]), Self.excluded]
            // Past the five custom plans: the session now keeps a plan made against the empty table.
            for _ in 0..<8 { #expect(try conn.query(Self.call, args).isEmpty) }
            _ = try conn.query("""
                INSERT INTO discrepancies (provider, order_id, transaction_ref, kind)
                SELECT 'pxp', CASE WHEN i % 2 = 0 THEN 'O-' || i END, 'TX-U' || i, 'amount_mismatch' FROM generate_series(1, 5000) AS i
                """, [])
            _ = try conn.query("BEGIN", [])
            defer { _ = try? conn.query("ROLLBACK", []) }
            let rows = try conn.query(Self.call, args)
            #expect(try rows.map { try $0.optionalString("order_id") ?? $0.string("transaction_ref") } == ["TX-U7", "O-8"])
            // The rows above came through an index: no scan of the table (a plan made without the function's guard, or
            // with its subqueries flattened, scans it here).
            let scans = try conn.query("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'discrepancies'", [])
            #expect(try scans.first?.int64("seq_scan") == 0)
        }
    }
}
