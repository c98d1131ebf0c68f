import Crypto
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

/// PayPal as its published documents and real deliveries show it (not as payrecon first read it), end to end
/// against paysim over real HTTP and a real PostgreSQL: chargebacks as reversal records, disputes PayPal refuses to
/// show, orders that expire, the simulator's shape of PAYMENT.SALE.REFUNDED, the v1 refund's key, and the sale
/// refunds payrecon makes itself.
@Suite("PayPal as documented", .serialized) struct PayPalRealityTests {
    static func open(_ h: WorkerHarness, _ order: String) throws -> [String: Int64] {
        let conn = try h.database.connect(); defer { conn.close() }
        var out: [String: Int64] = [:]
        for row in try conn.query(
            "SELECT kind, amount_at_risk_minor FROM discrepancies WHERE order_id = $1 AND status = 'open'", [.text(order)])
        {
            out[try row.string("kind")] = try row.int64("amount_at_risk_minor")
        }
        return out
    }

    /// The chargeback's record is named by PAYMENT.CAPTURE.REVERSED: V, not a merchant refund; the capture itself
    /// reads REFUNDED (PayPal has no REVERSED capture status). A refund the order wants is not planned against it.
    @Test func aChargebackIsReversedAndNoRefundIsPlannedAgainstIt() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-1"}]}"#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-1", ref: "PP-1", intent: .purchase, amount: 10000, currency: "USD", refund: 2000, merchant: nil))
            try await h.admin("/admin/paypal/reversals", #"{"capture_id":"CAP-1"}"#)
            _ = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.REVERSED","resource_id":"CAP-1"}"#).first)
            #expect(await h.runOnce().done == 1)
            let kinds = try Self.open(h, "ORD-1")
            #expect(kinds["reversed"] == 10000, "\(kinds)")
            #expect(kinds["over_refunded"] == nil)
            #expect(try h.actions().isEmpty, "nothing is left to refund: the payer has the money back")
        }
    }

    /// Without the disputes permission PayPal answers 403: the check still records what it can, holds the
    /// capture's refunds, and says which permission is missing.
    @Test func aDisputePayPalWillNotShowHoldsRefundsAndSaysWhy() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-1"}]}"#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-1", ref: "PP-1", intent: .purchase, amount: 10000, currency: "USD", refund: 3000, merchant: nil))
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-1","transaction_id":"CAP-1","amount":"40.00"}"#)
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.CREATED","resource_id":"PP-D-1"}"#).first)
            try await h.admin("/admin/paypal/permissions", #"{"disputes":false}"#)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-1")
            let kinds = try Self.open(h, "ORD-1")
            #expect(kinds["disputed"] == 10000, "held as if the whole capture were disputed: \(kinds)")
            #expect(kinds["action_not_allowed"] == 3000)
            #expect(try h.actions().isEmpty)
            let conn = try h.database.connect(); defer { conn.close() }
            let detail = try conn.query("SELECT detail FROM discrepancies WHERE kind = 'disputed'").first?.string("detail") ?? ""
            #expect(detail.contains("disputes/read-seller"), "\(detail)")
            // The open dispute flipped the capture to PARTIALLY_REFUNDED with no refund record: R stays 0.
            let r = try conn.query("SELECT snapshot->>'refunded' AS r FROM snapshots WHERE order_id = 'ORD-1'").first?.string("r")
            #expect(r == "0")
        }
    }

    /// An unapproved order expires to 404 after about 3 hours: beside the paid retry it is no finding, and it does
    /// not block the retry's actions; alone it is missing_at_provider unless the order was cancelled.
    @Test func anExpiredAttemptIsNoFindingBesideAPaidOne() async throws {
        try await WorkerHarness.with { h in
            let old = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-4 * 3600))
            try await h.seedPayPal(
                """
                [{"id":"PP-OLD","intent":"AUTHORIZE","status":"CREATED","currency":"EUR","amount":"30.00","create_time":"\(old)"},
                 {"id":"PP-NEW","intent":"AUTHORIZE","status":"COMPLETED","currency":"EUR","amount":"30.00","authorizations":[{"id":"AUTH-N"}]},
                 {"id":"PP-GONE","intent":"CAPTURE","status":"CREATED","currency":"EUR","amount":"5.00","create_time":"\(old)"}]
                """)
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-E", ref: "PP-OLD", intent: .authorisation, amount: 3000, currency: "EUR", merchant: nil))
            try h.execute(
                "INSERT INTO order_transactions (provider, order_id, transaction_ref, position) VALUES ('paypal','ORD-E','PP-OLD',0),('paypal','ORD-E','PP-NEW',1)"
            )
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-G", ref: "PP-GONE", intent: .purchase, amount: 500, currency: "EUR", merchant: nil))
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-C", ref: "PP-GONE", intent: .purchase, amount: 500, currency: "EUR",
                    fulfilment: .cancelled, merchant: nil))
            #expect(try await h.sweep().totals.errors == 0)
            let e = try Self.open(h, "ORD-E")
            #expect(e.isEmpty, "\(e)")
            #expect(try h.actions().map(\.idempotencyKey) == ["paypal:ORD-E:capture:3000:PP-NEW"])
            #expect(try Self.open(h, "ORD-G").keys.sorted() == ["missing_at_provider"])
            #expect(try Self.open(h, "ORD-C").isEmpty)
        }
    }

    /// A v1 sale refund payrecon made is counted from its answer, before any PAYMENT.SALE.REFUNDED arrives: raising
    /// refund_amount from 5.00 to 8.00 refunds 3.00 more, never 8.00.
    @Test func aSaleRefundPayreconMadeIsCountedBeforeItsWebhook() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-1","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-1"}"#)
            var order = WorkerHarness.order(
                .paypal, "ORD-S", ref: "PAY-1", intent: .purchase, amount: 2000, currency: "USD", refund: 500, merchant: nil)
            try h.insert(order)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-1"}"#)
            #expect(await h.runOnce().done == 1)
            #expect(await h.executor.executePending().succeeded == 1)
            order.refundAmount = 800
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            _ = await h.executor.executePending()
            let log = try await h.paysimLog(provider: "paypal").filter { $0["result"] as? String == "applied" }
            #expect(log.count == 2, "\(log)")
            let refunds = h.simulator.paypalSaleRefunds(of: "SALE-1")
            #expect(refunds.sorted() == [300, 500], "\(refunds)")
        }
    }

    /// PAYMENT.SALE.REFUNDED as PayPal's webhook simulator sends it (resource_type sale, a negative total, sale_id):
    /// a refund of |total| of that sale, not a sale of its own.
    @Test func aSaleRefundInTheSimulatorsShapeIsARefund() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-2","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-2"}"#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-T", ref: "PAY-2", intent: .purchase, amount: 2000, currency: "USD", refund: 700, merchant: nil))
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-2"}"#)
            #expect(await h.runOnce().done == 1)
            // The merchant refunded 7.00 in PayPal's dashboard; the webhook comes in the simulator's shape.
            let elsewhere = await ActionSafetyTests.elsewhere(h).refundSale(
                "SALE-2", amount: Money(minorUnits: 700, currency: Currency(code: "USD")!),
                requestID: "dashboard-refund-1")
            guard case .found = elsewhere else { Issue.record("the dashboard refund failed: \(elsewhere)"); return }
            let id = try #require(
                try h.storeWebhook(
                    #"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"SALE-2","shape":"simulator"}"#
                ).first)
            let body = String(decoding: try h.delivery(id).body, as: UTF8.self)
            #expect(body.contains(#""resource_type":"sale""#) && body.contains(#""total":"-7.00""#), "\(body)")
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-T")
            #expect(try Self.open(h, "ORD-T").isEmpty)
            #expect(try h.actions().filter { $0.status == .pending }.isEmpty, "R = 7.00 already: nothing to refund")
        }
    }

    /// The v1 sale refund takes a PayPal-Request-Id of at most 78 characters: a longer key goes as its SHA-256.
    @Test func aLongKeyFitsTheV1RefundsSeventyEightCharacters() async throws {
        try await WorkerHarness.with { h in
            let orderID = "ORD-" + String(repeating: "L", count: 70)
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-3","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-3"}"#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, orderID, ref: "PAY-3", intent: .purchase, amount: 2000, currency: "USD", refund: 500, merchant: nil))
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-3"}"#)
            #expect(await h.runOnce().done == 1)
            #expect(await h.executor.executePending().succeeded == 1)
            let sent = try #require(try await h.paysimLog(provider: "paypal").first?["idempotency_key"] as? String)
            #expect(sent.count == 64 && sent == SHA256.hex(Array("paypal:\(orderID):refund:500".utf8)))
        }
    }

    /// A dispute on an order of two PayPal orders is counted once, for the transaction whose capture it
    /// names, not once per transaction.
    @Test func aDisputeIsCountedOnceOnAnOrderOfTwoTransactions() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                """
                [{"id":"PP-A","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"60.00","captures":[{"id":"CAP-A"}]},
                 {"id":"PP-B","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"40.00","captures":[{"id":"CAP-B"}]}]
                """)
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-2", ref: "PP-A", intent: .purchase, amount: 10000, currency: "USD", merchant: nil))
            try h.execute(
                "INSERT INTO order_transactions (provider, order_id, transaction_ref, position) VALUES ('paypal','ORD-2','PP-A',0),('paypal','ORD-2','PP-B',1)"
            )
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-9","transaction_id":"CAP-A","amount":"10.00"}"#)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.CREATED","resource_id":"PP-D-9"}"#)
            #expect(await h.runOnce().done == 1)
            let kinds = try Self.open(h, "ORD-2")
            #expect(kinds["disputed"] == 1000, "\(kinds)")
        }
    }

    /// A v1 sale lost to a chargeback reads `refunded` (the v1 sale states have no reversed); the dispute PayPal's
    /// disputes API shows resolved in the buyer's favour (learned from its CUSTOMER.DISPUTE.* event) makes it V, not R:
    /// `reversed`, never `over_refunded`. A PAYMENT.SALE.REVERSED alone decides nothing.
    @Test func aChargedBackSaleIsReversedNotRefunded() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-4","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-4"}"#)
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-V", ref: "PAY-4", intent: .purchase, amount: 2000, currency: "USD", merchant: nil))
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-4"}"#)
            #expect(await h.runOnce().done == 1)
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-4","transaction_id":"SALE-4"}"#)
            try await h.admin("/admin/paypal/disputes", #"{"resolve":"PP-D-4","outcome":"buyer"}"#)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REVERSED","resource_id":"SALE-4"}"#)
            #expect(await h.runOnce().done == 1)
            // The event alone decides nothing: the sale reads refunded, R, until the dispute is known.
            #expect(try Self.open(h, "ORD-V")["reversed"] == nil)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.RESOLVED","resource_id":"PP-D-4"}"#)
            #expect(await h.runOnce().done == 1)
            let kinds = try Self.open(h, "ORD-V")
            #expect(kinds["reversed"] == 2000, "\(kinds)")
            #expect(kinds["over_refunded"] == nil)
        }
    }
}

/// Whether a refund record is a reversal is read from PayPal's answer, never
/// from the event that named it. A PAYMENT.CAPTURE.REVERSED naming a genuine merchant refund (forged to a CRC32 the
/// sender matched, or simply wrong) leaves that refund in R: no second refund is planned or made.
@Suite("A reversal from the answer", .serialized) struct ReversalFromTheAnswerTests {
    @Test func anEventCallingAMerchantRefundAReversalLeavesItInR() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                {"id":"PP-RV","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00",
                 "captures":[{"id":"CAP-RV","status":"PARTIALLY_REFUNDED"}],
                 "refunds":[{"id":"REF-RV","capture_id":"CAP-RV","amount":"25.00"}]}
                """#)
            let order = WorkerHarness.order(
                .paypal, "ORD-RV", ref: "PP-RV", intent: .purchase, amount: 10000, currency: "USD", refund: 2500,
                merchant: nil)
            try h.insert(order)
            guard case .checked(_, true) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("not clean before the event"); return
            }
            let body = #"""
                {"id":"WH-RV-1","event_type":"PAYMENT.CAPTURE.REVERSED","resource_type":"refund","summary":"A payment was reversed",
                 "resource":{"id":"REF-RV","status":"COMPLETED","amount":{"currency_code":"USD","value":"25.00"},"note_to_payer":"Payment reversed",
                             "links":[{"href":"\#(h.paysimURL)/v2/payments/captures/CAP-RV","rel":"up","method":"GET"}]}}
                """#
            let id = try h.store(.paypal, json: body)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-RV")
            let conn = try h.database.connect(); defer { conn.close() }
            let figures = try conn.query(
                "SELECT snapshot->>'refunded' AS r, snapshot->>'reversed' AS v FROM snapshots WHERE order_id = 'ORD-RV'"
            ).first
            #expect(try figures?.string("r") == "2500" && figures?.string("v") == "0", "the answer shows a merchant refund: R, not V")
            #expect(try h.actions().isEmpty, "no second refund planned")
            _ = await h.executor.executePending()
            #expect(h.simulator.paypalRefunds(ofOrder: "PP-RV").map(\.amount) == [2500], "PayPal refunded nothing more")
            #expect(try h.openKinds(order: "ORD-RV").isEmpty)
        }
    }
}

/// A v1 sale refund's amount is read from `GET /v1/payments/refund/{id}`, never from the PAYMENT.SALE.REFUNDED body:
/// a body stating 1.00 for a 5.00 dashboard refund leaves R at 5.00, so payrecon does not refund 4.00 more.
@Suite("A sale refund's amount from the answer", .serialized) struct SaleRefundAmountTests {
    @Test func theRefundsAmountIsPayPalsNotTheEvents() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-AM","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-AM"}"#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-AM", ref: "PAY-AM", intent: .purchase, amount: 2000, currency: "USD", refund: 500, merchant: nil))
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-AM"}"#)
            #expect(await h.runOnce().done == 1)
            // 5.00 refunded in PayPal's dashboard; the event about it says 1.00.
            let dashboard = await ActionSafetyTests.elsewhere(h).refundSale(
                "SALE-AM", amount: Money(minorUnits: 500, currency: Currency(code: "USD")!),
                requestID: "dashboard-refund-am")
            guard case .found(let answer) = dashboard, let refundID = answer["id"]?.stringValue else {
                Issue.record("\(dashboard)"); return
            }
            _ = try h.execute("DELETE FROM actions")  // whatever the first check planned before the dashboard refund
            let body = #"""
                {"id":"WH-AM-1","event_type":"PAYMENT.SALE.REFUNDED","resource_type":"refund",
                 "resource":{"id":"\#(refundID)","state":"completed","amount":{"total":"1.00","currency":"USD"},"sale_id":"SALE-AM","parent_payment":"PAY-AM"}}
                """#
            let id = try h.store(.paypal, json: body)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-AM")
            let conn = try h.database.connect(); defer { conn.close() }
            let amount = try conn.query("SELECT amount_minor FROM transaction_links WHERE external_id = $1", [.text(refundID)]).first?
                .int64("amount_minor")
            #expect(amount == 500, "the link holds PayPal's 5.00, not the event's 1.00")
            #expect(try h.actions().filter { $0.status == .pending }.isEmpty, "R = 5.00 already: nothing more to refund")
            _ = await h.executor.executePending()
            #expect(h.simulator.paypalSaleRefunds(of: "SALE-AM") == [500])
        }
    }
}

/// A dispute holds an order's refunds only when its own answer names one of the order's payments (the review of
/// round three): a forged CUSTOMER.DISPUTE event naming a real open dispute of another payment against this order's
/// capture holds nothing.
@Suite("A dispute from its answer", .serialized) struct DisputeFromTheAnswerTests {
    @Test func aDisputeThatNamesAnotherPaymentHoldsNothing() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-DA","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"50.00","captures":[{"id":"CAP-DA"}]},
                 {"id":"PP-DB","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"50.00","captures":[{"id":"CAP-DB"}]}]
                """#)
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-B","transaction_id":"CAP-DB","amount":"50.00"}"#)
            let order = WorkerHarness.order(
                .paypal, "ORD-DA", ref: "PP-DA", intent: .purchase, amount: 5000, currency: "USD", refund: 2000,
                merchant: nil)
            try h.insert(order)
            let forged = #"""
                {"id":"WH-DF-1","event_type":"CUSTOMER.DISPUTE.CREATED","resource_type":"dispute",
                 "resource":{"dispute_id":"PP-D-B","status":"OPEN","disputed_transactions":[{"seller_transaction_id":"CAP-DA"}],
                             "dispute_amount":{"currency_code":"USD","value":"50.00"}}}
                """#
            _ = try h.store(.paypal, json: forged)
            #expect(await h.runOnce().done == 1)
            let open = try h.openKinds(order: "ORD-DA")
            #expect(!open.contains("disputed") && !open.contains("action_not_allowed"), "\(open)")
            #expect(try h.actions().map(\.idempotencyKey) == ["paypal:ORD-DA:refund:2000"], "the refund the order wants is not held")
        }
    }
}
