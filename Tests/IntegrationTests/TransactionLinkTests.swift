import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// `transaction_links`, the provider-neutral table of linked transactions, and the migration that moved PXP's
/// modifications and snapshot ids into it.
@Suite struct TransactionLinkTests {
    /// A schema migrated up to (not including) `stopBefore`; the test applies the rest itself.
    static func schema(migratedBefore stopBefore: String) throws -> (TestDatabase, [Migrator.Migration]) {
        let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = try PostgresConnection(conninfo: TestDatabase.baseURL); defer { admin.close() }
        _ = try admin.execute("CREATE SCHEMA \(schema)")
        let db = TestDatabase(schema: schema, url: TestDatabase.withSearchPath(TestDatabase.baseURL, schema), server: TestDatabase.baseURL)
        guard let dir = Migrator.locateDirectory() else { throw TestSetupError("sql/ not found") }
        let all = try Migrator.load(from: dir)
        let conn = try db.connect(); defer { conn.close() }
        try Migrator.migrate(all.filter { $0.version < stopBefore }, on: conn)
        return (db, all)
    }

    @Test func migrationMovesModificationsAndSnapshotIdsIntoLinks() async throws {
        let (db, all) = try await offload { try Self.schema(migratedBefore: "0005") }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            _ = try conn.execute(
                """
                INSERT INTO pxp_modifications (system_transaction_id, parent_system_transaction_id, order_id, operation, amount_minor, currency, state, action_id)
                VALUES ('SYS-CAP', 'SYS-1', 'O-1', 'capture', 700, 'GBP', 'Captured', 3)
                """)
            _ = try conn.execute(
                """
                INSERT INTO snapshots (provider, order_id, transaction_ref, snapshot) VALUES
                ('pxp', 'O-1', 'TX-1', '{"actionTargets":{"systemTransactionID":"SYS-1","refundableCaptures":[]}}'),
                ('paypal', 'O-2', 'PP-1', '{"actionTargets":{"authorizationID":"A1","refundableCaptures":[]}}')
                """)
            try Migrator.migrate(all, on: conn)
            #expect(try conn.query("SELECT to_regclass('pxp_modifications') IS NULL AS gone").first!.bool("gone"))
            let links = try TransactionLinkStore.links(provider: .pxp, orderIDs: ["O-1"], on: conn)["O-1"] ?? []
            #expect(
                Set(links) == [
                    TransactionLink(
                        externalID: "SYS-CAP", parentExternalID: "SYS-1", orderID: "O-1", kind: .capture, amount: 700,
                        currency: "GBP", state: "Captured", source: .payrecon, actionID: 3),
                    .alias("SYS-1", orderID: "O-1")
                ])
            #expect(try TransactionLinkStore.links(provider: .paypal, orderIDs: ["O-2"], on: conn).isEmpty)
            // No table is named for a provider any more.
            let named = try conn.query(
                """
                SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema()
                  AND (table_name LIKE '%pxp%' OR table_name LIKE '%paypal%' OR table_name LIKE '%paypercut%')
                """
            ).map { try $0.string("t") }
            #expect(named.isEmpty, "tables named for a provider: \(named)")
        }
    }

    @Test func recordingALinkTwiceKeepsOneRowWithTheNewerState() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert(
                [
                    Order(
                        provider: .pxp, orderID: "O-1", merchant: "M1", site: "S1", transactionRef: "TX-1", intent: .authorisation,
                        amount: Money(minorUnits: 1000, currency: Currency(code: "GBP")!), fulfilment: .fulfilled)
                ], on: conn)
            var link = TransactionLink(
                externalID: "SYS-R", parentExternalID: "SYS-1", orderID: "O-1", kind: .refund, amount: 100,
                currency: "GBP", state: "Pending", source: .payrecon, actionID: 9)
            try TransactionLinkStore.record([link], provider: .pxp, on: conn)
            link.state = "Authorised"
            try TransactionLinkStore.record([link], provider: .pxp, on: conn)
            #expect(try TransactionLinkStore.links(provider: .pxp, orderIDs: ["O-1"], on: conn)["O-1"] == [link])
            #expect(try TransactionLinkStore.orders(provider: .pxp, externalID: "SYS-R", on: conn).map(\.orderID) == ["O-1"])
            #expect(try TransactionLinkStore.orders(provider: .paypal, externalID: "SYS-R", on: conn).isEmpty)
        }
    }

    /// A check links its snapshot's aliases; a later check whose aliases are all linked already (they came with the
    /// stored snapshot) writes none, and one that learns a new alias links it.
    @Test func aliasesAreLinkedOnceAndNewOnesAdded() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            let gbp = Currency(code: "GBP")!
            let order = Order(
                provider: .pxp, orderID: "O-1", merchant: "M1", site: "S1", transactionRef: "TX-1", intent: .authorisation,
                amount: Money(minorUnits: 1000, currency: gbp), fulfilment: .fulfilled)
            try OrderStore.upsert([order], on: conn)
            func check(aliases: [String], at seconds: TimeInterval) throws {
                let snapshot = Snapshot(
                    provider: .pxp, transactionRef: "TX-1", merchant: "M1", site: "S1", intent: .authorisation, currency: gbp,
                    value: 1000, authorised: 1000, captured: 0, refunded: 0, state: .authorised, rawState: "Authorised",
                    createdAt: nil, aliases: aliases)
                _ = try PlannedCheck.record(
                    provider: .pxp, order: order, transactionRef: "TX-1", snapshot: snapshot,
                    fetchedAt: Date(timeIntervalSince1970: 1_800_000_000 + seconds), plan: { _, _ in Plan() }, on: conn)
            }
            func aliases() throws -> [String] {
                try conn.query("SELECT external_id FROM transaction_links WHERE kind = 'alias' AND order_id = 'O-1' ORDER BY external_id")
                    .map { try $0.string("external_id") }
            }
            try check(aliases: ["SYS-1"], at: 0)
            #expect(try aliases() == ["SYS-1"])
            // Linked already: the second check skips the write (a row removed behind its back stays removed).
            _ = try conn.execute("DELETE FROM transaction_links WHERE external_id = 'SYS-1'")
            try check(aliases: ["SYS-1"], at: 1)
            #expect(try aliases().isEmpty)
            try check(aliases: ["SYS-1", "SYS-2"], at: 2)
            #expect(try aliases() == ["SYS-1", "SYS-2"])
        }
    }

    /// A check that finds nothing after one that found nothing sends no resolving UPDATE (sql/0013); every path that
    /// can leave something open still resolves it: findings from the last check, a check without a snapshot, and a
    /// transaction added to the order whose unknown_order is open.
    @Test func resolvingIsSkippedOnlyWhenTheLastCheckLeftNothingOpen() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            let gbp = Currency(code: "GBP")!
            var order = Order(
                provider: .pxp, orderID: "O-1", merchant: "M1", site: "S1", transactionRef: "TX-1", intent: .authorisation,
                amount: Money(minorUnits: 1000, currency: gbp), fulfilment: .fulfilled)
            try OrderStore.upsert([order], on: conn)
            let snapshot = Snapshot(
                provider: .pxp, transactionRef: "TX-1", merchant: "M1", site: "S1", intent: .authorisation, currency: gbp,
                value: 1000, authorised: 1000, captured: 0, refunded: 0, state: .authorised, rawState: "Authorised", createdAt: nil)
            let mismatch = Finding(
                kind: .amountMismatch, expected: ["amount": "10.00"], actual: ["amount": "9.00"], detail: "d", amountAtRisk: 100)
            var second: TimeInterval = 0
            func check(
                _ findings: [Finding], snapshot: Snapshot? = snapshot, order: Order? = nil, ref: String = "TX-1",
                refs: [String]? = nil
            ) throws -> CheckOutcome {
                second += 1
                return try #require(
                    try PlannedCheck.record(
                        provider: .pxp, order: order ?? orderNow(), transactionRef: ref, snapshot: snapshot,
                        fetchedAt: Date(timeIntervalSince1970: 1_800_000_000 + second), transactionRefs: refs,
                        plan: { _, _ in Plan(findings: findings) }, on: conn)
                ).outcome
            }
            func orderNow() throws -> Order { try #require(try OrderStore.find(provider: .pxp, orderID: "O-1", on: conn)) }
            func open() throws -> Int64 {
                try conn.query("SELECT count(*) AS n FROM discrepancies WHERE status IN ('open', 'acknowledged')").first!.int64("n")
            }
            #expect(try check([mismatch]).opened == 1)
            #expect(try check([]).resolved == 1, "findings last time: resolved")
            #expect(try check([]).resolved == 0)
            #expect(try open() == 0)
            // A check without a snapshot that finds something marks the row, so the next clean check resolves it.
            #expect(try check([mismatch], snapshot: nil).opened == 1)
            #expect(try check([]).resolved == 1)
            #expect(try open() == 0)
            // An unknown_order for TX-2, raised before TX-2 was the order's; then the order takes TX-2.
            _ = try PlannedCheck.record(
                provider: .pxp, order: nil, transactionRef: "TX-2", snapshot: nil, fetchedAt: Date(),
                plan: { _, _ in Plan(findings: [Finding(kind: .unknownOrder, expected: [:], actual: [:], detail: "u", amountAtRisk: 0)]) },
                on: conn)
            #expect(try open() == 1)
            _ = try OrderStore.addTransaction(provider: .pxp, orderID: "O-1", transactionRef: "TX-2", learnedFrom: "test", on: conn)
            order = try orderNow()
            #expect(try check([], order: order, ref: "TX-1 TX-2", refs: ["TX-1", "TX-2"]).resolved == 1, "the order's new transaction")
            #expect(try open() == 0)
        }
    }

    @Test func aDeliveryOfAProviderThisPayreconDoesNotKnowIsAnErrorNamingIt() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            let id = try conn.query(
                """
                INSERT INTO deliveries (provider, dedupe_key, headers, body) VALUES ('stripe', 'evt_1', '[]', '\\x7b7d') RETURNING id
                """
            ).first!.int64("id")
            do {
                _ = try DeliveryQueue.find(id: id, on: conn)
                Issue.record("a delivery of an unknown provider was read as some other provider")
            } catch {
                #expect(String(describing: error).contains("provider 'stripe', which this payrecon does not know"))
            }
        }
    }
}
