import Foundation
import Testing
@testable import PaysimCore

@Suite struct JSONAndMoneyTests {
    @Test func numbersKeepTheirLiteralAndMembersTheirOrder() throws {
        let text = #"{"b":24.99,"a":[1,-0.5,1e3,true,null],"s":"x\"\\\n\u00e9\ud83d\ude00"}"#
        let j = try JSON.parse(text)
        #expect(j["b"]?.numberLiteral == "24.99")
        #expect(j["a"]?.arrayValue?.count == 5)
        #expect(j["s"]?.stringValue == "x\"\\\né😀")
        #expect(j.objectValue?.map(\.key) == ["b", "a", "s"])
        let again = try JSON.parse(j.text)
        #expect(again == j)
        #expect(JSON.string("\u{01}").text == #""\u0001""#)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\"}", "01", "1.", "-", "tru", "\"abc", "[1] x", "\"\\x\"", "\"\\ud800\"",
                      "{\"a\":1,}", "\"\u{01}\"", String(repeating: "[", count: 300) + String(repeating: "]", count: 300)])
    func invalidJSON(text: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
    }

    @Test(arguments: [("24.99", 2, Int64(2499)), ("20", 2, 2000), ("1.5", 2, 150), ("1000", 0, 1000), ("1.250", 3, 1250),
                      ("0.001", 3, 1), ("0", 2, 0), ("92233720368547758.07", 2, Int64.max)])
    func parseMinorUnits(text: String, exponent: Int, expected: Int64) {
        #expect(MinorUnits.parse(text, exponent: exponent) == expected)
    }

    @Test(arguments: [("1.001", 2), ("1.0", 0), ("-1", 2), ("+1", 2), ("1e2", 2), ("", 2), (".5", 2), ("1.", 2),
                      ("1,00", 2), (" 1", 2), ("92233720368547758.08", 2), ("abc", 2)])
    func rejectMinorUnits(text: String, exponent: Int) {
        #expect(MinorUnits.parse(text, exponent: exponent) == nil)
    }

    @Test(arguments: [(Int64(2500), 2, "25.00"), (1000, 0, "1000"), (1250, 3, "1.250"), (5, 2, "0.05"), (0, 2, "0.00"),
                      (-150, 2, "-1.50")])
    func formatMinorUnits(minor: Int64, exponent: Int, expected: String) {
        #expect(MinorUnits.format(minor, exponent: exponent) == expected)
    }

    @Test(arguments: [("USD", 2), ("JPY", 0), ("KWD", 3), ("eur", nil), ("XYZ", nil)] as [(String, Int?)])
    func currencyExponents(code: String, expected: Int?) {
        #expect(PaysimCurrency.exponent(of: code) == expected)
    }

    @Test(arguments: [("2026-11-29T10:00:00Z", Int64(1_795_946_400)), ("2026-11-29T10:00:00.123Z", 1_795_946_400),
                      ("2026-11-29T11:00:00+01:00", 1_795_946_400), ("2026-11-29 10:00:00+00:00", 1_795_946_400),
                      ("1970-01-01T00:00:00Z", 0)])
    func parseTimes(text: String, expected: Int64) {
        #expect(SimTime.parse(text) == expected)
    }

    @Test(arguments: ["2026-13-01T00:00:00Z", "2026-11-29T10:00:00", "2026-11-29", "yesterday", "2026-11-29T10:00:00Zjunk"])
    func rejectTimes(text: String) {
        #expect(SimTime.parse(text) == nil)
    }

    @Test func formatTimes() {
        let date = Date(timeIntervalSince1970: 1_795_946_400.5)
        #expect(SimTime.rfc3339(date) == "2026-11-29T10:00:00Z")
        #expect(SimTime.rfc3339Millis(date) == "2026-11-29T10:00:00.500Z")
    }

    @Test func splitMixIsDeterministicAndUUIDsAreWellFormed() {
        var a = SplitMix64(seed: 7), b = SplitMix64(seed: 7)
        #expect((0..<10).map { _ in a.next() } == (0..<10).map { _ in b.next() })
        let uuid = a.uuid()
        #expect(UUID(uuidString: uuid) != nil)
        #expect(uuid == uuid.lowercased())
    }
}
