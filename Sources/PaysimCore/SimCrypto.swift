import COpenSSL
import CZlib
import Foundation

/// The few primitives paysim signs with (libcrypto and zlib).
public enum SimCrypto {
    /// HMAC-SHA256(key, data).
    public static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &length)
            }
        }
        return Array(out.prefix(Int(length)))
    }

    /// zlib's CRC-32 of `bytes` (PayPal signs it as an unsigned decimal).
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { buffer in
            UInt32(CZlib.crc32(0, buffer.baseAddress, uInt(buffer.count)))
        }
    }

    public static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// Constant-time equality (credentials).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }

    /// The latest libcrypto error as text (for error messages).
    static func lastError() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "unknown libcrypto error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
