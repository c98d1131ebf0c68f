import Reconciliation

/// PayPal's Settlement (STL) and Transaction Detail (TRR) report files → `SettlementLine`s and what the file says of
/// itself (docs/PROVIDER-FACTS.md PAYPAL-50…).
///
/// Every row starts with its type: RH report header, FH file header, SH section header, CH column names, SB body
/// row, SF section footer, SC section count, RF report footer, RC report count, FF file footer. Body columns are
/// named by the CH row (matched without regard to case or spaces, so "Transaction  Debit or Credit" with its double
/// space and the old "TransactionDebitOrCredit" both read). Amounts are unsigned integers in hundredths of the major
/// unit for every currency ("100,00 yen and $100.00 USD are both represented as 10000"), their direction in the
/// debit-or-credit columns. CSV in UTF-8 with or without a byte-order mark, or UTF-16 (older files).
///
/// A file is read whole or not at all: a row that cannot be read is an error naming its line, and so is a file cut
/// short (it ends inside its last row, or has a header without its footer): half a file is never half imported.
/// Footers are checked when present: an SC or RC whose count differs from the body rows before it, or an SF whose
/// gross or fee totals differ from its section's rows in that currency, are problems of the report
/// (`settlement_incomplete`) — its lines are still read. A file of CH and SB rows alone (an export) has no footers to
/// check. A body row with no Transaction ID is the account's own (a transfer, a withdrawal): kept as such, never a
/// reason to refuse the file.
public enum PayPalSettlementReport {
    /// Reads the report from `chunks`, handing its lines to `each` in batches of `batch`, in file order.
    public static func read(
        name: String, chunks: @escaping () -> [UInt8]?, batch: Int = 5_000,
        each: ([SettlementLine]) throws -> Void
    ) throws -> SettlementReportSummary {
        var reader = try Reader(name: name, chunks: chunks)
        var pending: [SettlementLine] = []
        pending.reserveCapacity(batch)
        while let line = try reader.nextLine() {
            pending.append(line)
            if pending.count >= batch { try each(pending); pending.removeAll(keepingCapacity: true) }
        }
        if !pending.isEmpty { try each(pending) }
        return try reader.finish()
    }

    /// Reads a whole report held in memory.
    public static func read(name: String, bytes: [UInt8]) throws -> (SettlementReportSummary, [SettlementLine]) {
        var given: [UInt8]? = bytes
        var lines: [SettlementLine] = []
        let summary = try read(
            name: name,
            chunks: {
                defer { given = nil }; return given
            }
        ) { lines += $0 }
        return (summary, lines)
    }

    /// The role of a T-code: T00xx are payments (money in when credited; a debit is a payment the merchant sent);
    /// T1106 (reversal), T1107 (refund) and T1201 (chargeback) take money back, their PayPal Reference ID naming the
    /// parent. Every other code (withdrawals, holds and their releases, conversions, mass-payment refunds…) is no
    /// order's. Whether the row moved money at all is its status's to say (`SettlementLine.Status`), not its code's.
    public static func role(eventCode: String) -> SettlementLine.Role {
        let code = eventCode.uppercased()
        if code.hasPrefix("T00") { return .payment }
        if ["T1106", "T1107", "T1201"].contains(code) { return .moneyBack }
        return .other
    }

    /// `STL-20261130.01.009.CSV` → ("STL", "2026-11-30"); nil parts when the name does not follow PayPal's.
    public static func nameParts(_ name: String) -> (kind: String?, day: String?) {
        let base = name.split(separator: "/").last.map(String.init) ?? name
        let upper = base.uppercased()
        let kind = ["STL", "TRR"].first { upper.hasPrefix($0 + "-") }
        guard let kind else { return (nil, nil) }
        let digits = upper.dropFirst(kind.count + 1).prefix(8)
        guard digits.count == 8, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
            let y = Int(digits.prefix(4)), let m = Int(digits.dropFirst(4).prefix(2)), let d = Int(digits.suffix(2)),
            UnixTime.seconds(year: y, month: m, day: d, hour: 0, minute: 0, second: 0) != nil
        else { return (kind, nil) }
        return (kind, "\(digits.prefix(4))-\(digits.dropFirst(4).prefix(2))-\(digits.suffix(2))")
    }

    /// Hundredths of a major unit → ISO minor units of `currency` (JPY `15000` is 150; BHD `1250` is 12.500).
    public static func minorUnits(hundredths: Int64, _ currency: Currency) -> Int64? {
        switch currency.exponent {
        case 2: return hundredths
        case 0, 1:
            let divisor: Int64 = currency.exponent == 0 ? 100 : 10
            return hundredths % divisor == 0 ? hundredths / divisor : nil
        default:
            var factor: Int64 = 1
            for _ in 2..<currency.exponent { factor *= 10 }
            let (v, overflow) = hundredths.multipliedReportingOverflow(by: factor)
            return overflow ? nil : v
        }
    }

    /// The offset of a report time (`2017/03/22 09:34:59 -0700` → −25 200 seconds east of UTC); nil without one.
    public static func offset(_ text: String) -> Int? {
        let t = Array(text.utf8)
        guard t.count > 19, let local = timestamp(String(decoding: t[..<19], as: UTF8.self)), let absolute = timestamp(text) else {
            return nil
        }
        let rest = t[19...].drop { $0 == 0x20 }
        guard !rest.isEmpty, rest != [0x5A] else { return nil }
        return Int(local - absolute)
    }

    /// `2017/03/22 09:34:59 -0700` (also with `-` between the date's parts, or `T`, or no zone: UTC) → unix seconds.
    public static func timestamp(_ text: String) -> Int64? { timestamp(bytes: ArraySlice(text.utf8)) }

    /// `timestamp(_:)` of the text's bytes (a settlement file's million rows each have two: read without allocating).
    static func timestamp(bytes t: ArraySlice<UInt8>) -> Int64? {
        guard t.count >= 19 else { return nil }
        let o = t.startIndex
        func number(_ from: Int, _ count: Int) -> Int? {
            var v = 0
            for i in (o + from)..<(o + from + count) { guard t[i] >= 0x30, t[i] <= 0x39 else { return nil }; v = v * 10 + Int(t[i] - 0x30) }
            return v
        }
        let dateMark = t[o + 4], timeMark = t[o + 10]
        guard let y = number(0, 4), let mo = number(5, 2), let d = number(8, 2), let h = number(11, 2), let mi = number(14, 2),
            let s = number(17, 2), dateMark == 0x2F || dateMark == 0x2D, t[o + 7] == dateMark, timeMark == 0x20 || timeMark == 0x54,
            t[o + 13] == 0x3A, t[o + 16] == 0x3A, let local = UnixTime.seconds(year: y, month: mo, day: d, hour: h, minute: mi, second: s)
        else { return nil }
        let rest = t[(o + 19)...].drop { $0 == 0x20 }
        if rest.isEmpty || (rest.count == 1 && rest.first == 0x5A) { return local }
        guard rest.count == 5 || rest.count == 6, let signByte = rest.first, signByte == 0x2B || signByte == 0x2D else { return nil }
        // Four digits, hhmm, with or without a colon among them.
        var hhmm: Int64 = 0, digits = 0
        for c in rest.dropFirst() where c != 0x3A {
            guard c >= 0x30, c <= 0x39, digits < 4 else { return nil }
            hhmm = hhmm * 10 + Int64(c - 0x30)
            digits += 1
        }
        guard digits == 4 else { return nil }
        let offset = (signByte == 0x2D ? -1 : 1) * ((hhmm / 100) * 3600 + (hhmm % 100) * 60)
        return local - offset
    }
}
