import COpenSSL

/// Compares two byte strings in time that depends only on their lengths (libcrypto `CRYPTO_memcmp`).
///
/// Different lengths answer false at once: a length is not a secret (every signature of one scheme has the same
/// length), and no byte of the content is looked at.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0
        }
    }
}
