// RFC 4180 CSV records over chunked bytes: order files and providers' report files read them alike.

extension ByteInput {
    public enum CSVRecord: Sendable {
        case fields([[UInt8]], line: Int)
        /// A record that cannot be read (the rest of its line is skipped): its first line and why.
        case error(line: Int, reason: String)
    }

    /// The next record (blank lines skipped), or nil at the end of the input. A field is its raw bytes (quotes
    /// removed, `""` as one quote); a quoted field may hold line breaks. A field longer than `maxFieldBytes` or a
    /// record of more than `maxFields` fields is an error (the rest of its line skipped), so a hostile file cannot
    /// make one record fill the memory.
    public mutating func readCSVRecord(maxFieldBytes: Int = .max, maxFields: Int = .max) -> CSVRecord? {
        while true {
            guard peek() != nil else { return nil }
            let startLine = line
            var fields: [[UInt8]] = []
            var field: [UInt8] = []
            var atFieldStart = true
            var quotedAny = false

            func fail(_ reason: String) -> CSVRecord {
                .error(line: startLine, reason: reason)
            }

            reading: while true {
                guard let byte = next() else { break reading }
                if atFieldStart, byte == UInt8(ascii: "\"") {
                    quotedAny = true
                    atFieldStart = false
                    if let reason = readQuotedField(into: &field, maxFieldBytes: maxFieldBytes) { return fail(reason) }
                    continue reading
                }
                switch byte {
                case UInt8(ascii: ","):
                    fields.append(field)
                    field = []
                    atFieldStart = true
                    if fields.count >= maxFields { skipLine(); return fail("more than \(maxFields) fields") }
                case 0x0A, 0x0D:
                    finishNewline(byte)
                    break reading
                case UInt8(ascii: "\""):
                    skipLine()
                    return fail("quote inside an unquoted field (quote the whole field and write \"\")")
                default:
                    field.append(byte)
                    atFieldStart = false
                    if field.count > maxFieldBytes { skipLine(); return fail("a field longer than \(maxFieldBytes) bytes") }
                }
            }
            fields.append(field)
            if fields.count == 1, fields[0].isEmpty, !quotedAny { continue }  // blank line
            return .fields(fields, line: startLine)
        }
    }

    /// Reads the rest of a quoted field, its opening quote read, into `field`. Returns why the record cannot be read
    /// (its line skipped where the field ran too long or a character followed the closing quote), or nil.
    private mutating func readQuotedField(into field: inout [UInt8], maxFieldBytes: Int) -> String? {
        quoted: while true {
            guard let inner = next() else { return "unterminated quoted field" }
            if inner == UInt8(ascii: "\"") {
                if peek() == UInt8(ascii: "\"") {
                    _ = next(); field.append(inner)
                    if field.count > maxFieldBytes { skipLine(); return "a field longer than \(maxFieldBytes) bytes" }
                } else {
                    break quoted
                }
            } else {
                field.append(inner)
                if field.count > maxFieldBytes { skipLine(); return "a field longer than \(maxFieldBytes) bytes" }
                if ByteInput.isNewline(inner) {
                    if inner == 0x0D, peek() == 0x0A { field.append(0x0A) }
                    finishNewline(inner)
                }
            }
        }
        if let following = peek(), following != UInt8(ascii: ","), !ByteInput.isNewline(following) {
            skipLine()
            return "unexpected character after a closing quote (a quote inside a quoted field is written \"\")"
        }
        return nil
    }
}
