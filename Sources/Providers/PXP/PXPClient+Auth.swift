import Crypto
import Foundation

/// PXP-UST1 request authentication (merchant → PXP API).
///
/// Documented: `Authorization: PXP-UST1 {tokenId}:{timestamp}:{hmac}` plus `X-Request-Id` and `X-Client-Id`
/// headers (PXP's own plugin repo, skills/implement-pxp-api-auth). NOT documented: the string to sign, the hash,
/// the encoding and the timestamp unit. The construction here is an assumption kept in this one place (paysim
/// verifies with the same function); see `signature(...)`.
public enum PXPAuth {
    /// The PXP-UST1 HMAC, **assumed** (unpublished by PXP) to be:
    ///
    ///     base64( HMAC-SHA256( key: tokenValue as UTF-8,
    ///                          message: timestamp + requestID + METHOD + pathAndQuery + body ) )
    ///
    /// - `timestamp`: unix seconds in decimal, the same string that goes into the header;
    /// - `requestID`: the `X-Request-Id` header (a UUID);
    /// - `method`: upper-case HTTP method;
    /// - `pathAndQuery`: the request target exactly as sent, e.g. `/api/v1/transactions/M/S?merchantTransactionId=X`;
    /// - `body`: the raw body bytes (empty for a GET); the parts are concatenated without separators, mirroring
    ///   PXP's documented webhook signature (`X-Request-Id + X-Signature-Timestamp + body`).
    /// Check against the live docs or a sandbox 401/200 before production use.
    public static func signature(
        tokenValue: String, timestamp: String, requestID: String, method: String,
        pathAndQuery: String, body: [UInt8]
    ) -> String {
        var message = Array(timestamp.utf8)
        message += Array(requestID.utf8)
        message += Array(method.uppercased().utf8)
        message += Array(pathAndQuery.utf8)
        message += body
        return Base64.encode(HMAC.authenticate(.sha256, key: Array(tokenValue.utf8), message: message))
    }

    /// The request target a server recomputes the signature over when its HTTP layer hands it a percent-decoded
    /// path and decoded query (as HTTP's `HTTPRequest` does): each path segment and query pair re-encoded the way
    /// `PXPClient` encodes them (RFC 3986 unreserved kept), query pairs sorted by name. For the ids PXP uses
    /// (no `/` inside a segment) this equals what the client signed.
    public static func requestTarget(decodedPath: String, query: [String: String]) -> String {
        let path = decodedPath.split(separator: "/", omittingEmptySubsequences: false)
            .map { ProviderURL.encodeComponent(String($0)) }.joined(separator: "/")
        guard !query.isEmpty else { return path }
        return path + "?"
            + query.sorted(by: { $0.key < $1.key })
            .map { ProviderURL.encodeComponent($0.key) + "=" + ProviderURL.encodeComponent($0.value) }.joined(separator: "&")
    }

    /// `PXP-UST1 {tokenId}:{timestamp}:{signature}`.
    public static func authorizationHeader(tokenID: String, timestamp: String, signature: String) -> String {
        "PXP-UST1 \(tokenID):\(timestamp):\(signature)"
    }
}

extension PXPClient {
    /// A PXP merchantTransactionId (≤ 50 characters, unique per transaction) derived from an action's idempotency
    /// key, so executing the same action twice sends the same id: `pr-` + the first 32 hex digits of SHA-256(key).
    public static func merchantTransactionId(forIdempotencyKey key: String) -> String {
        "pr-" + SHA256.hex(Array(key.utf8)).prefix(32)
    }
}
