import Reconciliation
import TextFormats

/// What PXP does where its documents say nothing (developer.pxp.io documents none of these). Each is a setting, so
/// the tests run payrecon against every plausible reading and a wrong guess costs a configuration change, never
/// money. `--pxp-behaviour dedupe=no,lookup=no,partial-capture=captured,increment=value,timestamp=ms` or
/// `POST /admin/pxp/behaviour {"dedupe": false, ...}`.
public struct PXPBehaviour: Sendable, Equatable {
    /// A repeated merchantTransactionId on a modification answers the first result (true), or is applied again as a
    /// new transaction (false).
    public var deduplicates = true
    /// GET `?merchantTransactionId=` finds modification transactions (true), or only the merchant's own
    /// transactions (false: a modification's merchantTransactionId answers 404).
    public var findsModifications = true
    /// A parent after a partial capture: still `Authorised` (false) or `Captured` (true).
    public var capturedAfterPartialCapture = false
    /// An increment raises the parent's `authorisedAmount` only (false) or its `transactionValue` too (true).
    public var incrementRaisesValue = false
    /// How webhooks carry `X-Signature-Timestamp`.
    public enum Timestamp: String, Sendable, Equatable, CaseIterable { case seconds, milliseconds = "ms", iso8601 }
    public var webhookTimestamp = Timestamp.seconds
    /// A modification is answered `Pending` (applied, its outcome not final yet) and shows its final state from the
    /// first lookup on (PXP documents Pending among its states).
    public var answersPending = false

    public init() {}

    var json: JSONValue {
        .object([
            "dedupe": .bool(deduplicates), "lookup": .bool(findsModifications),
            "partial_capture": .string(capturedAfterPartialCapture ? "captured" : "authorised"),
            "increment": .string(incrementRaisesValue ? "value" : "authorised"),
            "timestamp": .string(webhookTimestamp.rawValue), "pending": .bool(answersPending)
        ])
    }

    /// Reads the command-line form (`name=value` pairs separated by commas); the error says what is wrong.
    public static func parse(_ text: String) -> Result<PXPBehaviour, PXPBehaviourError> {
        var b = PXPBehaviour()
        for pair in text.split(separator: ",") where !pair.isEmpty {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2 else { return .failure(PXPBehaviourError(message: "'\(pair)' is not name=value")) }
            do { try b.set(kv[0], kv[1]) } catch {
                return .failure(PXPBehaviourError(message: error.body["error"]?["message"]?.stringValue ?? error.code))
            }
        }
        return .success(b)
    }

    /// Reads a `POST /admin/pxp/behaviour` body; absent fields keep `base`'s values.
    static func parse(_ json: JSONValue, base: PXPBehaviour) throws(SimError) -> PXPBehaviour {
        guard let members = json.objectMembers else { throw SimError.admin(400, "malformed_body", "expected a JSON object") }
        var b = base
        for (key, value) in members {
            guard let text = value.boolValue.map({ $0 ? "yes" : "no" }) ?? value.stringValue else {
                throw SimError.admin(400, "invalid_field", "\(key) must be a boolean or a string")
            }
            try b.set(key.replacingOccurrences(of: "_", with: "-"), text)
        }
        return b
    }

    mutating func set(_ name: String, _ value: String) throws(SimError) {
        func yesNo() throws(SimError) -> Bool {
            switch value.lowercased() {
            case "yes", "true", "on": return true
            case "no", "false", "off": return false
            default: throw SimError.admin(400, "invalid_field", "\(name) must be yes or no, not '\(value)'")
            }
        }
        switch name {
        case "dedupe": deduplicates = try yesNo()
        case "lookup": findsModifications = try yesNo()
        case "partial-capture":
            switch value.lowercased() {
            case "authorised": capturedAfterPartialCapture = false
            case "captured": capturedAfterPartialCapture = true
            default: throw SimError.admin(400, "invalid_field", "partial-capture must be authorised or captured")
            }
        case "increment":
            switch value.lowercased() {
            case "authorised": incrementRaisesValue = false
            case "value": incrementRaisesValue = true
            default: throw SimError.admin(400, "invalid_field", "increment must be authorised or value")
            }
        case "pending": answersPending = try yesNo()
        case "timestamp":
            guard let t = Timestamp(rawValue: value.lowercased()) else {
                throw SimError.admin(400, "invalid_field", "timestamp must be seconds, ms or iso8601")
            }
            webhookTimestamp = t
        default:
            throw SimError.admin(
                400, "invalid_field", "unknown PXP behaviour '\(name)' (dedupe, lookup, partial-capture, increment, timestamp, pending)")
        }
    }
}

public struct PXPBehaviourError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
