import Foundation
@_spi(Positional) import Postgres
import Receiver
import Reconciliation
import Store
import Testing

/// `serve` runs as a role with only what the receiver does (`ServeRole`): everything `PostgresReceiverStorage` does
/// works as that role, and what a stranger who took over serve would want (bodies, orders, actions, a delivery's status)
/// is refused by PostgreSQL itself.
@Suite struct ServeRoleTests {
    /// A login role of its own on the test server, dropped at the end (roles are the cluster's, not the schema's).
    struct Role {
        let name = "serve_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let db: TestDatabase
        init(_ db: TestDatabase) throws {
            self.db = db
            let admin = try PostgresConnection(conninfo: db.server); defer { admin.close() }
            _ = try admin.execute("CREATE ROLE \(try quoteIdentifier(name)) LOGIN")
        }
        /// The test schema's URL, connecting as this role.
        var url: String {
            guard let scheme = db.url.range(of: "://"), let at = db.url.range(of: "@", range: scheme.upperBound..<db.url.endIndex) else {
                return db.url + " user=\(name)"
            }
            return db.url.replacingCharacters(in: scheme.upperBound..<at.lowerBound, with: name)
        }
        func drop() {
            guard let admin = try? PostgresConnection(conninfo: db.server) else { return }
            db.drop()
            _ = try? admin.execute("DROP OWNED BY \(try quoteIdentifier(name))")
            _ = try? admin.execute("DROP ROLE \(try quoteIdentifier(name))")
            admin.close()
        }
    }

    static func delivery(_ key: String, transmission: String? = nil, body: String = "{}") -> NewDelivery {
        NewDelivery(
            provider: .paypal, dedupeKey: key, eventType: "PAYMENT.CAPTURE.COMPLETED", headers: [("X-Test", "1")],
            body: Array(body.utf8), transmissionID: transmission)
    }

    @Test func theReceiversStorageWorksAsServesRole() throws {
        let db = try TestDatabase.create()
        let role = try Role(db); defer { role.drop() }
        let owner = try db.connect(); defer { owner.close() }
        try ServeRole.apply(to: role.name, on: owner)

        let pool = PostgresPool(conninfo: role.url, size: 2, acquireTimeout: .seconds(5)); defer { pool.close() }
        let storage = PostgresReceiverStorage(pool: pool, expectedMigrations: Migrator.shippedVersions)
        #expect(storage.pendingMigrations() == [])
        #expect(storage.isReady())

        // New, then the same again (a redelivery), then a batch with one new key twice and the stored one.
        let first = try storage.commit([Self.delivery("EV-1", transmission: "T-1")])
        #expect(first.count == 1 && first[0].inserted && first[0].refused == nil)
        let again = try storage.commit([Self.delivery("EV-1", transmission: "T-1")])
        #expect(again == [StoredDelivery(id: first[0].id, inserted: false)])
        let batch = try storage.commit([Self.delivery("EV-2"), Self.delivery("EV-2"), Self.delivery("EV-1", transmission: "T-1")])
        #expect(batch.map(\.inserted) == [true, false, false])
        #expect(try db.count("SELECT redeliveries FROM deliveries WHERE dedupe_key = 'EV-1'") == 2)
        #expect(try db.count("SELECT redeliveries FROM deliveries WHERE dedupe_key = 'EV-2'") == 1)
        // The one-body-per-transmission guard still refuses another body under a stored transmission id.
        let forged = try storage.commit([Self.delivery("EV-3", transmission: "T-1", body: #"{"forged":true}"#)])
        #expect(forged.count == 1 && forged[0].refused != nil)
        #expect(storage.pendingCount() == 2)

        // Rejections: counted, and sampled.
        let hour = Int64(Date().timeIntervalSince1970) / 3600 * 3600
        try storage.recordRejections(
            [RejectionCount(provider: .paypal, reason: "invalid_signature", source: "203.0.113.9", hour: hour, count: 2)],
            samples: [
                Rejection(
                    provider: .paypal, reason: "invalid_signature", message: "bad", headers: [],
                    body: Array("x".utf8), remoteAddress: "203.0.113.9")
            ])
        try storage.recordRejections(
            [RejectionCount(provider: .paypal, reason: "invalid_signature", source: "203.0.113.9", hour: hour, count: 1)],
            samples: [])
        #expect(try db.count("SELECT count FROM rejection_counts WHERE source = '203.0.113.9'") == 3)
        #expect(try db.count("SELECT count(*) FROM rejected_deliveries") == 1)

        // PayPal's certificates: saved, replaced, read back; when a row was saved is the database's word.
        try storage.saveWebhookMaterial(.paypal, key: "https://example/cert", value: [1, 2], keepUntil: Date().addingTimeInterval(3600))
        try storage.saveWebhookMaterial(.paypal, key: "https://example/cert", value: [3], keepUntil: Date().addingTimeInterval(3600))
        let material = try storage.loadWebhookMaterial(.paypal)
        #expect(material.count == 1 && material.first?.value == [3])
        #expect(try db.count("SELECT count(*) FROM webhook_material WHERE saved_at <= now()") == 1)
    }

    /// What a stranger who took over serve would want, each refused by PostgreSQL (42501, insufficient privilege).
    @Test(arguments: [
        "SELECT body FROM deliveries",
        "SELECT headers FROM deliveries",
        "SELECT * FROM deliveries",
        "UPDATE deliveries SET status = 'done'",
        "INSERT INTO deliveries (provider, dedupe_key, headers, body, status) VALUES ('pxp', 'x', '[]', '\\x00', 'done')",
        "INSERT INTO deliveries (id, provider, dedupe_key, headers, body) VALUES (999999, 'pxp', 'y', '[]', '\\x00')",
        "UPDATE webhook_material SET saved_at = now() + interval '100 years'",
        "UPDATE deliveries SET body = '\\x00'",
        "DELETE FROM deliveries",
        "DELETE FROM transmissions",
        "SELECT * FROM orders",
        "UPDATE orders SET amount_minor = 1",
        "INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, idempotency_key) VALUES ('paypal', 'x', 'refund', 1, 'EUR', 1, 'k')",
        "SELECT * FROM actions",
        "SELECT * FROM snapshots",
        "SELECT * FROM discrepancies",
        "SELECT headers FROM rejected_deliveries",
        "DELETE FROM rejection_counts",
        "DELETE FROM webhook_material",
        "INSERT INTO schema_migrations (version) VALUES ('9999_x')",
        "CREATE TABLE serve_was_here (x int)"
    ])
    func whatServesRoleMayNotDo(_ sql: String) throws {
        let db = try TestDatabase.create()
        let role = try Role(db); defer { role.drop() }
        let owner = try db.connect(); defer { owner.close() }
        // A privilege given by hand before (a table-wide one, and a column one) is taken away by the next apply.
        _ = try owner.execute("GRANT ALL ON ALL TABLES IN SCHEMA \(try quoteIdentifier(db.schema)) TO \(try quoteIdentifier(role.name))")
        _ = try owner.execute("GRANT UPDATE (status) ON deliveries TO \(try quoteIdentifier(role.name))")
        try ServeRole.apply(to: role.name, on: owner)
        _ = try PostgresReceiverStorage(pool: PostgresPool(conninfo: role.url, size: 1, acquireTimeout: .seconds(5)))
            .commit([Self.delivery("EV-1")])

        let conn = try PostgresConnection(conninfo: role.url); defer { conn.close() }
        #expect {
            _ = try conn.execute(sql)
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.sqlState == "42501"
        }
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE status = 'pending'") == 1)
    }

    @Test func aRoleThatCannotBeLimitedIsRefusedSayingWhy() throws {
        let db = try TestDatabase.create(); defer { db.drop() }
        let owner = try db.connect(); defer { owner.close() }
        let me = try db.string("SELECT current_user")
        let cases: [(role: String, says: String)] = [
            ("no_such_role_" + UUID().uuidString.prefix(8).lowercased(), "no such role"),
            (me, "the role payrecon migrate runs as"),
            ("", "is empty")
        ]
        for c in cases {
            #expect {
                try ServeRole.apply(to: c.role, on: owner)
            } throws: { error in
                (error as? ServeRole.Refused)?.description.contains(c.says) == true
            }
        }
        // Roles no grant can limit, each created for the case and dropped after.
        let admin = try PostgresConnection(conninfo: db.server); defer { admin.close() }
        let unlimitable: [(attributes: String, says: String)] = [
            ("LOGIN CREATEROLE", "may create roles"),  // on PostgreSQL 15 it may grant itself the owner's role
            ("LOGIN REPLICATION", "may create roles or databases, or replicate"),
            ("LOGIN IN ROLE pg_read_all_data", "is a member of pg_read_all_data"),  // a member has the role's privileges
            ("SUPERUSER", "superuser")
        ]
        for c in unlimitable {
            let role = "serve_case_" + UUID().uuidString.prefix(8).lowercased()
            _ = try admin.execute("CREATE ROLE \(role) \(c.attributes)")
            defer { _ = try? admin.execute("DROP ROLE \(role)") }
            #expect {
                try ServeRole.apply(to: role, on: owner)
            } throws: { error in
                (error as? ServeRole.Refused)?.description.contains(c.says) == true
            }
        }
    }
}
