import TextFormats

// JSON Lines for order files: one object per line, scalar values kept as written (numbers as their literal text).

extension OrderFileReader {
    mutating func nextJSONLine() -> OrderFileRecord? {
        while true {
            guard input.peek() != nil else { return nil }
            let line = input.line
            var bytes: [UInt8] = []
            while let byte = input.next() {
                if ByteInput.isNewline(byte) { input.finishNewline(byte); break }
                bytes.append(byte)
                if bytes.count > OrderFile.maxLineBytes {
                    input.skipLine()  // a hostile file cannot make one line fill the memory
                    return .invalid([OrderFileError(line: line, field: "", reason: "a line longer than \(OrderFile.maxLineBytes) bytes")])
                }
            }
            if bytes.allSatisfy(OrderFile.isBlank) { continue }
            return record(line: line, bytes: bytes)
        }
    }

    private mutating func record(line: Int, bytes: [UInt8]) -> OrderFileRecord {
        guard String(validating: bytes, as: UTF8.self) != nil else {
            return .invalid([OrderFileError(line: line, field: "", reason: "not valid UTF-8")])
        }
        var parser = JSONLineParser(bytes: bytes)
        let members: [(key: String, value: RawValue)]
        do {
            members = try parser.parseLine()
        } catch {
            return .invalid([OrderFileError(line: line, field: "", reason: error.description)])
        }
        var values: [String: RawValue] = [:]
        var errors: [OrderFileError] = []
        for (key, value) in members {
            if !OrderFile.knownFields.contains(key) {
                if readPast(key) { continue }
                errors.append(
                    OrderFileError(
                        line: line, field: key, reason: "unknown key" + (Self.nearMiss(key).map { "; did you mean \($0)?" } ?? "")))
            } else if values[key] != nil {
                errors.append(OrderFileError(line: line, field: key, reason: "repeated key"))
            } else {
                values[key] = value
            }
        }
        guard errors.isEmpty else { return .invalid(errors) }
        return validator.validate(line: line, values: values)
    }
}

struct JSONSyntaxError: Error, CustomStringConvertible {
    var reason: String
    /// 1-based byte column.
    var column: Int
    var description: String { "invalid JSON at column \(column): \(reason)" }
}

/// A small RFC 8259 parser for one line holding one object. Top-level values are kept as `RawValue`; nested
/// objects and arrays are checked for syntax and reported as wrong types.
struct JSONLineParser {
    let bytes: [UInt8]
    var index = 0
    static let maxDepth = 32

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseLine() throws(JSONSyntaxError) -> [(key: String, value: RawValue)] {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{") else { throw fail("expected an object") }
        index += 1
        var members: [(key: String, value: RawValue)] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try parseString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: 1)
                members.append((key, value))
                skipWhitespace()
                guard let byte = peek() else { throw fail("unterminated object") }
                index += 1
                if byte == UInt8(ascii: "}") { break }
                guard byte == UInt8(ascii: ",") else { index -= 1; throw fail("expected ',' or '}'") }
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the object") }
        return members
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ reason: String, at i: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(reason: reason, column: (i ?? index) + 1)
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), OrderFile.isBlank(byte) { index += 1 }
    }

    private mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> RawValue {
        guard depth <= JSONLineParser.maxDepth else { throw fail("nested too deeply") }
        guard let byte = peek() else { throw fail("expected a value") }
        switch byte {
        case UInt8(ascii: "\""):
            return .text(try parseString())
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try skipContainer(depth: depth)
            return .wrongType(byte == UInt8(ascii: "{") ? "an object" : "an array")
        case UInt8(ascii: "t"): try literal("true"); return .wrongType("true")
        case UInt8(ascii: "f"): try literal("false"); return .wrongType("false")
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = index
            while let next = peek(), Self.isNumberByte(next) { index += 1 }
            let literal = bytes[start..<index]
            do {
                _ = try DecimalText(parsing: Array(literal), json: true)
            } catch {
                index = start
                throw fail("invalid number (\(error))")
            }
            return .number(String(decoding: literal, as: UTF8.self))
        default:
            throw fail("unexpected character")
        }
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
            UInt8(ascii: "e"), UInt8(ascii: "E"):
            true
        default: false
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected)
        else { throw fail("unexpected character") }
        index += expected.count
    }

    private mutating func skipContainer(depth: Int) throws(JSONSyntaxError) {
        let close = bytes[index] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
        let isObject = close == UInt8(ascii: "}")
        index += 1
        skipWhitespace()
        if peek() == close { index += 1; return }
        while true {
            skipWhitespace()
            if isObject {
                guard peek() == UInt8(ascii: "\"") else { throw fail("expected a key") }
                _ = try parseString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
            }
            _ = try parseValue(depth: depth + 1)
            skipWhitespace()
            guard let byte = peek() else { throw fail("unterminated \(isObject ? "object" : "array")") }
            index += 1
            if byte == close { return }
            guard byte == UInt8(ascii: ",") else { index -= 1; throw fail("expected ',' or a closing bracket") }
        }
    }

    /// A string at `index` (on its opening quote), escapes decoded.
    private mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard let byte = peek() else { throw fail("unterminated string") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                do throws(JSONEscapeError) {
                    index = try JSONEscape.decode(bytes, backslash: index - 1, into: &out)
                } catch {
                    throw fail(Self.reason(error.kind), at: error.index)
                }
            case 0x00..<0x20:
                index -= 1
                throw fail("control character in a string")
            default:
                out.append(byte)
            }
        }
    }

    private static func reason(_ kind: JSONEscapeError.Kind) -> String {
        switch kind {
        case .endOfInput: "unterminated string"
        case .invalidEscape: "invalid escape"
        case .truncatedHex, .invalidHexDigit, .invalidCodePoint: "invalid \\u escape"
        case .loneHighSurrogate, .highSurrogateWithoutLow, .loneLowSurrogate: "lone surrogate"
        }
    }
}
