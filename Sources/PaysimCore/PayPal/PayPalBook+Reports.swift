import Foundation
import Reconciliation
import TextFormats

/// paysim's PayPal Settlement (STL) and Transaction Detail (TRR) report files, written from the same book that
/// answers the API (the layout payrecon reads: its docs/money-seen.md, "Settlement files", after PayPal's Settlement Report
/// specification and the public parsers of it). One file per account and day of that account's time zone (the rows'
/// offsets say which): RH, FH, SH, CH, one SB per money movement of the day (a capture or sale T0006/T0002 credited
/// with its fee debited, a refund T1107 and a reversal T1106 debited with the fee given back credited, naming their
/// capture as PayPal Reference ID of type TXN), an SF per currency (gross credits, gross debits, fee credits, fee
/// debits), SC, RF, RC and FF. Amounts in hundredths of the major unit for every currency. An account's file lists
/// the payments made to it (the order's payee `merchant_id`; sales are the default account's).
///
/// The TRR adds Transactional Status as PayPal's Transaction Search defines it (reporting_transactions_v1.json
/// `transaction_status`): S completed; V a capture or sale fully refunded or reversed by the report's day's end (the
/// money came in; the refund is a row of its own); P a payment made that day and not completed by its end (an eCheck
/// seeded with a later `completed_time`, or one still PENDING), listed again as S in the file of the day it completes,
/// which is also the day an STL lists it; D a declined capture (no money moved).
///
/// Faults, to test a reader: `missing_line` (the day's first row left out, its footers still counting it),
/// `fee_off_by_one` (the first fee one hundredth higher, its footer too), `truncated` (cut inside the last row, no
/// footers), `double_space` ("Transaction  Debit or Credit", as some versions write it), `utf16` (UTF-16LE with a
/// byte-order mark, as older files are), `bom` (UTF-8 with a byte-order mark). And `account_row`, no fault: an
/// account-level row with no Transaction ID (a T0400 withdrawal of 10.00 in the day's first currency), as PayPal's
/// public STL samples carry them.
extension PayPalBook {
    struct ReportRow {
        var id: String, invoice: String, reference: String?, code: String
        /// Unix seconds: when the transaction was made, when it moved money (completed), when Transaction Search lists it.
        var initiated: Int64, completed: Int64, listed: Int64
        var status: String
        var direction: String, gross: Int64, currency: Currency, feeDirection: String, fee: Int64?
        /// The account the money moved in (the order's payee).
        var account: String
    }

    /// A Transaction Search amount: `{currency_code, value}`, signed (money out is negative), in PayPal's decimals.
    func searchMoney(_ minor: Int64, _ currency: Currency) -> JSONValue {
        .object([
            "currency_code": .string(currency.code),
            "value": .string(Money.format(minorUnits: minor / Self.paypalUnit(currency), exponent: Self.paypalDecimals(currency)))
        ])
    }

    static let reportFaults: Set = ["missing_line", "fee_off_by_one", "truncated", "double_space", "utf16", "bom", "account_row"]

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

    /// The rows Transaction Search lists (balance-affecting: completed), by initiation time (then id), built once per
    /// change of the book. The route leaves out those not listed yet (`listed` after now).
    mutating func transactionSearchIndex() -> [(time: Int64, row: ReportRow)] {
        if let searchIndex { return searchIndex }
        let index = ledgerRows().filter { $0.status == "S" || $0.status == "V" }.map { (time: $0.initiated, row: $0) }
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

    /// Every money movement of the book, as of now: completed ones S (V once fully refunded or reversed), payments not
    /// completed P, declined captures D.
    func ledgerRows() -> [ReportRow] {
        var rows: [ReportRow] = []
        func t(_ text: String) -> Int64 { SimTime.parse(text) ?? 0 }
        for c in captures.values {
            guard let order = orders[c.orderID] else { continue }
            let moved = ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"].contains(c.status)
            let created = t(c.createTime), completed = c.completedTime.map(t) ?? created
            let status = c.status == "REFUNDED" ? "V" : moved ? "S" : c.status == "PENDING" ? "P" : c.status == "DECLINED" ? "D" : nil
            guard let status else { continue }
            rows.append(
                ReportRow(
                    id: c.id, invoice: order.referenceID, reference: order.id, code: "T0006", initiated: created,
                    completed: moved ? completed : .max, listed: max(completed, c.listedTime.map(t) ?? completed), status: status,
                    direction: "CR", gross: c.amount, currency: order.currency, feeDirection: "DR",
                    fee: moved ? PayPalFees.capture(c.amount, order.currency) : nil, account: order.merchantID))
        }
        for r in refunds.values where r.status == "COMPLETED" {
            guard let order = orders[r.orderID] else { continue }
            let fee = r.isReversal ? 0 : PayPalFees.refund(r.amount, order.currency)
            let at = t(r.createTime)
            rows.append(
                ReportRow(
                    id: r.id, invoice: order.referenceID, reference: r.captureID, code: r.isReversal ? "T1106" : "T1107",
                    initiated: at, completed: at, listed: at, status: "S", direction: "DR", gross: r.amount, currency: order.currency,
                    feeDirection: "CR", fee: fee > 0 ? fee : nil, account: order.merchantID))
        }
        for s in sales.values {
            let at = t(s.createTime)
            let status = s.state == "refunded" ? "V" : s.state == "pending" ? "P" : s.state == "denied" ? "D" : "S"
            let moved = status == "S" || status == "V"
            rows.append(
                ReportRow(
                    id: s.id, invoice: "", reference: s.billingAgreement ?? s.parentPayment, code: "T0002", initiated: at,
                    completed: moved ? at : .max, listed: at, status: status, direction: "CR", gross: s.amount, currency: s.currency,
                    feeDirection: "DR", fee: moved ? PayPalFees.capture(s.amount, s.currency) : nil, account: PayPalOrder.defaultMerchantID)
            )
        }
        for r in saleRefunds.values {
            guard let sale = sales[r.saleID] else { continue }
            let at = t(r.createTime)
            rows.append(
                ReportRow(
                    id: r.id, invoice: "", reference: r.saleID, code: "T1107", initiated: at, completed: at, listed: at, status: "S",
                    direction: "DR", gross: r.amount, currency: sale.currency, feeDirection: "CR", fee: nil,
                    account: PayPalOrder.defaultMerchantID))
        }
        return rows
    }

    /// The rows of `account`'s day [from, from + 86 400): what moved money that day (an STL's), and for a TRR also the
    /// payments made that day that had not moved it by the day's end (P) or were declined (D). A row fully refunded
    /// after the day's end still reads S in that day's file: V only once it was so by then. In time order then id.
    func reportRows(from: Int64, account: String, detail: Bool) -> [ReportRow] {
        let to = from + 86_400
        var rows: [ReportRow] = []
        for var row in ledgerRows() where row.account == account {
            if row.completed >= from && row.completed < to {
                if row.status == "V", let c = captures[row.id], (SimTime.parse(c.updateTime) ?? 0) >= to { row.status = "S" }
                if row.status == "V", let s = sales[row.id], (SimTime.parse(s.updateTime) ?? 0) >= to { row.status = "S" }
                if !detail && row.status == "V" { row.status = "S" }
                rows.append(row)
            } else if detail, row.initiated >= from, row.initiated < to, row.completed >= to || row.status == "D" {
                row.status = row.status == "D" ? "D" : "P"
                row.fee = nil
                row.completed = row.initiated
                rows.append(row)
            }
        }
        return rows.sorted { ($0.completed, $0.id) < ($1.completed, $1.id) }
    }

    /// The file `kind` (STL or TRR) of `day` for `account`, with `faults` applied.
    /// `offset`: the account's time zone, seconds east of UTC (PayPal's samples read `-0700`): the day is that zone's,
    /// and every time is written with it.
    func report(kind: String, day: String, account: String, generated: String, faults: Set<String>, offset: Int64 = 0) -> [UInt8] {
        let detail = kind == "TRR"
        let from = (SimTime.parse(day + "T00:00:00Z") ?? 0) - offset
        var rows = reportRows(from: from, account: account, detail: detail)
        if faults.contains("account_row") {
            rows.append(
                ReportRow(
                    id: "", invoice: "", reference: nil, code: "T0400", initiated: from + 43_200, completed: from + 43_200,
                    listed: from + 43_200, status: "S", direction: "DR", gross: 1_000,
                    currency: rows.first?.currency ?? Currency(code: "USD")!, feeDirection: "", fee: nil, account: account))
        }
        let counted = rows  // what the footers count (a missing line is left out after)
        if faults.contains("fee_off_by_one"), let i = rows.firstIndex(where: { $0.fee != nil }) {
            rows[i].fee! += 1  // one hundredth for a two-decimal currency: in the footer as well
        }
        if faults.contains("missing_line"), !rows.isEmpty { rows.removeFirst() }
        let zone = String(format: "%@%02d%02d", offset < 0 ? "-" : "+", abs(offset) / 3_600, abs(offset) % 3_600 / 60)
        func stamp(_ seconds: Int64) -> String {
            // PayPal's "yyyy/MM/dd HH:mm:ss -0700": the account's local time and its offset.
            let t = SimTime.rfc3339(Date(timeIntervalSince1970: Double(seconds + offset)))
            return t.replacingOccurrences(of: "-", with: "/").prefix(10) + " " + t.dropFirst(11).prefix(8) + " " + zone
        }
        func q(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        var lines: [String] = []
        let version = detail ? "011" : "009"
        lines.append("\(q("RH")),\(stamp(SimTime.parse(generated) ?? from)),\(q("R")),\(q(account)),\(version),")
        lines.append("\(q("FH")),01")
        lines.append("\(q("SH")),\(stamp(from)),\(stamp(from + 86_399)),\(q(account)),\(q(""))")
        var names = [
            "Transaction ID", "Invoice ID", "PayPal Reference ID", "PayPal Reference ID Type", "Transaction Event Code",
            "Transaction Initiation Date", "Transaction Completion Date",
            faults.contains("double_space") ? "Transaction  Debit or Credit" : "Transaction Debit or Credit",
            "Gross Transaction Amount", "Gross Transaction Currency", "Fee Debit or Credit", "Fee Amount", "Fee Currency"
        ]
        if detail { names.append("Transactional Status") }
        names += ["Custom Field", "Consumer ID"]
        lines.append(([q("CH")] + names.map(q)).joined(separator: ","))
        for r in rows {
            let referenceType = r.reference == nil ? "" : r.code.hasPrefix("T11") ? "TXN" : r.code == "T0002" ? "PAP" : "ODR"
            var f = [
                q("SB"), q(r.id), q(r.invoice), q(r.reference ?? ""), q(referenceType), q(r.code), stamp(r.initiated), stamp(r.completed),
                q(r.direction), String(Self.hundredths(r.gross, r.currency)), q(r.currency.code),
                q(r.fee == nil ? "" : r.feeDirection), r.fee.map { String(Self.hundredths($0, r.currency)) } ?? "",
                q(r.fee == nil ? "" : r.currency.code)
            ]
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
