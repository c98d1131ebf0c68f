import Foundation
import Reconciliation

/// Why a webhook delivery was refused.
public enum RejectionCode: String, Sendable, Hashable, CaseIterable {
    case missingSignature = "missing_signature"
    case invalidSignature = "invalid_signature"
    case staleTimestamp = "stale_timestamp"
    case untrustedCertificate = "untrusted_certificate"
    case malformedBody = "malformed_body"

    /// 400 for a body that cannot be read, 401 for everything about authenticity.
    public var httpStatus: Int { self == .malformedBody ? 400 : 401 }
}

/// A refused delivery: the code the sender sees and a message that tells an operator what is wrong.
/// Messages never contain a key, a secret or an expected signature.
public struct WebhookRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public let code: RejectionCode
    public let message: String

    public init(_ code: RejectionCode, _ message: String) {
        self.code = code
        self.message = message
    }

    /// HTTP status of the answer.
    public var httpStatus: Int { code.httpStatus }

    /// `code: message`, as `payrecon verify` prints after `invalid: `.
    public var description: String { "\(code.rawValue): \(message)" }

    /// The answer body `{"error":{"code":"...","message":"..."}}`.
    public var jsonBody: [UInt8] {
        let object: [String: Any] = ["error": ["code": code.rawValue, "message": message]]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return Array(data)
    }

    static func missing(_ header: String) -> WebhookRejection {
        WebhookRejection(.missingSignature, "header \(header) is missing or empty")
    }
}

/// A provider's verifier cannot run because its secret is not configured. The caller answers this before any
/// verification (the delivery is not the sender's fault: an operator must set the variable).
public struct WebhookConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let provider: Provider
    /// The environment variable (or flag) that must be set, e.g. `PXP_WEBHOOK_KEY`.
    public let variable: String
    /// Why its value is refused; nil when it is not set at all.
    public let problem: String?

    public init(provider: Provider, variable: String, problem: String? = nil) {
        self.provider = provider
        self.variable = variable
        self.problem = problem
    }

    public var description: String {
        guard let problem else { return "\(provider.rawValue) webhooks cannot be verified: \(variable) is not set" }
        return "\(provider.rawValue) webhooks cannot be verified: \(variable): \(problem)"
    }
}

/// Shortens a header value quoted in a message (values are not secrets, but they may be long or hostile).
func quoted(_ value: String, limit: Int = 64) -> String {
    let cleaned = String(String.UnicodeScalarView(value.unicodeScalars.map { String.isTerminalControl($0) ? "?" : $0 }))
    return cleaned.count <= limit ? "'\(cleaned)'" : "'\(cleaned.prefix(limit))…'"
}
