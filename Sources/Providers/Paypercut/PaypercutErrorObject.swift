import Reconciliation
import TextFormats

/// Paypercut's error object (docs.paypercut.io/docs/developer-resources/error-object): top level `{type, code, param,
/// message, trace_id}`. Paypercut's own plugins also read `error.message`, so the wrapped form is read too.
struct PaypercutErrorObject: Sendable, Equatable {
    var code: String?
    var traceID: String?

    /// nil when `body` is not a JSON object.
    init?(body: String) {
        guard let json = try? JSONValue.parse(Array(body.utf8)), json.objectMembers != nil else { return nil }
        let object = json["error"].flatMap { $0.objectMembers != nil ? $0 : nil } ?? json
        code = object["code"]?.stringValue
        traceID = object["trace_id"]?.stringValue
    }

    /// What to fix when a 403 is about the account context, an authorization error of the configuration, never a
    /// payment Paypercut lacks (docs error codes): `account_invalid`, the key cannot act for the account or it does
    /// not exist; `account_required`, a platform key named none. nil for any other code.
    func accountRefusal(account: String?) -> String? {
        let fix: String
        switch code {
        case "account_invalid":
            fix =
                "Paypercut refused account '\(account ?? "")' (403 account_invalid): check the order's merchant and that "
                + "PAYPERCUT_SECRET_KEY may act for it"
        case "account_required":
            fix =
                "Paypercut requires an account (403 account_required): set the order's merchant to the Paypercut account the "
                + "payment belongs to"
        default:
            return nil
        }
        return fix + (traceID.map { " (trace_id \($0))" } ?? "")
    }
}

extension ProviderOutcome {
    /// A 403 about the account context as a refusal in words that name the account and what to fix (`declined`: the
    /// reason is complete as it stands); any other outcome as it is.
    func namingAccountRefusal(account: String?) -> ProviderOutcome<T> {
        guard case .permanent(.refused(403, let body)) = self,
            let refusal = PaypercutErrorObject(body: body)?.accountRefusal(account: account)
        else {
            return self
        }
        return .permanent(.declined(refusal))
    }
}
