import Providers
import Reconciliation
import Testing
import TextFormats

/// PayPal's own decimals (HUF and TWD none, where ISO 4217 has two): amounts go out and come back in PayPal's
/// decimals, and payrecon keeps ISO minor units.
@Suite struct PayPalCurrenciesTests {
    static let huf = Currency(code: "HUF")!, twd = Currency(code: "TWD")!, jpy = Currency(code: "JPY")!, usd = Currency(code: "USD")!

    @Test(arguments: [("HUF", 0, 100), ("TWD", 0, 100), ("JPY", 0, 1), ("USD", 2, 1), ("KWD", 3, 1)])
    func exponentsAndUnits(code: String, exponent: Int, unit: Int64) {
        let c = Currency(code: code)!
        #expect(PayPalCurrencies.exponent(c) == exponent)
        #expect(PayPalCurrencies.unit(c) == unit)
    }

    @Test func amountsGoOutInPayPalsDecimals() {
        #expect(PayPalClient.amountObject(Money(minorUnits: 100_000, currency: Self.huf))["value"]?.stringValue == "1000")
        #expect(PayPalClient.amountObject(Money(minorUnits: 4_200, currency: Self.twd))["value"]?.stringValue == "42")
        #expect(PayPalClient.amountObject(Money(minorUnits: 1_050, currency: Self.usd))["value"]?.stringValue == "10.50")
        #expect(PayPalClient.amountObject(Money(minorUnits: 500, currency: Self.jpy))["value"]?.stringValue == "500")
    }

    @Test func anAmountWithDecimalsIsRefusedBeforeAnyCall() {
        #expect(PayPalCurrencies.refusal(100_000, Self.huf) == nil)
        #expect(PayPalCurrencies.refusal(100_050, Self.huf) == "PayPal takes HUF without decimals: 1000.50 HUF cannot be sent")
        #expect(PayPalCurrencies.refusal(1_050, Self.usd) == nil)
        let caps = PayPalProvider.capabilities(
            authorizationID: "A", authorizationStatus: "CREATED", refundableCaptures: [], currency: Self.huf)
        #expect(caps.amountRefusal(100_050, currency: Self.huf) == "PayPal takes HUF without decimals: 1000.50 HUF cannot be sent")
        #expect(caps.amountRefusal(100_000, currency: Self.huf) == nil)
    }

    @Test func amountsComeBackAsISOMinorUnits() throws {
        let order = try JSONValue.parse(
            Array(
                """
                {"id":"O1","intent":"AUTHORIZE","status":"COMPLETED","create_time":"2026-01-01T00:00:00Z",
                 "purchase_units":[{"amount":{"currency_code":"HUF","value":"1000"},"payee":{"merchant_id":"M"},
                   "payments":{"authorizations":[{"id":"A1","status":"CREATED","amount":{"currency_code":"HUF","value":"1000"}}]}}]}
                """.utf8))
        let s = try PayPalMapping.snapshot(order: order)
        #expect(s.authorised == 100_000 && s.value == 100_000)
        let decimals = try JSONValue.parse(
            Array(
                """
                {"id":"O2","intent":"AUTHORIZE","status":"COMPLETED","create_time":"2026-01-01T00:00:00Z",
                 "purchase_units":[{"amount":{"currency_code":"HUF","value":"1000.50"},"payee":{"merchant_id":"M"},"payments":{}}]}
                """.utf8))
        #expect(throws: ProviderMappingError.self) { try PayPalMapping.snapshot(order: decimals) }
    }
}
