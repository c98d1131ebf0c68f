import Foundation
import Reconciliation
import Reporting
import Testing

@Suite("Report CSV")
struct ReportCSVTests {
    @Test func headerAndOneRowPerDiscrepancy() throws {
        let records = try readCSV(report([row(1), row(2, kind: .overCaptured, risk: 1000, currency: jpy),
                                          row(3, status: .resolved, risk: 1250, currency: bhd)]).csv())
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

    @Test("fields with quotes, commas and newlines parse back", arguments: [
        "plain", "a,b", "say \"hi\"", "two\nlines", "cr\r\nlf", "\"", ",", "", "ünïcødé, \"mixed\"\r\n,end",
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
