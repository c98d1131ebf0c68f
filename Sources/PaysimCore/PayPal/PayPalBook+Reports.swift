import Foundation
import Reconciliation

/// paysim's PayPal Settlement (STL) and Transaction Detail (TRR) report files, written from the same book that
/// answers the API (the layout payrecon reads: its README's "Settlement files", after PayPal's Settlement Report
/// specification and the public parsers of it). One file per UTC day: RH, FH, SH, CH, one SB per money movement of
/// the day (a capture or sale T0006/T0002 credited with its fee debited, a refund T1107 and a reversal T1106 debited
/// with the fee given back credited, naming their capture as PayPal Reference ID of type TXN), an SF per currency
/// (gross credits, gross debits, fee credits, fee debits), SC, RF, RC and FF. Amounts in hundredths of the major unit
/// for every currency; the TRR adds Transactional Status and lists pending captures (status P) too.
///
/// Faults, to test a reader: `missing_line` (the day's first row left out, its footers still counting it),
/// `fee_off_by_one` (the first fee one hundredth higher, its footer too), `truncated` (cut inside the last row, no
/// footers), `double_space` ("Transaction  Debit or Credit", as some versions write it), `utf16` (UTF-16LE with a
/// byte-order mark, as older files are), `bom` (UTF-8 with a byte-order mark).
extension PayPalBook {
    struct ReportRow {
        var id: String, invoice: String, reference: String?, code: String, time: String, status: String
        var direction: String, gross: Int64, currency: Currency, feeDirection: String, fee: Int64?
    }

    /// A Transaction Search amount: `{currency_code, value}`, signed (money out is negative), in PayPal's decimals.
    func searchMoney(_ minor: Int64, _ currency: Currency) -> JSONValue {
        .object(["currency_code": .string(currency.code),
                 "value": .string(Money.format(minorUnits: minor / Self.paypalUnit(currency), exponent: Self.paypalDecimals(currency)))])
    }

    static let reportFaults: Set = ["missing_line", "fee_off_by_one", "truncated", "double_space", "utf16", "bom"]

    /// Hundredths of the major unit, as the reports write every amount (JPY 150 → 15000).
    static func hundredths(_ minor: Int64, _ currency: Currency) -> Int64 {
        switch currency.exponent {
        case 0: return minor * 100
        case 1: return minor * 10
        case 2: return minor
        default:
            var divisor: Int64 = 1
            for _ in 2..<currency.exponent { divisor *= 10 }
            return minor / divisor
        }
    }

    /// The rows of one UTC day (`YYYY-MM-DD`; nil: every day), in time order then id.
    /// The rows Transaction Search lists, in time order (then by id), built once per change of the book.
    mutating func transactionSearchIndex() -> [(time: Int64, row: ReportRow)] {
        if let searchIndex { return searchIndex }
        let index = reportRows(day: nil, detail: false).compactMap { row in SimTime.parse(row.time).map { (time: $0, row: row) } }
            .sorted { ($0.time, $0.row.id) < ($1.time, $1.row.id) }
        searchIndex = index
        return index
    }

    /// The first position in `index` whose time is `time` or later (binary search).
    static func firstIndex(in index: [(time: Int64, row: ReportRow)], atOrAfter time: Int64) -> Int {
        var low = 0, high = index.count
        while low < high {
            let middle = (low + high) / 2
            if index[middle].time < time { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func reportRows(day: String?, detail: Bool) -> [ReportRow] {
        var rows: [ReportRow] = []
        func onDay(_ time: String) -> Bool { day.map { time.hasPrefix($0) } ?? true }
        for c in captures.values where onDay(c.createTime) {
            guard let order = orders[c.orderID] else { continue }
            let moved = ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"].contains(c.status)
            guard moved || (detail && c.status == "PENDING") else { continue }
            rows.append(ReportRow(id: c.id, invoice: order.referenceID, reference: order.id, code: "T0006", time: c.createTime,
                                  status: moved ? "S" : "P", direction: "CR", gross: c.amount, currency: order.currency,
                                  feeDirection: "DR", fee: moved ? PayPalFees.capture(c.amount, order.currency) : nil))
        }
        for r in refunds.values where onDay(r.createTime) && r.status == "COMPLETED" {
            guard let order = orders[r.orderID] else { continue }
            let fee = r.isReversal ? 0 : PayPalFees.refund(r.amount, order.currency)
            rows.append(ReportRow(id: r.id, invoice: order.referenceID, reference: r.captureID, code: r.isReversal ? "T1106" : "T1107",
                                  time: r.createTime, status: "S", direction: "DR", gross: r.amount, currency: order.currency,
                                  feeDirection: "CR", fee: fee > 0 ? fee : nil))
        }
        for s in sales.values where onDay(s.createTime) && s.state != "pending" && s.state != "denied" {
            rows.append(ReportRow(id: s.id, invoice: "", reference: s.billingAgreement ?? s.parentPayment, code: "T0002", time: s.createTime,
                                  status: "S", direction: "CR", gross: s.amount, currency: s.currency, feeDirection: "DR",
                                  fee: PayPalFees.capture(s.amount, s.currency)))
        }
        for r in saleRefunds.values where onDay(r.createTime) {
            guard let sale = sales[r.saleID] else { continue }
            rows.append(ReportRow(id: r.id, invoice: "", reference: r.saleID, code: "T1107", time: r.createTime, status: "S",
                                  direction: "DR", gross: r.amount, currency: sale.currency, feeDirection: "CR", fee: nil))
        }
        return rows.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
    }

    /// The file `kind` (STL or TRR) of `day` for `account`, with `faults` applied.
    func report(kind: String, day: String, account: String, generated: String, faults: Set<String>) -> [UInt8] {
        let detail = kind == "TRR"
        var rows = reportRows(day: day, detail: detail)
        let counted = rows   // what the footers count (a missing line is left out after)
        if faults.contains("fee_off_by_one"), let i = rows.firstIndex(where: { $0.fee != nil }) {
            rows[i].fee! += 1   // one hundredth for a two-decimal currency: in the footer as well
        }
        if faults.contains("missing_line"), !rows.isEmpty { rows.removeFirst() }
        let stamp = { (t: String) -> String in
            // RFC 3339 → PayPal's "yyyy/MM/dd HH:mm:ss +0000".
            let s = t.replacingOccurrences(of: "-", with: "/").prefix(10) + " " + t.dropFirst(11).prefix(8) + " +0000"
            return String(s)
        }
        func q(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        var lines: [String] = []
        let version = detail ? "011" : "009"
        lines.append("\(q("RH")),\(stamp(generated)),\(q("R")),\(q(account)),\(version),")
        lines.append("\(q("FH")),01")
        lines.append("\(q("SH")),\(day.replacingOccurrences(of: "-", with: "/")) 00:00:00 +0000,\(day.replacingOccurrences(of: "-", with: "/")) 23:59:59 +0000,\(q(account)),\(q(""))")
        var names = ["Transaction ID", "Invoice ID", "PayPal Reference ID", "PayPal Reference ID Type", "Transaction Event Code",
                     "Transaction Initiation Date", "Transaction Completion Date",
                     faults.contains("double_space") ? "Transaction  Debit or Credit" : "Transaction Debit or Credit",
                     "Gross Transaction Amount", "Gross Transaction Currency", "Fee Debit or Credit", "Fee Amount", "Fee Currency"]
        if detail { names.append("Transactional Status") }
        names += ["Custom Field", "Consumer ID"]
        lines.append(([q("CH")] + names.map(q)).joined(separator: ","))
        for r in rows {
            var f = [q("SB"), q(r.id), q(r.invoice), q(r.reference ?? ""), q(r.reference == nil ? "" : "TXN"), q(r.code), stamp(r.time), stamp(r.time),
                     q(r.direction), String(Self.hundredths(r.gross, r.currency)), q(r.currency.code),
                     q(r.fee == nil ? "" : r.feeDirection), r.fee.map { String(Self.hundredths($0, r.currency)) } ?? "", q(r.fee == nil ? "" : r.currency.code)]
            if detail { f.append(q(r.status)) }
            f += [q(r.invoice), q("")]
            lines.append(f.joined(separator: ","))
        }
        // Footers count and total what PayPal's ledger holds (a line missing from the body still counts there).
        var totals: [String: [Int64]] = [:]
        var footed = counted
        if faults.contains("fee_off_by_one"), let i = footed.firstIndex(where: { $0.fee != nil }) { footed[i].fee! += 1 }
        for r in footed {
            var t = totals[r.currency.code] ?? [0, 0, 0, 0]
            t[r.direction == "CR" ? 0 : 1] += Self.hundredths(r.gross, r.currency)
            if let fee = r.fee { t[r.feeDirection == "CR" ? 2 : 3] += Self.hundredths(fee, r.currency) }
            totals[r.currency.code] = t
        }
        for (code, t) in totals.sorted(by: { $0.key < $1.key }) {
            lines.append("\(q("SF")),\(q(code)),\(t[0]),\(t[1]),\(t[2]),\(t[3])")
        }
        lines.append("\(q("SC")),\(counted.count)")
        lines.append("\(q("RF")),\(counted.count)")
        lines.append("\(q("RC")),\(counted.count)")
        lines.append("\(q("FF")),\(counted.count)")
        var text = lines.joined(separator: "\r\n") + "\r\n"
        if faults.contains("truncated") {
            // Cut inside the last body row: everything after it is lost.
            let bodyEnd = text.range(of: "\r\n\"SF\"") ?? text.range(of: "\r\n\"SC\"")
            if let bodyEnd {
                let cut = text[..<bodyEnd.lowerBound]
                text = String(cut.dropLast(min(12, cut.count / 4)))
            }
        }
        if faults.contains("utf16") {
            var out: [UInt8] = [0xFF, 0xFE]
            for unit in text.utf16 { out += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
            return out
        }
        return (faults.contains("bom") ? [0xEF, 0xBB, 0xBF] : []) + Array(text.utf8)
    }
}
