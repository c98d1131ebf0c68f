import COpenSSL

/// The hash functions the HMAC-signed webhook schemes use.
public enum HMACAlgorithm: String, Sendable, Hashable, CaseIterable {
    case sha1, sha256, sha512

    /// Parses a configuration value (`sha256`, `SHA-512`, `HmacSHA1`, …); nil when it is none of the three.
    public init?(configuration value: String) {
        var v = value.lowercased().replacingOccurrences(of: "-", with: "")
        if v.hasPrefix("hmac") { v.removeFirst(4) }
        self.init(rawValue: v)
    }

    /// Length of the digest in bytes.
    public var digestLength: Int {
        switch self {
        case .sha1: 20
        case .sha256: 32
        case .sha512: 64
        }
    }

    var evpMD: OpaquePointer? {
        switch self {
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha512: EVP_sha512()
        }
    }
}

/// Keyed-hash message authentication (RFC 2104) over libcrypto.
///
/// Inside a file that also imports `COpenSSL`, write `Crypto.HMAC` (libcrypto has a C function of that name).
public enum HMAC {
    /// The HMAC of `message` under `key`.
    public static func authenticate(_ algorithm: HMACAlgorithm, key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        // libcrypto wants non-null pointers even for empty inputs.
        let keyBytes = key.isEmpty ? [0] : key
        let messageBytes = message.isEmpty ? [0] : message
        let ok = keyBytes.withUnsafeBufferPointer { k in
            messageBytes.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    COpenSSL.HMAC(
                        algorithm.evpMD, k.baseAddress, Int32(key.count),
                        m.baseAddress, message.count, o.baseAddress, &length) != nil
                }
            }
        }
        // HMAC only fails on allocation failure or an unknown digest; neither is recoverable here.
        precondition(ok && Int(length) == algorithm.digestLength, "libcrypto HMAC failed")
        return Array(out.prefix(Int(length)))
    }

    /// The HMAC of a UTF-8 string message under a UTF-8 string key.
    public static func authenticate(_ algorithm: HMACAlgorithm, key: String, message: String) -> [UInt8] {
        authenticate(algorithm, key: Array(key.utf8), message: Array(message.utf8))
    }
}
