/// HTTP header fields in the order they were received, with case-insensitive lookup.
///
/// `headers["paypal-transmission-id"]` finds `PAYPAL-TRANSMISSION-ID`. Repeated fields are kept;
/// the subscript returns the first, `values(for:)` all of them.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as (name, value) pairs, in order.
    public private(set) var pairs: [(name: String, value: String)]

    public init() { pairs = [] }

    public init(_ pairs: [(String, String)]) {
        self.pairs = pairs.map { (name: $0.0, value: $0.1) }
    }

    /// From a dictionary (a `--headers` file, a test): fields in name order.
    public init(_ dictionary: [String: String]) {
        self.pairs = dictionary.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field `name` (ASCII case-insensitive, as HTTP says), or nil.
    public subscript(name: String) -> String? {
        pairs.first { Self.sameName($0.name, name) }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        pairs.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// The value of `name` with surrounding whitespace removed; nil when absent or empty.
    public func nonEmpty(_ name: String) -> String? {
        guard let value = self[name] else { return nil }
        let bytes = Array(value.utf8)
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d }
        var start = 0, end = bytes.count
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        return start == end ? nil : String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// Replaces every field named `name` (any case) with one field; removes them when `value` is nil.
    public mutating func set(_ name: String, _ value: String?) {
        pairs.removeAll { Self.sameName($0.name, name) }
        if let value { pairs.append((name: name, value: value)) }
    }

    /// Whether a field called `name` is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        pairs.append((name: name, value: value))
    }

    /// Replaces every field called `name` with one field.
    public mutating func replace(_ name: String, _ value: String) { set(name, value) }

    public var count: Int { pairs.count }
    public var isEmpty: Bool { pairs.isEmpty }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        pairs.makeIterator()
    }

    /// The fields as a dictionary with lower-cased names (repeated fields joined with ", ").
    public var lowercasedDictionary: [String: String] {
        var result: [String: String] = [:]
        for (name, value) in pairs {
            let key = name.lowercased()
            if let existing = result[key] { result[key] = existing + ", " + value } else { result[key] = value }
        }
        return result
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.pairs.count == rhs.pairs.count
            && zip(lhs.pairs, rhs.pairs).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in pairs { hasher.combine(field.name); hasher.combine(field.value) }
    }

    /// ASCII case-insensitive comparison without allocating (header names are ASCII).
    static func sameName(_ a: String, _ b: String) -> Bool {
        var i = a.utf8.makeIterator(), j = b.utf8.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x == y { continue }
                let fx = x >= 65 && x <= 90 ? x + 32 : x, fy = y >= 65 && y <= 90 ? y + 32 : y
                if fx != fy { return false }
            default: return false
            }
        }
    }
}
