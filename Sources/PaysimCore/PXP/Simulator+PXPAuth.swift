import COpenSSL
import Crypto
import Foundation

// PXP-UST1 as paysim checks it, written apart from payrecon's client (PXP publishes the header's shape,
// `PXP-UST1 {tokenId}:{timestamp}:{hmac}` with X-Request-Id and X-Client-Id, but not the string to sign). paysim's
// reading of the string to sign is the same assumption as payrecon's — timestamp, X-Request-Id, the method, the
// request target and the body, concatenated, HMAC-SHA256 with the token value, base64 — but none of payrecon's code
// computes it here: a change to one side that breaks the other fails the tests. Whether PXP really signs this way is
// what `payrecon doctor`'s PXP credentials check tells against the real sandbox (docs/PROVIDER-FACTS.md PXP-11).
extension Simulator {
    /// Recomputes the HMAC over the request target re-encoded from the decoded path and query, and compares in
    /// constant time.
    func verifyPXPSignature(
        request: SimRequest, tokenValue: String, timestamp: String, requestID: String,
        signature: String
    ) -> Bool {
        var message = Array(timestamp.utf8) + Array(requestID.utf8) + Array(request.method.uppercased().utf8)
        message += Array(Self.pxpRequestTarget(path: request.path, query: request.query).utf8)
        message += request.body
        let expected = Data(Self.hmacSHA256(key: Array(tokenValue.utf8), message: message)).base64EncodedString()
        return simConstantTimeEquals(Array(expected.utf8), Array(signature.utf8))
    }

    /// `/a/b?k=v&…`: each path segment and query pair percent-encoded (RFC 3986 unreserved characters kept), query
    /// pairs sorted by name.
    static func pxpRequestTarget(path: String, query: [String: String]) -> String {
        func encode(_ s: String) -> String {
            var out = ""
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                default:
                    out += String(format: "%%%02X", byte)
                }
            }
            return out
        }
        let encodedPath = path.split(separator: "/", omittingEmptySubsequences: false).map { encode(String($0)) }.joined(separator: "/")
        guard !query.isEmpty else { return encodedPath }
        return encodedPath + "?" + query.sorted { $0.key < $1.key }.map { encode($0.key) + "=" + encode($0.value) }.joined(separator: "&")
    }

    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count, &out, &length)
            }
        }
        return Array(out.prefix(Int(length)))
    }

    /// Unix seconds, unix milliseconds (digits, no sign, no leading zero) or an ISO 8601 date-time.
    static func isPXPTimestamp(_ text: String) -> Bool {
        if let first = text.utf8.first, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return first != UInt8(ascii: "0") && (text.utf8.count == 10 || text.utf8.count == 13)
        }
        let iso = ISO8601DateFormatter()
        if iso.date(from: text) != nil { return true }
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return iso.date(from: text) != nil
    }
}
