// Building JSONValue documents in code: literals, objects from ordered pairs, a member set in place.
//
// For code that writes provider-shaped bodies (paysim, test fixtures): `.object(["id": "X", "amount": amount,
// "note": nil])` keeps member order and leaves out nil members, so optional fields need no branches.

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer literal becomes a number with that literal text.
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue {
    /// An object from ordered pairs; members whose value is nil are left out.
    public static func object(_ pairs: KeyValuePairs<String, JSONValue?>) -> JSONValue {
        .object(pairs.compactMap { key, value in value.map { (key, $0) } })
    }

    /// An integer as a number (`.integer(42)` → `42`).
    public static func integer<I: BinaryInteger>(_ value: I) -> JSONValue { .number(String(value)) }

    /// A copy with member `key` set: replaced where it stands when present, appended otherwise. Not an object:
    /// returned unchanged.
    public func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(var members) = self else { return self }
        if let index = members.firstIndex(where: { $0.0 == key }) {
            members[index].1 = value
        } else {
            members.append((key, value))
        }
        return .object(members)
    }

    /// The serialized document as a String (`serialized()` decoded as UTF-8).
    public var serializedText: String { String(decoding: serialized(), as: UTF8.self) }
}
