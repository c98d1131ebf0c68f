import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Providers
import Store
import Testing

/// What payrecon records about what went wrong may quote what a provider or a sender sent. A NUL in it (a provider's
/// 4xx body, an unreadable answer) is recorded as U+FFFD: PostgreSQL's text holds no NUL, and a statement refused for
/// one would fail the worker's whole batch of completed deliveries on every flush.
@Suite struct StoredDiagnosticsTests {
    static let nul = "HTTP 400: {\"error\":\"bad\u{0}input\"}"

    @Test func aProvidersNULIsStoredAsReplacementWhereverAnOutcomeIsKept() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            // The classifier's text for a 4xx answer carrying a NUL.
            guard
                case .permanent(.refused(_, let body)) = ProviderOutcomeClassifier.classify(
                    ProviderResponse(status: 400, body: Array(Self.nul.utf8)), notFoundIsAbsence: true, now: 0)
            else {
                Issue.record("a 400 is permanent"); return
            }
            #expect(!body.utf8.contains(0) && body.contains("bad\u{FFFD}input"))

            _ = try conn.query(
                """
                INSERT INTO deliveries (provider, dedupe_key, headers, body, lease_owner, lease_expires_at)
                SELECT 'pxp', 'd' || i, '[]', '\\x7b7d', 'w1', now() + interval '1 hour' FROM generate_series(1, 3) AS i
                """, [])
            // A batch of completions, one quoting the NUL: all three recorded.
            let batch = [
                DeliveryQueue.Completion(id: 1, status: "done", outcome: "checked"),
                DeliveryQueue.Completion(id: 2, status: "done", outcome: Self.nul),
                DeliveryQueue.Completion(id: 3, status: "ignored", outcome: "nothing to check")
            ]
            #expect(try DeliveryQueue.complete(batch, owner: "w1", on: conn).sorted() == [1, 2, 3])
            #expect(
                try conn.query("SELECT outcome FROM deliveries WHERE id = 2", []).first?.string("outcome")
                    == "HTTP 400: {\"error\":\"bad\u{FFFD}input\"}")

            _ = try conn.query(
                """
                INSERT INTO deliveries (provider, dedupe_key, headers, body, lease_owner, lease_expires_at) VALUES ('pxp', 'd4', '[]', '\\x7b7d', 'w1', now() + interval '1 hour')
                """, [])
            #expect(try DeliveryQueue.fail(id: 4, owner: "w1", error: Self.nul, retryAfter: .seconds(30), on: conn))

            _ = try conn.query(
                """
                INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, idempotency_key, attempts, lease_expires_at)
                VALUES ('pxp', 'O-1', 'capture', 100, 'GBP', 100, 'k1', 1, now() + interval '1 hour')
                """, [])
            #expect(try ActionStore.finish(id: 1, attempt: 1, status: .failed, providerRef: nil, error: Self.nul, on: conn))

            let run = try RunStore.start(options: "{}", on: conn)
            try RunStore.finish(id: run, totals: RunStore.Totals(), errors: ["pxp O-1: " + Self.nul], exitCode: 1, on: conn)
            let stored = try conn.query(
                """
                SELECT (SELECT last_error FROM deliveries WHERE id = 4) AS delivery, (SELECT last_error FROM actions WHERE id = 1) AS action,
                       (SELECT error_list->>0 FROM runs WHERE id = $1) AS run
                """, [.int64(run)]
            ).first
            for column in ["delivery", "action", "run"] {
                #expect(try stored?.optionalString(column)?.contains("bad\u{FFFD}input") == true, "\(column)")
            }
        }
    }
}
