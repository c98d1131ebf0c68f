import Providers
import Reconciliation
import Testing
import TextFormats

/// Paypercut payment intent + latest payment → snapshot, on the documented answer shapes.
@Suite struct PaypercutMappingTests {
    static func intent(
        status: String, method: String = "manual", amount: Int64 = 2000, capturable: Int64 = 0, received: Int64 = 0,
        iso: String = "EUR", scale: Int = 2, created: String = #""2026-11-20T10:30:45Z""#
    ) throws -> JSONValue {
        try JSONValue.parse(
            Array(
                """
                {"id":"pi_1","object":"payment_intent","amount":\(amount),"amount_capturable":\(capturable),"amount_received":\(received),
                 "currency":{"iso":"\(iso)","scale":\(scale)},"status":"\(status)","capture_method":"\(method)","created":\(created),
                 "latest_payment":"pay_1","livemode":false}
                """.utf8))
    }

    static func payment(status: String = "succeeded", captured: Int64, refunded: Int64 = 0, method: String = "card") throws -> JSONValue {
        try JSONValue.parse(
            Array(
                """
                {"id":"pay_1","status":"\(status)","amount_captured":\(captured),"amount_refunded":\(refunded),"payment_method":"\(method)",
                 "payment_intent":"pi_1"}
                """.utf8))
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String, status: String, method = "manual", capturable: Int64 = 0, received: Int64 = 0
        var payment: (status: String, captured: Int64, refunded: Int64)?
        var state: TransactionState, a: Int64, c: Int64, r: Int64
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "requires_capture → authorised", status: "requires_capture", capturable: 2000, state: .authorised, a: 2000, c: 0, r: 0),
        Row(
            name: "succeeded, manual, captured", status: "succeeded", received: 2000, payment: ("succeeded", 2000, 0), state: .captured,
            a: 2000, c: 2000, r: 0),
        Row(
            name: "succeeded, automatic, no payment: C from amount_received", status: "succeeded", method: "automatic", received: 2000,
            state: .captured, a: 2000, c: 2000, r: 0),
        Row(
            name: "succeeded, partly refunded", status: "succeeded", received: 2000, payment: ("succeeded", 2000, 500),
            state: .partiallyRefunded, a: 2000, c: 2000, r: 500),
        Row(
            name: "succeeded, refunded", status: "succeeded", received: 2000, payment: ("succeeded", 2000, 2000), state: .refunded, a: 2000,
            c: 2000, r: 2000),
        Row(name: "requires_action → action_required", status: "requires_action", state: .actionRequired, a: 0, c: 0, r: 0),
        Row(name: "requires_confirmation → pending", status: "requires_confirmation", state: .pending, a: 0, c: 0, r: 0),
        Row(name: "processing → pending", status: "processing", state: .pending, a: 0, c: 0, r: 0),
        Row(name: "requires_payment_method, no payment → pending", status: "requires_payment_method", state: .pending, a: 0, c: 0, r: 0),
        Row(
            name: "requires_payment_method, payment failed → failed", status: "requires_payment_method", payment: ("failed", 0, 0),
            state: .failed, a: 0, c: 0, r: 0),
        Row(name: "canceled, nothing captured → voided", status: "canceled", state: .voided, a: 0, c: 0, r: 0)
    ]

    @Test(arguments: rows)
    func statusTable(_ row: Row) throws {
        let s = try PaypercutMapping.snapshot(
            intent: try Self.intent(status: row.status, method: row.method, capturable: row.capturable, received: row.received),
            payment: try row.payment.map { try Self.payment(status: $0.status, captured: $0.captured, refunded: $0.refunded) },
            account: "acct_1")
        #expect(s.state == row.state)
        #expect((s.authorised, s.captured, s.refunded) == (row.a, row.c, row.r))
        #expect(s.rawState == row.status)
        #expect(s.intent == (row.method == "manual" ? .authorisation : .purchase))
        #expect(s.merchant == "acct_1" && s.transactionRef == "pi_1" && s.value == 2000)
    }

    @Test func captureAndVoidOnlyWhileRequiresCapture() throws {
        let open = try PaypercutMapping.snapshot(
            intent: try Self.intent(status: "requires_capture", capturable: 2000), payment: nil, account: nil)
        #expect(open.capabilities.capture == .allowed(target: "pi_1") && open.capabilities.void == .allowed(target: "pi_1"))
        #expect(open.capabilities.refund == .against(target: "pi_1"))
        if case .unsupported = open.capabilities.increment {} else { Issue.record("Paypercut has no increment") }
        let done = try PaypercutMapping.snapshot(intent: try Self.intent(status: "succeeded", received: 2000), payment: nil, account: nil)
        #expect(done.capabilities.capture == .denied("Paypercut payment intent is succeeded, not requires_capture"))
    }

    @Test func zeroAndTwoDecimalCurrenciesAndTheScaleCheck() throws {
        let jpy = try PaypercutMapping.snapshot(
            intent: try Self.intent(status: "requires_capture", amount: 1500, capturable: 1500, iso: "jpy", scale: 0),
            payment: nil, account: nil)
        #expect(jpy.currency.code == "JPY" && jpy.authorised == 1500)
        do {
            _ = try PaypercutMapping.snapshot(
                intent: try Self.intent(status: "requires_capture", iso: "JPY", scale: 2), payment: nil, account: nil)
            Issue.record("a scale that differs from the currency's exponent was accepted")
        } catch {
            #expect(String(describing: error).contains("scale 2 differs from JPY's exponent 0"))
        }
    }

    @Test func creationTimeInEitherForm() throws {
        let iso = try PaypercutMapping.snapshot(intent: try Self.intent(status: "processing"), payment: nil, account: nil)
        let unix = try PaypercutMapping.snapshot(
            intent: try Self.intent(status: "processing", created: "1795170645"), payment: nil, account: nil)
        #expect(iso.createdAt == 1_795_170_645 && unix.createdAt == 1_795_170_645)
        #expect(throws: ProviderMappingError.self) {
            try PaypercutMapping.snapshot(
                intent: try Self.intent(status: "processing", created: #""yesterday""#), payment: nil, account: nil)
        }
    }

    @Test func unknownStatusOrCaptureMethodIsAMappingErrorNamingTheField() throws {
        do {
            _ = try PaypercutMapping.snapshot(intent: try Self.intent(status: "exploded"), payment: nil, account: nil);
            Issue.record("accepted")
        } catch { #expect(String(describing: error).contains("status")) }
        do {
            _ = try PaypercutMapping.snapshot(
                intent: try Self.intent(status: "processing", method: "sometimes"), payment: nil, account: nil);
            Issue.record("accepted")
        } catch { #expect(String(describing: error).contains("capture_method")) }
    }
}
