import Foundation
import Reconciliation
import Reporting
import TextFormats

let usd = Currency(code: "USD")!, jpy = Currency(code: "JPY")!, bhd = Currency(code: "BHD")!
/// 2026-11-29T12:00:00Z
let noon = Date(timeIntervalSince1970: 1_795_953_600)

func row(
    _ id: Int64, provider: Provider = .pxp, order: String? = "ORD-1", ref: String = "tx-1",
    kind: DiscrepancyKind = .amountMismatch, status: DiscrepancyStatus = .open, detail: String = "captured less",
    risk: Int64 = 2500, currency: Currency? = usd, expected: JSONValue = .object([("amount", .string("25.00"))]),
    firstSeen: Date = noon, occurrences: Int = 1
) -> DiscrepancyRow {
    DiscrepancyRow(
        id: id, provider: provider, orderID: order, transactionRef: ref, kind: kind, status: status,
        expected: expected, actual: .object([("amount", .string("0.00"))]), detail: detail,
        amountAtRisk: risk, currency: currency, firstSeen: firstSeen, lastSeen: noon,
        occurrences: occurrences, resolvedAt: status == .resolved ? noon : nil)
}

func report(_ rows: [DiscrepancyRow], summary: ReportSummary? = nil, days: [DayCount] = []) -> Report {
    var s = ReportSummary()
    for r in rows where r.status == .open {
        s.open += 1
        s.byKind[r.kind, default: 0] += 1
        if let c = r.currency, r.amountAtRisk != 0 { s.amountAtRisk[c, default: 0] += Int128(r.amountAtRisk) }
    }
    return Report(generatedAt: noon, summary: summary ?? s, openByDay: days, discrepancies: rows)
}

func parseJSON(_ bytes: [UInt8]) throws -> JSONValue { try JSONValue.parse(bytes) }

/// A tiny RFC 4180 reader: quoted fields may hold commas, CR, LF and doubled quotes; records end with CRLF.
func readCSV(_ text: String) throws -> [[String]] {
    struct Malformed: Error {}
    var records: [[String]] = [], record: [String] = [], field = ""
    var inQuotes = false, wasQuoted = false
    let scalars = Array(text.unicodeScalars)
    var i = 0
    while i < scalars.count {
        let c = scalars[i]
        if inQuotes {
            if c == "\"" {
                if i + 1 < scalars.count, scalars[i + 1] == "\"" { field.unicodeScalars.append("\""); i += 1 } else { inQuotes = false }
            } else {
                field.unicodeScalars.append(c)
            }
        } else {
            switch c {
            case "\"":
                guard field.isEmpty, !wasQuoted else { throw Malformed() }
                inQuotes = true; wasQuoted = true
            case ",": record.append(field); field = ""; wasQuoted = false
            case "\r":
                guard i + 1 < scalars.count, scalars[i + 1] == "\n" else { throw Malformed() }
                i += 1
                record.append(field); records.append(record); record = []; field = ""; wasQuoted = false
            case "\n": throw Malformed()  // bare LF outside quotes: not RFC 4180
            default:
                guard !wasQuoted else { throw Malformed() }
                field.unicodeScalars.append(c)
            }
        }
        i += 1
    }
    guard !inQuotes, field.isEmpty, record.isEmpty else { throw Malformed() }  // last record must end with CRLF
    return records
}
