import Foundation
import Testing
import Reconciliation
@testable import PaysimCore
import TextFormats

/// How paysim reads amounts and builds JSON with Reconciliation's exact types.
@Suite struct AmountAndTimeTests {
    @Test(arguments: [
        ("24.99", 2, Int64(2499)), ("20", 2, 2000), ("1.5", 2, 150), ("1000", 0, 1000), ("1.250", 3, 1250),
        ("0.001", 3, 1), ("0", 2, 0), ("007.50", 2, 750), ("92233720368547758.07", 2, Int64.max)
    ])
    func requestAmounts(text: String, exponent: Int, expected: Int64) {
        #expect(RequestAmount.minorUnits(text, exponent: exponent) == expected)
    }

    /// PXP and PayPal refuse these: a sign, exponent notation, more decimals than the currency has (even zeros).
    @Test(arguments: [
        ("1.001", 2), ("1.0", 0), ("20.000", 2), ("-1", 2), ("-0", 2), ("+1", 2), ("1e2", 2), ("", 2),
        (".5", 2), ("1.", 2), ("1,00", 2), (" 1", 2), ("92233720368547758.08", 2), ("abc", 2)
    ])
    func rejectRequestAmounts(text: String, exponent: Int) {
        #expect(RequestAmount.minorUnits(text, exponent: exponent) == nil)
    }

    /// Seeds accept a number or a decimal string, and trailing zeros beyond the exponent.
    @Test(arguments: [
        (JSONValue.number("24.99"), 2, Int64(2499)), (.string("20.00"), 2, 2000), (.string("20.000"), 2, 2000),
        (.number("1.0"), 0, 1), (.number("1000"), 0, 1000), (.string("1.25"), 3, 1250)
    ])
    func seedAmounts(value: JSONValue, exponent: Int, expected: Int64) {
        #expect(value.seedMinorUnits(exponent: exponent) == expected)
    }

    @Test(arguments: [
        (JSONValue.string("1.001"), 2), (.number("-1"), 2), (.string("-0.00"), 2), (.number("1e2"), 2),
        (.string("abc"), 2), (.bool(true), 2), (.null, 2), (.string("01.00"), 2),
        (.number("92233720368547758.08"), 2)
    ])
    func rejectSeedAmounts(value: JSONValue, exponent: Int) {
        #expect(value.seedMinorUnits(exponent: exponent) == nil)
    }

    @Test func integersAndScalarsReadFromNumbersOrStrings() {
        #expect(JSONValue.number("3").integerValue == 3)
        #expect(JSONValue.string("3").integerValue == 3)
        #expect(JSONValue.number("3.5").integerValue == nil)
        #expect(JSONValue.bool(true).integerValue == nil)
        #expect(JSONValue.number("0.25").scalarText == "0.25")
        #expect(JSONValue.array([]).scalarText == nil)
    }

    /// The builder paysim writes every body with (Reconciliation's ExactJSON+Building).
    @Test func buildsObjectsInOrderWithoutNilMembers() throws {
        let missing: String? = nil
        let value = JSONValue.object([
            "b": "x", "a": [1, true], "gone": missing.map { .string($0) },
            "amount": .decimal(minorUnits: 2000, exponent: 2), "n": .integer(Int64(-7))
        ])
        #expect(value.serializedText == #"{"b":"x","a":[1,true],"amount":20.00,"n":-7}"#)
        #expect(value.setting("b", "y").serializedText == #"{"b":"y","a":[1,true],"amount":20.00,"n":-7}"#)
        #expect(value.setting("c", .null).objectMembers?.map(\.0) == ["b", "a", "amount", "n", "c"])
        #expect(JSONValue.string("x").setting("c", .null) == .string("x"))
        #expect(try JSONValue.parse(value.serializedText) == value)
        #expect(JSONValue.object([:]).serializedText == "{}")
    }

    @Test(arguments: [
        ("2026-11-29T10:00:00Z", Int64(1_795_946_400)), ("2026-11-29T10:00:00.123Z", 1_795_946_400),
        ("2026-11-29T11:00:00+01:00", 1_795_946_400), ("2026-11-29 10:00:00+00:00", 1_795_946_400),
        ("1970-01-01T00:00:00Z", 0)
    ])
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
