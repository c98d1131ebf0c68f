import Testing
@testable import Reconciliation

@Suite struct CurrencyTests {
    @Test(arguments: [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND",
        "VUV", "XAF", "XOF", "XPF"
    ])
    func zeroExponent(code: String) throws {
        #expect(try #require(Currency(code: code)).exponent == 0)
    }

    @Test(arguments: ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"])
    func threeExponent(code: String) throws {
        #expect(try #require(Currency(code: code)).exponent == 3)
    }

    @Test(arguments: ["CLF", "UYW"])
    func fourExponent(code: String) throws {
        #expect(try #require(Currency(code: code)).exponent == 4)
    }

    @Test(arguments: [
        "USD", "EUR", "GBP", "CHF", "CAD", "AUD", "SEK", "BRL", "INR", "CNY", "MXN", "XCD", "XCG",
        "SLE", "ZWG", "VES"
    ])
    func twoExponent(code: String) throws {
        let currency = try #require(Currency(code: code))
        #expect(currency.exponent == 2)
        #expect(currency.code == code)
    }

    @Test func lowerAndMixedCaseAreNormalised() throws {
        #expect(try #require(Currency(code: "usd")).code == "USD")
        #expect(Currency(code: "jPy") == Currency(code: "JPY"))
        #expect(try #require(Currency(code: "bhd")).exponent == 3)
    }

    @Test(arguments: ["", "US", "USDD", " USD", "USD ", "XXX", "XAU", "XTS", "HRK", "ABC", "U$D", "12A", "ÜSD", "usd\n"])
    func unknownCodesAreNil(code: String) {
        #expect(Currency(code: code) == nil)
    }

    @Test func tableIsComplete() {
        #expect(Currency.all.count > 150)
        #expect(Set(Currency.all.map(\.code)).count == Currency.all.count)
        #expect(Currency.all.allSatisfy { [0, 2, 3, 4].contains($0.exponent) && $0.code.count == 3 })
    }

    @Test func codableRoundTripAndRejectsUnknown() throws {
        let usd = try #require(Currency(code: "USD"))
        let encoded = try JSONCoding.encode(usd)
        #expect(encoded.contains("\"code\":\"USD\""))
        #expect(try JSONCoding.decode(Currency.self, encoded) == usd)
        // The exponent comes from the table, not from the stored text.
        #expect(try JSONCoding.decode(Currency.self, #"{"code":"JPY","exponent":2}"#).exponent == 0)
        #expect(throws: DecodingError.self) { try JSONCoding.decode(Currency.self, #"{"code":"ZZZ","exponent":2}"#) }
    }
}
