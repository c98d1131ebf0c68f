import Foundation
import Reconciliation
import Reporting
import Testing

@Suite("Report CSV")
struct ReportCSVTests {
    @Test func headerAndOneRowPerDiscrepancy() throws {
        let records = try readCSV(
            report([
                row(1), row(2, kind: .overCaptured, risk: 1000, currency: jpy),
                row(3, status: .resolved, risk: 1250, currency: bhd)
            ]).csv())
        #expect(records.count == 4)
        #expect(records[0] == Report.csvColumns)
        #expect(records.allSatisfy { $0.count == Report.csvColumns.count })
        let col = { (name: String) in Report.csvColumns.firstIndex(of: name)! }
        #expect(records[1][col("amount_at_risk")] == "25.00")
        #expect(records[2][col("amount_at_risk")] == "1000")
        #expect(records[3][col("amount_at_risk")] == "1.250")
        #expect(records[3][col("status")] == "resolved")
        #expect(records[3][col("resolved_at")] == "2026-11-29T12:00:00Z")
        #expect(records[1][col("expected")] == #"{"amount":"25.00"}"#)
    }

    /// The headline money at risk counts each order once, at its largest open finding; CSV's counted_at_risk column
    /// gives each row what it adds, so a spreadsheet's sum is the headline (a trial read USD 110 on top over rows of
    /// 130, with nothing saying why). The table, the JSON and the HTML say how it counts.
    @Test func countedAtRiskSumsToTheHeadline() throws {
        let rows = [
            row(1, order: "ORD-A", risk: 11_000), row(2, order: "ORD-A", kind: .overRefunded, risk: 2_000),
            row(3, order: nil, ref: "TX-U", kind: .unknownOrder, risk: 500), row(4, order: "ORD-B", risk: 700, currency: jpy),
            row(5, order: "ORD-C", status: .resolved, risk: 999)
        ]
        var summary = ReportSummary()
        summary.open = 4
        summary.amountAtRisk = [usd: 11_500, jpy: 700]  // as the store computes it: per order, its largest finding
        let r = report(rows, summary: summary)
        let records = try readCSV(r.csv())
        let col = Report.csvColumns.firstIndex(of: "counted_at_risk")!, cur = Report.csvColumns.firstIndex(of: "currency")!
        #expect(records[1...].map { $0[col] } == ["110.00", "0.00", "5.00", "700", ""])
        var sums: [String: Int64] = [:]
        for record in records.dropFirst() where !record[col].isEmpty {
            sums[record[cur], default: 0] += Int64(record[col].replacingOccurrences(of: ".", with: ""))!
        }
        #expect(sums == ["USD": 11_500, "JPY": 700])
        #expect(
            r.table(colour: false).contains("each order counted once, at its largest open finding")
                && r.table(colour: false).contains("counted_at_risk"))
        let json = try parseJSON(r.json())
        #expect(json["summary"]?["amount_at_risk_counts"]?.stringValue == Report.moneyAtRiskRule)
        #expect(
            json["discrepancies"]?.arrayValue?.map { $0["counted_at_risk"]?.stringValue ?? "null" } == [
                "110.00", "0.00", "5.00", "700", "null"
            ])
        #expect(r.html().contains("Each order counted once, at its largest open finding"))
    }

    @Test(
        "fields with quotes, commas and newlines parse back",
        arguments: [
            "plain", "a,b", "say \"hi\"", "two\nlines", "cr\r\nlf", "\"", ",", "", "ünïcødé, \"mixed\"\r\n,end"
        ])
    func roundTrip(value: String) throws {
        let records = try readCSV(report([row(1, order: value, ref: value, detail: value)]).csv())
        #expect(records.count == 2)
        #expect(records[1][2] == value)
        #expect(records[1][3] == value)
        #expect(records[1][8] == value)
    }

    @Test("formula-looking text is neutralised", arguments: ["=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "\tx"])
    func formulaInjection(value: String) throws {
        let records = try readCSV(report([row(1, order: value)]).csv())
        #expect(records[1][2] == "'" + value)
    }

    @Test func unknownOrderHasAnEmptyOrderIdAndNoCurrency() throws {
        let records = try readCSV(report([row(1, order: nil, kind: .unknownOrder, risk: 0, currency: nil)]).csv())
        #expect(records[1][2] == "")
        #expect(records[1][6] == "")
        #expect(records[1][7] == "")
    }

    /// A field with `;` or a tab is quoted: a spreadsheet in a `;`-separated locale would otherwise split it, and
    /// what follows could start a formula.
    @Test func csvFieldsWithSemicolonsOrTabsAreQuoted() {
        #expect(CSV.field("a;=HYPERLINK(\"x\")") == "\"a;=HYPERLINK(\"\"x\"\")\"")
        #expect(CSV.field("a\t=1") == "\"a\t=1\"")
        #expect(CSV.field("plain") == "plain")
    }

    @Test func readerRejectsMalformedCSV() {
        for bad in ["a\"b\r\n", "\"open\r\n", "a,b", "a\nb\r\n"] { #expect(throws: (any Error).self) { try readCSV(bad) } }
    }
}
