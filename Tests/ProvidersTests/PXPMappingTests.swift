import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// A PXP GET /transactions answer shaped like the documented example (pxp.md §2.3), with the fields varied per test.
func pxpAnswer(
    state: String = "Authorised", intent: String = "Authorisation", value: String = "50.05", currency: String = "EUR",
    authorisedAmount: String? = nil, date: String = "2024-01-27T08:51:02.826Z",
    id: String = "1ed768bb-e88a-4636-91ae-67927ccbb02b"
) throws -> JSONValue {
    let funding =
        authorisedAmount.map {
            #","fundingData":{"cardScheme":"Visa","providerResponse":{"provider":"pxpfinancial","code":"00","merchantAdvice":{},"authorisedAmount":\#($0)}}"#
        } ?? ""
    return try JSONValue.parse(
        #"""
        {"systemTransactionId":"\#(id)","state":"\#(state)","stateMessage":"Transaction \#(state)",
         "transactionMethod":{"intent":"\#(intent)","fundingType":"Card","entryType":"Ecom"},"merchant":"MERCHANT-1","site":"SITE-1",
         "merchantTransactionId":"ECOM-001","merchantTransactionDate":"\#(date)",
         "amounts":{"transactionValue":\#(value),"currencyCode":"\#(currency)"},
         "shopper":{"id":"Shopper_01","firstName":"John","lastName":"Doe","email":"shopper@example.com"}\#(funding)}
        """#)
}

let parentID = "1ed768bb-e88a-4636-91ae-67927ccbb02b"

func child(_ id: String, _ op: PXPOperation, _ amount: Int64, _ state: String, parent: String = parentID) -> PXPModification {
    PXPModification(systemTransactionId: id, parentSystemTransactionId: parent, operation: op, amount: amount, state: state)
}

@Suite struct PXPMappingTests {
    @Test func documentedAuthorisedTransaction() throws {
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(), transactionRef: "ECOM-001")
        #expect(s.provider == .pxp)
        #expect(s.transactionRef == "ECOM-001")
        #expect(s.merchant == "MERCHANT-1")
        #expect(s.site == "SITE-1")
        #expect(s.intent == .authorisation)
        #expect(s.currency.code == "EUR")
        #expect(s.value == 5005)
        #expect((s.authorised, s.captured, s.refunded) == (5005, 0, 0))
        #expect(s.state == .authorised)
        #expect(s.rawState == "Authorised")
        #expect(s.createdAt == 1706345462)
        #expect(s.capabilities == PXPProvider.capabilities(systemTransactionID: parentID))
        #expect(s.aliases == [parentID])
        #expect(s.reportsSite)
    }

    /// Every row of the contract's PXP state table, with A, C and R.
    @Test(
        arguments: [
            ("Authorised", "Authorisation", nil, TransactionState.authorised, 5005, 0, 0),
            ("Authorised", "EstimatedAuthorisation", "45.00", .authorised, 4500, 0, 0),
            ("Captured", "Authorisation", nil, .captured, 5005, 5005, 0),
            ("Captured", "Purchase", "60.00", .captured, 5005, 5005, 0),
            ("Executed", "Payout", nil, .captured, 5005, 5005, 0),
            ("Confirmed", "Purchase", nil, .captured, 5005, 5005, 0),
            ("Approved", "Purchase", nil, .captured, 5005, 5005, 0),
            ("Refunded", "Purchase", nil, .refunded, 5005, 5005, 5005),
            ("Cancelled", "Authorisation", "0", .voided, 0, 0, 0),
            ("Cancelled", "Authorisation", nil, .voided, 5005, 0, 0),
            ("Refused", "Authorisation", nil, .failed, 5005, 0, 0),
            ("Rejected", "Payout", nil, .failed, 5005, 0, 0),
            ("Error", "Purchase", nil, .failed, 5005, 0, 0),
            ("Pending", "Authorisation", nil, .pending, 5005, 0, 0),
            ("Updated", "Authorisation", nil, .pending, 5005, 0, 0),
            ("captured", "purchase", nil, .captured, 5005, 5005, 0)
        ] as [(String, String, String?, TransactionState, Int64, Int64, Int64)])
    func stateTable(
        state: String, intent: String, authorisedAmount: String?, expected: TransactionState, a: Int64, c: Int64, r: Int64
    ) throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: state, intent: intent, authorisedAmount: authorisedAmount),
            transactionRef: "ECOM-001")
        #expect(s.state == expected)
        #expect(s.rawState == state)
        #expect((s.authorised, s.captured, s.refunded) == (a, c, r))
    }

    @Test(arguments: [
        ("Authorisation", Intent.authorisation), ("ESTIMATEDAUTHORISATION", .estimatedAuthorisation),
        ("purchase", .purchase), ("Payout", .payout)
    ])
    func intents(text: String, intent: Intent) throws {
        #expect(try PXPMapping.snapshot(transaction: try pxpAnswer(intent: text), transactionRef: "r").intent == intent)
    }

    @Test func authorisedAmountBelowTheValue() throws {
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(authorisedAmount: "40.00"), transactionRef: "r")
        #expect((s.value, s.authorised, s.state) == (5005, 4000, .authorised))
    }

    @Test(
        arguments: [
            ("2025-01-27 08:51:02.826445+00:00", 1737967862), ("2024-10-27T08:51:04.8264455Z", 1730019064),
            ("2024-01-27T09:51:02+01:00", 1706345462)
        ] as [(String, Int64)])
    func creationTimeForms(date: String, seconds: Int64) throws {
        #expect(try PXPMapping.snapshot(transaction: try pxpAnswer(date: date), transactionRef: "r").createdAt == seconds)
    }

    @Test func trailingZerosAreExact() throws {
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(value: "29.990", currency: "USD"), transactionRef: "r")
        #expect(s.value == 2999)
        let big = try PXPMapping.snapshot(transaction: try pxpAnswer(value: "12345678901234.56", currency: "USD"), transactionRef: "r")
        #expect(big.value == 1234567890123456)
    }

    @Test(
        .enabled(if: Currency(code: "JPY")?.exponent == 0 && Currency(code: "KWD")?.exponent == 3, "needs the real currency table"),
        arguments: [("JPY", "1000", 1000), ("KWD", "1.250", 1250), ("KWD", "1.25", 1250), ("GBP", "20", 2000)] as [(String, String, Int64)])
    func currencyExponents(code: String, value: String, minor: Int64) throws {
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(value: value, currency: code), transactionRef: "r")
        #expect(s.value == minor)
        #expect(s.authorised == minor)
    }

    @Test(.enabled(if: Currency(code: "JPY")?.exponent == 0, "needs the real currency table"))
    func decimalsOnAZeroDecimalCurrencyAreRejected() throws {
        #expect(throws: ProviderMappingError.self) {
            try PXPMapping.snapshot(transaction: try pxpAnswer(value: "1000.5", currency: "JPY"), transactionRef: "r")
        }
    }

    @Test(.enabled(if: Currency(code: "XXQ") == nil, "needs the real currency table"))
    func unknownCurrency() throws {
        let answer = try pxpAnswer(currency: "XXQ")
        do { _ = try PXPMapping.snapshot(transaction: answer, transactionRef: "r"); Issue.record("accepted") } catch {
            #expect(error.field == "amounts.currencyCode")
            #expect(error.value == "\"XXQ\"")
        }
    }

    // MARK: Modifications

    @Test func partialCaptureChildOnAnAuthorisedParent() throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(), modifications: [child("c1", .capture, 2000, "Captured")], transactionRef: "r")
        #expect((s.state, s.authorised, s.captured, s.refunded) == (.authorised, 5005, 2000, 0))
        #expect(s.rawState == "Authorised")
    }

    @Test func captureChildrenAddUp() throws {
        let mods = [child("c1", .capture, 2000, "Captured"), child("c2", .finalCapture, 3005, "Captured")]
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(), modifications: mods, transactionRef: "r")
        #expect((s.state, s.captured) == (.captured, 5005))
    }

    @Test func aParentThatAlsoShowsTheCaptureIsNotDoubleCounted() throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Captured"), modifications: [child("c1", .capture, 5005, "Captured")],
            transactionRef: "r")
        #expect((s.state, s.captured) == (.captured, 5005))
    }

    @Test func refundChildren() throws {
        let partial = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Captured", intent: "Purchase"),
            modifications: [child("r1", .refund, 1000, "Authorised")], transactionRef: "r")
        #expect((partial.state, partial.authorised, partial.captured, partial.refunded) == (.partiallyRefunded, 5005, 5005, 1000))
        let full = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Captured", intent: "Purchase"),
            modifications: [child("r1", .refund, 1000, "Authorised"), child("r2", .refund, 4005, "Authorised")],
            transactionRef: "r")
        #expect((full.state, full.refunded) == (.refunded, 5005))
        let reflected = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: "Refunded", intent: "Purchase"),
            modifications: [child("r1", .refund, 5005, "Authorised")], transactionRef: "r")
        #expect((reflected.state, reflected.captured, reflected.refunded) == (.refunded, 5005, 5005))
    }

    @Test func refundAfterCaptureChildOnAnAuthorisation() throws {
        let mods = [child("c1", .capture, 5005, "Captured"), child("r1", .refund, 5, "Authorised")]
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(), modifications: mods, transactionRef: "r")
        #expect((s.state, s.captured, s.refunded) == (.partiallyRefunded, 5005, 5))
    }

    @Test func incrementsAddToTheAuthorisation() throws {
        // Docs example: 24.99 raised to 29.99 → the modification records the delta 500.
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(value: "24.99"), modifications: [child("i1", .incremental, 500, "Authorised")],
            transactionRef: "r")
        #expect((s.state, s.value, s.authorised) == (.authorised, 2499, 2999))
        // The parent already shows the raised total: not added twice.
        let reflected = try PXPMapping.snapshot(
            transaction: try pxpAnswer(value: "24.99", authorisedAmount: "29.99"),
            modifications: [child("i1", .incremental, 500, "Authorised")], transactionRef: "r")
        #expect(reflected.authorised == 2999)
        let partialAuth = try PXPMapping.snapshot(
            transaction: try pxpAnswer(value: "24.99", authorisedAmount: "20.00"),
            modifications: [child("i1", .incremental, 500, "Authorised")], transactionRef: "r")
        #expect(partialAuth.authorised == 2500)
    }

    @Test func acceptedVoidChildVoidsAnUncapturedAuthorisation() throws {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(), modifications: [child("v1", .void, 5005, "Cancelled")], transactionRef: "r")
        #expect(s.state == .voided)
        #expect(s.rawState == "Authorised")
    }

    @Test func unacceptedForeignAndRepeatedChildrenDoNotCount() throws {
        let mods = [
            child("c1", .capture, 2000, "Refused"), child("r1", .refund, 100, "Error"), child("i1", .incremental, 100, "Pending"),
            child("v1", .void, 5005, "Refused"), child("c2", .capture, 1000, "Captured", parent: "someone-else"),
            child("c3", .capture, 1500, "Captured"), child("c3", .capture, 1500, "Captured")
        ]
        let s = try PXPMapping.snapshot(transaction: try pxpAnswer(), modifications: mods, transactionRef: "r")
        #expect((s.state, s.authorised, s.captured, s.refunded) == (.authorised, 5005, 1500, 0))
    }

    @Test func negativeModificationAmountIsAnError() throws {
        #expect(throws: ProviderMappingError.self) {
            try PXPMapping.snapshot(
                transaction: try pxpAnswer(), modifications: [child("c1", .capture, -1, "Captured")], transactionRef: "r")
        }
    }

    // MARK: Errors

    @Test(arguments: [
        (#"{"state":"Voided"}"#, "state", "\"Voided\"", "unknown transaction state"),
        (#"{"intent":"Refund"}"#, "transactionMethod.intent", "\"Refund\"", "not one of the four order intents"),
        (#"{"intent":"Verification"}"#, "transactionMethod.intent", "\"Verification\"", "not one of the four order intents"),
        (#"{"value":"5e1"}"#, "amounts.transactionValue", "5e1", "exponent notation is not accepted for money"),
        (#"{"value":"50.051"}"#, "amounts.transactionValue", "50.051", "more than 2 decimals"),
        (#"{"value":"-1.00"}"#, "amounts.transactionValue", "-1.00", "negative amount"),
        (#"{"value":"null"}"#, "amounts.transactionValue", "null", "not a number or decimal string"),
        (#"{"authorisedAmount":"\"x\""}"#, "fundingData.providerResponse.authorisedAmount", "\"x\"", "not a decimal number"),
        (#"{"date":"2024-13-01T00:00:00Z"}"#, "merchantTransactionDate", "\"2024-13-01T00:00:00Z\"", "not an ISO 8601 date-time"),
        (#"{"date":"2024-01-27T08:51:02"}"#, "merchantTransactionDate", "\"2024-01-27T08:51:02\"", "not an ISO 8601 date-time")
    ])
    func mappingErrorsNameTheFieldAndValue(overrides: String, field: String, value: String, reason: String) throws {
        let o = try JSONValue.parse(overrides)
        let answer = try pxpAnswer(
            state: o["state"]?.stringValue ?? "Authorised", intent: o["intent"]?.stringValue ?? "Authorisation",
            value: o["value"]?.stringValue ?? "50.05", authorisedAmount: o["authorisedAmount"]?.stringValue,
            date: o["date"]?.stringValue ?? "2024-01-27T08:51:02.826Z")
        do { _ = try PXPMapping.snapshot(transaction: answer, transactionRef: "r"); Issue.record("accepted") } catch {
            #expect(error.field == field)
            #expect(error.value == value)
            #expect(error.reason == reason)
            #expect(error.description == "pxp answer: \(field) = \(value): \(reason)")
        }
    }

    @Test(arguments: [
        (#"[]"#, "(answer)"),
        (
            #"{"state":"Authorised","transactionMethod":{"intent":"Purchase"},"amounts":{"transactionValue":1,"currencyCode":"EUR"}}"#,
            "systemTransactionId"
        ),
        (
            #"{"systemTransactionId":"x","state":"Authorised","amounts":{"transactionValue":1,"currencyCode":"EUR"}}"#,
            "transactionMethod.intent"
        ),
        (
            #"{"systemTransactionId":"x","state":"Authorised","transactionMethod":{"intent":"Purchase"},"amounts":{"transactionValue":1}}"#,
            "amounts.currencyCode"
        ),
        (
            #"{"systemTransactionId":"x","state":"Authorised","transactionMethod":{"intent":"Purchase"},"amounts":{"currencyCode":"EUR"}}"#,
            "amounts.transactionValue"
        ),
        (
            #"{"systemTransactionId":"x","transactionMethod":{"intent":"Purchase"},"amounts":{"transactionValue":1,"currencyCode":"EUR"}}"#,
            "state"
        ),
        (
            #"{"systemTransactionId":7,"state":"Authorised","transactionMethod":{"intent":"Purchase"},"amounts":{"transactionValue":1,"currencyCode":"EUR"}}"#,
            "systemTransactionId"
        ),
        (
            #"{"systemTransactionId":"x","state":"Authorised","transactionMethod":{"intent":"Purchase"},"amounts":{"transactionValue":1,"currencyCode":"EUR"},"merchant":5}"#,
            "merchant"
        )
    ])
    func missingOrMistypedFields(answer: String, field: String) throws {
        let parsed = try JSONValue.parse(answer)
        do { _ = try PXPMapping.snapshot(transaction: parsed, transactionRef: "r"); Issue.record("accepted") } catch {
            #expect(error.field == field)
        }
    }

    @Test func minimalAnswerWithoutOptionalFields() throws {
        let s = try PXPMapping.snapshot(
            transaction: try JSONValue.parse(
                #"{"systemTransactionId":"x","state":"Approved","transactionMethod":{"intent":"Payout"},"amounts":{"transactionValue":"20","currencyCode":"EUR"}}"#
            ),
            transactionRef: "r")
        #expect((s.merchant, s.site, s.createdAt) == (nil, nil, nil))
        #expect((s.state, s.intent, s.authorised, s.captured) == (.captured, .payout, 2000, 2000))
    }
}
