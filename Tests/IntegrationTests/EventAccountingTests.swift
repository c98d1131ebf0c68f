import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing
import Worker
import Wiring
import HTTP

/// Every event accounted for, end to end: deliveries built by paysim's webhook builder as the
/// providers send them, stored, processed by the real worker against paysim over HTTP; what each reaches, what it
/// fetches, how it ends, and what the report then holds.
@Suite("Every event accounted for", .serialized) struct EventAccountingTests {
    static let capturedOrder =
        #"{"id":"PP-1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-1"}]}"#

    func paypalOrder(_ h: WorkerHarness, refund: Int64 = 0) async throws {
        try await h.seedPayPal(Self.capturedOrder)
        try h.insert(
            WorkerHarness.order(
                .paypal, "ORD-1", ref: "PP-1", intent: .purchase, amount: 10000, currency: "USD", refund: refund,
                merchant: nil))
    }

    func risk(_ h: WorkerHarness, kind: String) throws -> (count: Int64, minor: Int64) {
        let conn = try h.database.connect(); defer { conn.close() }
        let row = try #require(
            try conn.query(
                """
                SELECT count(*) AS n, coalesce(sum(amount_at_risk_minor), 0)::bigint AS risk FROM discrepancies WHERE kind = $1 AND status = 'open'
                """, [.text(kind)]
            ).first)
        return (try row.int64("n"), try row.int64("risk"))
    }

    @Test func aDisputeIsCountedWithItsMoneyAndHoldsRefundsUntilResolved() async throws {
        try await WorkerHarness.with { h in
            try await paypalOrder(h, refund: 3000)
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-1","transaction_id":"CAP-1","amount":"40.00"}"#)
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.CREATED","resource_id":"PP-D-1"}"#).first)
            #expect(await h.runOnce().done == 1)
            let d = try h.delivery(id)
            #expect(d.status == "done")
            #expect(d.outcome == "re-checked paypal order ORD-1")
            #expect(try risk(h, kind: "disputed") == (1, 4000))
            // The refund the order wants is held: refunding a disputed payment pays twice.
            #expect(try h.actions().isEmpty)
            #expect(try h.openKinds(order: "ORD-1") == ["disputed", "action_not_allowed"])
            // The sweep fetches the dispute again on its own (the link was learned), so resolving it clears D.
            try await h.admin("/admin/paypal/disputes", #"{"resolve":"PP-D-1","outcome":"seller"}"#)
            let summary = try await h.sweep()
            #expect(summary.totals.errors == 0)
            #expect(try h.openKinds(order: "ORD-1").isEmpty)
            #expect(try h.actions().map(\.idempotencyKey) == ["paypal:ORD-1:refund:3000"])
        }
    }

    @Test func aChargebackIsReversedNotOverRefundedAndItsRefundRecordFindsTheOrder() async throws {
        try await WorkerHarness.with { h in
            try await paypalOrder(h)
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-2","transaction_id":"CAP-1"}"#)
            try await h.admin("/admin/paypal/disputes", #"{"resolve":"PP-D-2","outcome":"buyer"}"#)
            // PAYMENT.CAPTURE.REVERSED carries PayPal's reversal record: a refund resource whose only link to the
            // order is `up` → the capture, whose related_ids name the order.
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.REVERSED","resource_id":"CAP-1"}"#).first)
            let body = String(decoding: try h.delivery(id).body, as: UTF8.self)
            #expect(!body.contains("related_ids"))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-1")
            #expect(try risk(h, kind: "reversed") == (1, 10000))
            #expect(try h.openKinds(order: "ORD-1") == ["reversed"])
            #expect(try risk(h, kind: "over_refunded").count == 0)
        }
    }

    @Test func aRealRefundShapeIsTracedThroughItsCapture() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-2"}],"refunds":[{"id":"RF-2","capture_id":"CAP-2","amount":"10.00"}]}"#
            )
            try h.insert(
                WorkerHarness.order(
                    .paypal, "ORD-2", ref: "PP-2", intent: .purchase, amount: 10000, currency: "USD", refund: 1000, merchant: nil))
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.REFUNDED","resource_id":"RF-2"}"#).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-2")
            #expect(try h.openKinds(order: "ORD-2").isEmpty)
        }
    }

    @Test func approvalReversedReChecksItsOrder() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(#"{"id":"PP-3","intent":"CAPTURE","status":"VOIDED","currency":"EUR","amount":"50.00"}"#)
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-3", ref: "PP-3", intent: .purchase, amount: 5000, currency: "EUR", merchant: nil))
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.PAYMENT-APPROVAL.REVERSED","order_id":"PP-3"}"#).first)
            #expect(!String(decoding: try h.delivery(id).body, as: UTF8.self).contains("resource_type"))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-3")
            // The order is fulfilled but PayPal voided it: that is now seen.
            #expect(try h.openKinds(order: "ORD-3") == ["state_mismatch"])
        }
    }

    @Test func eventsNamingNoPaymentAreIgnoredWithTheirReason() async throws {
        try await WorkerHarness.with { h in
            let vault = try h.store(.paypal, body: try Fixtures.bytes("VAULT.PAYMENT-TOKEN.CREATED.v3.shopware-fixture.json"))
            let product = try h.store(
                .paypal, json: #"{"id":"WH-P","event_type":"CATALOG.PRODUCT.CREATED","resource_type":"product","resource":{"id":"PROD-1"}}"#
            )
            let auth3ds = try h.store(
                .pxp, json: #"{"eventCategory":"Authentication","eventCode":"3DS-completed","eventOwner":{"merchant":"M1","site":"S1"}}"#)
            let totals = await h.runOnce()
            #expect(totals.done == 3)
            let v = try h.delivery(vault), p = try h.delivery(product), a = try h.delivery(auth3ds)
            #expect(v.status == "ignored" && v.outcome?.hasPrefix("VAULT.PAYMENT-TOKEN.CREATED names no payment") == true)
            #expect(p.status == "ignored" && p.outcome?.contains("CATALOG.PRODUCT.CREATED") == true)
            #expect(a.status == "ignored" && a.outcome == "3DS-completed (category Authentication) names no transaction")
            let conn = try h.database.connect(); defer { conn.close() }
            #expect(try DeliveryQueue.list(status: "ignored", limit: 10, on: conn).count == 3)
            #expect(try DeliveryQueue.list(status: "done", limit: 10, on: conn).isEmpty)
        }
    }

    @Test func anUnknownEventTypeIsReCheckedThroughTheResourceItNames() async throws {
        try await WorkerHarness.with { h in
            try await paypalOrder(h)
            let id = try h.store(
                .paypal,
                json: #"{"id":"WH-NEW","event_type":"PAYMENT.CAPTURE.SOMETHING-NEW","resource_type":"capture","resource":{"id":"CAP-1"}}"#)
            #expect(await h.runOnce().done == 1)
            // The capture is fetched (the webhook names only its id) and leads to the order.
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-1")
        }
    }

    @Test func subscriptionSalesAreFetchedSummedAndRefundedAsSales() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales",
                #"[{"id":"SALE-1","state":"completed","amount":"9.99","currency":"USD","billing_agreement_id":"I-BA1"},{"id":"SALE-2","state":"completed","amount":"9.99","currency":"USD","billing_agreement_id":"I-BA1"}]"#
            )
            // The merchant's order is the subscription (its transaction_ref the billing agreement), two periods paid,
            // and one period to be refunded.
            try h.insert(
                WorkerHarness.order(
                    .paypal, "SUB-1", ref: "I-BA1", intent: .purchase, amount: 1998, currency: "USD", refund: 999,
                    merchant: "SOME-MERCHANT"))
            let ids =
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-1"}"#)
                + h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-2"}"#)
            #expect(await h.runOnce().done == 2)
            for id in ids { #expect(try h.delivery(id).outcome == "re-checked paypal order SUB-1") }
            // Both sales counted (C = 19.98), the merchant not compared (a sale does not carry it): only the refund.
            #expect(try h.openKinds(order: "SUB-1").isEmpty)
            let refund = try #require(try h.actions().first)
            #expect(refund.idempotencyKey == "paypal:SUB-1:refund:999")
            // Either sale holds the money (the deliveries are processed concurrently, so the first check may know
            // only one of them; the executor's fresh plan picks the target it sends to).
            #expect(["SALE-1", "SALE-2"].contains(refund.providerTarget ?? ""))
            // Executing refunds one sale through the v1 API, once.
            _ = await h.executor.executePending()
            let log = try await h.paysimLog(provider: "paypal")
            let paths = log.compactMap { $0["path"] as? String }
            #expect(paths.count == 1)
            let sale = try #require(try h.actions().first?.providerTarget)
            #expect(paths == ["/v1/payments/sale/\(sale)/refund"])
            #expect(try h.actions().first?.status == .succeeded)
            // PAYMENT.SALE.REFUNDED (a v1 refund naming its sale) teaches the refund's amount; the next check
            // counts R = 9.99 and wants nothing more.
            let refunded = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"\#(sale)"}"#)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(refunded[0]).outcome == "re-checked paypal order SUB-1")
            #expect(try h.openKinds(order: "SUB-1").isEmpty)
            let conn = try h.database.connect(); defer { conn.close() }
            let row = try #require(
                try conn.query(
                    """
                    SELECT snapshot->>'captured' AS c, snapshot->>'refunded' AS r, snapshot->>'state' AS s FROM snapshots WHERE order_id = 'SUB-1'
                    """
                ).first)
            #expect(try (row.string("c"), row.string("r"), row.string("s")) == ("1998", "999", "partially_refunded"))
            // The sweep fetches the sales too, not /v2/checkout/orders/I-BA1 (which PayPal would not know).
            #expect(try await h.sweep().totals.errors == 0)
            #expect(try h.openKinds(order: "SUB-1").isEmpty)
        }
    }

    @Test func aSaleNoOrderHoldsIsUnknownOrder() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales", #"{"id":"SALE-9","state":"completed","amount":"5.00","currency":"USD","parent_payment":"PAY-9"}"#)
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"SALE-9"}"#).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "unknown_order SALE-9")
            #expect(try risk(h, kind: "unknown_order") == (1, 500))
        }
    }

    @Test func aPortalRefundIsLinkedToItsParentNotUnknownOrder() async throws {
        try await WorkerHarness.with { h in
            let parent = try await h.seedPXP("TX-P", intent: "Purchase", value: "20.00", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "O-P", ref: "TX-P", intent: .purchase, amount: 2000, refund: 500))
            // The order is checked once (its systemTransactionId is learned), then the portal refunds 5.00.
            #expect(await checkOnce(h, "O-P"))
            #expect(try h.actions().map(\.idempotencyKey) == ["pxp:O-P:refund:500"])
            try await h.admin(
                "/admin/pxp/transactions",
                """
                {"merchant":"M1","site":"S1","merchantTransactionId":"PORTAL-1","intent":"Refund","currency":"GBP","value":"5.00",
                 "state":"Authorised","parentSystemTransactionId":"\(parent)"}
                """)
            let id = try #require(try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"PORTAL-1"}"#).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked pxp order O-P")
            #expect(try risk(h, kind: "unknown_order").count == 0)
            // R now counts the portal refund: the planned one is no longer wanted.
            #expect(try h.actions().first?.status == .superseded)
            #expect(try h.openKinds(order: "O-P").isEmpty)
        }
    }

    @Test func pxpTransactionsThatAreNotOrdersNeverKillTheDelivery() async throws {
        try await WorkerHarness.with { h in
            _ = try await h.seedPXP("VERIFY-1", intent: "Verification", value: "0.00")
            _ = try await h.seedPXP("REFUND-1", intent: "Refund", value: "3.00")
            let verify = try #require(try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"VERIFY-1"}"#).first)
            let orphan = try #require(try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"REFUND-1"}"#).first)
            #expect(await h.runOnce(maxAttempts: 1).done == 2)
            let v = try h.delivery(verify), o = try h.delivery(orphan)
            #expect(v.status == "ignored" && v.outcome?.contains("Verification") == true)
            #expect(o.status == "done" && o.outcome == "unknown_order REFUND-1")
            let conn = try h.database.connect(); defer { conn.close() }
            let detail = try #require(
                try conn.query("SELECT detail FROM discrepancies WHERE transaction_ref = 'REFUND-1'").first?.string("detail"))
            #expect(detail.contains("intent Refund") && detail.contains("parentSystemTransactionId"))
        }
    }

    /// The worker's own /metrics counts processed deliveries by provider and outcome (a scrape reads memory only).
    @Test func processedDeliveriesAreCountedByOutcome() async throws {
        try await WorkerHarness.with { h in
            let server = WorkerMetricsServer(host: "127.0.0.1", port: 0)
            let port = try server.start()
            defer { server.stop() }
            func value(_ outcome: String) async throws -> Int {
                let response = try await h.http.send(HTTPClientRequest(method: "GET", url: "http://127.0.0.1:\(port)/metrics"))
                let text = String(decoding: response.body, as: UTF8.self)
                let prefix = #"payrecon_deliveries_processed_total{provider="paypal",outcome="\#(outcome)"} "#
                return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
            }
            let (ignored, done) = (try await value("ignored"), try await value("done"))
            try await paypalOrder(h)
            _ = try h.store(
                .paypal,
                json: #"{"id":"WH-V","event_type":"VAULT.PAYMENT-TOKEN.DELETED","resource_type":"payment_token","resource":{"id":"T1"}}"#)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-1"}"#)
            #expect(await h.runOnce().done == 2)
            // Other suites in this process count too: the counters only grow.
            #expect(try await value("ignored") >= ignored + 1)
            #expect(try await value("done") >= done + 1)
            let other = try await h.http.send(HTTPClientRequest(method: "GET", url: "http://127.0.0.1:\(port)/orders"))
            #expect(other.status == 404)
        }
    }

    /// One check of an order, as the sweep does it.
    func checkOnce(_ h: WorkerHarness, _ orderID: String) async -> Bool {
        guard let summary = try? await h.sweep() else { return false }
        return summary.totals.errors == 0
    }
}

/// The provider samples, read from the providers' test fixtures.
enum Fixtures {
    static func bytes(_ name: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ProvidersTests/Fixtures/paypal/samples/\(name)")
        return Array(try Data(contentsOf: url))
    }
}
