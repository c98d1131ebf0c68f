// A small JSON value that keeps number literals as text and object members in order.
//
// Why not JSONSerialization: it turns `24.99` into a Double (money must never pass through Double) and cannot
// print `20.00` as a number literal with the currency's digits, which PXP's `transactionValue` needs.

/// A JSON value. Numbers are kept as their literal text; objects keep member order (first match wins on lookup).
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([JSONMember])

    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var numberLiteral: String? { if case .number(let n) = self { return n } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: [JSONMember]? { if case .object(let o) = self { return o } else { return nil } }
    public var isNull: Bool { self == .null }

    /// A number or a string holding a decimal, as text (for amounts given either way).
    public var decimalText: String? {
        switch self {
        case .number(let n): return n
        case .string(let s): return s
        default: return nil
        }
    }

    /// An integer (number literal without fraction or exponent, or such a string).
    public var int64Value: Int64? {
        switch self {
        case .number(let n), .string(let n): return Int64(n)
        default: return nil
        }
    }

    /// An object built from ordered pairs; `nil` values are left out.
    public static func obj(_ pairs: KeyValuePairs<String, JSON?>) -> JSON {
        .object(pairs.compactMap { key, value in value.map { JSONMember(key: key, value: $0) } })
    }

    /// A copy with `key` set (replaced in place when present, appended otherwise).
    public func setting(_ key: String, _ value: JSON) -> JSON {
        guard case .object(var members) = self else { return self }
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].value = value
        } else {
            members.append(JSONMember(key: key, value: value))
        }
        return .object(members)
    }
}

public struct JSONMember: Sendable, Equatable {
    public var key: String
    public var value: JSON
    public init(key: String, value: JSON) { self.key = key; self.value = value }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
}

// MARK: - Serializing

extension JSON {
    /// Compact UTF-8 JSON text.
    public var bytes: [UInt8] { Array(text.utf8) }

    public var text: String {
        var out = ""
        out.reserveCapacity(256)
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                JSON.writeString(member.key, into: &out)
                out += ":"
                member.value.write(into: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

// MARK: - Parsing

public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSON {
    /// Parses one JSON text (RFC 8259); surrounding whitespace allowed, anything else after it is an error.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSON {
        var parser = JSONParser(bytes: bytes)
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("trailing characters") }
        return value
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSON { try parse(Array(text.utf8)) }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    static let maxDepth = 256

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard depth < JSONParser.maxDepth else { throw error("nested too deeply") }
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character")
        }
    }

    mutating func expectWord(_ word: String) throws(JSONParseError) {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count, bytes[index..<(index + expected.count)].elementsEqual(expected)
        else { throw error("invalid literal") }
        index += expected.count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSON {
        index += 1
        var members: [JSONMember] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            let value = try parseValue(depth: depth + 1)
            members.append(JSONMember(key: key, value: value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSON {
        index += 1
        var items: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            items.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case 0x30...0x39: digit = UInt32(b - 0x30)
            case 0x41...0x46: digit = UInt32(b - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(b - 0x61 + 10)
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var runStart = index
        var out = ""
        func flushRun(_ end: Int) {
            if end > runStart { out += String(decoding: bytes[runStart..<end], as: UTF8.self) }
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                flushRun(index)
                index += 1
                return out
            }
            if b < 0x20 { throw error("control character in string") }
            if b == UInt8(ascii: "\\") {
                flushRun(index)
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out += "\""
                case UInt8(ascii: "\\"): out += "\\"
                case UInt8(ascii: "/"): out += "/"
                case UInt8(ascii: "b"): out += "\u{08}"
                case UInt8(ascii: "f"): out += "\u{0C}"
                case UInt8(ascii: "n"): out += "\n"
                case UInt8(ascii: "r"): out += "\r"
                case UInt8(ascii: "t"): out += "\t"
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("lone surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid surrogate pair") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw error("lone surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("invalid code point") }
                    out.unicodeScalars.append(scalar)
                default:
                    throw error("invalid escape")
                }
                runStart = index
                continue
            }
            index += 1
        }
    }
}
