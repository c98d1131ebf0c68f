// ExactJSON: a small strict RFC 8259 parser and serializer that never turns a number into a Double.
//
// Provider answers carry money as JSON numbers (PXP `"transactionValue": 50.05`) or decimal strings (PayPal
// `"value": "100.00"`). Foundation's JSONSerialization goes through Double, so `12345678901234.56` would come back
// changed; here a number stays the literal text it was sent as, and `minorUnits(exponent:)` converts it exactly.

/// A JSON document. Objects keep their members in document order; numbers keep their literal text.
public enum JSONValue: Sendable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    /// The number exactly as written (JSON number grammar), e.g. `"50.05"`, `"-0"`, `"1e3"`.
    case number(String)
    case bool(Bool)
    case null
}

// MARK: - Lookup

extension JSONValue {
    /// The member named `key` of an object (nil for a missing key or a value that is not an object).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.0 == key })?.1
    }

    /// The element at `index` of an array (nil when out of range or not an array).
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The literal text, when this is a number.
    public var numberLiteral: String? {
        if case .number(let s) = self { return s }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectMembers: [(String, JSONValue)]? {
        if case .object(let m) = self { return m }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension JSONValue: Equatable {
    /// Structural equality; object members compare in order, numbers by their literal text.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.array(let a), .array(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        default: return false
        }
    }
}

// MARK: - Errors

/// Why a document was rejected, with the byte offset where the problem was found.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public init(offset: Int, reason: String) { self.offset = offset; self.reason = reason }
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// Why a decimal could not be turned into minor units.
public struct DecimalAmountError: Error, Sendable, Equatable, CustomStringConvertible {
    public let literal: String
    public let reason: String
    public init(literal: String, reason: String) { self.literal = literal; self.reason = reason }
    public var description: String { "amount \"\(literal)\": \(reason)" }
}

// MARK: - Parsing

extension JSONValue {
    /// Limits that keep a hostile document from costing much.
    public struct ParseLimits: Sendable {
        /// Deepest nesting of arrays and objects.
        public var maxDepth: Int
        /// Largest document, in bytes.
        public var maxBytes: Int
        /// Longest number literal, in bytes.
        public var maxNumberLength: Int
        public init(maxDepth: Int = 64, maxBytes: Int = 16 << 20, maxNumberLength: Int = 256) {
            self.maxDepth = maxDepth; self.maxBytes = maxBytes; self.maxNumberLength = maxNumberLength
        }
        public static let `default` = ParseLimits()
    }

    /// Parses one JSON text (RFC 8259, strict): no trailing commas, comments, BOM, leading zeros, lone surrogates,
    /// invalid UTF-8, unescaped control characters or duplicate object keys (a document whose duplicate keys two
    /// parsers could read differently is refused rather than guessed at).
    public static func parse(_ bytes: [UInt8], limits: ParseLimits = .default) throws(JSONParseError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw JSONParseError(offset: 0, reason: "document of \(bytes.count) bytes exceeds the limit of \(limits.maxBytes)")
        }
        var parser = ExactJSONParser(bytes: bytes, limits: limits)
        return try parser.parseDocument()
    }

    /// Parses UTF-8 text.
    public static func parse(_ text: String, limits: ParseLimits = .default) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }
}

private struct ExactJSONParser {
    let bytes: [UInt8]
    let limits: JSONValue.ParseLimits
    var pos = 0

    init(bytes: [UInt8], limits: JSONValue.ParseLimits) { self.bytes = bytes; self.limits = limits }

    func fail(_ reason: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? pos, reason: reason)
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard pos < bytes.count else { throw fail("empty document") }
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard pos == bytes.count else { throw fail("unexpected \(describe(bytes[pos])) after the top-level value") }
        return value
    }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x" + String(byte, radix: 16, uppercase: true)
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard pos < bytes.count else { throw fail("unexpected end of document, expected a value") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected \(describe(bytes[pos])), expected a value")
        }
    }

    mutating func expectWord(_ word: String) throws(JSONParseError) {
        let start = pos
        for b in word.utf8 {
            guard pos < bytes.count, bytes[pos] == b else { throw fail("invalid literal, expected \(word)", at: start) }
            pos += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= limits.maxDepth else { throw fail("nesting deeper than \(limits.maxDepth)") }
        pos += 1  // {
        var members: [(String, JSONValue)] = []
        // Duplicate names: a linear scan while the object is small (no hashing, no allocation: the usual webhook
        // or API object), a set once it grows.
        var seen: Set<String>? = nil
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of document inside an object") }
            guard bytes[pos] == UInt8(ascii: "\"") else { throw fail("unexpected \(describe(bytes[pos])), expected a member name") }
            let keyOffset = pos
            let key = try parseString()
            let duplicate: Bool
            if seen != nil {
                duplicate = !seen!.insert(key).inserted
            } else if members.count < 16 {
                duplicate = members.contains(where: { $0.0 == key })
            } else {
                seen = Set(members.lazy.map(\.0))
                duplicate = !seen!.insert(key).inserted
            }
            guard !duplicate else { throw fail("duplicate member name \"\(key)\"", at: keyOffset) }
            skipWhitespace()
            guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':' after a member name") }
            pos += 1
            skipWhitespace()
            members.append((key, try parseValue(depth: depth)))
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of document inside an object") }
            switch bytes[pos] {
            case UInt8(ascii: ","): pos += 1
            case UInt8(ascii: "}"): pos += 1; return .object(members)
            default: throw fail("unexpected \(describe(bytes[pos])), expected ',' or '}'")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= limits.maxDepth else { throw fail("nesting deeper than \(limits.maxDepth)") }
        pos += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "]") { pos += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard pos < bytes.count else { throw fail("unexpected end of document inside an array") }
            switch bytes[pos] {
            case UInt8(ascii: ","): pos += 1
            case UInt8(ascii: "]"): pos += 1; return .array(elements)
            default: throw fail("unexpected \(describe(bytes[pos])), expected ',' or ']'")
            }
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = pos
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("a number needs a digit after '-'", at: start) }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < bytes.count, isDigit(bytes[pos]) { throw fail("leading zero in a number", at: start) }
        } else {
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("a number needs digits after '.'") }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            pos += 1
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("a number needs digits in its exponent") }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        guard pos - start <= limits.maxNumberLength else {
            throw fail("number literal longer than \(limits.maxNumberLength) characters", at: start)
        }
        return String(decoding: bytes[start..<pos], as: UTF8.self)
    }

    mutating func parseString() throws(JSONParseError) -> String {
        pos += 1  // opening quote
        // Fast path: a string without escapes (nearly all) becomes a String straight from the input bytes.
        let start = pos
        while pos < bytes.count {
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                pos += 1
                return String(decoding: bytes[start..<pos - 1], as: UTF8.self)  // UTF-8 checked while scanning
            } else if b == UInt8(ascii: "\\") {
                break
            } else if b < 0x20 {
                throw fail("unescaped control character in a string")
            } else if b < 0x80 {
                pos += 1
            } else {
                pos += try utf8SequenceLength(at: pos)
            }
        }
        // Slow path from the first escape (or the end, which fails below as unterminated).
        var out = Array(bytes[start..<pos])
        while true {
            guard pos < bytes.count else { throw fail("unterminated string") }
            let b = bytes[pos]
            switch b {
            case UInt8(ascii: "\""):
                pos += 1
                return String(decoding: out, as: UTF8.self)  // `out` is validated UTF-8
            case UInt8(ascii: "\\"):
                do throws(JSONEscapeError) {
                    pos = try JSONEscape.decode(bytes, backslash: pos, into: &out)
                } catch {
                    throw escapeFailure(error, backslash: pos)
                }
                // `\u0000` (the only way a NUL gets in: a raw one fails above) becomes U+FFFD. PostgreSQL's text and
                // jsonb hold no NUL, so one in a provider's id, state or reference failed every statement naming it
                // (a PXP alias: that order's check, on every sweep); as U+FFFD it is stored and compared as read.
                if out.last == 0 { out.removeLast(); out.append(contentsOf: [0xEF, 0xBF, 0xBD]) }
            case 0x00..<0x20:
                throw fail("unescaped control character in a string")
            case 0x20..<0x80:
                out.append(b); pos += 1
            default:
                let n = try utf8SequenceLength(at: pos)
                out.append(contentsOf: bytes[pos..<pos + n])
                pos += n
            }
        }
    }

    func escapeFailure(_ error: JSONEscapeError, backslash: Int) -> JSONParseError {
        switch error.kind {
        case .endOfInput: fail("unterminated escape", at: error.index)
        case .invalidEscape: fail("invalid escape \\\(describe(bytes[error.index]))", at: backslash)
        case .truncatedHex: fail("truncated \\u escape", at: error.index)
        case .invalidHexDigit: fail("invalid hex digit in \\u escape", at: error.index)
        case .loneHighSurrogate: fail("lone high surrogate", at: backslash)
        case .highSurrogateWithoutLow: fail("high surrogate without a low surrogate", at: backslash)
        case .loneLowSurrogate: fail("lone low surrogate", at: backslash)
        case .invalidCodePoint: fail("invalid code point", at: backslash)
        }
    }

    /// Length of the well-formed UTF-8 sequence starting at `i` (Unicode Table 3-7), or an error.
    func utf8SequenceLength(at i: Int) throws(JSONParseError) -> Int {
        let b0 = bytes[i]
        func cont(_ k: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            i + k < bytes.count && range.contains(bytes[i + k])
        }
        switch b0 {
        case 0xC2...0xDF where cont(1): return 2
        case 0xE0 where cont(1, 0xA0...0xBF) && cont(2): return 3
        case 0xE1...0xEC where cont(1) && cont(2), 0xEE...0xEF where cont(1) && cont(2): return 3
        case 0xED where cont(1, 0x80...0x9F) && cont(2): return 3
        case 0xF0 where cont(1, 0x90...0xBF) && cont(2) && cont(3): return 4
        case 0xF1...0xF3 where cont(1) && cont(2) && cont(3): return 4
        case 0xF4 where cont(1, 0x80...0x8F) && cont(2) && cont(3): return 4
        default: throw fail("invalid UTF-8 in a string", at: i)
        }
    }
}

// MARK: - Serializing

extension JSONValue {
    /// Compact UTF-8 JSON: members in order, no whitespace, numbers as their literal text.
    /// A `.number` must hold a valid JSON number literal (build amounts with `decimal(minorUnits:exponent:)`);
    /// anything else is a programming error and traps rather than send a malformed body.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    private func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .number(let literal):
            precondition(JSONValue.isValidNumberLiteral(literal), "JSONValue.number holds an invalid literal")
            out.append(contentsOf: Array(literal.utf8))
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                e.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (k, v)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(k, into: &out)
                out.append(UInt8(ascii: ":"))
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `s` as a JSON string literal (RFC 8259 escaping, `\u00xx` for other control characters). Strings
    /// that need no escaping, nearly all, are copied whole.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            guard bytes.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else {
                out.append(contentsOf: bytes)
                return
            }
            let hex = Array("0123456789abcdef".utf8)
            for b in bytes {
                switch b {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x00..<0x20:
                    out.append(contentsOf: Array("\\u00".utf8))
                    out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
                default: out.append(b)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// True when `literal` matches the JSON number grammar exactly.
    public static func isValidNumberLiteral(_ literal: String) -> Bool {
        var parser = ExactJSONParser(bytes: Array(literal.utf8), limits: .default)
        guard !parser.bytes.isEmpty else { return false }
        guard let first = parser.bytes.first, first == UInt8(ascii: "-") || (first >= 0x30 && first <= 0x39) else { return false }
        guard (try? parser.parseNumber()) != nil else { return false }
        return parser.pos == parser.bytes.count
    }
}

// MARK: - Exact money

extension JSONValue {
    /// The amount in minor units, for a number or a decimal string (PayPal sends `"100.00"`), exactly.
    ///
    /// Accepted: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`. Exponent notation (`1e3`) is refused — no provider writes money that
    /// way and it invites imprecision. More decimals than `exponent` are accepted only when the extra digits are
    /// zeros (`29.990` for USD is exactly 2999; `50.051` is an error): providers render numbers their own way and a
    /// trailing zero does not change the value.
    public func minorUnits(exponent: Int) throws(DecimalAmountError) -> Int64 {
        switch self {
        case .number(let s), .string(let s): return try JSONValue.minorUnits(literal: s, exponent: exponent)
        default: throw DecimalAmountError(literal: "\(self.kindName)", reason: "not a number or decimal string")
        }
    }

    var kindName: String {
        switch self {
        case .object: "object"
        case .array: "array"
        case .string: "string"
        case .number: "number"
        case .bool: "boolean"
        case .null: "null"
        }
    }

    /// Exact decimal text → minor units for a currency with `exponent` decimals. See `minorUnits(exponent:)`.
    public static func minorUnits(literal: String, exponent: Int) throws(DecimalAmountError) -> Int64 {
        precondition(exponent >= 0 && exponent <= 18, "currency exponent out of range")
        func fail(_ reason: String) -> DecimalAmountError { DecimalAmountError(literal: literal, reason: reason) }
        var bytes = Array(literal.utf8)[...]
        guard !bytes.isEmpty else { throw fail("empty") }
        if bytes.contains(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            throw fail("exponent notation is not accepted for money")
        }
        var negative = false
        if bytes.first == UInt8(ascii: "-") { negative = true; bytes = bytes.dropFirst() }
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        let intPart = parts[0]
        let fracPart = parts.count > 1 ? parts[1] : [][...]
        func allDigits<C: Collection<UInt8>>(_ c: C) -> Bool { c.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard !intPart.isEmpty, allDigits(intPart) else { throw fail("not a decimal number") }
        guard parts.count == 1 || (!fracPart.isEmpty && allDigits(fracPart)) else { throw fail("not a decimal number") }
        guard intPart.count == 1 || intPart.first != UInt8(ascii: "0") else { throw fail("leading zero") }
        let significant = fracPart.prefix(exponent)
        if fracPart.dropFirst(exponent).contains(where: { $0 != UInt8(ascii: "0") }) {
            throw fail("more than \(exponent) decimal\(exponent == 1 ? "" : "s")")
        }
        var value: Int64 = 0
        let digits = Array(intPart) + Array(significant) + Array(repeating: UInt8(ascii: "0"), count: exponent - significant.count)
        for d in digits {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(d - 0x30))
            guard !o1, !o2 else { throw fail("too large") }
            value = a
        }
        return negative ? -value : value
    }

    /// A number literal for `minorUnits` with exactly `exponent` decimals: 2499/2 → `24.99`, 1000/0 → `1000`,
    /// 1250/3 → `1.250`.
    public static func decimal(minorUnits: Int64, exponent: Int) -> JSONValue {
        .number(decimalString(minorUnits: minorUnits, exponent: exponent))
    }

    /// The decimal text for `minorUnits` with exactly `exponent` decimals (`"24.99"`, `"1000"`, `"1.250"`, `"-0.05"`).
    public static func decimalString(minorUnits: Int64, exponent: Int) -> String {
        precondition(exponent >= 0 && exponent <= 18, "currency exponent out of range")
        let negative = minorUnits < 0
        let magnitude = minorUnits.magnitude  // UInt64: Int64.min is fine
        var digits = String(magnitude)
        if exponent > 0 {
            if digits.count <= exponent { digits = String(repeating: "0", count: exponent - digits.count + 1) + digits }
            digits.insert(".", at: digits.index(digits.endIndex, offsetBy: -exponent))
        }
        return negative ? "-" + digits : digits
    }
}
