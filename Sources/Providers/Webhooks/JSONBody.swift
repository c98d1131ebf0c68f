import Reconciliation
import TextFormats

/// JSON helpers for webhook bodies, on the project's strict parser (`JSONValue`: numbers stay literal text, no
/// Double, no Foundation objects; it is several times cheaper than JSONSerialization + `[String: Any]` bridging on the
/// receiver's hot path).
///
/// Stricter than JSONSerialization in one way that matters: a body with a duplicate member name in any object is
/// `malformed_body`. Two parsers may read `{"id":"a","id":"b"}` differently (first wins, last wins), so the dedupe
/// key or transaction reference we store could differ from what the provider or a later reader sees; such a body is
/// refused rather than guessed at. No provider sends one.
enum JSONBody {
    /// Limits for webhook bodies. The receiver already bounds the size (`PAYRECON_MAX_BODY_BYTES`), so the byte limit
    /// is off; depth and number length are as generous as JSONSerialization's so that no body it read is refused for
    /// being deep or having a long number in some field we do not read.
    static let limits = JSONValue.ParseLimits(maxDepth: 512, maxBytes: .max, maxNumberLength: 1 << 16)

    /// Parses a body; `malformed_body` when it is empty or not (strict) JSON.
    static func parse(_ body: [UInt8]) throws(WebhookRejection) -> JSONValue {
        guard !body.isEmpty else { throw WebhookRejection(.malformedBody, "the body is empty") }
        do {
            return try JSONValue.parse(body, limits: limits)
        } catch {
            // The reason may quote a member name from the body: keep the message short.
            throw WebhookRejection(.malformedBody, "the body is not valid JSON (\(String(error.description.prefix(200))))")
        }
    }

    /// A JSON object body; `malformed_body` for any other JSON value.
    static func object(_ body: [UInt8]) throws(WebhookRejection) -> JSONValue {
        let json = try parse(body)
        guard case .object = json else {
            throw WebhookRejection(.malformedBody, "the body is a JSON \(kind(json)); expected an event object")
        }
        return json
    }

    /// A non-empty string, else nil.
    static func string(_ value: JSONValue?) -> String? {
        guard case .string(let s)? = value, !s.isEmpty else { return nil }
        return s
    }

    /// An id given as a non-empty string or an integer number (its literal digits; `-0` reads as `0`). Numbers with a
    /// fraction or an exponent are not ids.
    static func identifier(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let s)? where !s.isEmpty:
            return s
        case .number(let literal)?:
            // The parser has checked the number grammar, so no '.', 'e' or 'E' means an integer.
            guard !literal.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") })
            else { return nil }
            return literal == "-0" ? "0" : literal
        default:
            return nil
        }
    }

    static func kind(_ value: JSONValue) -> String {
        switch value {
        case .object: "object"
        case .array: "array"
        case .string: "string"
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        }
    }
}
