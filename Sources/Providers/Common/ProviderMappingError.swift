import Reconciliation
import TextFormats

// Errors from turning a provider answer into a Snapshot: always name the field and the value found.

/// A provider answer that cannot be mapped: which field, what was there, and why.
public struct ProviderMappingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var provider: Provider
    /// JSON path of the field, e.g. `transactionMethod.intent`, `purchase_units[0].payments.captures[1].status`.
    public var field: String
    /// The value found (nil when the field is missing).
    public var value: String?
    public var reason: String

    public init(provider: Provider, field: String, value: String?, reason: String) {
        self.provider = provider; self.field = field; self.value = value; self.reason = reason
    }

    public var description: String {
        if let value { return "\(provider.rawValue) answer: \(field) = \(value): \(reason)" }
        return "\(provider.rawValue) answer: \(field): \(reason)"
    }
}

/// Reading typed fields out of a provider answer, with errors that say where.
struct AnswerReader {
    let provider: Provider

    func fail(_ field: String, _ value: JSONValue?, _ reason: String) -> ProviderMappingError {
        ProviderMappingError(provider: provider, field: field, value: value.map(AnswerReader.render), reason: reason)
    }

    static func render(_ v: JSONValue) -> String {
        switch v {
        case .string(let s): return "\"\(s.count > 100 ? String(s.prefix(100)) + "…" : s)\""
        case .number(let n): return n
        case .bool(let b): return String(b)
        case .null: return "null"
        case .array: return "(array)"
        case .object: return "(object)"
        }
    }

    func string(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> String {
        guard let v else { throw fail(field, nil, "missing") }
        guard let s = v.stringValue else { throw fail(field, v, "expected a string") }
        return s
    }

    func optionalString(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> String? {
        guard let v, !v.isNull else { return nil }
        guard let s = v.stringValue else { throw fail(field, v, "expected a string") }
        return s
    }

    func array(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> [JSONValue] {
        guard let v, !v.isNull else { return [] }
        guard let a = v.arrayValue else { throw fail(field, v, "expected an array") }
        return a
    }

    /// A non-negative amount in minor units from a JSON number or decimal string.
    func amount(_ v: JSONValue?, _ field: String, exponent: Int) throws(ProviderMappingError) -> Int64 {
        guard let v else { throw fail(field, nil, "missing") }
        let minor: Int64
        do { minor = try v.minorUnits(exponent: exponent) } catch { throw fail(field, v, error.reason) }
        guard minor >= 0 else { throw fail(field, v, "negative amount") }
        return minor
    }

    func currency(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> Currency {
        let code = try string(v, field)
        guard let c = Currency(code: code) else { throw fail(field, v, "unknown currency") }
        return c
    }

    /// Unix seconds from an ISO 8601 timestamp; nil when absent.
    func timestamp(_ v: JSONValue?, _ field: String) throws(ProviderMappingError) -> Int64? {
        guard let s = try optionalString(v, field) else { return nil }
        guard let t = ISO8601.unixSeconds(from: s) else { throw fail(field, v, "not an ISO 8601 date-time") }
        return t
    }
}
