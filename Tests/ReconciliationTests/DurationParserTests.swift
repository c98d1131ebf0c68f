import Testing
@testable import Reconciliation

@Suite struct DurationParserTests {
    @Test(arguments: [
        ("90s", Int64(90)), ("10m", 600), ("24h", 86_400), ("7d", 604_800), ("1s", 1),
        ("0090s", 90), ("36500d", 3_153_600_000)
    ])
    func parses(text: String, seconds: Int64) throws {
        #expect(try DurationParser.parse(text) == seconds)
    }

    @Test func zeroOnlyWhenAllowed() throws {
        #expect(throws: DurationError.zero("0s")) { try DurationParser.parse("0s") }
        #expect(try DurationParser.parse("0s", allowZero: true) == 0)
        #expect(try DurationParser.parse("0d", allowZero: true) == 0)
    }

    @Test(arguments: [
        ("", DurationError.empty),
        ("90", .missingUnit("90")),
        ("0", .missingUnit("0")),
        ("10M", .unknownUnit("10M")),
        ("10ms", .malformed("10ms")),
        ("10w", .unknownUnit("10w")),
        ("10H", .unknownUnit("10H")),
        ("-5m", .malformed("-5m")),
        ("+5m", .malformed("+5m")),
        ("1.5h", .malformed("1.5h")),
        ("1h30m", .malformed("1h30m")),
        ("10 m", .malformed("10 m")),
        (" 10m", .malformed(" 10m")),
        ("10m ", .malformed("10m ")),
        ("m", .malformed("m")),
        ("s10", .malformed("s10")),
        ("abc", .malformed("abc")),
        ("9223372036854775808s", .overflow("9223372036854775808s")),
        ("106751991167301d", .overflow("106751991167301d"))
    ])
    func rejects(text: String, error: DurationError) {
        #expect(throws: error) { try DurationParser.parse(text) }
    }

    @Test func errorsSayWhatIsExpected() {
        let message = DurationError.missingUnit("90").description
        #expect(message.contains("'90' has no unit"))
        #expect(message.contains("90s, 10m, 24h, 7d"))
        #expect(DurationError.zero("0m").description == "duration '0m' must be greater than zero")
    }
}

@Test(arguments: [
    (Int64(0), "0s"), (45, "45s"), (60, "1m"), (125, "2m 5s"), (3_600, "1h"), (7_500, "2h 5m"),
    (86_400, "1d"), (27_933_148, "323d 7h"), (90_061, "1d 1h")
])
func describesDurationsForPeople(seconds: Int64, text: String) {
    #expect(DurationParser.describe(seconds) == text)
}
