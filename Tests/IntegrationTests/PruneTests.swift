import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Store
import Testing

/// `payrecon prune`: what PAYRECON_RETAIN no longer keeps goes, in batches; dead and pending
/// deliveries, orders, discrepancies and actions never do.
@Suite("Prune", .serialized) struct PruneTests {
    /// Deliveries of every status, old (100 days) and recent; rejections old (10 days) and recent; runs old,
    /// recent and one never finished; an order, a discrepancy and an action, all old.
    static func seeded() throws -> TestDatabase {
        let db = try TestDatabase.create()
        let conn = try db.connect(); defer { conn.close() }
        for (i, (status, days)) in [("done", 100), ("ignored", 100), ("dead", 100), ("pending", 100), ("done", 1), ("ignored", 1)]
            .enumerated()
        {
            _ = try conn.execute(
                """
                INSERT INTO deliveries (provider, dedupe_key, headers, body, status, received_at, processed_at)
                VALUES ('pxp', $1, '[]', '\\x7b7d', $2, now() - make_interval(days => $3::int),
                        CASE WHEN $2 = 'pending' THEN NULL ELSE now() - make_interval(days => $3::int) END)
                """, [.text("k-\(i)"), .text(status), .int64(Int64(days))])
        }
        for days in [10, 10, 1] {
            _ = try conn.execute(
                """
                INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes, received_at)
                VALUES ('pxp', 'invalid_signature', 'bad', '[]', '', 0, now() - make_interval(days => $1::int))
                """, [.int64(Int64(days))])
        }
        _ = try conn.execute(
            """
            INSERT INTO runs (started_at, finished_at, exit_code) VALUES
              (now() - interval '100 days', now() - interval '100 days', 0),
              (now() - interval '1 day', now() - interval '1 day', 0),
              (now() - interval '100 days', NULL, NULL)
            """)
        _ = try conn.execute(
            """
            INSERT INTO orders (provider, order_id, merchant, site, transaction_ref, intent, amount_minor, currency, fulfilment, created_at, updated_at)
            VALUES ('paypal', 'O-OLD', '', '', 'PP-OLD', 'purchase', 100, 'USD', 'open', now() - interval '400 days', now() - interval '400 days')
            """)
        _ = try conn.execute(
            """
            INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, status, first_seen, last_seen, resolved_at)
            VALUES ('paypal', 'O-OLD', 'PP-OLD', 'amount_mismatch', 'resolved', now() - interval '400 days', now() - interval '400 days', now() - interval '400 days')
            """)
        _ = try conn.execute(
            """
            INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, idempotency_key, status, created_at)
            VALUES ('paypal', 'O-OLD', 'refund', 100, 'USD', 100, 'paypal:O-OLD:refund:100', 'succeeded', now() - interval '400 days')
            """)
        return db
    }

    func counts(_ db: TestDatabase) throws -> [String: Int64] {
        [
            "deliveries": try db.count("SELECT count(*) FROM deliveries"),
            "dead": try db.count("SELECT count(*) FROM deliveries WHERE status = 'dead'"),
            "pending": try db.count("SELECT count(*) FROM deliveries WHERE status = 'pending'"),
            "rejected": try db.count("SELECT count(*) FROM rejected_deliveries"),
            "runs": try db.count("SELECT count(*) FROM runs"),
            "orders": try db.count("SELECT count(*) FROM orders"),
            "discrepancies": try db.count("SELECT count(*) FROM discrepancies"),
            "actions": try db.count("SELECT count(*) FROM actions")
        ]
    }

    @Test func dryRunCountsAndRemovesNothingThenPruneRemovesOnlyWhatRetentionAllows() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let before = try counts(db)
        let dry = try await PayreconProcess.launch(["prune", "--dry-run"], databaseURL: db.url)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("would remove 2 finished deliveries, 2 rejected-delivery samples, 1 closed runs"))
        #expect(try counts(db) == before)

        let real = try await PayreconProcess.launch(["prune"], databaseURL: db.url)
        #expect(real.status == 0, "\(real.stderr)")
        #expect(real.stdout.contains("removed 2 finished deliveries, 2 rejected-delivery samples, 1 closed runs"))
        let after = try counts(db)
        #expect(after["deliveries"] == 4 && after["dead"] == 1 && after["pending"] == 1)
        #expect(after["rejected"] == 1 && after["runs"] == 2)
        #expect(after["orders"] == 1 && after["discrepancies"] == 1 && after["actions"] == 1)
        // Again: nothing left to remove.
        #expect(
            try await PayreconProcess.launch(["prune"], databaseURL: db.url).stdout.contains(
                "removed 0 finished deliveries, 0 rejected-delivery samples, 0 closed runs"))
    }

    @Test func retentionIsConfigurable() async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let r = try await PayreconProcess.launch(
            ["prune"], databaseURL: db.url, environment: ["PAYRECON_RETAIN": "deliveries=12h, runs=365d"])
        #expect(r.status == 0, "\(r.stderr)")
        // Finished deliveries of a day ago go too; rejected keeps its default (7d); no run is a year old.
        #expect(r.stdout.contains("removed 4 finished deliveries, 2 rejected-delivery samples, 0 closed runs"))
    }

    @Test(arguments: [
        ("deliveries=forever", "PAYRECON_RETAIN deliveries=forever"),
        ("deliveries", "is not name=duration"),
        ("orders=30d", "PAYRECON_RETAIN names 'orders': it keeps deliveries, rejected, runs and evidence"),
        ("runs=1d,runs=2d", "PAYRECON_RETAIN names runs twice")
    ])
    func aBadRetentionIsAClearErrorAndRemovesNothing(value: String, message: String) async throws {
        let db = try Self.seeded(); defer { db.drop() }
        let before = try counts(db)
        let r = try await PayreconProcess.launch(["prune"], databaseURL: db.url, environment: ["PAYRECON_RETAIN": value])
        #expect(r.status == 2)
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(try counts(db) == before)
    }

    @Test func batchesRemoveEverythingDue() throws {
        let db = try Self.seeded(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute(
            """
            INSERT INTO deliveries (provider, dedupe_key, headers, body, status, received_at, processed_at)
            SELECT 'pxp', 'bulk-' || g, '[]', '\\x7b7d', 'done', now() - interval '100 days', now() - interval '100 days'
            FROM generate_series(1, 25) g
            """)
        var policy = RetentionPolicy()
        policy.rejectedSeconds = 365 * 86_400
        let removed = try PruneStore.prune(policy, dryRun: false, batchSize: 10, on: conn)
        #expect(removed.deliveries == 27)  // 3 batches of 10, then what is left
        #expect(removed.rejected == 0)
        #expect(
            try db.count(
                "SELECT count(*) FROM deliveries WHERE status IN ('done', 'ignored') AND processed_at < now() - interval '90 days'") == 0)
    }
}

/// What the receiver keeps about webhooks goes too: transmission ids older than the deliveries' retention, and
/// certificates past their notAfter; the current ones stay.
@Suite("Prune webhook material", .serialized) struct PruneWebhookMaterialTests {
    @Test func oldTransmissionIdsAndExpiredCertificatesGo() throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute(
            """
            INSERT INTO transmissions (provider, transmission_id, body_sha256, received_at) VALUES
              ('paypal', 'T-OLD', '\\x00', now() - interval '100 days'), ('paypal', 'T-NEW', '\\x01', now() - interval '1 day')
            """)
        _ = try conn.execute(
            """
            INSERT INTO webhook_material (provider, key, value, keep_until) VALUES
              ('paypal', 'https://api.paypal.com/v1/notifications/certs/CERT-OLD', '\\x00', now() - interval '1 day'),
              ('paypal', 'https://api.paypal.com/v1/notifications/certs/CERT-NEW', '\\x01', now() + interval '200 days')
            """)
        let dry = try PruneStore.prune(RetentionPolicy(), dryRun: true, on: conn)
        #expect(dry.transmissions == 1 && dry.webhookMaterial == 1)
        let removed = try PruneStore.prune(RetentionPolicy(), dryRun: false, on: conn)
        #expect(removed.transmissions == 1 && removed.webhookMaterial == 1)
        #expect(try db.count("SELECT count(*) FROM transmissions WHERE transmission_id = 'T-NEW'") == 1)
        #expect(try db.count("SELECT count(*) FROM transmissions") == 1)
        #expect(try db.count("SELECT count(*) FROM webhook_material WHERE key LIKE '%CERT-NEW'") == 1)
        #expect(try db.count("SELECT count(*) FROM webhook_material") == 1)
    }
}
