import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

// Every event accounted for: what each PayPal event is about, read by the one parser; the PayPal
// additions (V, D, status_details, reauthorizations, PARTIALLY_CREATED/EXPIRED); v1 sales; PXP transactions that are
// not an order's own.

@Suite struct PayPalEventSubjectTests {
    static func sample(_ name: String) throws -> PayPalEvent {
        try PayPalEvent.parse(body: Fixture.bytes("paypal/samples/\(name)"))
    }

    @Test func approvalReversedNamesItsOrderThroughResourceOrderID() throws {
        let e = try Self.sample("CHECKOUT.PAYMENT-APPROVAL.REVERSED.docs-pui-sample.json")
        #expect(e.subject == .payments)
        #expect(e.orderID == "5O190127TN364715T")
    }

    @Test func vaultTokenNamesNoPayment() throws {
        let e = try Self.sample("VAULT.PAYMENT-TOKEN.CREATED.v3.shopware-fixture.json")
        guard case .noPayment(let reason) = e.subject else { Issue.record("expected noPayment, got \(e.subject)"); return }
        #expect(reason.hasPrefix("VAULT.PAYMENT-TOKEN.CREATED names no payment"))
    }

    @Test(arguments: Fixture.paypalVectors)
    func realSaleDeliveriesNameTheirSale(name: String) throws {
        let e = try PayPalEvent.parse(body: Fixture.bytes("paypal/\(name)/body.bin"))
        guard case .sale(let id, _, let parent) = e.subject else { Issue.record("expected a sale, got \(e.subject)"); return }
        #expect(!id.isEmpty)
        #expect(parent?.hasPrefix("PAY-") == true)
    }

    @Test func saleRefundNamesItsSaleAndAmount() throws {
        let e = try Self.sample("PAYMENT.SALE.REFUNDED.v1.constructed.json")
        #expect(
            e.subject
                == .saleRefund(
                    id: "6YX43824R4443062K", saleID: "7DW85331GX749735N", parentPayment: "PAY-1A142943SV880364LKVJEFPQ",
                    amount: "5.00", currency: "USD"))
    }

    @Test func disputeNamesTheCapturesItDisputes() throws {
        let e = try Self.sample("CUSTOMER.DISPUTE.CREATED.v1.constructed.json")
        #expect(e.subject == .dispute(id: "PP-D-27803", transactions: ["3C679366HH908993F"]))
    }

    @Test func captureReversalIsARefundResourceLinkedToItsCapture() throws {
        let e = try Self.sample("PAYMENT.CAPTURE.REVERSED.v2.constructed.json")
        #expect(e.subject == .payments)
        #expect(e.references == [.refund("09E71677NS257044M"), .capture("3C679366HH908993F")])
    }

    @Test func subscriptionSaleNamesItsBillingAgreement() throws {
        let body =
            #"{"id":"WH-9","event_type":"PAYMENT.SALE.COMPLETED","resource_type":"sale","resource":{"id":"S1","state":"completed","billing_agreement_id":"I-BW452GLLEP1G","amount":{"total":"9.99","currency":"USD"}}}"#
        let e = try PayPalEvent.parse(body: Array(body.utf8))
        #expect(e.subject == .sale(id: "S1", billingAgreement: "I-BW452GLLEP1G", parentPayment: nil))
    }

    @Test func unknownEventTypesAreTracedThroughTheirResource() throws {
        let traced = try PayPalEvent.parse(
            body: Array(
                #"{"id":"WH-1","event_type":"PAYMENT.CAPTURE.SOMETHING-NEW","resource_type":"capture","resource":{"id":"C9"}}"#.utf8))
        #expect(traced.subject == .payments)
        #expect(traced.references == [.capture("C9")])
        let nothing = try PayPalEvent.parse(
            body: Array(#"{"id":"WH-2","event_type":"CATALOG.PRODUCT.CREATED","resource_type":"product","resource":{"id":"P1"}}"#.utf8))
        #expect(nothing.subject == .noPayment("CATALOG.PRODUCT.CREATED names no payment (resource_type product)"))
    }
}

@Suite struct PayPalAdditionsMappingTests {
    /// An order answer built by hand where `paypalOrder` cannot say it (status_details, notes, related ids).
    func order(_ units: String, status: String = "COMPLETED", intent: String = "CAPTURE", source: String = "") throws -> JSONValue {
        try JSONValue.parse(
            #"{"id":"O1","status":"\#(status)","intent":"\#(intent)","create_time":"2026-11-01T10:00:00Z",\#(source)"purchase_units":[{"amount":{"currency_code":"USD","value":"100.00"},"payee":{"merchant_id":"M1"},"payments":\#(units)}]}"#
        )
    }

    /// A chargeback as PayPal shows it: the capture REFUNDED (its published statuses have no REVERSED) and a
    /// COMPLETED refund-shaped record "Payment reversed" under it. It counts in V, never in R: no false
    /// over_refunded, and nothing is left to refund.
    @Test func aReversalRecordCountsInVNeverInR() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"REFUNDED","amount":{"currency_code":"USD","value":"100.00"}}],
                 "refunds":[{"id":"R1","status":"COMPLETED","note_to_payer":"Payment reversed","amount":{"currency_code":"USD","value":"100.00"},
                             "links":[{"rel":"up","href":"https://api.paypal.com/v2/payments/captures/C1"}]}]}
                """#))
        #expect((s.captured, s.refunded, s.reversed) == (10000, 0, 10000))
        #expect(s.state == .captured)
        guard case .spread(let sources, _) = s.capabilities.refund else { Issue.record("expected spread refunds"); return }
        #expect(sources.isEmpty)
        // A capture status REVERSED is not PayPal's: an answer carrying it is unreadable, never guessed at.
        #expect(throws: ProviderMappingError.self) {
            _ = try PayPalMapping.snapshot(
                order: try order(#"{"captures":[{"id":"C1","status":"REVERSED","amount":{"currency_code":"USD","value":"1.00"}}]}"#))
        }
    }

    /// Whether a record is a reversal is read from PayPal's answer, never from the event that named it: a
    /// PAYMENT.CAPTURE.REVERSED naming a record the answer shows as a merchant refund leaves it in R (said in a note),
    /// so a forged event naming a genuine refund cannot take it out of R and have it made again; a record whose answer
    /// carries PayPal's "Payment reversed" is V; one payrecon made is R whatever it carries.
    @Test func aReversalIsReadFromTheAnswerNeverFromTheEvent() throws {
        func answer(note: String?) throws -> JSONValue {
            let n = note.map { #","note_to_payer":"\#($0)""# } ?? ""
            return try order(
                #"""
                {"captures":[{"id":"C1","status":"REFUNDED","amount":{"currency_code":"USD","value":"100.00"}}],
                 "refunds":[{"id":"R1","status":"COMPLETED","amount":{"currency_code":"USD","value":"30.00"},
                             "links":[{"rel":"up","href":"https://api.paypal.com/v2/payments/captures/C1"}]},
                            {"id":"R2","status":"COMPLETED","amount":{"currency_code":"USD","value":"70.00"}\#(n),
                             "links":[{"rel":"up","href":"https://api.paypal.com/v2/payments/captures/C1"}]}]}
                """#)
        }
        let named = [
            TransactionLink(externalID: "R2", parentExternalID: nil, orderID: "O", kind: TransactionLink.Kind.reversal, source: .learned),
            TransactionLink(externalID: "R1", parentExternalID: "C1", orderID: "O", kind: .refund, source: .payrecon)
        ]
        let forged = try PayPalMapping.snapshot(order: try answer(note: nil), links: named)
        #expect((forged.captured, forged.refunded, forged.reversed) == (10000, 10000, 0))
        #expect(forged.notes.contains { $0.contains("named R2 a reversal") && $0.contains("counted in R") }, "\(forged.notes)")
        let genuine = try PayPalMapping.snapshot(order: try answer(note: "Payment reversed"), links: named)
        #expect((genuine.captured, genuine.refunded, genuine.reversed) == (10000, 3000, 7000))
        #expect(genuine.notes.isEmpty)
        // payrecon's own refund is R whatever note it carries.
        let own = [TransactionLink(externalID: "R2", parentExternalID: "C1", orderID: "O", kind: .refund, source: .payrecon)]
        #expect(try PayPalMapping.snapshot(order: try answer(note: "Payment reversed"), links: own).reversed == 0)
    }

    /// Only PayPal's own note marks a reversal: a merchant's refund whose note mentions a reversal is still R.
    @Test func aMerchantNoteMentioningAReversalIsStillARefund() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"PARTIALLY_REFUNDED","amount":{"currency_code":"USD","value":"100.00"}}],
                 "refunds":[{"id":"R1","status":"COMPLETED","note_to_payer":"Charge reversed at customer request","amount":{"currency_code":"USD","value":"30.00"},
                             "links":[{"rel":"up","href":"https://api.paypal.com/v2/payments/captures/C1"}]}]}
                """#))
        #expect((s.refunded, s.reversed) == (3000, 0))
    }

    /// While a dispute is open PayPal may show the capture PARTIALLY_REFUNDED with no refund record: R stays 0.
    @Test func aCaptureFlippedByADisputeIsNotARefund() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"PARTIALLY_REFUNDED","amount":{"currency_code":"USD","value":"100.00"}}]}
                """#))
        #expect((s.captured, s.refunded, s.reversed) == (10000, 0, 0))
        #expect(s.state == .captured)
    }

    /// A dispute PayPal refuses to show (403) holds its capture's refunds and says which permission is missing.
    @Test func anUnreadableDisputeHoldsTheCapturesRefunds() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"COMPLETED","amount":{"currency_code":"USD","value":"100.00"}}]}
                """#), unreadableDisputes: [(dispute: "PP-D-1", capture: "C1")])
        #expect(s.disputed == 10000)
        #expect(s.notes.first?.contains("disputes/read-seller") == true)
    }

    @Test func aPendingCaptureKeepsItsReasonAndAnEcheckIsItsMethod() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"PENDING","status_details":{"reason":"ECHECK"},"amount":{"currency_code":"USD","value":"100.00"}}]}
                """#, source: #""payment_source":{"paypal":{"email_address":"b@example.com"}},"#))
        #expect(s.state == .pending)
        #expect(s.rawState == "PENDING/ECHECK")
        #expect(s.method == "echeck")
        let manual = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"captures":[{"id":"C1","status":"PENDING","status_details":{"reason":"RECEIVING_PREFERENCE_MANDATES_MANUAL_ACTION"},"amount":{"currency_code":"USD","value":"100.00"}}]}
                """#, source: #""payment_source":{"paypal":{}},"#))
        #expect(manual.rawState == "PENDING/RECEIVING_PREFERENCE_MANDATES_MANUAL_ACTION")
        #expect(manual.method == "paypal")
    }

    @Test func partiallyCreatedCountsAsCreatedAndExpiredAsVoided() throws {
        let created = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"authorizations":[{"id":"A1","status":"PARTIALLY_CREATED","amount":{"currency_code":"USD","value":"60.00"}}]}
                """#, intent: "AUTHORIZE"))
        #expect(created.state == .authorised)
        #expect(created.authorised == 6000)
        #expect(created.capabilities.capture == .allowed(target: "A1"))
        let expired = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"authorizations":[{"id":"A1","status":"EXPIRED","amount":{"currency_code":"USD","value":"60.00"}}]}
                """#, intent: "AUTHORIZE"))
        #expect(expired.state == .voided)
        #expect(expired.authorised == 0)
    }

    @Test func aReauthorizationReplacesItsParentInA() throws {
        let s = try PayPalMapping.snapshot(
            order: try order(
                #"""
                {"authorizations":[{"id":"A1","status":"CREATED","amount":{"currency_code":"USD","value":"100.00"}},
                                   {"id":"A2","status":"CREATED","amount":{"currency_code":"USD","value":"110.00"},
                                    "supplementary_data":{"related_ids":{"order_id":"O1","authorization_id":"A1"}}}]}
                """#, intent: "AUTHORIZE"))
        #expect(s.authorised == 11000)  // not 210.00: the chain counts once
        #expect(s.capabilities.capture == .allowed(target: "A2"))
        #expect(s.capabilities.void == .allowed(target: "A1"))  // "void the original parent authorization"
    }

    @Test func openDisputesAreD() throws {
        let disputes = [
            try JSONValue.parse(
                #"{"dispute_id":"PP-D-1","status":"WAITING_FOR_SELLER_RESPONSE","dispute_amount":{"currency_code":"USD","value":"40.00"}}"#),
            try JSONValue.parse(#"{"dispute_id":"PP-D-2","status":"RESOLVED","dispute_amount":{"currency_code":"USD","value":"60.00"}}"#)
        ]
        let s = try PayPalMapping.snapshot(
            order: try order(#"{"captures":[{"id":"C1","status":"COMPLETED","amount":{"currency_code":"USD","value":"100.00"}}]}"#),
            disputes: disputes)
        #expect(s.disputed == 4000)
        let odd = [
            try JSONValue.parse(#"{"dispute_id":"PP-D-3","status":"SOMETHING","dispute_amount":{"currency_code":"USD","value":"1.00"}}"#)
        ]
        let error = #expect(throws: ProviderMappingError.self) {
            try PayPalMapping.snapshot(order: try order(#"{"captures":[]}"#), disputes: odd)
        }
        #expect(error?.field == "dispute PP-D-3.status")
    }
}

@Suite struct PayPalSaleMappingTests {
    func sale(_ id: String, _ state: String, _ total: String, currency: String = "USD", reason: String? = nil) throws -> JSONValue {
        try JSONValue.parse(
            #"{"id":"\#(id)","state":"\#(state)","amount":{"total":"\#(total)","currency":"\#(currency)"},"create_time":"2026-11-01T10:00:00Z"\#(reason.map { #","reason_code":"\#($0)""# } ?? "")}"#
        )
    }

    @Test(arguments: [
        ("completed", TransactionState.captured, Int64(2000), Int64(0), Int64(0), "completed"),
        ("refunded", .refunded, 2000, 2000, 0, "refunded"),
        ("reversed", .captured, 2000, 0, 2000, "reversed"),
        ("denied", .failed, 0, 0, 0, "denied")
    ])
    func states(state: String, expected: TransactionState, c: Int64, r: Int64, v: Int64, raw: String) throws {
        let s = try PayPalSaleMapping.snapshot(sales: [try sale("S1", state, "20.00")], refunds: [], transactionRef: "S1")
        #expect(s.state == expected)
        #expect((s.captured, s.refunded, s.reversed) == (c, r, v))
        #expect(s.rawState == raw)
        #expect(s.intent == .purchase)
        #expect(!s.reportsMerchant)
    }

    @Test func pendingKeepsItsReasonCode() throws {
        let s = try PayPalSaleMapping.snapshot(
            sales: [try sale("S1", "pending", "20.00", reason: "ECHECK")], refunds: [], transactionRef: "S1")
        #expect(s.state == .pending)
        #expect(s.rawState == "pending/ECHECK")
    }

    @Test func partiallyRefundedSumsTheRefundsSeen() throws {
        let refunds = [
            TransactionLink(
                externalID: "RF1", parentExternalID: "S1", orderID: "O", kind: .refund, amount: 500, currency: "USD", source: .learned),
            TransactionLink(
                externalID: "RF2", parentExternalID: "S1", orderID: "O", kind: .refund, amount: 250, currency: "USD", source: .learned),
            TransactionLink(
                externalID: "RF3", parentExternalID: "OTHER", orderID: "O", kind: .refund, amount: 999, currency: "USD", source: .learned)
        ]
        let s = try PayPalSaleMapping.snapshot(
            sales: [try sale("S1", "partially_refunded", "20.00")], refunds: refunds, transactionRef: "S1")
        #expect(s.state == .partiallyRefunded)
        #expect((s.captured, s.refunded) == (2000, 750))
        guard case .spread(let sources, _) = s.capabilities.refund else { Issue.record("expected spread refunds"); return }
        #expect(sources == [RefundSource(id: "S1", amount: 2000, refunded: 750)])
        guard case .denied = s.capabilities.capture, case .denied = s.capabilities.void, case .unsupported = s.capabilities.increment else {
            Issue.record("a sale cannot be captured, voided or incremented"); return
        }
    }

    @Test func aBillingAgreementSumsItsSales() throws {
        let s = try PayPalSaleMapping.snapshot(
            sales: [try sale("S1", "completed", "9.99"), try sale("S2", "completed", "9.99")],
            refunds: [], transactionRef: "I-BW452GLLEP1G")
        #expect(s.captured == 1998)
        #expect(s.transactionRef == "I-BW452GLLEP1G")
    }

    @Test func hufTakesNoDecimalsAndMixedCurrenciesAreAnError() throws {
        let huf = try PayPalSaleMapping.snapshot(
            sales: [try sale("S1", "completed", "1500", currency: "HUF")], refunds: [], transactionRef: "S1")
        #expect(huf.captured == 150000)  // ISO minor units (HUF has 2)
        #expect(huf.capabilities.amountUnit == 100)
        let error = #expect(throws: ProviderMappingError.self) {
            try PayPalSaleMapping.snapshot(
                sales: [try sale("S1", "completed", "1.00"), try sale("S2", "completed", "1.00", currency: "EUR")],
                refunds: [], transactionRef: "S1")
        }
        #expect(error?.field == "sale S2.amount.currency")
    }

    @Test func anUnknownSaleStateNamesTheField() throws {
        let error = #expect(throws: ProviderMappingError.self) {
            try PayPalSaleMapping.snapshot(sales: [try sale("S1", "weird", "1.00")], refunds: [], transactionRef: "S1")
        }
        #expect(error?.field == "sale S1.state")
    }
}

@Suite struct PXPNonOrderTransactionTests {
    func answer(intent: String, state: String = "Authorised", parent: String? = nil) throws -> JSONValue {
        try JSONValue.parse(
            #"{"systemTransactionId":"SYS-9","state":"\#(state)","transactionMethod":{"intent":\#(intent),"fundingType":"Card"},"merchant":"M1","site":"S1","merchantTransactionId":"PORTAL-1","merchantTransactionDate":"2026-11-01T10:00:00Z","amounts":{"transactionValue":12.50,"currencyCode":"EUR"}\#(parent.map { #","parentSystemTransactionId":"\#($0)""# } ?? "")}"#
        )
    }

    /// A NUL in PXP's systemTransactionId (`\u0000`) made an alias no PostgreSQL text holds: the alias insert failed
    /// its group, then the order's check alone, every sweep. Read as U+FFFD, what is linked is what is stored.
    @Test func aNULInTheSystemTransactionIdIsAnAliasPostgreSQLCanHold() throws {
        let answer = try JSONValue.parse(
            #"{"systemTransactionId":"SYS\u0000-9","state":"Authorised","transactionMethod":{"intent":"Authorisation","fundingType":"Card"},"merchant":"M1","site":"S1","merchantTransactionId":"T","merchantTransactionDate":"2026-11-01T10:00:00Z","amounts":{"transactionValue":12.50,"currencyCode":"EUR"}}"#
        )
        let s = try PXPMapping.snapshot(transaction: answer, transactionRef: "T")
        #expect(s.aliases == ["SYS\u{FFFD}-9"])
        #expect(!s.aliases.contains { $0.utf8.contains(0) })
    }

    @Test func aVerificationIsIgnoredWithThatReason() throws {
        guard
            case .ignored(let reason) = try PXPMapping.lookup(
                transaction: try answer(intent: #""Verification""#), transactionRef: "PORTAL-1")
        else {
            Issue.record("expected ignored"); return
        }
        #expect(reason.contains("Verification"))
    }

    @Test func aPortalRefundNamingItsParentIsLinkedToIt() throws {
        let lookup = try PXPMapping.lookup(transaction: try answer(intent: #""Refund""#, parent: "SYS-PARENT"), transactionRef: "PORTAL-1")
        guard case .modification(let parent, let link) = lookup else { Issue.record("expected a modification, got \(lookup)"); return }
        #expect(parent == "SYS-PARENT")
        #expect(link.kind == .refund && link.amount == 1250 && link.state == "Authorised" && link.externalID == "SYS-9")
        #expect(PXPModification(link: link)?.isAccepted == true)
    }

    @Test func aPortalCaptureIsReadFromItsState() throws {
        let lookup = try PXPMapping.lookup(
            transaction: try answer(intent: #""Authorisation""#, state: "Captured", parent: "SYS-PARENT"),
            transactionRef: "PORTAL-2")
        guard case .modification(_, let link) = lookup else { Issue.record("expected a modification"); return }
        #expect(link.kind == .capture)
    }

    @Test func aRefundNamingNoParentIsUnknownOrderSayingWhy() throws {
        guard case .unreconcilable(let t) = try PXPMapping.lookup(transaction: try answer(intent: #""Refund""#), transactionRef: "PORTAL-1")
        else {
            Issue.record("expected unreconcilable"); return
        }
        #expect(t.detail.contains("intent Refund") && t.detail.contains(PXPMapping.parentField))
        #expect(t.value == Money(minorUnits: 1250, currency: Currency(code: "EUR")!))
    }

    @Test func anAeropayIntentObjectNamesItsMethod() throws {
        let s = try PXPMapping.snapshot(transaction: try answer(intent: #"{"aeropay":"Authorisation"}"#), transactionRef: "PORTAL-1")
        #expect(s.intent == .authorisation)
        #expect(s.method == "aeropay")
        let card = try PXPMapping.snapshot(transaction: try answer(intent: #""Purchase""#, state: "Captured"), transactionRef: "PORTAL-1")
        #expect(card.method == "card")
    }

    @Test func anUnparsableDateFailsTheCheckNamingTheField() throws {
        let bad = try JSONValue.parse(
            #"{"systemTransactionId":"SYS-9","state":"Authorised","transactionMethod":{"intent":"Authorisation"},"merchant":"M1","site":"S1","merchantTransactionDate":"yesterday","amounts":{"transactionValue":1,"currencyCode":"EUR"}}"#
        )
        let error = #expect(throws: ProviderMappingError.self) { try PXPMapping.snapshot(transaction: bad, transactionRef: "T") }
        #expect(error?.field == "merchantTransactionDate")
    }
}

/// The false alarm of one 24 h window for every method: Aeropay (ACH, days), PayPal eCheck (days) and
/// BLIK (minutes) each get their own window from the method the provider's answer names.
@Suite struct PendingWindowByMethodTests {
    let windows = try! PendingWindows.parse("24h,aeropay=5d,echeck=5d,blik=15m")
    let now: Int64 = 1_796_000_000

    func stale(_ snapshot: Snapshot, _ order: Order) -> Bool {
        Planner.plan(
            order: order, snapshot: snapshot, emitted: [], now: now,
            pendingMax: windows.seconds(provider: snapshot.provider, method: snapshot.method)
        )
        .findings.contains { $0.kind == .stalePending }
    }

    func pxp(intent: String, ageDays: Int64) throws -> Snapshot {
        let date = UnixTime.iso8601(now - ageDays * 86_400)
        return try PXPMapping.snapshot(
            transaction: try JSONValue.parse(
                #"{"systemTransactionId":"S","state":"Pending","transactionMethod":{"intent":\#(intent),"fundingType":"Card"},"merchant":"M1","site":"S1","merchantTransactionDate":"\#(date)","amounts":{"transactionValue":10,"currencyCode":"USD"}}"#
            ), transactionRef: "T")
    }

    @Test func aeropayPendingTwoDaysIsNotStaleButACardIs() throws {
        let order = Order(
            provider: .pxp, orderID: "O", merchant: "M1", site: "S1", transactionRef: "T", intent: .authorisation,
            amount: Money(minorUnits: 1000, currency: Currency(code: "USD")!), fulfilment: .open)
        #expect(!stale(try pxp(intent: #"{"aeropay":"Authorisation"}"#, ageDays: 2), order))
        #expect(stale(try pxp(intent: #"{"aeropay":"Authorisation"}"#, ageDays: 6), order))
        #expect(stale(try pxp(intent: #""Authorisation""#, ageDays: 2), order))
    }

    @Test func paypalEcheckPendingTwoDaysIsNotStale() throws {
        let created = UnixTime.iso8601(now - 2 * 86_400)
        let snapshot = try PayPalMapping.snapshot(
            order: try JSONValue.parse(
                #"{"id":"O1","status":"COMPLETED","intent":"CAPTURE","create_time":"\#(created)","payment_source":{"paypal":{}},"purchase_units":[{"amount":{"currency_code":"USD","value":"10.00"},"payments":{"captures":[{"id":"C1","status":"PENDING","status_details":{"reason":"ECHECK"},"amount":{"currency_code":"USD","value":"10.00"}}]}}]}"#
            ))
        let order = Order(
            provider: .paypal, orderID: "O", merchant: nil, site: nil, transactionRef: "O1", intent: .purchase,
            amount: Money(minorUnits: 1000, currency: Currency(code: "USD")!), fulfilment: .fulfilled)
        #expect(snapshot.method == "echeck")
        #expect(!stale(snapshot, order))
    }
}
