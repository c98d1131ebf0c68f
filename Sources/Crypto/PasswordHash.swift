import COpenSSL

/// Passwords of the people who sign in to the console, kept as scrypt hashes (RFC 7914: memory-hard, so a stolen
/// users file is slow to guess from on any hardware), computed by libcrypto's `EVP_PBE_scrypt`.
///
/// The stored form names its parameters, so they can be raised later without invalidating older hashes:
/// `scrypt$ln=15,r=8,p=1$<salt, Base64>$<hash, Base64>` (N = 2^ln).
public enum PasswordHash {
    public struct Parameters: Sendable, Equatable {
        /// log2 of N, the cost: each verification takes 128 · r · 2^ln bytes (32 MiB at ln=15, r=8).
        public var ln: Int
        public var r: Int
        public var p: Int

        /// What `make` uses: about 32 MiB and a tenth of a second per verification on one core.
        public static let standard = Parameters(ln: 15, r: 8, p: 1)

        public init(ln: Int, r: Int, p: Int) { self.ln = ln; self.r = r; self.p = p }

        /// Within what a verification may cost, so a users file cannot make a sign-in take gigabytes: N ≤ 2^20,
        /// r ≤ 16, p ≤ 4, at most 256 MiB.
        var isBounded: Bool {
            (1...20).contains(ln) && (1...16).contains(r) && (1...4).contains(p) && memory <= Self.maxMemory
        }

        var memory: UInt64 { 128 * UInt64(r) * (UInt64(1) << UInt64(ln)) }
        static let maxMemory: UInt64 = 256 << 20
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    static let saltBytes = 16
    static let hashBytes = 32

    /// A new hash of `password` under a fresh random salt.
    public static func make(_ password: [UInt8], parameters: Parameters = .standard) throws(Failure) -> String {
        guard parameters.isBounded else { throw Failure(description: "scrypt parameters out of bounds") }
        let salt = randomBytes(saltBytes)
        guard let hash = derive(password, salt: salt, parameters: parameters, length: hashBytes) else {
            throw Failure(description: "libcrypto's scrypt failed")
        }
        return "scrypt$ln=\(parameters.ln),r=\(parameters.r),p=\(parameters.p)$\(Base64.encode(salt))$\(Base64.encode(hash))"
    }

    /// Whether `password` is the one `encoded` was made from. False for anything `encoded` cannot be read as
    /// (including parameters past the bounds); the comparison takes the same time wherever the bytes differ.
    public static func verify(_ password: [UInt8], against encoded: String) -> Bool {
        guard let stored = parse(encoded),
            let hash = derive(password, salt: stored.salt, parameters: stored.parameters, length: stored.hash.count)
        else { return false }
        return constantTimeEquals(hash, stored.hash)
    }

    /// Whether `encoded` is a hash `verify` can check (its form and parameters within bounds).
    public static func isReadable(_ encoded: String) -> Bool { parse(encoded) != nil }

    /// The parts of a stored hash, or nil when it is not one this reads.
    static func parse(_ encoded: String) -> (parameters: Parameters, salt: [UInt8], hash: [UInt8])? {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "scrypt" else { return nil }
        var values: [String: Int] = [:]
        for pair in parts[1].split(separator: ",") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, let v = Int(kv[1]), values[String(kv[0])] == nil else { return nil }
            values[String(kv[0])] = v
        }
        guard values.count == 3, let ln = values["ln"], let r = values["r"], let p = values["p"] else { return nil }
        let parameters = Parameters(ln: ln, r: r, p: p)
        guard parameters.isBounded, let salt = Base64.decode(String(parts[2])), let hash = Base64.decode(String(parts[3])),
            salt.count >= 8, (16...64).contains(hash.count)
        else { return nil }
        return (parameters, salt, hash)
    }

    /// scrypt itself (RFC 7914), `length` bytes; nil when libcrypto refuses.
    public static func derive(_ password: [UInt8], salt: [UInt8], parameters: Parameters, length: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: length)
        let ok = password.withUnsafeBytes { pw in
            salt.withUnsafeBytes { s in
                EVP_PBE_scrypt(
                    pw.baseAddress?.assumingMemoryBound(to: CChar.self), pw.count, s.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    s.count, UInt64(1) << UInt64(parameters.ln), UInt64(parameters.r), UInt64(parameters.p),
                    Parameters.maxMemory + (1 << 20), &out, length)
            }
        }
        return ok == 1 ? out : nil
    }
}
