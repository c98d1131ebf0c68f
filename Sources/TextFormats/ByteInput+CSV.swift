// RFC 4180 CSV records over chunked bytes: order files and providers' report files read them alike.

/// One CSV record read into buffers that are kept from record to record: its fields' bytes back to back, and where
/// each field ends. Reading a million-row file allocates nothing per field (a field is a slice of `bytes`).
public struct CSVFields: Sendable {
    public internal(set) var bytes: [UInt8] = []
    /// The end of each field in `bytes`: field `i` is `bytes[ends[i - 1] ..< ends[i]]` (from 0 for the first).
    public internal(set) var ends: [Int] = []

    public init() {}

    public var count: Int { ends.count }

    public subscript(i: Int) -> ArraySlice<UInt8> { bytes[(i == 0 ? 0 : ends[i - 1])..<ends[i]] }

    /// The fields as arrays of their own (the arrays form of `readCSVRecord`).
    var arrays: [[UInt8]] { (0..<count).map { Array(self[$0]) } }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    mutating func endField() { ends.append(bytes.count) }

    /// Bytes of the field being read.
    var openFieldCount: Int { bytes.count - (ends.last ?? 0) }
}

extension ByteInput {
    public enum CSVRecord: Sendable {
        case fields([[UInt8]], line: Int)
        /// A record that cannot be read (the rest of its line is skipped): its first line and why.
        case error(line: Int, reason: String)
    }

    /// How reading one record into ``CSVFields`` went.
    public enum CSVRead: Sendable, Equatable {
        /// The record starting on this line is in the fields.
        case record(line: Int)
        /// A record that cannot be read (the rest of its line is skipped): its first line and why.
        case error(line: Int, reason: String)
    }

    /// The next record (blank lines skipped), or nil at the end of the input, as arrays of bytes.
    /// ``readCSVRecord(into:maxFieldBytes:maxFields:)`` reads the same without an allocation per field.
    public mutating func readCSVRecord(maxFieldBytes: Int = .max, maxFields: Int = .max) -> CSVRecord? {
        var fields = CSVFields()
        switch readCSVRecord(into: &fields, maxFieldBytes: maxFieldBytes, maxFields: maxFields) {
        case nil: return nil
        case let .record(line): return .fields(fields.arrays, line: line)
        case let .error(line, reason): return .error(line: line, reason: reason)
        }
    }

    /// Reads the next record (blank lines skipped) into `fields`, or returns nil at the end of the input. A field is its
    /// raw bytes (quotes removed, `""` as one quote); a quoted field may hold line breaks. A field longer than
    /// `maxFieldBytes` or a record of more than `maxFields` fields is an error (the rest of its line skipped), so a
    /// hostile file cannot make one record fill the memory.
    public mutating func readCSVRecord(into fields: inout CSVFields, maxFieldBytes: Int = .max, maxFields: Int = .max) -> CSVRead? {
        while true {
            guard peek() != nil else { return nil }
            let startLine = line
            fields.removeAll()
            var quotedAny = false
            func fail(_ reason: String) -> CSVRead { .error(line: startLine, reason: reason) }

            reading: while true {
                // At the start of a field.
                if peek() == UInt8(ascii: "\"") {
                    index += 1
                    quotedAny = true
                    if let reason = readQuotedField(into: &fields, maxFieldBytes: maxFieldBytes) { return fail(reason) }
                } else {
                    let stop = appendRun(to: &fields, quoted: false, maxFieldBytes: maxFieldBytes)
                    if fields.openFieldCount > maxFieldBytes { skipLine(); return fail("a field longer than \(maxFieldBytes) bytes") }
                    if stop == UInt8(ascii: "\"") {
                        skipLine()
                        return fail("quote inside an unquoted field (quote the whole field and write \"\")")
                    }
                }
                fields.endField()
                // After a field: a comma, a line break, or the end of the input.
                guard let byte = next() else { break reading }
                if byte == UInt8(ascii: ",") {
                    if fields.count >= maxFields { skipLine(); return fail("more than \(maxFields) fields") }
                    continue reading
                }
                finishNewline(byte)
                break reading
            }
            if fields.count == 1, fields.ends[0] == 0, !quotedAny { continue }  // blank line
            return .record(line: startLine)
        }
    }

    /// Reads the rest of a quoted field, its opening quote read, into the open field of `fields`. Returns why the
    /// record cannot be read (its line skipped where the field ran too long or a character followed the closing
    /// quote), or nil.
    private mutating func readQuotedField(into fields: inout CSVFields, maxFieldBytes: Int) -> String? {
        while true {
            let stop = appendRun(to: &fields, quoted: true, maxFieldBytes: maxFieldBytes)
            if fields.openFieldCount > maxFieldBytes { skipLine(); return "a field longer than \(maxFieldBytes) bytes" }
            guard let stop else { return "unterminated quoted field" }
            index += 1
            if stop == UInt8(ascii: "\"") {
                guard peek() == UInt8(ascii: "\"") else { break }
                index += 1
                fields.bytes.append(stop)
                if fields.openFieldCount > maxFieldBytes { skipLine(); return "a field longer than \(maxFieldBytes) bytes" }
            } else {
                // A line break inside the field is the field's; a CRLF stays one. One that takes the field past the
                // limit ends the line the error skips: the next line is read as it is.
                fields.bytes.append(stop)
                let tooLong = fields.openFieldCount > maxFieldBytes
                if !tooLong, stop == 0x0D, peek() == 0x0A { fields.bytes.append(0x0A) }
                finishNewline(stop)
                if tooLong { return "a field longer than \(maxFieldBytes) bytes" }
            }
        }
        if let following = peek(), following != UInt8(ascii: ","), !ByteInput.isNewline(following) {
            skipLine()
            return "unexpected character after a closing quote (a quote inside a quoted field is written \"\")"
        }
        return nil
    }

    /// Appends bytes to the open field up to the next quote or line break (and, outside quotes, comma), which is
    /// returned and not consumed; nil at the end of the input. Runs over whole chunks: the bytes between two special
    /// ones are copied at once. Stops early once the field is longer than `maxFieldBytes` (at most a chunk past it).
    private mutating func appendRun(to fields: inout CSVFields, quoted: Bool, maxFieldBytes: Int) -> UInt8? {
        while true {
            guard peek() != nil else { return nil }
            let (end, stop) = scan(quoted: quoted)
            fields.bytes.append(contentsOf: chunkBytes(index..<end))
            index = end
            if let stop { return stop }
            if fields.openFieldCount > maxFieldBytes { return peek() }
        }
    }
}
