@_spi(Positional) import Postgres
import Crypto
import Foundation
import Observability
import HTTP
import PaysimCore
import PayreconTesting
import Providers
import Reconciliation
import Store
import Testing
@testable import Worker
import TextFormats

/// Actions move money exactly once, for exactly the right amount (issue 11),
/// against PostgreSQL and paysim over real HTTP.
@Suite struct ActionSafetyTests {
    static func pending(_ h: WorkerHarness) throws -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: try h.actions().filter { $0.status == .pending }.map { ($0.idempotencyKey, $0.amount.minorUnits) })
    }

    /// A PayPal order authorised for 20.00, its merchant order fulfilled for 20.00, checked: capture:2000 pending.
    static func plannedPayPalCapture(_ h: WorkerHarness) async throws -> Order {
        try await h.seedPayPal(#"{"id":"PP-1","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#)
        let order = WorkerHarness.order(.paypal, "P1", ref: "PP-1", amount: 2000, currency: "USD", merchant: nil)
        try h.insert(order)
        _ = await h.checker.check(order, logger: Logger())
        return order
    }

    /// The same at PXP (merchant M1, site S1, GBP, authorised for 20.00): capture:`amount` pending.
    static func plannedPXPCapture(_ h: WorkerHarness, amount: Int64 = 2000) async throws -> Order {
        try await h.seedPXP("TX", value: "20.00")
        let order = WorkerHarness.order(.pxp, "O", ref: "TX", amount: amount)
        try h.insert(order)
        _ = await h.checker.check(order, logger: Logger())
        return order
    }

    static func status(_ h: WorkerHarness, _ key: String) throws -> ActionStatus? {
        try h.actions().first { $0.idempotencyKey == key }?.status
    }

    /// Defect 1: a superseded key the plan wants again must be pending again (the order's amount changed and
    /// changed back), not silently left superseded.
    @Test func aSupersededActionThePlanWantsAgainIsPendingAgain() async throws {
        try await WorkerHarness.with { h in
            var order = try await Self.plannedPXPCapture(h)
            #expect(try Self.pending(h) == ["pxp:O:capture:2000": 2000])

            order.amount = Money(minorUnits: 1500, currency: order.amount.currency)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            #expect(try Self.pending(h) == ["pxp:O:capture:1500": 1500])
            #expect(try Self.status(h, "pxp:O:capture:2000") == .superseded)

            order.amount = Money(minorUnits: 2000, currency: order.amount.currency)
            try h.insert(order)
            guard case .checked(let outcome, _) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(try Self.pending(h) == ["pxp:O:capture:2000": 2000], "the capture the order calls for again is pending")
            #expect(try Self.status(h, "pxp:O:capture:1500") == .superseded)
            #expect(outcome.actionsEmitted == 1 && outcome.superseded == 1)
            #expect(try h.actions().count == 2, "the revived key is the same row")
        }
    }

    /// Defect 5: a check that fetched before the order changed must not plan from the order it was handed, nor leave
    /// a second pending capture beside the one a later check recorded.
    @Test func twoConcurrentChecksOfOneOrderLeaveOnePendingCapture() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            let before = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000)
            try h.insert(before)
            try await h.faults(#"{"latency_ms":1500}"#)
            let slow = Task { await h.checker.check(before, logger: Logger()) }  // its fetch is in flight for 1.5 s
            try await Task.sleep(for: .milliseconds(300))
            var after = before
            after.amount = Money(minorUnits: 1800, currency: before.amount.currency)
            try h.insert(after)
            try await h.faults(#"{"latency_ms":0}"#)
            guard case .checked = await h.checker.check(after, logger: Logger()) else { Issue.record("fast check failed"); return }
            let slowResult = await slow.value;
            guard case .checked = slowResult else { Issue.record("slow check failed: \(slowResult)"); return }
            #expect(try Self.pending(h) == ["pxp:O:capture:1800": 1800])
            // The stored snapshot is the newer one.
            let fetched = try h.database.count("SELECT count(*) FROM snapshots WHERE fetched_at > now() - interval '1 minute'")
            #expect(fetched == 1)
        }
    }

    /// A PayPal client of "someone else" (the merchant's portal, their own system) on the same paysim.
    static func elsewhere(_ h: WorkerHarness) -> PayPalClient {
        let config = SimConfig()
        return PayPalClient(
            configuration: PayPalConfiguration(
                baseURL: h.paysimURL, clientID: config.paypalClientID,
                secret: config.paypalSecret, timeout: .seconds(10)),
            transport: HTTPClientTransport(client: h.http), retry: .none)
    }

    static func paypalOrder(_ h: WorkerHarness, _ id: String) async throws -> JSONValue {
        guard case .found(let order) = await elsewhere(h).order(id) else { throw TestSetupError("paysim has no PayPal order \(id)") }
        return order
    }

    /// Defect 2: the amount was fixed at planning time. After 3.00 was captured elsewhere, the capture to 20.00 must
    /// send 17.00 (PayPal accepts up to 115% of an authorization, so 20.00 would over-capture).
    @Test func aCaptureAfterAPartialCaptureElsewhereSendsTheRest() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPayPalCapture(h)
            #expect(try Self.pending(h) == ["paypal:P1:capture:2000": 2000])
            let other = await Self.elsewhere(h).captureAuthorization(
                "AUTH-1", amount: Money(minorUnits: 300, currency: Currency(code: "USD")!),
                final: false, requestID: "portal-capture-1")
            guard case .found = other else { Issue.record("the capture elsewhere failed: \(other)"); return }

            #expect(await h.executor.executePending().succeeded == 1)
            let action = try #require(try h.actions().first)
            #expect(action.status == .succeeded && action.amount.minorUnits == 1700, "\(action)")
            let captures = try await Self.paypalOrder(h, "PP-1")["purchase_units"]?[0]?["payments"]?["captures"]?.arrayValue ?? []
            #expect(captures.compactMap { $0["amount"]?["value"]?.stringValue }.sorted() == ["17.00", "3.00"])
        }
    }

    /// Defect 4: no re-plan before the call. The order was cancelled after the capture was planned: the capture is
    /// superseded and never sent.
    @Test func aCaptureForAnOrderCancelledSinceIsNotSent() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-1","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#)
            var order = WorkerHarness.order(.paypal, "P1", ref: "PP-1", amount: 2000, currency: "USD", merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            order.fulfilment = .cancelled
            try h.insert(order)  // the merchant cancels; no check has run since
            let totals = await h.executor.executePending()
            #expect(totals.succeeded == 1, "the void the fresh check emits is executed, not the capture")
            #expect(try Self.status(h, "paypal:P1:capture:2000") == .superseded)
            let log = try await h.paysimLog(provider: "paypal")
            #expect(!log.contains { ($0["path"] as? String)?.hasSuffix("/capture") == true }, "\(log)")
            #expect(log.contains { ($0["path"] as? String)?.hasSuffix("/void") == true && $0["result"] as? String == "applied" })
        }
    }

    /// A renewal under way when the attempt records its outcome finds the action no longer pending. That is the fence
    /// having decided, not a lost lease: the attempt goes on to re-check the order and counts what it recorded. (Under
    /// a loaded CI run the renewal's late `false` made a succeeded call count as deferred and skip its re-check.)
    @Test func aRenewalThatLandsAfterTheRecordIsNotALostLease() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPayPalCapture(h)
            let claimed = try h.database.connect()
            defer { claimed.close() }
            let action = try #require(try ActionStore.claimPending(lease: .seconds(60), limit: 1, on: claimed).first)
            // The action's row is held by another transaction: the renewal's UPDATE waits on it.
            let holder = try h.database.connect()
            defer { holder.close() }
            try holder.execute("BEGIN")
            try holder.execute("SELECT 1 FROM actions WHERE id = $1 FOR UPDATE", [.int64(action.id)])
            let renewal = LeaseRenewal(pool: h.pool, action: action, lease: .seconds(1), logger: Logger())  // renews every 333 ms
            var waiting = false
            for _ in 0..<50 where !waiting {
                try await Task.sleep(for: .milliseconds(100))
                waiting =
                    try h.database.count(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE actions SET lease_expires_at%'"
                    ) == 1
            }
            #expect(waiting, "the renewal is waiting on the row")
            renewal.stop()  // the attempt records its outcome now
            try holder.execute("UPDATE actions SET status = 'succeeded' WHERE id = $1", [.int64(action.id)])
            try holder.execute("COMMIT")  // the renewal now finds it no longer pending
            try await Task.sleep(for: .milliseconds(300))
            #expect(!renewal.isLost)
        }
    }

    /// Defect 3: two executors can both call, and the first one's late outcome overwrites the second's. The lease
    /// is renewed while the call is in flight, so a second executor never takes the action.
    @Test func twoExecutorsRacingOnOneActionCallTheProviderOnce() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPayPalCapture(h)
            // A 3 s lease renewed every second: long enough that a loaded 2-core machine does not stall a renewal past
            // the lease's end (a lapse the fence handles, but not what this test is about).
            let a = ActionExecutor(pool: h.pool, gateway: h.gateway, checker: h.checker, lease: .seconds(3), logger: Logger())
            let b = ActionExecutor(pool: h.pool, gateway: h.gateway, checker: h.checker, lease: .seconds(3), logger: Logger())
            try await h.faults(#"{"latency_ms":4500}"#)  // the re-fetch and the call each outlast a 3 s lease
            let first = Task { await a.executePending() }
            try await Task.sleep(for: .milliseconds(3600))  // a's claim would have run out by now
            let second = await b.executePending()
            let firstTotals = await first.value
            #expect(firstTotals.succeeded == 1)
            #expect(second == ActionExecutor.Totals(), "the second executor took an action whose call was in flight")
            let calls = try await h.paysimLog(provider: "paypal").filter { ($0["path"] as? String)?.hasSuffix("/capture") == true }
            #expect(calls.count == 1, "\(calls)")
            #expect(try Self.status(h, "paypal:P1:capture:2000") == .succeeded)
        }
    }

    /// An executor whose claim was taken while it re-fetched (its lease lapsed and another executor claimed the
    /// action) must not make the call: the fence is checked just before it, not only when the outcome is recorded.
    @Test func anExecutorThatLostItsClaimDuringTheRefetchDoesNotCall() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPayPalCapture(h)
            try await h.faults(#"{"latency_ms":1500}"#)  // the re-fetch
            let first = Task { await h.executor.executePending() }
            try await Task.sleep(for: .milliseconds(500))
            // What another executor's claim does once a lease has lapsed.
            try h.execute("UPDATE actions SET attempts = attempts + 1, lease_expires_at = now() + interval '1 minute'")
            let totals = await first.value
            #expect(totals.succeeded == 0)
            let calls = try await h.paysimLog(provider: "paypal").filter { ($0["path"] as? String)?.hasSuffix("/capture") == true }
            #expect(calls.isEmpty, "the executor called after losing its claim: \(calls)")
            #expect(try Self.status(h, "paypal:P1:capture:2000") == .pending)
        }
    }

    /// Defect 7: a capture that brings C to the order amount is final, releasing the rest of the authorisation.
    @Test func aCaptureToTheOrderAmountIsFinal() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-1","intent":"AUTHORIZE","currency":"USD","amount":"100.00","authorizations":[{"id":"AUTH-1"}]}"#)
            let order = WorkerHarness.order(.paypal, "P1", ref: "PP-1", amount: 8000, currency: "USD", merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            #expect(await h.executor.executePending().succeeded == 1)
            let paypal = try await Self.paypalOrder(h, "PP-1")
            let payments = paypal["purchase_units"]?[0]?["payments"]
            #expect(payments?["captures"]?[0]?["final_capture"]?.boolValue == true)
            #expect(payments?["authorizations"]?[0]?["status"]?.stringValue == "CAPTURED", "the rest of the authorization is released")

            // PXP: Final capture.
            try await h.seedPXP("TX", value: "20.00")
            let pxp = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 1500)
            try h.insert(pxp)
            _ = await h.checker.check(pxp, logger: Logger())
            #expect(await h.executor.executePending().succeeded == 1)
            let modification = try #require(try await h.paysimLog(provider: "pxp").first)
            #expect(modification["result"] as? String == "applied")
            let link = try #require(try h.database.connect().query("SELECT state FROM transaction_links WHERE kind = 'capture'").first)
            #expect(try link.string("state") == "Captured")
        }
    }

    /// Defect 8: PayPal-Request-Id takes at most 108 characters; a longer key is sent as its SHA-256 in hex.
    @Test func aKeyLongerThanPayPalTakesIsSentAsItsSHA256() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-1","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#)
            let longID = "ORDER-" + String(repeating: "x", count: 120)
            let order = WorkerHarness.order(.paypal, longID, ref: "PP-1", amount: 2000, currency: "USD", merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            let key = "paypal:\(longID):capture:2000"
            #expect(await h.executor.executePending().succeeded == 1)
            let sent = try #require(try await h.paysimLog(provider: "paypal").first?["idempotency_key"] as? String)
            #expect(sent == Hex.encode(Crypto.SHA256.hash(Array(key.utf8))) && sent.count == 64)
            #expect(try Self.status(h, key) == .succeeded)
        }
    }

    /// Defect 6: a PXP modification is recorded before it is sent, so its webhook (naming only its
    /// merchantTransactionId, and possibly arriving before the answer) finds the order instead of unknown_order.
    @Test func aPXPModificationsWebhookFindsItsOrder() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPXPCapture(h)
            #expect(await h.executor.executePending().succeeded == 1)
            let mtid = PXPClient.merchantTransactionId(forIdempotencyKey: "pxp:O:capture:2000")
            _ = try h.store(.pxp, json: pxpEvent(mtid))
            #expect(await h.runOnce().done == 1)
            let found = try h.discrepancies()
            #expect(found.filter { $0.kind == "unknown_order" }.isEmpty, "\(found)")
        }
    }

    /// Defect 6, after an unknown outcome: PXP applied the capture but the answer was lost. The next attempt asks
    /// PXP for the merchantTransactionId and does not send it again.
    @Test(arguments: PXPUnknownOutcomeTests.modes)
    func aPXPModificationWhoseAnswerWasLostIsLookedUpNotResent(_ mode: PXPUnknownOutcomeTests.Mode) async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", mode.json)
            _ = try await Self.plannedPXPCapture(h, amount: 1500)
            try await h.faults(#"{"drop_after_apply_rate":1.0}"#)
            let lost = await h.executor.executePending()
            #expect(lost.deferred == 1, "a lost answer leaves the action pending: \(lost)")
            try await h.clearFaults()
            try await h.faults(#"{"drop_after_apply_rate":0}"#)
            // The fresh fetch sees the capture (PXP reflects it on the parent) or not; either way PXP is asked first,
            // and where it cannot say (lookups that do not find modifications) nothing is sent again.
            for _ in 0..<ActionExecutor.attemptsBeforeOutcomeUnknown {
                try h.execute("UPDATE actions SET lease_expires_at = NULL")
                _ = await h.executor.executePending()
            }
            let posts = try await h.paysimLog(provider: "pxp").filter {
                $0["method"] as? String == "POST" && $0["result"] as? String != "answer_dropped"
            }
            #expect(posts.filter { $0["result"] as? String == "applied" }.count == 1, "\(posts)")
            #expect(posts.count == 1, "the capture is sent once: \(posts)")
            let actions = try h.actions()
            #expect(actions.allSatisfy { $0.status != .pending }, "\(actions)")
        }
    }

    /// Defect 9: PayPal takes HUF and TWD without decimals (ISO 4217 gives them two). A capture goes as "1000",
    /// never "1000.00", and an amount with decimals is action_not_allowed, never a call.
    @Test func hufGoesToPayPalWithoutDecimals() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-HUF","intent":"AUTHORIZE","currency":"HUF","amount":"1000.00","authorizations":[{"id":"AUTH-HUF"}]},
                 {"id":"PP-HUF2","intent":"AUTHORIZE","currency":"HUF","amount":"2000.00","authorizations":[{"id":"AUTH-HUF2"}]}]
                """#)
            let whole = WorkerHarness.order(.paypal, "H1", ref: "PP-HUF", amount: 100_000, currency: "HUF", merchant: nil)
            let fractional = WorkerHarness.order(.paypal, "H2", ref: "PP-HUF2", amount: 100_050, currency: "HUF", merchant: nil)
            try h.insert(whole, fractional)
            _ = await h.checker.check(whole, logger: Logger())
            _ = await h.checker.check(fractional, logger: Logger())
            #expect(try Self.pending(h) == ["paypal:H1:capture:100000": 100_000], "the capture with decimals is not planned")
            #expect(try h.openKinds(order: "H2") == ["action_not_allowed"])
            let detail = try h.database.count(
                "SELECT count(*) FROM discrepancies WHERE order_id = 'H2' AND detail LIKE '%PayPal takes HUF without decimals%'")
            #expect(detail == 1)
            #expect(await h.executor.executePending().succeeded == 1)
            let captured = try await Self.paypalOrder(h, "PP-HUF")["purchase_units"]?[0]?["payments"]?["captures"]?[0]?["amount"]?["value"]?
                .stringValue
            #expect(captured == "1000")
            // Read back: PayPal's "1000" is 100000 ISO minor units, so the order now matches.
            #expect(await h.checker.check(whole, logger: Logger()) == .checked(CheckOutcome(), matched: true))
        }
    }

    /// At most one pending action of a kind per order and transaction, whatever writes the table.
    @Test func theDatabaseRefusesASecondPendingActionOfAKind() async throws {
        try await WorkerHarness.with { h in
            _ = try await Self.plannedPXPCapture(h)
            do {
                try h.execute(
                    """
                    INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, provider_target, idempotency_key)
                    SELECT provider, order_id, action, 900, currency, 900, provider_target, 'pxp:O:capture:900' FROM actions
                    """)
                Issue.record("a second pending capture of one transaction was accepted")
            } catch {
                #expect(String(describing: error).contains("actions_one_pending"))
            }
        }
    }
}
