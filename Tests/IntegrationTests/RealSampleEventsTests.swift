import Foundation
import PayreconTesting
import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// Every PayPal sample body in Tests/ProvidersTests/Fixtures/paypal (real deliveries and documented samples, plus the three
/// constructed ones), stored as received and processed by the worker against paysim seeded with what they name:
/// the order each reaches, the fetches made (paysim's request counts), and how the delivery ends.
@Suite("Real PayPal sample events", .serialized) struct RealSampleEventsTests {
    struct Sample: Sendable, CustomTestStringConvertible {
        var file: String
        /// paysim seeds: (admin path, JSON).
        var seeds: [(String, String)]
        /// The merchant's order: (order_id, transaction_ref), nil when none holds what the event names.
        var order: (String, String)?
        var status: String
        var outcome: String
        /// paysim route → how many times the worker called it.
        var fetches: [String: Int]
        var testDescription: String { file }
    }

    static let docsOrder =
        #"{"id":"5O190127TN364715T","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"3C679366HH908993F"}]}"#

    static let samples: [Sample] = [
        Sample(
            file: "samples/CHECKOUT.ORDER.APPROVED.v2.docs-sample.json", seeds: [("/admin/paypal/orders", docsOrder)],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_order": 1]),
        Sample(
            file: "samples/CHECKOUT.ORDER.COMPLETED.v2.simulator-2021.body.bin", seeds: [("/admin/paypal/orders", docsOrder)],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_order": 1]),
        Sample(
            file: "samples/CHECKOUT.PAYMENT-APPROVAL.REVERSED.docs-pui-sample.json", seeds: [("/admin/paypal/orders", docsOrder)],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_order": 1]),
        Sample(
            file: "samples/PAYMENT.CAPTURE.DENIED.v2.docs-pui-sample.json", seeds: [("/admin/paypal/orders", docsOrder)],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_order": 1]),
        Sample(
            file: "samples/PAYMENT.AUTHORIZATION.VOIDED.v2.simulator-sample.json",
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"9RC99380MW614700D","intent":"AUTHORIZE","status":"VOIDED","currency":"USD","amount":"2.51","authorizations":[{"id":"8PP38301D7923932J","status":"VOIDED"}]}"#
                )
            ],
            order: ("ORD-V", "9RC99380MW614700D"), status: "done", outcome: "re-checked paypal order ORD-V",
            fetches: ["paypal.get_order": 1]),
        // A refund names only its capture: the capture is fetched to find the order.
        Sample(
            file: "samples/PAYMENT.CAPTURE.REFUNDED.v2.constructed.json",
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"O-REF","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"1.98","captures":[{"id":"0JF852973C016714D"}],"refunds":[{"id":"1Y107995YT783435V","capture_id":"0JF852973C016714D","amount":"0.99"}]}"#
                )
            ],
            order: ("ORD-R", "O-REF"), status: "done", outcome: "re-checked paypal order ORD-R",
            fetches: ["paypal.get_capture": 1, "paypal.get_order": 1]),
        Sample(
            file: "samples/PAYMENT.CAPTURE.REVERSED.v2.constructed.json", seeds: [("/admin/paypal/orders", docsOrder)],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_capture": 1, "paypal.get_order": 1]),
        // A dispute names its capture: fetched to find the order; the check then fetches the dispute too.
        Sample(
            file: "samples/CUSTOMER.DISPUTE.CREATED.v1.constructed.json",
            seeds: [
                ("/admin/paypal/orders", docsOrder),
                ("/admin/paypal/disputes", #"{"id":"PP-D-27803","transaction_id":"3C679366HH908993F"}"#)
            ],
            order: ("ORD-D", "5O190127TN364715T"), status: "done", outcome: "re-checked paypal order ORD-D",
            fetches: ["paypal.get_capture": 1, "paypal.get_order": 1, "paypal.get_dispute": 1]),
        Sample(
            file: "samples/VAULT.PAYMENT-TOKEN.CREATED.v3.shopware-fixture.json", seeds: [], order: nil, status: "ignored",
            outcome: "VAULT.PAYMENT-TOKEN.CREATED names no payment (resource_type payment_token)", fetches: [:]),
        // A classic-API authorization PayPal's v2 API does not know: asked once, then ignored saying so.
        Sample(
            file: "samples/PAYMENT.AUTHORIZATION.CREATED.v1.sandbox-2015.json", seeds: [], order: nil, status: "ignored",
            outcome: "PAYMENT.AUTHORIZATION.CREATED names authorization 6F961703H62685926, which PayPal does not trace to an order",
            fetches: ["paypal.get_authorization": 1]),
        // The three real signed sale deliveries: the order holds the sale's parent payment. The sale is read twice: to
        // route the event by its own answer's names and creation time (the body is a hint), and by the check.
        Sample(
            file: "01-sdk-java-dotnet-sandbox-2015-sale-completed/body.bin",
            seeds: [
                (
                    "/admin/paypal/sales",
                    #"{"id":"7DW85331GX749735N","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-1A142943SV880364LKVJEFPQ"}"#
                )
            ],
            order: ("ORD-S1", "PAY-1A142943SV880364LKVJEFPQ"), status: "done", outcome: "re-checked paypal order ORD-S1",
            fetches: ["paypal.get_sale": 2]),
        Sample(
            file: "02-sdk-node-python-sandbox-2015-sale-completed/body.bin",
            seeds: [
                (
                    "/admin/paypal/sales",
                    #"{"id":"4EU7004268015634R","state":"completed","amount":"20.00","currency":"USD","parent_payment":"PAY-86C81811X5228590KKVNARQQ"}"#
                )
            ],
            order: ("ORD-S2", "4EU7004268015634R"), status: "done", outcome: "re-checked paypal order ORD-S2",
            fetches: ["paypal.get_sale": 2]),
        Sample(
            file: "03-sdk-php-sample-sandbox-2016-sale-completed/body.bin",
            seeds: [
                (
                    "/admin/paypal/sales",
                    #"{"id":"80F85758S3080410K","state":"completed","amount":"21.00","currency":"USD","parent_payment":"PAY-7F371669SL612941HK7RQFDQ"}"#
                )
            ],
            order: nil, status: "done", outcome: "unknown_order 80F85758S3080410K", fetches: ["paypal.get_sale": 2]),
        Sample(
            file: "samples/PAYMENT.SALE.REFUNDED.v1.constructed.json",
            seeds: [
                (
                    "/admin/paypal/sales",
                    #"{"id":"7DW85331GX749735N","state":"partially_refunded","amount":"20.00","currency":"USD","parent_payment":"PAY-1A142943SV880364LKVJEFPQ"}"#
                )
            ],
            // A sale refund names its sale, not the sale's agreement: the sale is read once to find its order (its
            // billing_agreement_id and parent_payment), then again by the check; the refund is read for its amount
            // (never the event's), and PayPal does not know this constructed one.
            order: ("ORD-S1", "PAY-1A142943SV880364LKVJEFPQ"), status: "done", outcome: "re-checked paypal order ORD-S1",
            fetches: ["paypal.get_sale": 2, "paypal.get_v1_refund": 1])
    ]

    static func body(_ file: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ProvidersTests/Fixtures/paypal/\(file)")
        return Array(try Data(contentsOf: url))
    }

    func requests(_ h: WorkerHarness) async throws -> [String: Int] {
        let stats = try await h.admin("/admin/stats", method: "GET")
        return (stats["requests"] as? [String: Int] ?? [:]).filter { $0.key.hasPrefix("paypal.get_") }
    }

    @Test(arguments: samples)
    func reachesItsOrderWithTheseFetches(_ sample: Sample) async throws {
        try await WorkerHarness.with { h in
            for (path, json) in sample.seeds { try await h.admin(path, json) }
            if let (id, ref) = sample.order {
                try h.insert(WorkerHarness.order(.paypal, id, ref: ref, intent: .purchase, amount: 10000, currency: "USD", merchant: nil))
            }
            let before = try await requests(h)
            let id = try h.store(.paypal, body: try Self.body(sample.file))
            #expect(await h.runOnce().done == 1)
            let d = try h.delivery(id)
            #expect(d.status == sample.status)
            #expect(d.outcome == sample.outcome)
            let after = try await requests(h)
            let made = after.compactMapValues { $0 }.reduce(into: [String: Int]()) { out, kv in
                let n = kv.value - (before[kv.key] ?? 0)
                if n > 0 { out[kv.key] = n }
            }
            #expect(made == sample.fetches)
        }
    }
}
