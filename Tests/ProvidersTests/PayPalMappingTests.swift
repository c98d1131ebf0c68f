import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

struct PP {
    var id: String
    var status: String
    var value: String
    var up: String? = nil  // rel:up href
}

/// A GET /v2/checkout/orders answer shaped like PayPal's (paypal.md §3, §4; the CHECKOUT.ORDER.COMPLETED sample).
func paypalOrder(
    status: String = "COMPLETED", intent: String = "CAPTURE", value: String = "100.00", currency: String = "USD",
    auths: [PP] = [], captures: [PP] = [], refunds: [PP] = [], merchant: String? = "7KNGBPH2U58GQ",
    createTime: String = "2018-04-01T21:18:49Z", extraUnit: Bool = false
) -> JSONValue {
    func money(_ v: String, _ c: String = currency) -> JSONValue { .object([("currency_code", .string(c)), ("value", .string(v))]) }
    func payment(_ p: PP, kind: String) -> JSONValue {
        var links: [JSONValue] = [
            .object([
                ("href", .string("https://api.sandbox.paypal.com/v2/payments/\(kind)/\(p.id)")),
                ("rel", .string("self")), ("method", .string("GET"))
            ])
        ]
        if let up = p.up { links.append(.object([("href", .string(up)), ("rel", .string("up")), ("method", .string("GET"))])) }
        return .object([
            ("id", .string(p.id)), ("status", .string(p.status)), ("amount", money(p.value)),
            ("create_time", .string("2018-04-01T21:20:49Z")), ("links", .array(links))
        ])
    }
    var payments: [(String, JSONValue)] = []
    if !auths.isEmpty { payments.append(("authorizations", .array(auths.map { payment($0, kind: "authorizations") }))) }
    if !captures.isEmpty { payments.append(("captures", .array(captures.map { payment($0, kind: "captures") }))) }
    if !refunds.isEmpty { payments.append(("refunds", .array(refunds.map { payment($0, kind: "refunds") }))) }
    var payee: [(String, JSONValue)] = [("email_address", .string("seller@example.com"))]
    if let merchant { payee.append(("merchant_id", .string(merchant))) }
    var unit: [(String, JSONValue)] = [("reference_id", .string("default")), ("amount", money(value)), ("payee", .object(payee))]
    if !payments.isEmpty { unit.append(("payments", .object(payments))) }
    var units: [JSONValue] = [.object(unit)]
    if extraUnit { units.append(.object([("reference_id", .string("second")), ("amount", money("5.00"))])) }
    return .object([
        ("id", .string("5O190127TN364715T")), ("intent", .string(intent)), ("status", .string(status)),
        ("purchase_units", .array(units)), ("create_time", .string(createTime)),
        (
            "links",
            .array([
                .object([
                    ("href", .string("https://api.sandbox.paypal.com/v2/checkout/orders/5O190127TN364715T")),
                    ("rel", .string("self")), ("method", .string("GET"))
                ])
            ])
        )
    ])
}

let captureUp = "https://api.sandbox.paypal.com/v2/payments/captures/"

@Suite struct PayPalMappingTests {
    @Test func completedCaptureOrder() throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(captures: [PP(id: "3C679366HH908993F", status: "COMPLETED", value: "100.00")]))
        #expect(s.provider == .paypal)
        #expect(s.transactionRef == "5O190127TN364715T")
        #expect(s.merchant == "7KNGBPH2U58GQ")
        #expect(s.site == nil)
        #expect(s.intent == .purchase)
        #expect(s.currency.code == "USD")
        #expect(s.value == 10000)
        #expect((s.authorised, s.captured, s.refunded) == (0, 10000, 0))
        #expect(s.state == .captured)
        #expect(s.rawState == "COMPLETED")
        #expect(s.createdAt == 1522617529)
        #expect(
            s.capabilities
                == PayPalProvider.capabilities(
                    authorizationID: nil, authorizationStatus: nil,
                    refundableCaptures: [RefundSource(id: "3C679366HH908993F", amount: 10000, refunded: 0)]))
    }

    /// The contract's state rules, each reached by a realistic order.
    @Test(
        arguments: [
            ("no payments, CREATED", "CREATED", "CAPTURE", [], [], [], TransactionState.pending, 0, 0, 0),
            ("no payments, SAVED", "SAVED", "AUTHORIZE", [], [], [], .pending, 0, 0, 0),
            ("no payments, APPROVED", "APPROVED", "CAPTURE", [], [], [], .pending, 0, 0, 0),
            ("payer action", "PAYER_ACTION_REQUIRED", "CAPTURE", [], [], [], .actionRequired, 0, 0, 0),
            ("order voided", "VOIDED", "AUTHORIZE", [PP(id: "A1", status: "CREATED", value: "100.00")], [], [], .voided, 10000, 0, 0),
            (
                "auth created", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "CREATED", value: "100.00")], [], [], .authorised, 10000, 0,
                0
            ),
            (
                "auth partially captured", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "PARTIALLY_CAPTURED", value: "100.00")],
                [PP(id: "C1", status: "COMPLETED", value: "40.00")], [], .authorised, 10000, 4000, 0
            ),
            (
                "auth captured", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "CAPTURED", value: "100.00")],
                [PP(id: "C1", status: "COMPLETED", value: "100.00")], [], .captured, 10000, 10000, 0
            ),
            ("auths voided", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "VOIDED", value: "100.00")], [], [], .voided, 0, 0, 0),
            ("auth expired", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "EXPIRED", value: "100.00")], [], [], .voided, 0, 0, 0),
            ("auths denied", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "DENIED", value: "100.00")], [], [], .failed, 0, 0, 0),
            ("auth pending", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "PENDING", value: "100.00")], [], [], .pending, 0, 0, 0),
            (
                "voided + denied", "COMPLETED", "AUTHORIZE",
                [PP(id: "A1", status: "VOIDED", value: "100.00"), PP(id: "A2", status: "DENIED", value: "100.00")],
                [], [], .failed, 0, 0, 0
            ),
            ("capture declined", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "DECLINED", value: "100.00")], [], .failed, 0, 0, 0),
            ("capture failed", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "FAILED", value: "100.00")], [], .failed, 0, 0, 0),
            ("capture pending", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "PENDING", value: "100.00")], [], .pending, 0, 0, 0),
            (
                "declined then completed", "COMPLETED", "CAPTURE", [],
                [PP(id: "C1", status: "DECLINED", value: "100.00"), PP(id: "C2", status: "COMPLETED", value: "100.00")], [], .captured, 0,
                10000, 0
            ),
            (
                "partial refund", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "PARTIALLY_REFUNDED", value: "100.00")],
                [PP(id: "R1", status: "COMPLETED", value: "30.00", up: captureUp + "C1")], .partiallyRefunded, 0, 10000, 3000
            ),
            (
                "full refund", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "REFUNDED", value: "100.00")],
                [PP(id: "R1", status: "COMPLETED", value: "60.00"), PP(id: "R2", status: "COMPLETED", value: "40.00")], .refunded, 0, 10000,
                10000
            ),
            (
                "refund pending", "COMPLETED", "CAPTURE", [], [PP(id: "C1", status: "COMPLETED", value: "100.00")],
                [PP(id: "R1", status: "PENDING", value: "30.00")], .partiallyRefunded, 0, 10000, 3000
            ),  // pending money counts as moved
            (
                "refund of a partial capture", "COMPLETED", "AUTHORIZE", [PP(id: "A1", status: "PARTIALLY_CAPTURED", value: "100.00")],
                [PP(id: "C1", status: "PARTIALLY_REFUNDED", value: "50.00")], [PP(id: "R1", status: "COMPLETED", value: "10.00")],
                .partiallyRefunded, 10000, 5000, 1000
            )
        ] as [(String, String, String, [PP], [PP], [PP], TransactionState, Int64, Int64, Int64)])
    func stateRules(
        name: String, status: String, intent: String, auths: [PP], captures: [PP], refunds: [PP],
        state: TransactionState, a: Int64, c: Int64, r: Int64
    ) throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(status: status, intent: intent, auths: auths, captures: captures, refunds: refunds))
        #expect(s.state == state, "\(name)")
        #expect((s.authorised, s.captured, s.refunded) == (a, c, r), "\(name)")
        // A pending payment is the raw state (with its status_details.reason when PayPal gives one).
        let pendingPayment = state == .pending && (auths + captures).contains { $0.status == "PENDING" }
        // A refund still pending says so after the order's status.
        let pendingRefund = refunds.contains { $0.status == "PENDING" }
        #expect(s.rawState == (pendingPayment ? "PENDING" : pendingRefund ? status + "/REFUND_PENDING" : status), "\(name)")
        #expect(s.intent == (intent == "CAPTURE" ? .purchase : .authorisation))
    }

    @Test func openAuthorizationIsTheActionTarget() throws {
        let created = try PayPalMapping.snapshot(
            order: paypalOrder(
                intent: "AUTHORIZE",
                auths: [
                    PP(id: "VOID1", status: "VOIDED", value: "100.00"), PP(id: "0VF52814937998046", status: "CREATED", value: "100.00")
                ]))
        // CREATED: capture and void both act on it.
        #expect(created.capabilities.capture == .allowed(target: "0VF52814937998046"))
        #expect(created.capabilities.void == .allowed(target: "0VF52814937998046"))
        let partial = try PayPalMapping.snapshot(
            order: paypalOrder(
                intent: "AUTHORIZE", auths: [PP(id: "A1", status: "PARTIALLY_CAPTURED", value: "100.00")],
                captures: [PP(id: "C1", status: "COMPLETED", value: "25.00")]))
        // PARTIALLY_CAPTURED: capture the rest, never void.
        #expect(partial.capabilities.capture == .allowed(target: "A1"))
        #expect(partial.capabilities.void == .denied("PayPal authorization A1 is PARTIALLY_CAPTURED, not CREATED"))
        #expect(refundSources(partial) == [RefundSource(id: "C1", amount: 2500, refunded: 0)])
        let done = try PayPalMapping.snapshot(
            order: paypalOrder(intent: "AUTHORIZE", auths: [PP(id: "A1", status: "CAPTURED", value: "100.00")]))
        #expect(done.capabilities.capture == .denied("no PayPal authorization left to capture"))
    }

    @Test func refundsAreAttributedToTheirCaptures() throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(
                captures: [
                    PP(id: "C1", status: "PARTIALLY_REFUNDED", value: "60.00"), PP(id: "C2", status: "REFUNDED", value: "40.00"),
                    PP(id: "C3", status: "COMPLETED", value: "10.00"), PP(id: "C4", status: "DECLINED", value: "10.00")
                ],
                refunds: [
                    PP(id: "R1", status: "COMPLETED", value: "40.00", up: captureUp + "C2"),
                    PP(id: "R2", status: "COMPLETED", value: "5.00", up: captureUp + "C1"),
                    PP(id: "R3", status: "FAILED", value: "50.00", up: captureUp + "C1")
                ]))
        #expect((s.captured, s.refunded, s.state) == (11000, 4500, .partiallyRefunded))
        #expect(
            refundSources(s) == [RefundSource(id: "C1", amount: 6000, refunded: 500), RefundSource(id: "C3", amount: 1000, refunded: 0)])
    }

    @Test func unlinkableRefundsFillCapturesInOrder() throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(
                captures: [
                    PP(id: "C1", status: "REFUNDED", value: "30.00"), PP(id: "C2", status: "PARTIALLY_REFUNDED", value: "70.00")
                ],
                refunds: [
                    PP(id: "R1", status: "COMPLETED", value: "50.00"),
                    PP(id: "R2", status: "COMPLETED", value: "5.00", up: "https://api.sandbox.paypal.com/v2/payments/captures/UNKNOWN")
                ]))
        #expect(refundSources(s) == [RefundSource(id: "C2", amount: 7000, refunded: 2500)])
    }

    @Test(
        .enabled(if: Currency(code: "JPY")?.exponent == 0 && Currency(code: "KWD")?.exponent == 3, "needs the real currency table"),
        arguments: [("JPY", "1000", 1000), ("KWD", "1.250", 1250), ("USD", "25.00", 2500)] as [(String, String, Int64)])
    func currencyExponents(code: String, value: String, minor: Int64) throws {
        let s = try PayPalMapping.snapshot(
            order: paypalOrder(value: value, currency: code, captures: [PP(id: "C1", status: "COMPLETED", value: value)]))
        #expect((s.value, s.captured) == (minor, minor))
    }

    @Test func purchaseUnitsAddUpAndMerchantMayBeAbsent() throws {
        let s = try PayPalMapping.snapshot(order: paypalOrder(status: "APPROVED", merchant: nil, extraUnit: true))
        #expect(s.value == 10500)
        #expect(s.merchant == nil)
        #expect(s.state == .pending)
    }

    @Test func offsetCreateTime() throws {
        #expect(
            try PayPalMapping.snapshot(order: paypalOrder(status: "CREATED", createTime: "2018-08-15T12:13:29-07:00")).createdAt
                == 1534360409)
    }

    // MARK: Errors

    @Test(
        arguments: [
            (paypalOrder(intent: "SALE"), "intent", "\"SALE\"", "unknown intent"),
            (paypalOrder(status: "DONE"), "status", "\"DONE\"", "unknown order status"),
            (paypalOrder(status: "COMPLETED"), "status", "\"COMPLETED\"", "no payments to derive a state from"),
            (
                paypalOrder(captures: [PP(id: "C1", status: "SETTLED", value: "1.00")]), "purchase_units[0].payments.captures[0].status",
                "\"SETTLED\"", "unknown status"
            ),
            (
                paypalOrder(auths: [PP(id: "A1", status: "OPEN", value: "1.00")]), "purchase_units[0].payments.authorizations[0].status",
                "\"OPEN\"", "unknown status"
            ),
            (
                paypalOrder(refunds: [PP(id: "R1", status: "DONE", value: "1.00")]), "purchase_units[0].payments.refunds[0].status",
                "\"DONE\"", "unknown status"
            ),
            (
                paypalOrder(captures: [PP(id: "C1", status: "COMPLETED", value: "1e2")]),
                "purchase_units[0].payments.captures[0].amount.value", "\"1e2\"",
                "exponent notation is not accepted for money"
            ),
            (paypalOrder(value: "100.001"), "purchase_units[0].amount.value", "\"100.001\"", "more than 2 decimals"),
            (paypalOrder(value: "-1.00"), "purchase_units[0].amount.value", "\"-1.00\"", "negative amount"),
            (
                paypalOrder(status: "CREATED", createTime: "2018-19-12T22:20:32.000Z"), "create_time", "\"2018-19-12T22:20:32.000Z\"",
                "not an ISO 8601 date-time"
            )
        ] as [(JSONValue, String, String, String)])
    func mappingErrorsNameTheFieldAndValue(order: JSONValue, field: String, value: String, reason: String) {
        do { _ = try PayPalMapping.snapshot(order: order); Issue.record("accepted") } catch {
            #expect(error.field == field)
            #expect(error.value == value)
            #expect(error.reason == reason)
            #expect(error.description.hasPrefix("paypal answer: \(field)"))
        }
    }

    @Test func paymentInAnotherCurrency() throws {
        let order = try JSONValue.parse(
            #"""
            {"id":"O1","intent":"CAPTURE","status":"COMPLETED","purchase_units":[{"amount":{"currency_code":"USD","value":"10.00"},
             "payments":{"captures":[{"id":"C1","status":"COMPLETED","amount":{"currency_code":"EUR","value":"10.00"}}]}}]}
            """#)
        do { _ = try PayPalMapping.snapshot(order: order); Issue.record("accepted") } catch {
            #expect(error.field == "purchase_units[0].payments.captures[0].amount.currency_code")
            #expect(error.reason == "differs from the order's currency USD")
        }
    }

    @Test(arguments: [
        (#"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[]}"#, "purchase_units"),
        (#"{"id":"O1","intent":"CAPTURE","status":"CREATED"}"#, "purchase_units"),
        (#"{"intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"}}]}"#, "id"),
        (#"{"id":"O1","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"}}]}"#, "intent"),
        (#"{"id":"O1","intent":"CAPTURE","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"}}]}"#, "status"),
        (
            #"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"value":"1.00"}}]}"#,
            "purchase_units[0].amount.currency_code"
        ),
        (
            #"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD"}}]}"#,
            "purchase_units[0].amount.value"
        ),
        (
            #"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":true}}]}"#,
            "purchase_units[0].amount.value"
        ),
        (
            #"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"},"payments":{"captures":{}}}]}"#,
            "purchase_units[0].payments.captures"
        ),
        (
            #"{"id":"O1","intent":"CAPTURE","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"},"payments":{"captures":[{"status":"COMPLETED","amount":{"currency_code":"USD","value":"1.00"}}]}}]}"#,
            "purchase_units[0].payments.captures[0].id"
        ),
        ("\"order\"", "(answer)")
    ])
    func missingOrMistypedFields(text: String, field: String) throws {
        let order = try JSONValue.parse(text)
        do { _ = try PayPalMapping.snapshot(order: order); Issue.record("accepted \(text)") } catch {
            #expect(error.field == field)
        }
    }

    // MARK: Webhook resource → order

    @Test func resourceReferencesComeFromTheOneEventParser() throws {
        // PAYMENT.CAPTURE.REFUNDED carries a refund whose up link names the capture (paypal.md §3).
        let refund = try JSONValue.parse(
            #"""
            {"id":"1Y107995YT783435V","amount":{"currency_code":"USD","value":"0.99"},"status":"COMPLETED",
             "links":[{"href":"https://api.paypal.com/v2/payments/refunds/1Y107995YT783435V","rel":"self","method":"GET"},
                      {"href":"https://api.paypal.com/v2/payments/captures/0JF852973C016714D","rel":"up","method":"GET"}]}
            """#)
        #expect(
            PayPalEvent.references(resourceType: "refund", resource: refund) == [
                .refund("1Y107995YT783435V"), .capture("0JF852973C016714D")
            ])
        let capture = try JSONValue.parse(
            #"""
            {"id":"C1","status":"COMPLETED","supplementary_data":{"related_ids":{"order_id":"5O190127TN364715T","authorization_id":"A1"}},
             "links":[{"href":"https://api.paypal.com/v2/payments/authorizations/A1","rel":"up","method":"GET"}]}
            """#)
        #expect(
            PayPalEvent.references(resourceType: "capture", resource: capture).first(where: { $0.kind == "order" })
                == .order("5O190127TN364715T"))
        // CHECKOUT.PAYMENT-APPROVAL.REVERSED has no resource_type: resource.order_id names the order.
        #expect(PayPalEvent.references(resourceType: nil, resource: try JSONValue.parse(#"{"order_id":"O7"}"#)) == [.order("O7")])
        #expect(PayPalEvent.references(resourceType: "payment_token", resource: try JSONValue.parse(#"{"id":"T1"}"#)).isEmpty)
    }
}

/// The captures a PayPal snapshot's refunds are spread over (nil when refunds are not spread).
private func refundSources(_ s: Snapshot) -> [RefundSource]? {
    if case .spread(let sources, _) = s.capabilities.refund { return sources }
    return nil
}
