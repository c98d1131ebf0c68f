import Crypto
import Foundation

/// Verifies PXP webhook deliveries: `X-Signature` = base64(HMAC(key as UTF-8,
/// `X-Request-Id` + `X-Signature-Timestamp` + raw body)), the timestamp within the tolerance of now.
///
/// Order of checks: the three headers are present (`missing_signature`), the HMAC matches in constant time
/// (`invalid_signature`), then the timestamp parses and is fresh (`stale_timestamp`). The signature is checked before
/// the timestamp so a forged delivery is always reported as `invalid_signature`, whatever its timestamp, and a
/// genuine one with an unreadable or old timestamp as `stale_timestamp`.
public struct PXPWebhookVerifier: Sendable {
    public static let requestIDHeader = "X-Request-Id"
    public static let timestampHeader = "X-Signature-Timestamp"
    public static let signatureHeader = "X-Signature"

    private let key: [UInt8]
    public let algorithm: HMACAlgorithm
    public let tolerance: TimeInterval

    /// `key` is `PXP_WEBHOOK_KEY` (its UTF-8 bytes are the HMAC key); an empty key is a configuration error.
    public init(
        key: String, algorithm: HMACAlgorithm = .sha256,
        tolerance: TimeInterval = WebhookDefaults.signatureTolerance
    ) throws(WebhookConfigurationError) {
        guard !key.isEmpty else { throw WebhookConfigurationError(provider: .pxp, variable: "PXP_WEBHOOK_KEY") }
        self.key = Array(key.utf8)
        self.algorithm = algorithm
        self.tolerance = tolerance
    }

    /// Throws the reason the delivery is refused; returns when it is authentic and fresh.
    public func verify(headers: Headers, body: [UInt8], time: VerificationTime) throws(WebhookRejection) {
        // X-Request-Id is signed when present; a delivery without one signs "" + timestamp + body and is
        // deduplicated on the body's SHA-256.
        let requestID = headers.nonEmpty(Self.requestIDHeader) ?? ""
        guard let timestamp = headers.nonEmpty(Self.timestampHeader) else { throw .missing(Self.timestampHeader) }
        guard let signatureText = headers.nonEmpty(Self.signatureHeader) else { throw .missing(Self.signatureHeader) }

        guard let signature = Base64.decode(signatureText) else {
            throw WebhookRejection(.invalidSignature, "\(Self.signatureHeader) is not base64")
        }
        let expected = Self.mac(algorithm: algorithm, key: key, requestID: requestID, timestamp: timestamp, body: body)
        guard constantTimeEquals(signature, expected) else {
            let hint =
                signature.count == expected.count
                ? "check PXP_WEBHOOK_KEY"
                : "it has \(signature.count) bytes, HMAC-\(algorithm.rawValue.uppercased()) has \(expected.count): check PXP_WEBHOOK_HMAC"
            throw WebhookRejection(.invalidSignature, "\(Self.signatureHeader) does not match the request id, timestamp and body (\(hint))")
        }

        guard let signedAt = SignedTimestamp.parse(timestamp) else {
            throw WebhookRejection(
                .staleTimestamp,
                "\(Self.timestampHeader) \(quoted(timestamp)) is not canonical unix seconds, unix milliseconds (no sign, no leading zero) or ISO 8601"
            )
        }
        if case .at(let now) = time,
            let stale = SignedTimestamp.freshness(signedAt, now: now, tolerance: tolerance, header: Self.timestampHeader)
        {
            throw stale
        }
    }

    /// The `X-Signature` value for a delivery (what PXP sends; used by paysim and the tests).
    public static func signature(
        key: String, algorithm: HMACAlgorithm = .sha256, requestID: String,
        timestamp: String, body: [UInt8]
    ) -> String {
        Base64.encode(mac(algorithm: algorithm, key: Array(key.utf8), requestID: requestID, timestamp: timestamp, body: body))
    }

    private static func mac(
        algorithm: HMACAlgorithm, key: [UInt8], requestID: String, timestamp: String,
        body: [UInt8]
    ) -> [UInt8] {
        HMAC.authenticate(algorithm, key: key, message: Array(requestID.utf8) + Array(timestamp.utf8) + body)
    }
}
