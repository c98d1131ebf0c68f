import Foundation
import PaysimCore
import PayreconTesting
import Postgres
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
            try await h.seedPayPal(#"""
                {"id":"PP-PEND","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00",
                 "captures":[{"id":"CAP-P","status":"PARTIALLY_REFUNDED"}],
                 "refunds":[{"id":"REF-P","capture_id":"CAP-P","status":"PENDING","amount":"30.00","status_details_reason":"ECHECK"}]}
                """#)
            let order = WorkerHarness.order(.paypal, "ORD-P", ref: "PP-PEND", intent: .purchase, amount: 10000, currency: "USD", refund: 3000,
                                            merchant: nil)
            try h.insert(order)
            guard case .checked(_, let matched) = await h.checker.check(order) else { Issue.record("check failed"); return }
            #expect(matched, "R counts the pending refund: nothing is wrong")
            #expect(try h.actions().isEmpty, "no second refund of the pending money is planned")
            let conn = try h.database.connect(); defer { conn.close() }
            let raw = try conn.query("SELECT snapshot->>'rawState' AS raw, snapshot->>'refunded' AS r FROM snapshots WHERE order_id = 'ORD-P'").first
            #expect(try raw?.string("raw") == "COMPLETED/REFUND_PENDING")
            #expect(try raw?.string("r") == "3000")

            // The refund fails at PayPal: it moved nothing, and the order still wants 30.00 back.
            try await h.admin("/admin/paypal/refunds", #"{"refund_id":"REF-P","status":"FAILED"}"#)
            _ = await h.checker.check(order)
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
            try await h.seedPayPal(#"""
                {"id":"PP-OWN","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00",
                 "captures":[{"id":"CAP-O","refunds_pending_reason":"ECHECK"}]}
                """#)
            var order = WorkerHarness.order(.paypal, "ORD-O", ref: "PP-OWN", intent: .purchase, amount: 10000, currency: "USD", refund: 3000,
                                            merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order)
            #expect(await h.executor.executePending().succeeded == 1)
            var refunds = Self.refundsAtPayPal(h, order: "PP-OWN")
            #expect(refunds.map(\.status) == ["PENDING"], "\(refunds)")

            order.refundAmount = 5000
            try h.insert(order)
            _ = await h.checker.check(order)
            let pending = try h.actions().filter { $0.status == .pending }
            #expect(pending.map { "\($0.idempotencyKey)=\($0.amount.minorUnits)" } == ["paypal:ORD-O:refund:5000=2000"])
            #expect(await h.executor.executePending().succeeded == 1)
            refunds = Self.refundsAtPayPal(h, order: "PP-OWN")
            #expect(refunds.map(\.value) == [3000, 2000], "50.00 in all goes back, never 80.00: \(refunds)")
            guard case .checked(_, let matched) = await h.checker.check(order) else { Issue.record("check failed"); return }
            #expect(matched)
        }
    }
}
