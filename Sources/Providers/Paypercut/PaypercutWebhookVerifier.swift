import Crypto
import Foundation

/// Verifies Paypercut webhook deliveries: `Paypercut-Signature: t=<unix>,v1=<hex>` where
/// v1 = hex(HMAC-SHA256(secret, t + "." + raw body)). Several `v1` entries may appear (secret rotation): the
/// delivery is accepted when any of them matches. Unknown schemes (`v0=`, …) are ignored.
///
/// Order of checks: header present (`missing_signature`); it has a `t` and at least one `v1`
/// (`invalid_signature`); a `v1` matches (`invalid_signature`); `t` is unix seconds within the tolerance
/// (`stale_timestamp`).
public struct PaypercutWebhookVerifier: Sendable {
    public static let signatureHeader = "Paypercut-Signature"

    private let secret: [UInt8]
    public let tolerance: TimeInterval

    /// `secret` is `PAYPERCUT_WEBHOOK_SECRET`, the endpoint's signing secret.
    public init(secret: String, tolerance: TimeInterval = WebhookDefaults.signatureTolerance) throws(WebhookConfigurationError) {
        guard !secret.isEmpty else {
            throw WebhookConfigurationError(provider: .paypercut, variable: "PAYPERCUT_WEBHOOK_SECRET")
        }
        self.secret = Array(secret.utf8)
        self.tolerance = tolerance
    }

    /// Throws the reason the delivery is refused; returns when it is authentic and fresh.
    public func verify(headers: Headers, body: [UInt8], time: VerificationTime) throws(WebhookRejection) {
        guard let header = headers.nonEmpty(Self.signatureHeader) else { throw .missing(Self.signatureHeader) }
        var timestamp: String?
        var candidates: [String] = []
        for part in header.split(separator: ",", omittingEmptySubsequences: true) {
            let item = String(part).trimmingASCIIWhitespace()
            guard let eq = item.firstIndex(of: "=") else { continue }
            let name = item[..<eq], value = String(item[item.index(after: eq)...])
            if name == "t" {
                guard timestamp == nil else {
                    throw WebhookRejection(.invalidSignature, "\(Self.signatureHeader) has more than one t= entry")
                }
                timestamp = value
            } else if name == "v1" {
                candidates.append(value)
            }
        }
        guard let timestamp, !timestamp.isEmpty else {
            throw WebhookRejection(.invalidSignature, "\(Self.signatureHeader) has no t= entry (expected t=<unix>,v1=<hex>)")
        }
        guard !candidates.isEmpty else {
            throw WebhookRejection(.invalidSignature, "\(Self.signatureHeader) has no v1= entry (expected t=<unix>,v1=<hex>)")
        }
        let expected = Self.mac(secret: secret, timestamp: timestamp, body: body)
        var matched = false
        for candidate in candidates {
            // Compare every candidate (no early exit) so timing does not tell which entry matched.
            if let bytes = Hex.decode(candidate), constantTimeEquals(bytes, expected) { matched = true }
        }
        guard matched else {
            throw WebhookRejection(
                .invalidSignature,
                "no v1 signature in \(Self.signatureHeader) matches the timestamp and body (check PAYPERCUT_WEBHOOK_SECRET)")
        }
        guard let signedAt = SignedTimestamp.parseUnixSeconds(timestamp) else {
            throw WebhookRejection(.staleTimestamp, "t=\(quoted(timestamp)) in \(Self.signatureHeader) is not unix seconds")
        }
        if case .at(let now) = time,
            let stale = SignedTimestamp.freshness(signedAt, now: now, tolerance: tolerance, header: "t= of \(Self.signatureHeader)")
        {
            throw stale
        }
    }

    /// The `Paypercut-Signature` value for a delivery signed at `timestamp` (unix seconds).
    public static func signatureHeaderValue(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(Hex.encode(mac(secret: Array(secret.utf8), timestamp: String(timestamp), body: body)))"
    }

    private static func mac(secret: [UInt8], timestamp: String, body: [UInt8]) -> [UInt8] {
        HMAC.authenticate(.sha256, key: secret, message: Array(timestamp.utf8) + [UInt8(ascii: ".")] + body)
    }
}
