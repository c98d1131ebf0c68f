/// HTTP header fields with case-insensitive name lookup (names compare ASCII-case-insensitively, as HTTP says).
/// When a name repeats, `subscript` answers the first value; `values(_:)` answers all of them.
public struct Headers: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order given, names as received.
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    public init(_ dictionary: [String: String]) {
        self.fields = dictionary.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of `name`, any case; nil when absent.
    public subscript(_ name: String) -> String? {
        let key = Headers.fold(name)
        return fields.first { Headers.fold($0.name) == key }?.value
    }

    /// Every value of `name`, any case, in order.
    public func values(_ name: String) -> [String] {
        let key = Headers.fold(name)
        return fields.filter { Headers.fold($0.name) == key }.map(\.value)
    }

    /// The value of `name` with surrounding whitespace removed; nil when absent or empty.
    public func nonEmpty(_ name: String) -> String? {
        guard let value = self[name]?.trimmingASCIIWhitespace(), !value.isEmpty else { return nil }
        return value
    }

    /// Adds a field.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field named `name` (any case) with one field; removes them when `value` is nil.
    public mutating func set(_ name: String, _ value: String?) {
        let key = Headers.fold(name)
        fields.removeAll { Headers.fold($0.name) == key }
        if let value { fields.append((name: name, value: value)) }
    }

    public func makeIterator() -> AnyIterator<(name: String, value: String)> {
        AnyIterator(fields.makeIterator())
    }

    public static func == (a: Headers, b: Headers) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields { hasher.combine(field.name); hasher.combine(field.value) }
    }

    private static func fold(_ name: String) -> String {
        String(decoding: name.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
    }
}

extension String {
    func trimmingASCIIWhitespace() -> String {
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d }
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
