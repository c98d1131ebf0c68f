import Testing
@testable import Reconciliation

@Suite struct MoneyParsingTests {
    struct Good: Sendable, CustomTestStringConvertible {
        var text: String, code: String, minor: Int64
        var testDescription: String { "\(text) \(code)" }
    }

    @Test(arguments: [
        Good(text: "25.00", code: "USD", minor: 2500),
        Good(text: "25.5", code: "USD", minor: 2550),
        Good(text: "25", code: "USD", minor: 2500),
        Good(text: "0", code: "USD", minor: 0),
        Good(text: "0.00", code: "USD", minor: 0),
        Good(text: "-0.01", code: "USD", minor: -1),
        Good(text: "-0", code: "USD", minor: 0),
        Good(text: "007.50", code: "USD", minor: 750),
        Good(text: "1000", code: "JPY", minor: 1000),
        Good(text: "0", code: "JPY", minor: 0),
        Good(text: "-5", code: "KRW", minor: -5),
        Good(text: "1.250", code: "BHD", minor: 1250),
        Good(text: "1.25", code: "BHD", minor: 1250),
        Good(text: "0.001", code: "KWD", minor: 1),
        Good(text: "1.2345", code: "CLF", minor: 12345),
        Good(text: "92233720368547758.07", code: "USD", minor: Int64.max),
        Good(text: "-92233720368547758.08", code: "USD", minor: Int64.min),
        Good(text: "9223372036854775807", code: "JPY", minor: Int64.max)
    ])
    func parsesDecimalStrings(_ good: Good) throws {
        let currency = try #require(Currency(code: good.code))
        let money = try Money.parse(good.text, currency: currency)
        #expect(money == Money(minorUnits: good.minor, currency: currency))
        #expect(try Money.parse(decimal: good.text, currency: currency) == money)
        #expect(try Money.minorUnits(fromDecimal: good.text, exponent: currency.exponent) == good.minor)
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        var text: String, code: String, error: MoneyError, message: String
        var testDescription: String { "'\(text)' \(code)" }
    }

    @Test(arguments: [
        Bad(text: "", code: "USD", error: .empty, message: "empty amount"),
        Bad(
            text: "25.000", code: "USD", error: .tooManyDecimals(currency: "USD", allowed: 2, found: 3),
            message: "more decimals than USD allows (2)"),
        Bad(
            text: "25.001", code: "USD", error: .tooManyDecimals(currency: "USD", allowed: 2, found: 3),
            message: "more decimals than USD allows (2)"),
        Bad(
            text: "1.0", code: "JPY", error: .tooManyDecimals(currency: "JPY", allowed: 0, found: 1),
            message: "more decimals than JPY allows (0)"),
        Bad(
            text: "1.2500", code: "BHD", error: .tooManyDecimals(currency: "BHD", allowed: 3, found: 4),
            message: "more decimals than BHD allows (3)"),
        Bad(text: "1e2", code: "USD", error: .exponentNotation, message: "exponent notation is not allowed"),
        Bad(text: "1.5E2", code: "USD", error: .exponentNotation, message: "exponent notation is not allowed"),
        Bad(
            text: "1,000.00", code: "USD", error: .invalidCharacter(",", offset: 1),
            message: "invalid character ',' at position 2"),
        Bad(
            text: "1 000", code: "USD", error: .invalidCharacter(" ", offset: 1),
            message: "invalid character ' ' at position 2"),
        Bad(
            text: " 25.00", code: "USD", error: .invalidCharacter(" ", offset: 0),
            message: "invalid character ' ' at position 1"),
        Bad(
            text: "25.00 ", code: "USD", error: .invalidCharacter(" ", offset: 5),
            message: "invalid character ' ' at position 6"),
        Bad(
            text: "+25", code: "USD", error: .invalidCharacter("+", offset: 0),
            message: "invalid character '+' at position 1"),
        Bad(
            text: "--1", code: "USD", error: .invalidCharacter("-", offset: 1),
            message: "invalid character '-' at position 2"),
        Bad(
            text: "25,00", code: "EUR", error: .invalidCharacter(",", offset: 2),
            message: "invalid character ',' at position 3"),
        Bad(
            text: "$25", code: "USD", error: .invalidCharacter("$", offset: 0),
            message: "invalid character '$' at position 1"),
        Bad(
            text: "2€", code: "EUR", error: .invalidCharacter("€", offset: 1),
            message: "invalid character '€' at position 2"),
        Bad(
            text: "1.2.3", code: "USD", error: .invalidCharacter(".", offset: 3),
            message: "invalid character '.' at position 4"),
        Bad(text: "-", code: "USD", error: .missingDigits, message: "not a number: digits missing"),
        Bad(text: "1.", code: "USD", error: .missingDigits, message: "not a number: digits missing"),
        Bad(
            text: ".5", code: "USD", error: .invalidCharacter(".", offset: 0),
            message: "invalid character '.' at position 1"),
        Bad(
            text: "NaN", code: "USD", error: .invalidCharacter("N", offset: 0),
            message: "invalid character 'N' at position 1"),
        Bad(text: "92233720368547758.08", code: "USD", error: .overflow, message: "amount too large"),
        Bad(text: "-92233720368547758.09", code: "USD", error: .overflow, message: "amount too large"),
        Bad(text: "99999999999999999999", code: "JPY", error: .overflow, message: "amount too large")
    ])
    func rejectsBadDecimalStrings(_ bad: Bad) throws {
        let currency = try #require(Currency(code: bad.code))
        #expect(throws: bad.error) { try Money.parse(bad.text, currency: currency) }
        do {
            _ = try Money.parse(bad.text, currency: currency)
        } catch {
            #expect(error.description == bad.message)
        }
    }

    @Test func minorUnitsWithoutCurrencyNamesTheExponent() {
        #expect(throws: MoneyError.tooManyDecimals(currency: nil, allowed: 2, found: 3)) {
            try Money.minorUnits(fromDecimal: "1.234", exponent: 2)
        }
        #expect(
            MoneyError.tooManyDecimals(currency: nil, allowed: 2, found: 3).description
                == "more decimals than the exponent allows (2)")
        #expect(throws: Never.self) { try Money.minorUnits(fromDecimal: "1.2345", exponent: 4) }
    }

    struct JSONCase: Sendable, CustomTestStringConvertible {
        var text: String, code: String, result: Result<Int64, MoneyError>
        var testDescription: String { "\(text) \(code)" }
    }

    @Test(arguments: [
        JSONCase(text: "50.05", code: "EUR", result: .success(5005)),
        JSONCase(text: "20", code: "GBP", result: .success(2000)),
        JSONCase(text: "-1", code: "USD", result: .success(-100)),
        JSONCase(text: "0", code: "USD", result: .success(0)),
        JSONCase(text: "-0.0", code: "USD", result: .success(0)),
        JSONCase(text: "1.300", code: "BHD", result: .success(1300)),
        JSONCase(text: "1.0E2", code: "USD", result: .success(10000)),
        JSONCase(text: "1e2", code: "JPY", result: .success(100)),
        JSONCase(text: "1.0E2", code: "JPY", result: .success(100)),
        JSONCase(text: "15E-1", code: "USD", result: .success(150)),
        JSONCase(text: "1.5e-1", code: "USD", result: .success(15)),
        JSONCase(text: "1E+2", code: "USD", result: .success(10000)),
        JSONCase(text: "0e999999999999", code: "USD", result: .success(0)),
        JSONCase(text: "1.0", code: "JPY", result: .failure(.tooManyDecimals(currency: "JPY", allowed: 0, found: 1))),
        JSONCase(text: "1.00E1", code: "JPY", result: .failure(.tooManyDecimals(currency: "JPY", allowed: 0, found: 1))),
        JSONCase(text: "25.000", code: "USD", result: .failure(.tooManyDecimals(currency: "USD", allowed: 2, found: 3))),
        JSONCase(text: "1e-3", code: "USD", result: .failure(.tooManyDecimals(currency: "USD", allowed: 2, found: 3))),
        JSONCase(
            text: "1e-9999999999", code: "USD",
            result: .failure(.tooManyDecimals(currency: "USD", allowed: 2, found: 1_000_000))),
        JSONCase(text: "1e17", code: "USD", result: .failure(.overflow)),
        JSONCase(text: "1e999999999999", code: "USD", result: .failure(.overflow)),
        JSONCase(text: "01", code: "USD", result: .failure(.leadingZero)),
        JSONCase(text: "-01.5", code: "USD", result: .failure(.leadingZero)),
        JSONCase(text: "+1", code: "USD", result: .failure(.invalidCharacter("+", offset: 0))),
        JSONCase(text: ".5", code: "USD", result: .failure(.invalidCharacter(".", offset: 0))),
        JSONCase(text: "1.", code: "USD", result: .failure(.missingDigits)),
        JSONCase(text: "1e", code: "USD", result: .failure(.missingDigits)),
        JSONCase(text: "1e+", code: "USD", result: .failure(.missingDigits)),
        JSONCase(text: "1.5x", code: "USD", result: .failure(.invalidCharacter("x", offset: 3))),
        JSONCase(text: "\"1.50\"", code: "USD", result: .failure(.invalidCharacter("\"", offset: 0))),
        JSONCase(text: "", code: "USD", result: .failure(.empty))
    ])
    func parsesJSONNumberTextExactly(_ json: JSONCase) throws {
        let currency = try #require(Currency(code: json.code))
        switch json.result {
        case let .success(minor):
            #expect(try Money.parse(jsonNumberText: json.text, currency: currency).minorUnits == minor)
            #expect(try Money.minorUnits(fromJSONNumber: json.text, exponent: currency.exponent) == minor)
        case let .failure(error):
            #expect(throws: error) { try Money.parse(jsonNumberText: json.text, currency: currency) }
        }
    }
}

@Suite struct MoneyFormattingTests {
    @Test(arguments: [
        (Int64(2500), "USD", "25.00"), (0, "USD", "0.00"), (1, "USD", "0.01"), (-1, "USD", "-0.01"),
        (-250, "USD", "-2.50"), (100, "USD", "1.00"), (1000, "JPY", "1000"), (0, "JPY", "0"), (-7, "JPY", "-7"),
        (1250, "BHD", "1.250"), (5, "BHD", "0.005"), (12345, "CLF", "1.2345"),
        (Int64.max, "USD", "92233720368547758.07"), (Int64.min, "USD", "-92233720368547758.08"),
        (Int64.min, "JPY", "-9223372036854775808")
    ])
    func formatsMajorUnits(minor: Int64, code: String, text: String) throws {
        let money = Money(minorUnits: minor, currency: try #require(Currency(code: code)))
        #expect(money.formatted == text)
        #expect(money.description == "\(text) \(code)")
    }

    @Test func formatParseRoundTrip() throws {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let currency = Currency.all[Int(generator.next() % UInt64(Currency.all.count))]
            let minor = Int64(bitPattern: generator.next())
            let text = Money(minorUnits: minor, currency: currency).formatted
            #expect(try Money.parse(text, currency: currency).minorUnits == minor)
            #expect(try Money.parse(jsonNumberText: text, currency: currency).minorUnits == minor)
        }
    }

    @Test func staticFormatWorksWithoutCurrency() {
        #expect(Money.format(minorUnits: 2550, exponent: 2) == "25.50")
        #expect(Money.format(minorUnits: 9, exponent: 4) == "0.0009")
    }
}
