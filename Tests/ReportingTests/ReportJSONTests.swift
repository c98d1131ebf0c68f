import Foundation
import Reconciliation
import Reporting
import Testing
import TextFormats

@Suite("Report JSON")
struct ReportJSONTests {
    @Test func contractShapeAndTypes() throws {
        let r = report([row(7, occurrences: 2)])
        let doc = try parseJSON(r.json())
        #expect(doc["generated_at"]?.stringValue == "2026-11-29T12:00:00Z")
        let summary = try #require(doc["summary"])
        #expect(summary["open"]?.numberLiteral == "1")
        #expect(summary["by_kind"] == .object([("amount_mismatch", .number("1"))]))
        #expect(summary["amount_at_risk"] == .object([("USD", .string("25.00"))]))
        let d = try #require(doc["discrepancies"]?[0])
        #expect(d["id"]?.numberLiteral == "7")
        #expect(d["provider"]?.stringValue == "pxp")
        #expect(d["order_id"]?.stringValue == "ORD-1")
        #expect(d["transaction_ref"]?.stringValue == "tx-1")
        #expect(d["kind"]?.stringValue == "amount_mismatch")
        #expect(d["status"]?.stringValue == "open")
        #expect(d["expected"] == .object([("amount", .string("25.00"))]))
        #expect(d["actual"] == .object([("amount", .string("0.00"))]))
        #expect(d["detail"]?.stringValue == "captured less")
        #expect(d["first_seen"]?.stringValue == "2026-11-29T12:00:00Z")
        #expect(d["last_seen"]?.stringValue == "2026-11-29T12:00:00Z")
        #expect(d["occurrences"]?.numberLiteral == "2")
        #expect(d["amount_at_risk"]?.stringValue == "25.00")
        #expect(d["resolved_at"]?.isNull == true)
        #expect(r.json().last == UInt8(ascii: "\n"))
    }

    @Test(
        "amounts with the currency's digits",
        arguments: [
            (usd, Int64(2500), "25.00"), (usd, 1, "0.01"), (jpy, 1000, "1000"), (jpy, 0, "0"),
            (bhd, 1250, "1.250"), (bhd, 5, "0.005"), (usd, Int64.max, "92233720368547758.07")
        ])
    func amountsAreExactStrings(currency: Currency, minor: Int64, expected: String) throws {
        let r = report(
            [row(1, risk: minor, currency: currency)],
            summary: ReportSummary(
                open: 1, byKind: [.amountMismatch: 1],
                amountAtRisk: [currency: Int128(minor)]))
        let doc = try parseJSON(r.json())
        #expect(doc["summary"]?["amount_at_risk"]?[currency.code]?.stringValue == expected)
        #expect(doc["discrepancies"]?[0]?["amount_at_risk"]?.stringValue == expected)
        #expect(doc["discrepancies"]?[0]?["currency"]?.stringValue == currency.code)
    }

    @Test func unknownOrderHasNullOrderIdAndCurrenciesAreSorted() throws {
        let r = report([
            row(1, order: nil, ref: "PAYPAL-9", kind: .unknownOrder, risk: 1000, currency: jpy), row(2), row(3, risk: 0, currency: nil)
        ])
        let doc = try parseJSON(r.json())
        #expect(doc["discrepancies"]?[0]?["order_id"]?.isNull == true)
        #expect(doc["discrepancies"]?[0]?["transaction_ref"]?.stringValue == "PAYPAL-9")
        #expect(doc["discrepancies"]?[2]?["amount_at_risk"]?.isNull == true)
        #expect(doc["discrepancies"]?[2]?["currency"]?.isNull == true)
        #expect(doc["summary"]?["amount_at_risk"]?.objectMembers?.map(\.0) == ["JPY", "USD"])
        #expect(doc["summary"]?["by_kind"]?.objectMembers?.map(\.0) == ["unknown_order", "amount_mismatch"])
    }

    @Test func storedObjectsAreKeptExactly() throws {
        let expected = JSONValue.object([("z", .string("1")), ("a", .number("12345678901234.56")), ("nested", .object([("k", .null)]))])
        let doc = try parseJSON(report([row(1, expected: expected)]).json())
        #expect(doc["discrepancies"]?[0]?["expected"] == expected)
    }

    @Test func emptyReportIsStillTheShape() throws {
        let doc = try parseJSON(report([]).json())
        #expect(doc["summary"]?["open"]?.numberLiteral == "0")
        #expect(doc["summary"]?["by_kind"] == .object([]))
        #expect(doc["summary"]?["amount_at_risk"] == .object([]))
        #expect(doc["discrepancies"] == .array([]))
    }

    @Test func rejectedAndFiltersAreExtras() throws {
        var s = ReportSummary()
        s.rejected24h = ["invalid_signature": 2, "body_too_large": 1]
        var r = report([], summary: s)
        r.filters = ReportFilters(status: "all", provider: .paypal, kind: .overRefunded, since: "7d")
        let doc = try parseJSON(r.json())
        #expect(doc["summary"]?["rejected_24h"] == .object([("invalid_signature", .number("2")), ("body_too_large", .number("1"))]))
        #expect(
            doc["filters"]
                == .object([
                    ("status", .string("all")), ("provider", .string("paypal")),
                    ("kind", .string("over_refunded")), ("since", .string("7d"))
                ]))
    }

    @Test func stringsAreEscaped() throws {
        let nasty = "quote \" backslash \\ newline \n tab \t nul \u{0} ünï"
        let bytes = report([row(1, order: nasty, detail: nasty)]).json()
        // The NUL is written as the escape JSON has for it; payrecon's own parser reads that back as U+FFFD (no NUL
        // reaches PostgreSQL), so the round trip holds everything else byte for byte.
        #expect(String(decoding: bytes, as: UTF8.self).contains(#"nul \u0000 ünï"#))
        let doc = try parseJSON(bytes)
        let read = nasty.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}")
        #expect(doc["discrepancies"]?[0]?["order_id"]?.stringValue == read)
        #expect(doc["discrepancies"]?[0]?["detail"]?.stringValue == read)
    }
}

@Suite("Timestamp")
struct TimestampTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00Z"), (1_795_953_600.0, "2026-11-29T12:00:00Z"), (951_782_400.5, "2000-02-29T00:00:00Z"),
        (-1.0, "1969-12-31T23:59:59Z"), (4_102_444_799.0, "2099-12-31T23:59:59Z")
    ])
    func iso8601(seconds: Double, expected: String) {
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test func daysAndMinutes() {
        #expect(Timestamp.minutes(noon) == "2026-11-29 12:00")
        #expect(Timestamp.day(of: noon) == "2026-11-29")
        #expect(Timestamp.day(of: noon, offset: 3) == "2026-12-02")
        #expect(Timestamp.day(of: noon, offset: -29) == "2026-10-31")
    }
}

/// Money-at-risk totals cannot overflow: two amounts near 2^62 in one currency (and many near 2^63) still print exactly.
@Suite struct ReportTotalsTests {
    @Test(arguments: [
        (Int128(Int64.max) * 2, 2, "184467440737095516.14"),
        (Int128(1) << 62 + Int128(1) << 62, 0, "9223372036854775808"),
        (Int128(5), 3, "0.005"),
        (Int128(0), 2, "0.00"),
        (Int128(Int64.max) * 1_000_000, 2, "92233720368547758070000.00")
    ])
    func wideTotalsFormatExactly(minor: Int128, exponent: Int, expected: String) {
        #expect(ReportSummary.format(minor, exponent: exponent) == expected)
    }
}
