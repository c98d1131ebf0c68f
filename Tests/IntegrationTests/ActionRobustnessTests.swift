import Foundation
import Observability
import PaysimCore
import PayreconTesting
@_spi(Positional) import Postgres
import Providers
import Reconciliation
import Store
import Testing
import Worker

/// The executor's robustness: it leases only what it runs, actions run beside a busy queue, a re-pended action takes
/// the plan's currency, and `payrecon actions retry` says what it did.
@Suite(.serialized) struct ActionRobustnessTests {
    /// Nothing is left leased once a pass returns: an action leased and not run could not be superseded by a check
    /// until its lease ran out.
    @Test func aPassLeavesNoActionLeased() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXPOrders(3)
            for i in 0..<3 {
                _ = await h.checker.check(WorkerHarness.order(.pxp, "O-\(i)", ref: "TX-\(i)", amount: 2000), logger: Logger())
            }
            #expect(try h.actions().count == 3)
            try await h.faults(#"{"error_rate":1.0}"#)  // every call transient: every action stays pending
            let totals = await h.executor.executePending()
            #expect(totals.deferred == 3)
            let conn = try h.database.connect(); defer { conn.close() }
            let leased = try conn.query("SELECT count(*) AS n FROM actions WHERE status = 'pending' AND lease_expires_at > now()").first?
                .int64("n")
            #expect(leased == 0, "actions tried and left pending are not held")
        }
    }

    /// Actions ran only when the worker held no delivery, so sustained webhook load starved them. Now an action is
    /// executed while deliveries are still being worked through.
    @Test func actionsRunBesideABusyQueue() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-A", value: "20.00")
            let order = WorkerHarness.order(.pxp, "O-A", ref: "TX-A", amount: 2000)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            // A slow PayPal makes the queue busy: 40 deliveries at 2 at a time, each fetch 400 ms.
            try await h.seedPayPal(
                #"{"id":"PP-B","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"5.00","captures":[{"id":"CAP-B"}]}"#)
            for _ in 0..<40 { _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"PP-B"}"#) }
            try await h.faults(#"{"latency_ms":400}"#)
            let worker = h.worker(batchSize: 2, executeActions: true)
            let running = Task { await worker.run(once: false) }
            let executed = try await h.eventually(20) { try h.actions().first?.status == .succeeded }
            let conn = try h.database.connect(); defer { conn.close() }
            let pending = try conn.query("SELECT count(*) AS n FROM deliveries WHERE status = 'pending'").first?.int64("n") ?? 0
            worker.stop()
            _ = await running.value
            #expect(executed, "the capture ran while the queue was busy")
            #expect(pending > 0, "deliveries were still waiting when the action had run")
        }
    }

    /// A superseded key the plan wants again is pending again with the plan's amount and currency.
    @Test func aRependedActionTakesThePlansCurrency() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            let gbp = Currency(code: "GBP")!, eur = Currency(code: "EUR")!
            let order = Order(
                provider: .pxp, orderID: "O", merchant: "M1", site: "S1", transactionRef: "TX", intent: .authorisation,
                amount: Money(minorUnits: 1000, currency: gbp), fulfilment: .fulfilled)
            try OrderStore.upsert([order], on: conn)
            func plan(_ currency: Currency, supersede: Bool, at second: TimeInterval) throws {
                _ = try PlannedCheck.record(
                    provider: .pxp, order: order, transactionRef: "TX", snapshot: nil,
                    fetchedAt: Date(timeIntervalSince1970: 1_800_000_000 + second),
                    plan: { _, _ in
                        supersede
                            ? Plan(supersede: ["pxp:O:capture:1000"])
                            : Plan(actions: [
                                PlannedAction(
                                    kind: .capture, amount: 1000, currency: currency, target: 1000,
                                    idempotencyKey: "pxp:O:capture:1000", providerTarget: nil)
                            ])
                    }, on: conn)
            }
            try plan(gbp, supersede: false, at: 1)
            try plan(gbp, supersede: true, at: 2)
            try plan(eur, supersede: false, at: 3)
            let row = try #require(try conn.query("SELECT status, currency FROM actions").first)
            #expect(try row.string("status") == "pending")
            #expect(try row.string("currency") == "EUR")
        }
    }

    /// A retry re-plans the attempt it read: an action tried again meanwhile (another retry, sent and failed again) is
    /// neither re-pended nor superseded by the older plan, and a retry asked for an attempt that is not the latest (a
    /// console form opened before) is refused before anything is fetched.
    @Test func aRetryActsOnlyOnTheAttemptItReplanned() async throws {
        try await WorkerHarness.with { h in
            let conn = try h.database.connect(); defer { conn.close() }
            _ = try conn.execute(
                """
                INSERT INTO actions (id, provider, order_id, action, amount_minor, currency, target_minor, idempotency_key, status, attempts)
                VALUES (5, 'pxp', 'O-5', 'capture', 1000, 'EUR', 1000, 'pxp:O-5:capture:1000', 'failed', 2)
                """)
            #expect(try !ActionStore.retry(id: 5, attempts: 1, amount: 1000, currency: "EUR", providerTarget: nil, on: conn))
            #expect(try !ActionStore.retire(id: 5, attempts: 1, reason: "stale", on: conn))
            #expect(try conn.query("SELECT status FROM actions WHERE id = 5").first?.string("status") == "failed")
            let refused = await h.executor.retry(id: 5, expectedAttempts: 1)
            guard case .notFailed(let why) = refused else { Issue.record("\(refused)"); return }
            #expect(why.contains("tried again since (attempt 2 now, 1 when looked at)"))
            #expect(try ActionStore.retry(id: 5, attempts: 2, amount: 1000, currency: "EUR", providerTarget: nil, on: conn))
        }
    }

    @Test func actionsRetrySaysWhatItDid() async throws {
        try await WorkerHarness.with { h in
            let none = try await PayreconProcess.launch(
                ["actions", "retry", "--failed"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            #expect(none.status == 0 && none.stdout.contains("no failed actions to retry"), "\(none.stdout) \(none.stderr)")
            let unknown = try await PayreconProcess.launch(
                ["actions", "retry", "999"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            // An id no action has is the caller's mistake (2, as events retry and explain say of theirs), not a finding (1).
            #expect(
                unknown.status == 2 && unknown.stderr.contains("no action 999") && unknown.stderr.contains("actions list --status failed"),
                "\(unknown.status) \(unknown.stderr)")
            let bad = try await PayreconProcess.launch(
                ["actions", "retry", "x"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            #expect(bad.status == 2 && bad.stderr.contains("ID must be an action id"), "\(bad.stderr)")
        }
    }
}
