/// A statement and its parameters, written as one interpolated string: each `\(value)` becomes the next `$n` and
/// carries its ``PostgresValue``, so a placeholder and its value can never drift apart as they can between a
/// hand-numbered string and a parallel array. This is the shape of postgres-nio's `PostgresQuery`.
///
/// ```swift
/// let rows = try conn.query("SELECT id FROM actions WHERE status = \(.text(status)) AND id > \(.int64(after))")
/// ```
///
/// - `\(value)` takes a ``PostgresValue`` only. A bare `String` or `Int` does not compile, so nothing reaches the
///   statement as text by accident.
/// - `\(fragment)` splices another `SQL` with its own parameters; they are numbered where they land. Statements are
///   composed this way, never by renumbering text.
/// - `\(unescaped: text)` splices trusted SQL text (a column list, a constant clause). It must never hold data.
public struct SQL: Sendable, Hashable, ExpressibleByStringInterpolation {
    /// The text between parameters: always one more than `binds`, so `literals[i]` precedes parameter `i + 1`.
    private var literals: [String]
    /// The values, in order: `binds[i]` is `$(i + 1)`.
    public private(set) var binds: [PostgresValue]

    public init(stringLiteral value: String) {
        literals = [value]
        binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self = stringInterpolation.sql
    }

    /// Trusted SQL text with no parameters (a column list, a clause chosen from constants). Never data.
    public init(unescaped text: String) {
        literals = [text]
        binds = []
    }

    /// The statement text with `$1`, `$2`... in place of the values.
    public var text: String {
        var text = literals[0]
        for index in binds.indices {
            text += "$"
            text += String(index + 1)
            text += literals[index + 1]
        }
        return text
    }

    /// Appends trusted text to the statement's end.
    private mutating func appendText(_ text: String) {
        literals[literals.count - 1] += text
    }

    /// Appends another statement part, its parameters numbered after these.
    public mutating func append(_ other: SQL) {
        literals[literals.count - 1] += other.literals[0]
        literals.append(contentsOf: other.literals.dropFirst())
        binds.append(contentsOf: other.binds)
    }

    public static func + (lhs: SQL, rhs: SQL) -> SQL {
        var joined = lhs
        joined.append(rhs)
        return joined
    }

    /// The parts joined by `separator` (`", "`, `" AND "`...).
    public static func joined(_ parts: [SQL], separator: SQL) -> SQL {
        var joined = SQL(stringLiteral: "")
        for (index, part) in parts.enumerated() {
            if index > 0 { joined.append(separator) }
            joined.append(part)
        }
        return joined
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        /// The statement as built so far: every piece goes through `SQL`'s own appending.
        fileprivate var sql = SQL(stringLiteral: "")

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.literals[0].reserveCapacity(literalCapacity)
            sql.binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { sql.appendText(literal) }

        /// A parameter: becomes the next `$n`.
        public mutating func appendInterpolation(_ value: PostgresValue) {
            sql.binds.append(value)
            sql.literals.append("")
        }

        /// Another statement part, with its own parameters.
        public mutating func appendInterpolation(_ fragment: SQL) { sql.append(fragment) }

        /// Trusted SQL text (a column list, a constant clause). Never data: data goes in as a ``PostgresValue``.
        public mutating func appendInterpolation(unescaped text: String) { sql.appendText(text) }

        /// A constant number written into the text (a lock key, a timeout): digits alone cannot change the statement.
        public mutating func appendInterpolation(unescaped number: some BinaryInteger) { sql.appendText(String(number)) }
    }
}

extension SQL: CustomStringConvertible {
    /// The text and the parameters' count: the values may be secrets or personal data, so they are not shown.
    public var description: String { "\(text) -- \(binds.count) parameter(s)" }
}
