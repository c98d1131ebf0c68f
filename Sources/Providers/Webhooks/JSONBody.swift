import Foundation

/// JSON helpers for webhook bodies (JSONSerialization: no money is read from webhooks, so its Double numbers are fine).
enum JSONBody {
    /// Parses a body; `malformed_body` when it is empty or not JSON.
    static func parse(_ body: [UInt8]) throws(WebhookRejection) -> Any {
        guard !body.isEmpty else { throw WebhookRejection(.malformedBody, "the body is empty") }
        do {
            return try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
        } catch {
            throw WebhookRejection(.malformedBody, "the body is not valid JSON")
        }
    }

    /// A JSON object body; `malformed_body` for any other JSON value.
    static func object(_ body: [UInt8]) throws(WebhookRejection) -> [String: Any] {
        let json = try parse(body)
        guard let object = json as? [String: Any] else {
            throw WebhookRejection(.malformedBody, "the body is a JSON \(kind(json)); expected an event object")
        }
        return object
    }

    /// A non-empty string, else nil.
    static func string(_ value: Any?) -> String? {
        guard let s = value as? String, !s.isEmpty else { return nil }
        return s
    }

    /// An id given as a non-empty string or an integer.
    static func identifier(_ value: Any?) -> String? {
        if let s = string(value) { return s }
        if let n = value as? NSNumber, !isBoolean(n), let i = Int64(exactly: n.doubleValue) {
            return String(i)
        }
        return nil
    }

    /// JSON true/false arrive as NSNumber of type char (no JSON number parses to that type).
    static func isBoolean(_ n: NSNumber) -> Bool {
        String(cString: n.objCType) == "c"
    }

    static func kind(_ value: Any) -> String {
        switch value {
        case is [String: Any]: "object"
        case is [Any]: "array"
        case is String: "string"
        case is NSNull: "null"
        case let n as NSNumber: isBoolean(n) ? "boolean" : "number"
        default: "value"
        }
    }
}
