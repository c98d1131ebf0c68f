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

/// Money the provider accepted and has not finished moving counts as moved, end to end against paysim over real
/// HTTP and a real PostgreSQL (issue "money by construction", item 1): a PENDING PayPal refund is never refunded a
/// second time, whoever made it, and one that fails is planned again.
@Suite("Pending money", .serialized) struct PendingMoneyEndToEndTests {
    static func refundsAtPayPal(_ h: WorkerHarness, order: String) -> [(status: String, value: Int64)] {
        h.simulator.paypalRefunds(ofOrder: order).map { ($0.status, $0.amount) }
    }

    /// The review's case: a 30.00 refund made in PayPal's dashboard is PENDING; the order is imported with
    /// refund_amount 30.00. Nothing is planned nor sent; once the refund fails, the refund is planned and executed.
    @Test func aPendingDashboardRefundIsNotRefundedAgain() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                {"id":"PP-PEND","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00",
                 "captures":[{"id":"CAP-P","status":"PARTIALLY_REFUNDED"}],
                 "refunds":[{"id":"REF-P","capture_id":"CAP-P","status":"PENDING","amount":"30.00","status_details_reason":"ECHECK"}]}
                """#)
            let order = WorkerHarness.order(
                .paypal, "ORD-P", ref: "PP-PEND", intent: .purchase, amount: 10000, currency: "USD", refund: 3000,
                merchant: nil)
            try h.insert(order)
            guard case .checked(_, let matched) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(matched, "R counts the pending refund: nothing is wrong")
            #expect(try h.actions().isEmpty, "no second refund of the pending money is planned")
            let conn = try h.database.connect(); defer { conn.close() }
            let raw = try conn.query(
                "SELECT snapshot->>'rawState' AS raw, snapshot->>'refunded' AS r FROM snapshots WHERE order_id = 'ORD-P'"
            ).first
            #expect(try raw?.string("raw") == "COMPLETED/REFUND_PENDING")
            #expect(try raw?.string("r") == "3000")

            // The refund fails at PayPal: it moved nothing, and the order still wants 30.00 back.
            try await h.admin("/admin/paypal/refunds", #"{"refund_id":"REF-P","status":"FAILED"}"#)
            _ = await h.checker.check(order, logger: Logger())
            #expect(try h.actions().map { "\($0.idempotencyKey)=\($0.amount.minorUnits)" } == ["paypal:ORD-P:refund:3000=3000"])
            #expect(await h.executor.executePending().succeeded == 1)
            let refunds = Self.refundsAtPayPal(h, order: "PP-PEND")
            #expect(refunds.filter { $0.status == "COMPLETED" }.map(\.value) == [3000], "\(refunds)")
        }
    }

    /// The variant: payrecon's own refund comes back PENDING (the capture was funded by an eCheck), then the merchant
    /// raises refund_amount. The new key is sized on R with the pending refund in it: 20.00 more, not 50.00.
    @Test func payreconsOwnPendingRefundIsNotSentAgainWhenTheOrderWantsMore() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                {"id":"PP-OWN","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00",
                 "captures":[{"id":"CAP-O","refunds_pending_reason":"ECHECK"}]}
                """#)
            var order = WorkerHarness.order(
                .paypal, "ORD-O", ref: "PP-OWN", intent: .purchase, amount: 10000, currency: "USD", refund: 3000,
                merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            #expect(await h.executor.executePending().succeeded == 1)
            var refunds = Self.refundsAtPayPal(h, order: "PP-OWN")
            #expect(refunds.map(\.status) == ["PENDING"], "\(refunds)")

            order.refundAmount = 5000
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            let pending = try h.actions().filter { $0.status == .pending }
            #expect(pending.map { "\($0.idempotencyKey)=\($0.amount.minorUnits)" } == ["paypal:ORD-O:refund:5000=2000"])
            #expect(await h.executor.executePending().succeeded == 1)
            refunds = Self.refundsAtPayPal(h, order: "PP-OWN")
            #expect(refunds.map(\.value) == [3000, 2000], "50.00 in all goes back, never 80.00: \(refunds)")
            guard case .checked(_, let matched) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(matched)
        }
    }
}

/// A learned transaction is evidence, never authority (issue "money by construction", item 2), end to end: another
/// customer's payment that carries a cancelled order's number in its reference_id is counted, never refunded, by the
/// worker (a webhook named it) and by `payrecon backfill` (PayPal's list named it); once the merchant lists it, it is.
@Suite("Learned transactions", .serialized) struct LearnedTransactionTests {
    /// ORD-C-1 was paid by PP-C1 (50.00) and cancelled, and that payment refunded. PP-STORE2 (80.00) is a second
    /// storefront's payment on the same PayPal account whose reference_id happens to be "ORD-C-1".
    static func seed(_ h: WorkerHarness, captureTime: String? = nil) async throws {
        let time = captureTime.map { #","create_time":"\#($0)""# } ?? ""
        try await h.seedPayPal(
            #"""
            [{"id":"PP-C1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"50.00","reference_id":"ORD-C-1",
              "captures":[{"id":"CAP-C1","status":"REFUNDED"}],"refunds":[{"id":"REF-C1","capture_id":"CAP-C1","amount":"50.00"}]},
             {"id":"PP-STORE2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"80.00","reference_id":"ORD-C-1",
              "captures":[{"id":"CAP-S2"\#(time)}]}]
            """#)
        try h.insert(
            WorkerHarness.order(
                .paypal, "ORD-C-1", ref: "PP-C1", intent: .purchase, amount: 5000, currency: "USD",
                fulfilment: .cancelled, merchant: nil))
    }

    static func expectNothingMoved(_ h: WorkerHarness) async throws {
        #expect(try h.actions().isEmpty, "no refund of the other customer's payment is planned")
        #expect(await h.executor.executePending().succeeded == 0)
        #expect(h.simulator.paypalRefunds(ofOrder: "PP-STORE2").isEmpty, "PayPal refunded nothing of PP-STORE2")
        let open = try h.openKinds(order: "ORD-C-1")
        #expect(open.contains("over_captured"), "the second payment still shows: \(open)")
        #expect(open.contains("action_not_allowed"), "\(open)")
        let conn = try h.database.connect(); defer { conn.close() }
        let detail =
            try conn.query(
                "SELECT detail FROM discrepancies WHERE order_id = 'ORD-C-1' AND kind = 'action_not_allowed' AND status = 'open'"
            )
            .first?.string("detail") ?? ""
        #expect(
            detail.contains("PP-STORE2") && detail.contains("purchase_units[0].reference_id") && detail.contains("transaction_ref"),
            "\(detail)")
    }

    @Test func aWebhookNamingAnotherCustomersPaymentMovesNoMoney() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            _ = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"PP-STORE2"}"#).first)
            #expect(await h.runOnce().done == 1)
            let conn = try h.database.connect(); defer { conn.close() }
            #expect(
                try OrderStore.find(provider: .paypal, orderID: "ORD-C-1", on: conn)?.learned
                    == ["PP-STORE2": "PayPal purchase_units[0].reference_id"])
            try await Self.expectNothingMoved(h)
            _ = try await h.sweep()
            try await Self.expectNothingMoved(h)

            // The merchant says it is this order's after all (a re-import listing it): now payrecon may refund it.
            var listed = WorkerHarness.order(
                .paypal, "ORD-C-1", ref: "PP-C1", intent: .purchase, amount: 5000, currency: "USD",
                fulfilment: .cancelled, merchant: nil)
            listed.transactionRefs = ["PP-C1", "PP-STORE2"]
            try OrderStore.upsert([listed], on: conn)
            #expect(try OrderStore.find(provider: .paypal, orderID: "ORD-C-1", on: conn)?.learned.isEmpty == true)
            _ = await h.checker.check(try #require(try OrderStore.find(provider: .paypal, orderID: "ORD-C-1", on: conn)), logger: Logger())
            #expect(try h.actions().map { "\($0.idempotencyKey)=\($0.amount.minorUnits)" } == ["paypal:ORD-C-1:refund:8000:PP-STORE2=8000"])
        }
    }

    @Test func backfillLinkingAnotherCustomersPaymentMovesNoMoney() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h, captureTime: BackfillTests.at(1))
            let r = try await BackfillTests.backfill(h, "--since", "3d")
            #expect(r.status == 0 || r.status == 1, "\(r.stdout) \(r.stderr)")
            let conn = try h.database.connect(); defer { conn.close() }
            #expect(
                try OrderStore.find(provider: .paypal, orderID: "ORD-C-1", on: conn)?.learned.keys.sorted() == ["PP-STORE2"], "\(r.stdout)")
            try await Self.expectNothingMoved(h)
        }
    }
}
