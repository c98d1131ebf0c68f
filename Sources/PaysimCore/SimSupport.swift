import Crypto
import Foundation
import Providers
import COpenSSL

/// SplitMix64: tiny, fast, and fully determined by its seed (fault injection and generated ids).
public struct SplitMix64: Sendable {
    public private(set) var state: UInt64
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits (probabilities only; never money).
    public mutating func nextUnit() -> Double { Double(next() >> 11) / 9_007_199_254_740_992.0 }

    /// Uniform in 0...upper.
    public mutating func next(upTo upper: UInt64) -> UInt64 {
        upper == UInt64.max ? next() : next() % (upper + 1)
    }

    /// `count` characters from `alphabet`.
    public mutating func string(_ count: Int, alphabet: [Character]) -> String {
        String((0..<count).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
    }

    /// A random (version 4 layout) UUID, lower case.
    public mutating func uuid() -> String {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * UInt64(i))) }
        for i in 0..<8 { bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * UInt64(i))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Hex.encode(bytes)
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }
}

/// RFC 3339 timestamps in UTC as the providers write them, over Providers' ISO 8601 helpers.
public enum SimTime {
    /// `2026-01-02T03:04:05Z`
    public static func rfc3339(_ date: Date) -> String { ISO8601.format(date) }

    /// `2026-01-02T03:04:05.678Z` (milliseconds rounded down, like the whole seconds).
    public static func rfc3339Millis(_ date: Date) -> String {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let millis = ((totalMillis % 1000) + 1000) % 1000
        let seconds = Date(timeIntervalSince1970: TimeInterval((totalMillis - millis) / 1000))
        let digits = String(millis)
        return String(ISO8601.format(seconds).dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Unix seconds of an ISO 8601 / RFC 3339 date-time with a zone (`2026-01-02T03:04:05.678Z`,
    /// `2026-01-02 03:04:05+00:00`); nil for anything else.
    public static func parse(_ text: String) -> Int64? { ISO8601.unixSeconds(from: text) }
}

/// paysim's own constant-time comparison (OpenSSL's CRYPTO_memcmp), so no request check leans on payrecon's code.
func simConstantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    guard !a.isEmpty else { return true }
    return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
}
