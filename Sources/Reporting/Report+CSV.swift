// `payrecon report --format csv`: one row per discrepancy for spreadsheets (RFC 4180).
import Foundation
import Reconciliation

extension Report {
    /// The CSV header, in column order.
    public static let csvColumns = [
        "id", "provider", "order_id", "transaction_ref", "kind", "status", "amount_at_risk", "currency", "detail",
        "expected", "actual", "first_seen", "last_seen", "occurrences", "resolved_at",
        "acknowledged_at", "ack_note", "acknowledged_by", "counted_at_risk"
    ]

    /// RFC 4180: a header row, CRLF line ends, fields quoted when they hold a comma, quote, CR or LF (quotes doubled).
    /// `expected` / `actual` are compact JSON. Text that came from outside (order ids, references, details) and begins
    /// with `=`, `+`, `-`, `@`, tab or CR gets a leading `'` so a spreadsheet shows it instead of running it as a
    /// formula (CSV injection); amounts and timestamps are ours and never prefixed.
    /// `counted_at_risk`: what the row adds to the headline money at risk (`countedAtRisk`): summed over the open rows,
    /// per currency, it is the report's total; empty for a row not open.
    public func csv() -> String {
        var out = CSV.line(Report.csvColumns)
        let counted = countedAtRisk()
        for d in discrepancies {
            out += CSV.line([
                String(d.id), CSV.text(d.provider.rawValue), CSV.text(d.orderID ?? ""), CSV.text(d.transactionRef), d.kind.rawValue,
                d.status.rawValue, d.formattedAmountAtRisk ?? "", d.currency?.code ?? "", CSV.text(d.detail),
                CSV.text(String(decoding: d.expected.serialized(), as: UTF8.self)),
                CSV.text(String(decoding: d.actual.serialized(), as: UTF8.self)),
                Timestamp.iso8601(d.firstSeen), Timestamp.iso8601(d.lastSeen), String(d.occurrences),
                d.resolvedAt.map(Timestamp.iso8601) ?? "",
                d.acknowledgedAt.map(Timestamp.iso8601) ?? "", CSV.text(d.ackNote ?? ""), CSV.text(d.acknowledgedBy ?? ""),
                counted[d.id].flatMap { amount in d.currency.map { Money.format(minorUnits: amount, exponent: $0.exponent) } } ?? ""
            ])
        }
        return out
    }
}

/// RFC 4180 writing.
public enum CSV {
    /// One record, CRLF-terminated.
    public static func line(_ fields: [String]) -> String {
        fields.map(field).joined(separator: ",") + "\r\n"
    }

    /// A field, quoted when it must be.
    public static func field(_ value: String) -> String {
        // `;` and tab too: a spreadsheet in a locale that separates by `;` would otherwise split the field, and what
        // follows could start with a formula character.
        let needsQuotes = value.unicodeScalars.contains { $0 == "," || $0 == ";" || $0 == "\t" || $0 == "\"" || $0 == "\r" || $0 == "\n" }
        guard needsQuotes else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Outside text made safe to open in a spreadsheet: a leading formula character gets a `'` before it.
    public static func text(_ value: String) -> String {
        guard let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return value }
        return "'" + value
    }
}
