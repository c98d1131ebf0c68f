import Foundation
import Observability
import HTTP
import PaysimCore
import PayreconTesting
@_spi(Positional) import Postgres
import Providers
import Reconciliation
import Store
import Testing
import Worker

/// How actions execute, end to end against paysim over real HTTP and a real PostgreSQL (issue "money by
/// construction", items 3, 4, 5, 7 and 8): a key once sent goes again only as it was sent, what is recorded as moved
/// is what the provider answered, a 429 is sent again as it was, and an action is recorded as it ended.
@Suite("Money by construction", .serialized) struct MoneyByConstructionTests {
    static func keysSent(_ h: WorkerHarness, provider: String) -> [String] {
        h.simulator.log.filter { $0.provider == provider }.compactMap(\.idempotencyKey)
    }

    static func statuses(_ h: WorkerHarness) throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try h.actions().map { ($0.idempotencyKey, $0.status.rawValue) })
    }

    /// Item 3. A PayPal refund of 30.00 is cut before PayPal applies it (its outcome unknown); meanwhile 10.00 is
    /// refunded in PayPal's dashboard, so the fresh plan wants 20.00 under the same key (its target, 30.00 refunded,
    /// is the same). That key is never sent again with another amount: the action is superseded and the 20.00 goes
    /// under `…:2`.
    @Test func aKeySentOnceIsNeverSentWithAnotherAmount() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-K","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-K"}]}"#)
            let order = WorkerHarness.order(
                .paypal, "ORD-K", ref: "PP-K", intent: .purchase, amount: 10000, currency: "USD", refund: 3000, merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            try await h.faults(#"{"drop_before_apply_rate":1.0}"#)
            _ = await h.executor.executePending()
            try await h.clearFaults()
            try await h.faults(#"{"drop_before_apply_rate":0}"#)
            #expect(try h.actions().first?.inDoubt == true)
            // The dashboard refund of 10.00.
            try await h.seedPayPal(
                #"""
                {"id":"PP-K","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-K","status":"PARTIALLY_REFUNDED"}],
                 "refunds":[{"id":"REF-DASH","capture_id":"CAP-K","amount":"10.00"}]}
                """#)
            try h.execute("UPDATE actions SET lease_expires_at = NULL")
            _ = await h.executor.executePending()  // superseded; the check after it plans …:2
            _ = await h.executor.executePending()
            let sent = Self.keysSent(h, provider: "paypal")
            #expect(sent.filter { $0 == "paypal:ORD-K:refund:3000" }.count == 1, "the key went once, with 30.00: \(sent)")
            #expect(sent.filter { $0 == "paypal:ORD-K:refund:3000:2" }.count == 1, "\(sent)")
            #expect(try Self.statuses(h) == ["paypal:ORD-K:refund:3000": "superseded", "paypal:ORD-K:refund:3000:2": "succeeded"])
            let refunds = h.simulator.paypalRefunds(ofOrder: "PP-K").filter { $0.status == "COMPLETED" }.map(\.amount)
            #expect(refunds.reduce(0, +) == 3000, "30.00 in all, as the order wants: \(refunds)")
            guard case .checked(_, let matched) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(matched)
        }
    }

    /// Item 3. A Paypercut refund whose key an earlier request used with other parameters is answered 409
    /// `idempotency_error`: that proves the earlier request arrived, so the call in doubt stays in doubt (never
    /// `failed`, which would release the order's hold).
    @Test func paypercutsIdempotencyErrorKeepsACallInDoubtInDoubt() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"{"id":"pi_K","status":"succeeded","capture_method":"automatic","amount":2000,"currency":"EUR","amount_received":2000,"payment":{"status":"succeeded","amount_captured":2000}}"#
            )
            let order = WorkerHarness.order(
                .paypercut, "ORD-PK", ref: "pi_K", intent: .purchase, amount: 2000, currency: "EUR", refund: 700, merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            let key = try #require(try h.actions().first?.idempotencyKey)
            // An earlier request under this key, with other parameters, reached Paypercut; payrecon's call is in doubt.
            // (On another path, so it moved no money: Paypercut refused it, and keeps the key as used.)
            let other = try await h.http.send(
                HTTPClientRequest(
                    method: "POST", url: h.paysimURL + "/v1/payment_intents/pi_K/cancel",
                    headers: [
                        ("Authorization", "Bearer " + h.simulator.config.paypercutSecretKey), ("Idempotency-Key", key),
                        ("Content-Type", "application/json")
                    ],
                    body: Array(#"{"cancellation_reason":"requested_by_customer"}"#.utf8)))
            #expect(other.status == 409, "\(other.status)")
            try h.execute("UPDATE actions SET in_doubt = true, sent_at = now() - interval '1 hour'")
            _ = await h.executor.executePending()
            let action = try #require(try h.actions().first)
            #expect(action.status == .pending && action.inDoubt, "\(action.status) \(action.lastError ?? "")")
            #expect(action.lastError?.contains("idempotency_error") == true, "\(action.lastError ?? "")")
        }
    }

    /// Item 4. What a PXP modification moved is what PXP's answer states: before a re-send the modification is looked
    /// up, and the link records the value PXP shows for it, not the amount the call carried.
    @Test func aPXPModificationIsRecordedWithTheAmountPXPStates() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", #"{"dedupe":false,"lookup":true}"#)
            try await h.seedPXP("TX-M", intent: "Purchase", value: "20.00", state: "Captured")
            let order = WorkerHarness.order(.pxp, "O-M", ref: "TX-M", intent: .purchase, amount: 2000, refund: 1000)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            let snapshot = try #require(
                await {
                    if case .found(let s) = await h.gateway[.pxp].snapshot(
                        of: TransactionQuery(transactionRef: "TX-M", merchant: "M1", site: "S1"))
                    {
                        return s
                    }
                    return nil
                }())
            let key = "pxp:O-M:refund:1000"
            let parent = try #require(snapshot.aliases.first)
            // The refund of 10.00 reached PXP; its answer was lost.
            let first = ActionCall(
                actionID: 1, kind: .refund, amount: Money(minorUnits: 1000, currency: Currency(code: "GBP")!), target: 1000,
                providerTarget: parent, idempotencyKey: key, order: order, snapshot: snapshot)
            guard case .found = await h.gateway[.pxp].execute(first).outcome else { Issue.record("first refund not made"); return }
            // A call under the same key that carries 7.00 (as a stale plan once sent) finds the modification PXP holds.
            let prepared = h.gateway[.pxp].prepare(first)
            var again = first
            again.amount = Money(minorUnits: 700, currency: Currency(code: "GBP")!)
            again.links = prepared
            let result = await h.gateway[.pxp].execute(again)
            let made = try #require(
                result.links.first { $0.source == .payrecon && !$0.externalID.hasPrefix("pxr") && $0.state == "Authorised" })
            #expect(made.amount == 1000, "recorded as PXP states it: \(result.links)")
            #expect(h.simulator.pxpTransactions().filter { $0.operation == "Refund" }.count == 1, "sent once")
        }
    }

    /// Item 5. A PXP capture answered 429 (Retry-After: 1) was refused before it was processed: it is not in doubt,
    /// and it is sent again after the second, under the same merchantTransactionId and body; it succeeds once.
    @Test func aPXPCaptureRefusedWith429IsSentAgainAndSucceeds() async throws {
        try await WorkerHarness.with { h in
            let order = try await ActionSafetyTests.plannedPXPCapture(h)
            try await h.faults(#"{"refuse_actions_429":1,"retry_after":1}"#)
            _ = await h.executor.executePending()
            var action = try #require(try h.actions().first)
            #expect(action.status == .pending && !action.inDoubt, "\(action.status) in doubt \(action.inDoubt): \(action.lastError ?? "")")
            #expect(await h.executor.executePending() == ActionExecutor.Totals(), "not claimed again before its Retry-After")
            try await Task.sleep(for: .milliseconds(1200))
            #expect(await h.executor.executePending().succeeded == 1)
            action = try #require(try h.actions().first)
            #expect(action.status == .succeeded)
            #expect(h.simulator.pxpTransactions().filter { $0.operation == "Capture" || $0.operation == "FinalCapture" }.count == 1)
            let sent = h.simulator.log.filter { $0.provider == "pxp" && $0.method == "POST" }.map(\.status)
            #expect(sent == [429, 200], "\(sent)")
            guard case .checked(_, let matched) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(matched)
        }
    }

    /// Item 8. A PayPal refund that PayPal applied, whose executor lost its lease before recording it, is found by the
    /// mark it carried (custom_id) and recorded `succeeded`, not superseded.
    @Test func aPayPalRefundMadeByAnExecutorThatLostItsLeaseIsSucceeded() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-L","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-L"}]}"#)
            let order = WorkerHarness.order(
                .paypal, "ORD-L", ref: "PP-L", intent: .purchase, amount: 10000, currency: "USD", refund: 2500, merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            // The call takes 1.5 s; meanwhile another executor takes the action over (its claim moves on).
            try await h.faults(#"{"latency_ms":1500}"#)
            let slow = Task { await h.executor.executePending() }
            // Once the call is on its way (the action confirmed, sent_at set), the action is taken from under it.
            for _ in 0..<100 where try h.database.count("SELECT count(*) FROM actions WHERE sent_at IS NOT NULL") == 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            try h.execute("UPDATE actions SET attempts = attempts + 1, lease_expires_at = NULL")
            _ = await slow.value
            try await h.clearFaults()
            #expect(h.simulator.paypalRefunds(ofOrder: "PP-L").map(\.amount) == [2500], "PayPal applied it")
            var action = try #require(try h.actions().first)
            #expect(action.status == .pending && action.inDoubt, "the first executor could not record it")
            _ = await h.executor.executePending()
            action = try #require(try h.actions().first)
            #expect(action.status == .succeeded, "\(action.status): \(action.lastError ?? "")")
            #expect(h.simulator.paypalRefunds(ofOrder: "PP-L").map(\.amount) == [2500], "and never sent again")
            #expect(h.simulator.paypalRefunds(ofOrder: "PP-L").first?.customID == "paypal:ORD-L:refund:2500")
        }
    }

    /// Item 7. A re-fetch that decided not to send records no key as planned: only the check that went on to its call
    /// planned it.
    @Test func aCheckThatDecidedNotToSendPlansNothing() async throws {
        try await WorkerHarness.with { h in
            let order = try await ActionSafetyTests.plannedPXPCapture(h)
            // Captured elsewhere meanwhile: the executor's re-fetch finds nothing to do.
            try await h.admin(
                "/admin/pxp/transactions",
                #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Authorisation","currency":"GBP","value":"20.00","state":"Captured"}"#
            )
            _ = await h.executor.executePending()
            #expect(try h.actions().first?.status == .superseded)
            let conn = try h.database.connect(); defer { conn.close() }
            let rows = try conn.query(
                """
                SELECT decided, (decision->'planned')::text AS planned FROM evidence
                WHERE order_id = $1 AND source = 'executor' AND decided IS NOT NULL
                """, [.text(order.orderID)])
            #expect(!rows.isEmpty)
            for row in rows {
                let decided = try row.string("decided"), planned = try row.string("planned")
                #expect(planned == "[]", "\(decided): \(planned)")
            }
        }
    }
}

/// A subscription order (transaction_ref the billing agreement) whose sale was refunded, with only the
/// refund's event in the shape PayPal's webhook simulator sends, is found through the sale's agreement: checked from
/// the sale, never fetched as an Orders v2 order (which answers 404: `missing_at_provider`, blocking every action).
@Suite("Sale refunds and their agreement", .serialized) struct SaleRefundAgreementTests {
    @Test func aSaleRefundAloneFindsTheSubscriptionOrderAndTheSweepChecksTheSale() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales",
                #"{"id":"SALE-SUB","state":"completed","amount":"9.99","currency":"USD","billing_agreement_id":"I-SUB1","parent_payment":"PAYID-SUB"}"#
            )
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-SUB", ref: "I-SUB1", intent: .purchase, amount: 999, currency: "USD", refund: 999, merchant: nil))
            let elsewhere = await ActionSafetyTests.elsewhere(h).refundSale(
                "SALE-SUB", amount: Money(minorUnits: 999, currency: Currency(code: "USD")!),
                requestID: "dashboard-refund-sub")
            guard case .found = elsewhere else { Issue.record("the dashboard refund failed: \(elsewhere)"); return }
            let id = try #require(
                try h.storeWebhook(
                    #"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"SALE-SUB","shape":"simulator"}"#
                ).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-SUB")
            _ = try await h.sweep()
            let open = try h.openKinds(order: "ORD-SUB")
            #expect(!open.contains("missing_at_provider"), "\(open)")
            #expect(open.isEmpty, "refunded as the order wants: \(open)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }.isEmpty)
            #expect(try h.actions().isEmpty)
        }
    }
}
