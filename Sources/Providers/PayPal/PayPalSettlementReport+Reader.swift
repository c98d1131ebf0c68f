import Reconciliation
import TextFormats

extension PayPalSettlementReport {
    /// The row-by-row reading: the encoding, the column names, the counts and totals the footers are checked against.
    struct Reader {
        private var input: ByteInput
        private var summary = SettlementReportSummary()
        /// Normalized column name → index (from the CH row).
        private var columns: [String: Int] = [:]
        private var columnCount = 0
        private var at = Columns()
        /// The identifying columns the file has (each held to at most 255 bytes and no NUL), and their names.
        private var identifiers: [(Int, String)] = []
        private var sawReportHeader = false, sawReportFooter = false, inSection = false
        /// The file's FH sequence number ("01" the first file of a report), and whether its FF came.
        private var fileSequence: Int?, sawFileFooter = false
        private var sectionRows = 0, reportRows = 0
        /// Per currency, the section's gross credits, gross debits, fee credits and fee debits, in hundredths.
        private var sectionTotals: [String: [Int64]] = [:]
        /// The record being read, and a body row read but not yet returned (the last one may turn out to be cut short):
        /// two buffers kept from row to row, swapped as a row is held.
        private var record = CSVFields(), held = CSVFields()
        /// The line of the held body row; nil when none is held.
        private var heldLine: Int?

        static let maxHundredths: Int64 = 1_000_000_000_000_000

        struct Columns {
            var transactionID = -1, eventCode = -1, direction = -1, gross = -1, currency = -1
            var feeDirection = -1, fee = -1, feeCurrency = -1, reference = -1, referenceType = -1, invoice = -1, custom = -1
            var initiated = -1, completed = -1, status = -1
        }

        private let decoder: Decoder

        init(name: String, chunks: @escaping () -> [UInt8]?) throws {
            decoder = Decoder(chunks)
            let decoder = self.decoder
            input = ByteInput(nextChunk: { decoder.next() })
            input.skipBOM()
            let (kind, day) = nameParts(name)
            summary.kind = kind
            summary.day = day
        }

        /// The next body row as a line, or nil at the end. A body row is held until the row after it is read, so the
        /// last one can be told cut short; footers are checked after the rows before them are counted.
        mutating func nextLine() throws -> SettlementLine? {
            while true {
                if let line = ready { ready = nil; return line }
                guard let read = input.readCSVRecord(into: &record, maxFieldBytes: 65_536, maxFields: 512) else {
                    if let error = decoder.error { throw error }
                    guard let line = heldLine else { return nil }
                    heldLine = nil
                    return try release(line, last: true)
                }
                let lineNumber: Int
                switch read {
                case let .error(line, reason):
                    if let error = decoder.error { throw error }
                    // A quoted field open at the end of the input is a file cut inside its last row.
                    guard input.peek() == nil, reason.hasPrefix("unterminated") else { throw SettlementReportError(line: line, reason) }
                    throw SettlementReportError(line: line, "the file ends inside this row (a quoted field never closes): it was cut short")
                case let .record(line): lineNumber = line
                }
                lastLine = lineNumber
                if let line = heldLine { heldLine = nil; ready = try release(line, last: false) }
                if Self.isBodyRow(record[0]) {
                    guard columnCount > 0 else {
                        throw SettlementReportError(line: lineNumber, "a body row (SB) before the column names (CH)")
                    }
                    swap(&record, &held)
                    heldLine = lineNumber
                } else {
                    try header(Self.trimmed(record[0]), record, lineNumber)
                }
            }
        }
        private var ready: SettlementLine?
        /// The line of the last record read (where a file cut short ends).
        private var lastLine = 0
        /// Where the file and report headers were (a cut-short file names them).
        private var fileHeaderLine = 0, reportHeaderLine = 0

        /// A held body row, counted into its section and read; the file's last one with too few fields was cut short.
        private mutating func release(_ lineNumber: Int, last: Bool) throws -> SettlementLine? {
            if held.count < columnCount {
                if last {
                    throw SettlementReportError(
                        line: lineNumber, "the file ends inside this row (\(held.count) of \(columnCount) fields): it was cut short")
                }
                throw SettlementReportError(line: lineNumber, "\(held.count) fields where the column names (CH) give \(columnCount)")
            }
            try count(held, lineNumber)
            let read = try line(held, lineNumber)
            // A file with no section header states its zone in its rows' times.
            if summary.utcOffset == nil { summary.utcOffset = offset(text(held, at.initiated)) }
            return read
        }

        /// The row counted into its section's totals as written, in hundredths as the footers give them.
        private mutating func count(_ fields: CSVFields, _ line: Int) throws {
            sectionRows += 1; reportRows += 1; summary.bodyRows += 1
            let currency = text(fields, at.currency)
            var totals = sectionTotals[currency] ?? [0, 0, 0, 0]
            let gross = try hundredths(fields, at.gross, line, "Gross Transaction Amount") ?? 0
            totals[Self.direction(field(fields, at.direction)) == .debit ? 1 : 0] &+= gross
            if at.fee >= 0, let fee = try hundredths(fields, at.fee, line, "Fee Amount") {
                totals[Self.direction(field(fields, at.feeDirection)) == .debit ? 3 : 2] &+= fee
            }
            sectionTotals[currency] = totals
        }

        private mutating func header(_ type: String, _ fields: CSVFields, _ line: Int) throws {
            switch type {
            case "RH":
                sawReportHeader = true
                reportHeaderLine = line
                if summary.account == nil, fields.count > 3 { summary.account = try account(fields, line, "RH") }
            case "FH":
                fileSequence = Int(text(fields, 1))
                fileHeaderLine = line
            case "SH":
                inSection = true
                sectionRows = 0
                sectionTotals = [:]
                if fields.count > 2 {
                    summary.periodStart = summary.periodStart ?? timestamp(text(fields, 1))
                    summary.utcOffset = summary.utcOffset ?? offset(text(fields, 1))
                    summary.periodEnd = timestamp(text(fields, 2)) ?? summary.periodEnd
                }
                if fields.count > 3, let account = try account(fields, line, "SH") { summary.account = account }
                if summary.day == nil, let start = summary.periodStart { summary.day = UnixTime.date(UnixTime.split(start).days) }
            case "CH":
                try readColumns(fields, line)
            case "SC":
                if let n = Int(text(fields, 1)), n != sectionRows {
                    problem("line \(line): its section count (SC) says \(n) rows, the section has \(sectionRows)")
                }
                inSection = false
            case "SF":
                checkSectionFooter(fields, line)
            case "RC":
                // A report of over a million rows comes in several files, and only the last has RC, counting all of
                // them: it is checked when this file is the report's first (so its only) one.
                if fileSequence == nil || fileSequence == 1, let n = Int(text(fields, 1)), n != reportRows {
                    problem("line \(line): its report count (RC) says \(n) rows, the report has \(reportRows)")
                }
            case "RF":
                sawReportFooter = true
            case "FF":
                // FF counts the file's body rows (as the public parsers read it: PAYPAL-53).
                sawFileFooter = true
                if let n = Int(text(fields, 1)), n != summary.bodyRows {
                    problem("line \(line): its file footer (FF) says \(n) rows, the file has \(summary.bodyRows)")
                }
            default:
                throw SettlementReportError(
                    line: line, "\"\(type.prefix(20))\" is not a row type of a PayPal report (RH, FH, SH, CH, SB, SF, SC, RF, RC, FF)")
            }
        }

        /// The column names (CH), read into where each field is: a report without one of the columns a line needs is refused.
        private mutating func readColumns(_ fields: CSVFields, _ line: Int) throws {
            columns = [:]
            for i in 1..<max(fields.count, 1) {
                columns[Self.normalized(String(decoding: fields[i], as: UTF8.self))] = i
            }
            columnCount = fields.count
            at = Columns()
            func need(_ name: String) throws -> Int {
                guard let i = columns[Self.normalized(name)] else {
                    throw SettlementReportError(line: line, "the column names (CH) have no \"\(name)\"")
                }
                return i
            }
            at.transactionID = try need("Transaction ID")
            at.eventCode = try need("Transaction Event Code")
            at.direction = try need("Transaction Debit or Credit")
            at.gross = try need("Gross Transaction Amount")
            at.currency = try need("Gross Transaction Currency")
            func optional(_ name: String) -> Int { columns[Self.normalized(name)] ?? -1 }
            at.feeDirection = optional("Fee Debit or Credit"); at.fee = optional("Fee Amount");
            at.feeCurrency = optional("Fee Currency")
            at.reference = optional("PayPal Reference ID"); at.referenceType = optional("PayPal Reference ID Type")
            at.invoice = optional("Invoice ID"); at.custom = optional("Custom Field")
            at.initiated = optional("Transaction Initiation Date"); at.completed = optional("Transaction Completion Date")
            at.status = optional("Transactional Status")
            identifiers = [
                (at.transactionID, "Transaction ID"), (at.eventCode, "Transaction Event Code"), (at.reference, "PayPal Reference ID"),
                (at.referenceType, "PayPal Reference ID Type"), (at.invoice, "Invoice ID"), (at.custom, "Custom Field")
            ].filter { $0.0 >= 0 }
        }

        /// A section footer (SF) checked against the section's rows: a total that differs is a problem, not a refusal.
        private mutating func checkSectionFooter(_ fields: CSVFields, _ line: Int) {
            // SF, currency, total gross credits, total gross debits, total fee credits, total fee debits, …
            let currency = text(fields, 1)
            let got = sectionTotals[currency] ?? [0, 0, 0, 0]
            let names = ["gross credits", "gross debits", "fee credits", "fee debits"]
            for (k, name) in names.enumerated() where fields.count > 2 + k {
                if let said = Int64(text(fields, 2 + k)), said != got[k] {
                    problem(
                        "line \(line): its section footer (SF) gives \(currency) \(name) of \(said) hundredths, its rows add up to \(got[k])"
                    )
                }
            }
        }

        /// At most 50 problems are kept in words; past that they are counted (a hostile file of a million bad footers
        /// must not become a million lines of text).
        private var moreProblems = 0
        /// A problem's text may quote the file (a footer's currency): a NUL in it is U+FFFD, as PostgreSQL stores text.
        private mutating func problem(_ text: String) {
            let text = text.withoutNUL
            if summary.problems.count < 50 { summary.problems.append(text) } else { moreProblems += 1 }
        }

        /// The account of a report (RH) or section (SH) header, stored with the file: held to what a body row's
        /// identifiers are held to.
        private func account(_ fields: CSVFields, _ line: Int, _ row: String) throws -> String? {
            guard let account = nonEmpty(text(fields, 3)) else { return nil }
            guard !account.utf8.contains(0) else {
                throw SettlementReportError(line: line, "the account of its header (\(row)) holds a NUL byte")
            }
            guard account.utf8.count <= 255 else {
                throw SettlementReportError(line: line, "the account of its header (\(row)) is longer than 255 bytes")
            }
            return account
        }

        /// What the file says of itself, once it is read to its end; a file whose header has no footer was cut short
        /// and is refused whole, naming where it stops.
        mutating func finish() throws -> SettlementReportSummary {
            let end = lastLine == 0 ? "it is empty" : "it stops after line \(lastLine)"
            if fileSequence != nil && !sawFileFooter {
                throw SettlementReportError(
                    line: lastLine, "the file header (FH, line \(fileHeaderLine)) has no file footer (FF): \(end), cut short")
            }
            if fileSequence == nil && sawReportHeader && !sawReportFooter {
                throw SettlementReportError(
                    line: lastLine, "the report header (RH, line \(reportHeaderLine)) has no report footer (RF): \(end), cut short")
            }
            if inSection {
                problem("its last section has no section count (SC)")
            }
            if moreProblems > 0 { summary.problems.append("… and \(moreProblems) more problems") }
            return summary
        }

        // MARK: Fields

        private func line(_ f: CSVFields, _ lineNumber: Int) throws -> SettlementLine {
            func required(_ i: Int, _ name: String) throws -> String {
                let v = text(f, i)
                guard !v.isEmpty else { throw SettlementReportError(line: lineNumber, "\(name) is empty") }
                return v
            }
            // No Transaction ID: an account row (a transfer, a withdrawal), the account's own and no transaction's.
            let id = text(f, at.transactionID)
            let code = try required(at.eventCode, "Transaction Event Code")
            for (i, name) in identifiers {
                let v = field(f, i)
                guard !v.contains(0) else { throw SettlementReportError(line: lineNumber, "\(name) holds a NUL byte") }
                // Measured as stored: a byte that is not UTF-8 is kept as U+FFFD, three bytes.
                let stored = v.allSatisfy { $0 < 0x80 } ? v.count : text(f, i).utf8.count
                guard stored <= 255 else { throw SettlementReportError(line: lineNumber, "\(name) is longer than 255 bytes") }
            }
            _ = try required(at.direction, "Transaction Debit or Credit")
            guard let direction = Self.direction(field(f, at.direction)) else {
                throw SettlementReportError(
                    line: lineNumber, "Transaction Debit or Credit is \"\(text(f, at.direction).prefix(20))\", not CR or DR")
            }
            let currency = try self.currency(
                try required(at.currency, "Gross Transaction Currency"), lineNumber, "Gross Transaction Currency")
            guard let grossHundredths = try hundredths(f, at.gross, lineNumber, "Gross Transaction Amount") else {
                throw SettlementReportError(line: lineNumber, "Gross Transaction Amount is empty")
            }
            guard let gross = minorUnits(hundredths: grossHundredths, currency) else {
                throw SettlementReportError(
                    line: lineNumber, "Gross Transaction Amount \(grossHundredths) hundredths is not a whole amount of \(currency.code)")
            }
            var out = SettlementLine(
                transactionID: id, eventCode: code, direction: direction, role: id.isEmpty ? .other : role(eventCode: code),
                referenceID: nonEmpty(text(f, at.reference)), referenceType: nonEmpty(text(f, at.referenceType)),
                invoiceID: nonEmpty(text(f, at.invoice)), customField: nonEmpty(text(f, at.custom)),
                initiatedAt: timestamp(bytes: field(f, at.initiated)), completedAt: timestamp(bytes: field(f, at.completed)),
                currency: currency, gross: gross, line: lineNumber)
            out.row = SettlementLine.rowText(f)
            if let feeHundredths = try hundredths(f, at.fee, lineNumber, "Fee Amount") {
                let feeCurrency =
                    nonEmpty(text(f, at.feeCurrency)).map { code in (try? self.currency(code, lineNumber, "Fee Currency")) ?? currency }
                    ?? currency
                guard let fee = minorUnits(hundredths: feeHundredths, feeCurrency) else {
                    throw SettlementReportError(
                        line: lineNumber, "Fee Amount \(feeHundredths) hundredths is not a whole amount of \(feeCurrency.code)")
                }
                out.fee = fee
                out.feeCurrency = feeCurrency
                out.feeDirection = Self.direction(field(f, at.feeDirection)) ?? .debit
            }
            if let status = nonEmpty(text(f, at.status)) {
                guard status.utf8.count == 1, let known = SettlementLine.Status(rawValue: status.uppercased()) else {
                    throw SettlementReportError(
                        line: lineNumber, "Transactional Status \"\(status.prefix(10))\" is not one PayPal defines (S, V, P or D)")
                }
                out.status = known
            }
            return out
        }

        private func currency(_ code: String, _ line: Int, _ field: String) throws -> Currency {
            guard let c = Currency(code: code.uppercased()) else {
                throw SettlementReportError(line: line, "\(field) \"\(code.prefix(10))\" is not an ISO 4217 currency")
            }
            return c
        }

        /// An unsigned integer amount field; nil when the column is absent or the field empty.
        private func hundredths(_ f: CSVFields, _ i: Int, _ line: Int, _ field: String) throws -> Int64? {
            guard i >= 0, i < f.count else { return nil }
            let v = self.field(f, i)
            guard !v.isEmpty else { return nil }
            // Digits only, read by the standard library (an amount's few digits make a string held inline: no allocation).
            guard v.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int64(String(decoding: v, as: UTF8.self)) else {
                throw SettlementReportError(
                    line: line, "\(field) \"\(text(f, i).prefix(20))\" is not an unsigned whole number of hundredths")
            }
            // Ten trillion in any currency is no settlement line: refusing it keeps every sum and difference in range.
            guard n <= Self.maxHundredths else {
                throw SettlementReportError(
                    line: line, "\(field) \(n) is larger than any settlement amount (at most \(Self.maxHundredths) hundredths)")
            }
            return n
        }

        private func text(_ f: CSVFields, _ i: Int) -> String {
            guard i >= 0, i < f.count else { return "" }
            return Self.trimmed(f[i])
        }

        /// A field's bytes without the spaces and tabs around it; empty when the column is absent.
        private func field(_ f: CSVFields, _ i: Int) -> ArraySlice<UInt8> {
            guard i >= 0, i < f.count else { return [] }
            return Self.trimmedBytes(f[i])
        }

        private func nonEmpty(_ s: String) -> String? { s.isEmpty ? nil : s }

        /// "Transaction  Debit or Credit", "TransactionDebitOrCredit" → "transactiondebitorcredit".
        static func normalized(_ name: String) -> String {
            String(String.UnicodeScalarView(name.unicodeScalars.filter { !$0.properties.isWhitespace })).lowercased()
        }
    }
}

extension PayPalSettlementReport.Reader {
    /// A field's text without the spaces and tabs around it, trimmed on the bytes (every field of a million-row file
    /// passes here).
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: trimmedBytes(bytes), as: UTF8.self) }

    static func trimmedBytes(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return bytes[start..<end]
    }

    /// Whether a row's type (its first field) is SB, a body row, spaces around it allowed: asked of every row, without
    /// making a string of it.
    static func isBodyRow(_ type: ArraySlice<UInt8>) -> Bool { trimmedBytes(type).elementsEqual("SB".utf8) }

    /// CR or DR in any case, from a trimmed field; nil for anything else.
    static func direction(_ v: ArraySlice<UInt8>) -> SettlementLine.Direction? {
        guard v.count == 2, v[v.startIndex + 1] | 0x20 == UInt8(ascii: "r") else { return nil }
        switch v[v.startIndex] | 0x20 {
        case UInt8(ascii: "c"): return .credit
        case UInt8(ascii: "d"): return .debit
        default: return nil
        }
    }
}

/// The file's bytes as UTF-8: UTF-16 (by its byte-order mark, or by the zero bytes of ASCII text without one) is
/// transcoded chunk by chunk; anything else passes as it is (a UTF-8 byte-order mark is skipped by the reader).
final class Decoder {
    private let chunks: () -> [UInt8]?
    private var first: [UInt8]?
    private var transcoder: UTF16Transcoder?
    private(set) var error: SettlementReportError?

    init(_ chunks: @escaping () -> [UInt8]?) {
        self.chunks = chunks
        var head = chunks() ?? []
        while head.count < 4, let more = chunks() { head += more }
        if head.starts(with: [0xFF, 0xFE]) {
            transcoder = UTF16Transcoder(bigEndian: false); head.removeFirst(2)
        } else if head.starts(with: [0xFE, 0xFF]) {
            transcoder = UTF16Transcoder(bigEndian: true); head.removeFirst(2)
        } else if head.count >= 2, head[0] != 0, head[1] == 0 {
            transcoder = UTF16Transcoder(bigEndian: false)
        } else if head.count >= 2, head[0] == 0, head[1] != 0 {
            transcoder = UTF16Transcoder(bigEndian: true)
        }
        first = head
    }

    func next() -> [UInt8]? {
        guard error == nil else { return nil }
        let bytes: [UInt8]?
        if let f = first { first = nil; bytes = f } else { bytes = chunks() }
        guard transcoder != nil else { return bytes }
        do {
            guard let bytes else { return try transcoder!.finish() }
            return try transcoder!.feed(bytes)
        } catch {
            self.error = error
            return nil
        }
    }
}

/// UTF-16 bytes (either order) → UTF-8 bytes, fed in chunks of any size (a code unit or a surrogate pair may span two).
struct UTF16Transcoder {
    let bigEndian: Bool
    private var carry: [UInt8] = []
    private var high: UInt16?

    init(bigEndian: Bool) { self.bigEndian = bigEndian }

    mutating func feed(_ bytes: [UInt8]) throws(SettlementReportError) -> [UInt8] {
        var all = carry + bytes
        carry = []
        if all.count % 2 == 1 { carry = [all.removeLast()] }
        var out: [UInt8] = []
        out.reserveCapacity(all.count)
        var i = 0
        while i < all.count {
            let unit = bigEndian ? UInt16(all[i]) << 8 | UInt16(all[i + 1]) : UInt16(all[i + 1]) << 8 | UInt16(all[i])
            i += 2
            if let h = high {
                guard unit >= 0xDC00, unit <= 0xDFFF else {
                    throw SettlementReportError(line: 0, "the file is UTF-16 with a broken surrogate pair")
                }
                high = nil
                append(0x10000 + ((UInt32(h) - 0xD800) << 10) + (UInt32(unit) - 0xDC00), to: &out)
            } else if unit >= 0xD800, unit <= 0xDBFF {
                high = unit
            } else if unit >= 0xDC00, unit <= 0xDFFF {
                throw SettlementReportError(line: 0, "the file is UTF-16 with a broken surrogate pair")
            } else {
                append(UInt32(unit), to: &out)
            }
        }
        return out
    }

    mutating func finish() throws(SettlementReportError) -> [UInt8]? {
        guard carry.isEmpty, high == nil else { throw SettlementReportError(line: 0, "the file is UTF-16 and ends inside a character") }
        return nil
    }

    private func append(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case ..<0x80: out.append(UInt8(scalar))
        case ..<0x800: out += [UInt8(0xC0 | (scalar >> 6)), UInt8(0x80 | (scalar & 0x3F))]
        case ..<0x10000: out += [UInt8(0xE0 | (scalar >> 12)), UInt8(0x80 | ((scalar >> 6) & 0x3F)), UInt8(0x80 | (scalar & 0x3F))]
        default:
            out += [
                UInt8(0xF0 | (scalar >> 18)), UInt8(0x80 | ((scalar >> 12) & 0x3F)), UInt8(0x80 | ((scalar >> 6) & 0x3F)),
                UInt8(0x80 | (scalar & 0x3F))
            ]
        }
    }
}
