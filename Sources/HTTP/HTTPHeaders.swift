/// HTTP header fields in the order they were received, with case-insensitive lookup.
///
/// `headers["paypal-transmission-id"]` finds `PAYPAL-TRANSMISSION-ID`. Repeated fields are kept;
/// the subscript returns the first, `values(for:)` all of them.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as (name, value) pairs, in order.
    public private(set) var pairs: [(name: String, value: String)]

    public init() { pairs = [] }

    public init(_ pairs: [(String, String)]) {
        self.pairs = pairs.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field `name` (ASCII case-insensitive), or nil.
    public subscript(name: String) -> String? {
        let key = name.lowercased()
        return pairs.first { $0.name.lowercased() == key }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        let key = name.lowercased()
        return pairs.filter { $0.name.lowercased() == key }.map(\.value)
    }

    /// Whether a field called `name` is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        pairs.append((name: name, value: value))
    }

    /// Replaces every field called `name` with one field.
    public mutating func replace(_ name: String, _ value: String) {
        let key = name.lowercased()
        pairs.removeAll { $0.name.lowercased() == key }
        pairs.append((name: name, value: value))
    }

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
}
