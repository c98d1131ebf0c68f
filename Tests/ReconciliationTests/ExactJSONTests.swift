import Testing
@testable import Reconciliation
import TextFormats

@Suite struct ExactJSONTests {
    @Test func parsesAnObjectKeepingMemberOrderAndLiterals() throws {
        let v = try JSONValue.parse(#" {"b": 1, "a": [true, false, null, "x"], "n": -0.50, "big": 12345678901234.56} "#)
        #expect(v.objectMembers?.map(\.0) == ["b", "a", "n", "big"])
        #expect(v["b"]?.numberLiteral == "1")
        #expect(v["n"]?.numberLiteral == "-0.50")
        #expect(v["big"]?.numberLiteral == "12345678901234.56")
        #expect(v["a"]?[0]?.boolValue == true)
        #expect(v["a"]?[2]?.isNull == true)
        #expect(v["a"]?[3]?.stringValue == "x")
        #expect(v["a"]?[4] == nil)
        #expect(v["missing"] == nil)
        #expect(v["a"]?["x"] == nil)
    }

    /// PostgreSQL's text and jsonb hold no NUL: a `\u0000` in a provider's id failed every statement naming it (a PXP
    /// alias: its order's check, on every sweep). It reads as U+FFFD; a raw NUL is still refused.
    @Test func aNULEscapeReadsAsTheReplacementCharacter() throws {
        let v = try JSONValue.parse(#"{"id":"SYS\u0000-1","list":["\u0000","a\n\u0000"]}"#)
        #expect(v["id"]?.stringValue == "SYS\u{FFFD}-1")
        #expect(v["list"]?.arrayValue?.compactMap(\.stringValue) == ["\u{FFFD}", "a\n\u{FFFD}"])
        #expect(throws: JSONParseError.self) { try JSONValue.parse([UInt8](#"{"id":"a"#.utf8) + [0] + [UInt8](#""}"#.utf8)) }
    }

    @Test func nestedLookup() throws {
        let v = try JSONValue.parse(#"{"amounts":{"transactionValue":50.05,"currencyCode":"EUR"}}"#)
        #expect(v["amounts"]?["transactionValue"]?.numberLiteral == "50.05")
        #expect(v["amounts"]?["currencyCode"]?.stringValue == "EUR")
    }

    @Test(arguments: [
        (#""a\"b\\c\/d\b\f\n\r\t""#, "a\"b\\c/d\u{8}\u{c}\n\r\t"),
        (#""\u00e9\u20AC""#, "é€"),
        (#""\ud83d\ude00""#, "😀"),
        ("\"h\u{e9}llo \u{1F600}\"", "héllo 😀")
    ])
    func decodesStrings(json: String, expected: String) throws {
        #expect(try JSONValue.parse(json).stringValue == expected)
    }

    @Test(arguments: ["0", "-0", "1", "-12", "0.5", "1e5", "1E+5", "2.5e-3", "123456789012345678901234567890"])
    func acceptsValidNumbers(literal: String) throws {
        #expect(try JSONValue.parse(literal).numberLiteral == literal)
        #expect(JSONValue.isValidNumberLiteral(literal))
    }

    @Test(arguments: [
        ("", "empty document"),
        ("   ", "empty document"),
        ("{", "unexpected end of document inside an object"),
        ("[1,]", "unexpected ']', expected a value"),
        (#"{"a":1,}"#, "unexpected '}', expected a member name"),
        ("01", "leading zero in a number"),
        ("-", "a number needs a digit after '-'"),
        ("1.", "a number needs digits after '.'"),
        (".5", "unexpected '.', expected a value"),
        ("1e", "a number needs digits in its exponent"),
        ("+1", "unexpected '+', expected a value"),
        ("NaN", "unexpected 'N', expected a value"),
        ("tru", "invalid literal, expected true"),
        ("nul", "invalid literal, expected null"),
        (#""abc"#, "unterminated string"),
        ("\"a\u{01}b\"", "unescaped control character in a string"),
        (#""\x""#, "invalid escape \\'x'"),
        (#""\u12G4""#, "invalid hex digit in \\u escape"),
        (#""\ud800""#, "lone high surrogate"),
        (#""\udc00""#, "lone low surrogate"),
        (#""\ud800\u0041""#, "high surrogate without a low surrogate"),
        (#"{"a":1,"a":2}"#, "duplicate member name \"a\""),
        ("[1] 2", "unexpected '2' after the top-level value"),
        (#"{"a" 1}"#, "expected ':' after a member name"),
        ("[1 2]", "unexpected '2', expected ',' or ']'"),
        ("// c\n1", "unexpected '/', expected a value"),
        ("\u{FEFF}1", "unexpected byte 0xEF, expected a value")
    ])
    func rejectsInvalidDocuments(json: String, reason: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(json) }
        do { _ = try JSONValue.parse(json) } catch { #expect(error.reason == reason) }
    }

    /// Strings take a copy-free path until their first escape; the result must not depend on where the escape is.
    @Test(arguments: [
        ("\"plain ascii\"", "plain ascii"),
        ("\"\"", ""),
        ("\"h\u{e9}llo \\n w\u{f6}rld\"", "h\u{e9}llo \n w\u{f6}rld"),
        ("\"\u{1F600}\\u00e9\u{20AC}\\\"x\"", "\u{1F600}\u{e9}\u{20AC}\"x"),
        ("\"\\\\\"", "\\"),
        ("\"abc\\t\"", "abc\t")
    ])
    func decodesStringsWithEscapesAnywhere(json: String, expected: String) throws {
        #expect(try JSONValue.parse(json).stringValue == expected)
        #expect(try JSONValue.parse("{" + json + ":" + json + "}")[expected]?.stringValue == expected)
    }

    @Test(arguments: [("\"ab\\", 4), ("\"h\u{e9}llo\\n", 9), ("\"ab\\n\u{01}\"", 5)])
    func stringErrorsAfterAnEscape(json: String, offset: Int) {
        do { _ = try JSONValue.parse(json); Issue.record("accepted") } catch { #expect(error.offset == offset) }
    }

    /// Duplicate names are found however many members come before them (small objects are scanned, large use a set).
    @Test(arguments: [2, 15, 16, 17, 40])
    func duplicateNamesInObjectsOfAnySize(count: Int) {
        let members = (0..<count).map { #""k\#($0)":\#($0)"# }
        let ok = "{" + members.joined(separator: ",") + "}"
        #expect(throws: Never.self) { try JSONValue.parse(ok) }
        for duplicate in ["k0", "k\(count / 2)", "k\(count - 1)"] {
            let bad = "{" + members.joined(separator: ",") + #","\#(duplicate)":true,"z":1}"#
            do { _ = try JSONValue.parse(bad); Issue.record("accepted a duplicate \(duplicate)") } catch {
                #expect(error.reason == "duplicate member name \"\(duplicate)\"")
            }
        }
    }

    @Test func reportsTheByteOffset() {
        do { _ = try JSONValue.parse(#"{"a": [1, 2, x]}"#); Issue.record("accepted") } catch {
            #expect(error.offset == 13)
            #expect(error.description == "invalid JSON at byte 13: unexpected 'x', expected a value")
        }
    }

    @Test(
        arguments: [
            [0x22, 0xC3, 0x28, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF8, 0x88, 0x80, 0x80, 0x80, 0x22],
            [0x22, 0xE2, 0x82, 0x22], [0x22, 0xC0, 0xAF, 0x22]
        ] as [[UInt8]])
    func rejectsInvalidUTF8(bytes: [UInt8]) {
        do { _ = try JSONValue.parse(bytes); Issue.record("accepted invalid UTF-8") } catch {
            #expect(error.reason == "invalid UTF-8 in a string")
            #expect(error.offset == 1)
        }
    }

    @Test func enforcesTheDepthLimit() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try JSONValue.parse(ok) }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        do { _ = try JSONValue.parse(deep); Issue.record("accepted") } catch { #expect(error.reason == "nesting deeper than 64") }
        let deepObjects = String(repeating: #"{"a":"#, count: 100_000) + "1" + String(repeating: "}", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deepObjects) }
    }

    @Test func enforcesSizeLimits() {
        let limits = JSONValue.ParseLimits(maxDepth: 64, maxBytes: 10, maxNumberLength: 5)
        #expect(throws: JSONParseError.self) { try JSONValue.parse("[1,2,3,4,5,6]", limits: limits) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse("123456", limits: limits) }
        #expect(throws: Never.self) { try JSONValue.parse("12345", limits: limits) }
    }

    @Test func serializesCompactlyInOrder() throws {
        let v: JSONValue = .object([
            ("z", .string("a\"b\\c\n\u{1}é")), ("a", .array([.number("24.99"), .bool(true), .null])), ("e", .object([]))
        ])
        #expect(String(decoding: v.serialized(), as: UTF8.self) == #"{"z":"a\"b\\c\n\u0001é","a":[24.99,true,null],"e":{}}"#)
        #expect(try JSONValue.parse(v.serialized()) == v)
    }

    @Test func roundTripsAParsedDocument() throws {
        let text = #"{"id":"5O1","purchase_units":[{"amount":{"currency_code":"USD","value":"100.00"}}],"n":1.50,"u":"\u2028"}"#
        let v = try JSONValue.parse(text)
        #expect(try JSONValue.parse(v.serialized()) == v)
    }

    @Test func equalityIsOrderSensitiveForObjects() {
        #expect(JSONValue.object([("a", .null), ("b", .null)]) != .object([("b", .null), ("a", .null)]))
        #expect(JSONValue.number("1.0") != .number("1"))
    }

    // MARK: Money

    @Test(
        arguments: [
            ("20", 2, 2000), ("50.05", 2, 5005), ("29.990", 2, 2999), ("0.5", 2, 50), ("1000", 0, 1000), ("1000.0", 0, 1000),
            ("1.250", 3, 1250), ("1.25", 3, 1250), ("12345678901234.56", 2, 1234567890123456), ("-0.05", 2, -5), ("0", 2, 0),
            ("92233720368547758.07", 2, Int64.max)
        ] as [(String, Int, Int64)])
    func convertsDecimalsExactly(literal: String, exponent: Int, minor: Int64) throws {
        #expect(try JSONValue.minorUnits(literal: literal, exponent: exponent) == minor)
        #expect(try JSONValue.number(literal).minorUnits(exponent: exponent) == minor)
        #expect(try JSONValue.string(literal).minorUnits(exponent: exponent) == minor)
    }

    @Test(
        arguments: [
            ("1e3", 2, "exponent notation is not accepted for money"),
            ("2.5E-1", 2, "exponent notation is not accepted for money"),
            ("50.051", 2, "more than 2 decimals"),
            ("1000.5", 0, "more than 0 decimals"),
            ("1.2501", 3, "more than 3 decimals"),
            ("", 2, "empty"),
            ("abc", 2, "not a decimal number"),
            ("1.", 2, "not a decimal number"),
            (".5", 2, "not a decimal number"),
            ("1,00", 2, "not a decimal number"),
            (" 1", 2, "not a decimal number"),
            ("007", 2, "leading zero"),
            ("92233720368547758.08", 2, "too large"),
            ("99999999999999999999", 0, "too large")
        ] as [(String, Int, String)])
    func rejectsBadAmounts(literal: String, exponent: Int, reason: String) {
        do { _ = try JSONValue.minorUnits(literal: literal, exponent: exponent); Issue.record("accepted \(literal)") } catch {
            #expect(error.reason == reason)
            #expect(error.literal == literal)
        }
    }

    @Test func nonNumbersAreNotAmounts() {
        #expect(throws: DecimalAmountError.self) { try JSONValue.bool(true).minorUnits(exponent: 2) }
        #expect(throws: DecimalAmountError.self) { try JSONValue.null.minorUnits(exponent: 2) }
    }

    @Test(
        arguments: [
            (2499, 2, "24.99"), (1000, 0, "1000"), (1250, 3, "1.250"), (5, 2, "0.05"), (0, 2, "0.00"), (-5, 2, "-0.05"),
            (1234567890123456, 2, "12345678901234.56"), (Int64.min, 2, "-92233720368547758.08")
        ] as [(Int64, Int, String)])
    func formatsMinorUnits(minor: Int64, exponent: Int, text: String) throws {
        #expect(JSONValue.decimalString(minorUnits: minor, exponent: exponent) == text)
        #expect(JSONValue.decimal(minorUnits: minor, exponent: exponent) == .number(text))
        #expect(JSONValue.isValidNumberLiteral(text))
        if minor != Int64.min { #expect(try JSONValue.minorUnits(literal: text, exponent: exponent) == minor) }
    }
}
