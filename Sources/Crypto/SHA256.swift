import COpenSSL

/// SHA-256 over libcrypto.
///
/// Inside a file that also imports `COpenSSL`, write `Crypto.SHA256` (libcrypto has a C function of that name).
public enum SHA256 {
    /// The 32-byte digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let input = bytes.isEmpty ? [0] : bytes
        let ok = input.withUnsafeBufferPointer { i in
            out.withUnsafeMutableBufferPointer { o in
                EVP_Digest(i.baseAddress, bytes.count, o.baseAddress, &length, EVP_sha256(), nil) == 1
            }
        }
        precondition(ok && length == 32, "libcrypto SHA-256 failed")
        return out
    }

    /// The digest of `bytes` as 64 lowercase hex digits.
    public static func hex(_ bytes: [UInt8]) -> String {
        Hex.encode(hash(bytes))
    }
}

/// Lowercase hexadecimal encoding.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lowercase hex digits, two per byte.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex digits (either case); nil for an odd length or any other character.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// SHA-256 of bytes fed in pieces (a file read in chunks), over libcrypto's digest context.
public final class SHA256Stream {
    private let context: OpaquePointer

    public init() {
        guard let c = EVP_MD_CTX_new() else { fatalError("libcrypto: EVP_MD_CTX_new failed") }
        context = c
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "libcrypto SHA-256 init failed")
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        let ok = bytes.withUnsafeBufferPointer { EVP_DigestUpdate(context, $0.baseAddress, $0.count) == 1 }
        precondition(ok, "libcrypto SHA-256 update failed")
    }

    /// The 32-byte digest of everything fed (call once).
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) == 1 }
        precondition(ok && length == 32, "libcrypto SHA-256 final failed")
        return out
    }
}
