import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// Money a provider accepted and has not finished moving counts as moved (a pending refund in R, a pending capture
/// outside the capturable room), so the plan never moves it a second time; a refund that later fails or is cancelled
/// stops counting and the next plan asks for what is still wanted. Each row maps a provider's documented answer and
/// plans the order against it.
@Suite struct PendingMoneyTests {
    static let now: Int64 = 1_800_000_000

    static func plan(_ order: Order, _ s: Snapshot) -> Plan {
        Planner.plan(order: order, snapshot: s, emitted: [], now: now, pendingMax: 86_400)
    }

    static func order(
        _ provider: Provider, _ intent: Intent = .purchase, _ fulfilment: Fulfilment = .fulfilled, amount: Int64 = 10000,
        refund: Int64 = 0, currency: String = "USD", merchant: String? = nil, site: String? = nil
    ) -> Order {
        Order(
            provider: provider, orderID: "O-1", merchant: merchant, site: site, transactionRef: "REF", intent: intent,
            amount: Money(minorUnits: amount, currency: Currency(code: currency)!), fulfilment: fulfilment, refundAmount: refund)
    }

    static func keys(_ p: Plan) -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: p.actions.map { ($0.idempotencyKey, $0.amount) })
    }

    // MARK: PayPal Orders v2

    struct PayPalRow: Sendable, CustomTestStringConvertible {
        var name: String
        var refundStatus: String
        var refundAmount: Int64  // the order's refund_amount
        var r: Int64
        var raw: String
        var planned: [String: Int64]
        var testDescription: String { name }
    }

    /// A capture of 100.00 with a 30.00 refund record in each of PayPal's refund statuses.
    static let paypalRows: [PayPalRow] = [
        // The review's case: refunded in PayPal's dashboard, still PENDING (eCheck-funded, or the balance was short).
        PayPalRow(
            name: "pending refund, order wants it", refundStatus: "PENDING", refundAmount: 3000, r: 3000,
            raw: "COMPLETED/REFUND_PENDING", planned: [:]),
        // The variant: refund_amount raised while the first refund is pending: only the difference, sized on R with it.
        PayPalRow(
            name: "pending refund, order wants more", refundStatus: "PENDING", refundAmount: 5000, r: 3000,
            raw: "COMPLETED/REFUND_PENDING", planned: ["paypal:O-1:refund:5000": 2000]),
        PayPalRow(name: "completed refund", refundStatus: "COMPLETED", refundAmount: 3000, r: 3000, raw: "COMPLETED", planned: [:]),
        // A refund that failed or was cancelled moved nothing: what is still wanted is planned again.
        PayPalRow(
            name: "failed refund", refundStatus: "FAILED", refundAmount: 3000, r: 0, raw: "COMPLETED",
            planned: ["paypal:O-1:refund:3000": 3000]),
        PayPalRow(
            name: "cancelled refund", refundStatus: "CANCELLED", refundAmount: 3000, r: 0, raw: "COMPLETED",
            planned: ["paypal:O-1:refund:3000": 3000])
    ]

    @Test(arguments: paypalRows)
    func paypalRefunds(_ row: PayPalRow) throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(
                captures: [
                    PP(
                        id: "C1",
                        status: row.refundStatus == "COMPLETED" || row.refundStatus == "PENDING" ? "PARTIALLY_REFUNDED" : "COMPLETED",
                        value: "100.00")
                ],
                refunds: [PP(id: "R1", status: row.refundStatus, value: "30.00", up: captureUp + "C1")]))
        #expect(s.refunded == row.r)
        #expect(s.rawState == row.raw)
        #expect(s.refundPending == (row.refundStatus == "PENDING"))
        // The capture's refundable room excludes the pending refund too.
        guard case .spread(let sources, _) = s.capabilities.refund else { Issue.record("no refund sources"); return }
        #expect(sources == [RefundSource(id: "C1", amount: 10000, refunded: row.r)])
        let p = Self.plan(Self.order(.paypal, refund: row.refundAmount), s)
        #expect(Self.keys(p) == row.planned)
        #expect(!p.findings.contains { $0.kind == .overRefunded })
    }

    /// A cancelled order whose capture holds a pending refund of all of it: nothing is refunded again.
    @Test func paypalCancelledOrderWithItsRefundPending() throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(
                captures: [PP(id: "C1", status: "REFUNDED", value: "100.00")],
                refunds: [PP(id: "R1", status: "PENDING", value: "100.00", up: captureUp + "C1")]))
        #expect((s.refunded, s.state) == (10000, .refunded))
        #expect(Self.plan(Self.order(.paypal, .purchase, .cancelled), s).actions.isEmpty)
    }

    /// An authorization of 100.00 with 40.00 captured and 60.00 captured PENDING: the order wants 100.00 captured,
    /// and PayPal may already be moving all of it, so no capture is planned.
    @Test func paypalPendingCaptureLeavesTheCapturableRoom() throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(
                intent: "AUTHORIZE", auths: [PP(id: "A1", status: "PARTIALLY_CAPTURED", value: "100.00")],
                captures: [
                    PP(id: "C1", status: "COMPLETED", value: "40.00"),
                    PP(id: "C2", status: "PENDING", value: "60.00")
                ]))
        #expect((s.captured, s.pendingCaptured, s.state) == (4000, 6000, .authorised))
        let p = Self.plan(Self.order(.paypal, .authorisation), s)
        #expect(p.actions.isEmpty)
        #expect(!p.findings.contains { $0.kind == .actionNotAllowed })
        // With 20.00 of it pending, the capture asks only for what no capture holds: 40.00, to 100.00.
        let part = try PayPalMapping.snapshot(
            order: paypalOrder(
                intent: "AUTHORIZE", auths: [PP(id: "A1", status: "PARTIALLY_CAPTURED", value: "100.00")],
                captures: [
                    PP(id: "C1", status: "COMPLETED", value: "40.00"),
                    PP(id: "C2", status: "PENDING", value: "20.00")
                ]))
        #expect(Self.keys(Self.plan(Self.order(.paypal, .authorisation), part)) == ["paypal:O-1:capture:10000": 4000])
    }

    // MARK: PayPal v1 sales

    static func sale(_ state: String, _ total: String = "20.00") throws -> JSONValue {
        try JSONValue.parse(
            #"{"id":"S1","state":"\#(state)","amount":{"total":"\#(total)","currency":"USD"},"create_time":"2026-11-01T10:00:00Z"}"#)
    }

    static func saleRefund(_ id: String, _ amount: Int64, _ state: String?) -> TransactionLink {
        TransactionLink(
            externalID: id, parentExternalID: "S1", orderID: nil, kind: .refund, amount: amount, currency: "USD", state: state,
            source: .payrecon, actionID: 1)
    }

    @Test(
        arguments: [
            // PayPal still shows the sale completed while the refund payrecon made is pending.
            ("completed, refund pending", "completed", [saleRefund("RF1", 500, "pending")], Int64(500), "completed/refund_pending"),
            (
                "partially refunded, one pending", "partially_refunded",
                [saleRefund("RF1", 500, "completed"), saleRefund("RF2", 300, "pending")],
                Int64(800), "partially_refunded/refund_pending"
            ),
            (
                "partially refunded, one failed", "partially_refunded",
                [saleRefund("RF1", 500, "completed"), saleRefund("RF2", 300, "failed")],
                Int64(500), "partially_refunded"
            ),
            ("completed, a failed refund", "completed", [saleRefund("RF1", 500, "failed")], Int64(0), "completed")
        ] as [(String, String, [TransactionLink], Int64, String)])
    func saleRefunds(name: String, state: String, links: [TransactionLink], r: Int64, raw: String) throws {
        let s = try PayPalSaleMapping.snapshot(sales: [Self.sale(state)], refunds: links, transactionRef: "S1")
        #expect(s.refunded == r, "\(name)")
        #expect(s.rawState == raw, "\(name)")
        #expect(s.refundPending == raw.hasSuffix("/refund_pending"), "\(name)")
        // The order wants 5.00 refunded: planned only when R holds less.
        let p = Self.plan(Self.order(.paypal, amount: 2000, refund: 500), s)
        #expect(Self.keys(p) == (r >= 500 ? [:] : ["paypal:O-1:refund:500": 500 - r]), "\(name)")
    }

    // MARK: PXP

    @Test(
        arguments: [
            ("refund pending", PXPOperation.refund, "Pending", Int64(1000), Int64(0), "Captured/RefundPending"),
            ("refund accepted", .refund, "Authorised", 1000, 0, "Captured"),
            ("refund refused", .refund, "Refused", 0, 0, "Captured")
        ] as [(String, PXPOperation, String, Int64, Int64, String)])
    func pxpRefunds(name: String, op: PXPOperation, state: String, r: Int64, pendingCaptured: Int64, raw: String) throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Captured", intent: "Purchase", value: "50.00"),
            modifications: [child("MOD-1", op, 1000, state)], transactionRef: "ECOM-001")
        #expect((s.refunded, s.pendingCaptured, s.rawState) == (r, pendingCaptured, raw), "\(name)")
        #expect(s.refundPending == raw.hasSuffix("/RefundPending"), "\(name)")
        let p = Self.plan(Self.order(.pxp, amount: 5000, refund: 1000, currency: "EUR", merchant: "MERCHANT-1", site: "SITE-1"), s)
        #expect(Self.keys(p) == (r >= 1000 ? [:] : ["pxp:O-1:refund:1000": 1000]), "\(name)")
    }

    @Test func pxpPendingCaptureIsNeverCapturedAgain() throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Authorised", value: "50.00"),
            modifications: [child("MOD-1", .capture, 5000, "Pending")], transactionRef: "ECOM-001")
        #expect((s.captured, s.pendingCaptured, s.state) == (0, 5000, .authorised))
        let p = Self.plan(Self.order(.pxp, .authorisation, amount: 5000, currency: "EUR", merchant: "MERCHANT-1", site: "SITE-1"), s)
        #expect(p.actions.isEmpty)
    }

    // MARK: Paypercut

    static func paypercutRefund(_ id: String, _ amount: Int64, _ state: String) -> TransactionLink {
        TransactionLink(
            externalID: id, parentExternalID: "pi_1", orderID: nil, kind: .refund, amount: amount, currency: "EUR", state: state,
            source: .payrecon, actionID: 1)
    }

    @Test(
        arguments: [
            // Whether amount_refunded includes a pending refund is not documented: R is the larger of the two.
            (
                "pending, not in amount_refunded", Int64(0), [paypercutRefund("re_1", 700, "pending")], Int64(700),
                "succeeded/refund_pending"
            ),
            // Either reading may be Paypercut's: R takes the larger (700 + 700), the bound that makes a refund smaller.
            ("pending, in amount_refunded", 700, [paypercutRefund("re_1", 700, "pending")], 1400, "succeeded/refund_pending"),
            // The review's case: payrecon's 200 pending, 500 refunded in the dashboard (done), the order now wants 700:
            // amount_refunded may leave the pending 200 out, so R is 700 and nothing more is refunded.
            ("pending, beside a dashboard refund", 500, [paypercutRefund("re_1", 200, "pending")], 700, "succeeded/refund_pending"),
            ("succeeded", 700, [paypercutRefund("re_1", 700, "succeeded")], 700, "succeeded"),
            ("failed", 0, [paypercutRefund("re_1", 700, "failed")], 0, "succeeded"),
            ("none known, Paypercut's total", 300, [], 300, "succeeded")
        ] as [(String, Int64, [TransactionLink], Int64, String)])
    func paypercutRefunds(name: String, amountRefunded: Int64, links: [TransactionLink], r: Int64, raw: String) throws {
        let s = try PaypercutMapping.snapshot(
            intent: try PaypercutMappingTests.intent(status: "succeeded", method: "automatic", received: 2000),
            payment: try PaypercutMappingTests.payment(captured: 2000, refunded: amountRefunded),
            account: nil, links: links)
        #expect((s.refunded, s.rawState) == (r, raw), "\(name)")
        #expect(s.refundPending == raw.hasSuffix("/refund_pending"), "\(name)")
        let p = Self.plan(Self.order(.paypercut, amount: 2000, refund: 700, currency: "EUR"), s)
        #expect(Self.keys(p) == (r >= 700 ? [:] : ["paypercut:O-1:refund:700": 700 - r]), "\(name)")
    }
}
