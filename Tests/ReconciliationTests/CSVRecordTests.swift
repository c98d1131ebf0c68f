import Testing
import TextFormats

/// The CSV reader over chunked bytes, table by table: what each input reads as (fields or error, and the line a record
/// starts on), the same however the input is cut into chunks.
@Suite struct CSVRecordTests {
    enum Read: Equatable {
        case fields([String], line: Int)
        case error(line: Int, String)
    }

    static func read(_ text: String, chunk: Int, maxFieldBytes: Int = .max, maxFields: Int = .max) -> [Read] {
        let bytes = Array(text.utf8)
        var offset = 0
        var input = ByteInput {
            guard offset < bytes.count else { return nil }
            defer { offset += chunk }
            return Array(bytes[offset..<min(offset + chunk, bytes.count)])
        }
        var out: [Read] = []
        var fields = CSVFields()
        while let read = input.readCSVRecord(into: &fields, maxFieldBytes: maxFieldBytes, maxFields: maxFields) {
            switch read {
            case let .record(line): out.append(.fields((0..<fields.count).map { String(decoding: fields[$0], as: UTF8.self) }, line: line))
            case let .error(line, reason): out.append(.error(line: line, reason))
            }
        }
        return out
    }

    static let cases: [(String, [Read])] = [
        ("a,b,c\n", [.fields(["a", "b", "c"], line: 1)]),
        ("a,b\r\nc,d", [.fields(["a", "b"], line: 1), .fields(["c", "d"], line: 2)]),
        ("a\rb\n\n\nc", [.fields(["a"], line: 1), .fields(["b"], line: 2), .fields(["c"], line: 5)]),
        (",,\n", [.fields(["", "", ""], line: 1)]),
        ("\"\"\n", [.fields([""], line: 1)]),
        ("\"x,y\",\"say \"\"hi\"\"\",z\n", [.fields(["x,y", "say \"hi\"", "z"], line: 1)]),
        ("\"two\r\nlines\",b\nc\n", [.fields(["two\r\nlines", "b"], line: 1), .fields(["c"], line: 3)]),
        (
            "\"a\"x,b\nc\n",
            [
                .error(line: 1, "unexpected character after a closing quote (a quote inside a quoted field is written \"\")"),
                .fields(["c"], line: 2)
            ]
        ),
        (
            "ab\"c,d\ne\n",
            [.error(line: 1, "quote inside an unquoted field (quote the whole field and write \"\")"), .fields(["e"], line: 2)]
        ),
        ("a,\"never closed\n", [.error(line: 1, "unterminated quoted field")]),
        ("\"SB\",CAP1,2026/11/30 01:01:01 +0000,\"\"\r\n", [.fields(["SB", "CAP1", "2026/11/30 01:01:01 +0000", ""], line: 1)])
    ]

    @Test(arguments: [1, 2, 3, 5, 64])
    func eachInputReadsTheSameInAnyChunks(chunk: Int) {
        for (text, expected) in Self.cases {
            #expect(Self.read(text, chunk: chunk) == expected, "\(text.debugDescription) in chunks of \(chunk)")
        }
    }

    @Test(arguments: [1, 4, 64])
    func aFieldTooLongIsAnErrorAndTheNextLineReads(chunk: Int) {
        for text in ["abcdefgh,x\nok\n", "\"abcdefgh\",x\nok\n", "\"abc\"\"defgh\",x\nok\n"] {
            #expect(
                Self.read(text, chunk: chunk, maxFieldBytes: 6) == [
                    .error(line: 1, "a field longer than 6 bytes"), .fields(["ok"], line: 2)
                ], "\(text.debugDescription) in chunks of \(chunk)")
        }
        #expect(Self.read("abcdef,x\n", chunk: chunk, maxFieldBytes: 6) == [.fields(["abcdef", "x"], line: 1)])
        // A line break inside a quoted field that takes it past the limit: the error, then the next line as it is.
        for text in ["\"ab\r\nok\r\n", "\"ab\nok\n"] {
            #expect(
                Self.read(text, chunk: chunk, maxFieldBytes: 2) == [
                    .error(line: 1, "a field longer than 2 bytes"), .fields(["ok"], line: 2)
                ],
                "\(text.debugDescription) in chunks of \(chunk)")
        }
    }

    @Test func tooManyFieldsIsAnErrorAndTheNextLineReads() {
        #expect(
            Self.read("a,b,c\nd,e,f,g\nh\n", chunk: 3, maxFields: 3) == [
                .fields(["a", "b", "c"], line: 1), .error(line: 2, "more than 3 fields"), .fields(["h"], line: 3)
            ])
    }

    /// The arrays form, which order files read, is the same records.
    @Test func theArraysFormReadsTheSame() {
        for (text, expected) in Self.cases {
            var input = ByteInput(Array(text.utf8))
            var got: [Read] = []
            while let record = input.readCSVRecord() {
                switch record {
                case let .fields(f, line): got.append(.fields(f.map { String(decoding: $0, as: UTF8.self) }, line: line))
                case let .error(line, reason): got.append(.error(line: line, reason))
                }
            }
            #expect(got == expected, "\(text.debugDescription)")
        }
    }
}
