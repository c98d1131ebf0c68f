import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address or CIDR block (`PAYRECON_TRUSTED_PROXIES`): `10.0.0.5`, `10.0.0.0/8`, `::1`, `fd00::/8`.
/// An IPv4 address also matches as its IPv4-mapped IPv6 form (`::ffff:10.0.0.5`).
public struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    /// 16 bytes (IPv4 as IPv4-mapped IPv6) and how many leading bits must match.
    let network: [UInt8]
    let prefixLength: Int
    public let description: String

    public struct ParseError: Error, Sendable, CustomStringConvertible { public let description: String }

    public init(_ text: String) throws(ParseError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let address = AddressRange.bytes(parts[0]) else {
            throw ParseError(
                description: "'\(trimmed)' is not an IPv4 or IPv6 address or CIDR block (e.g. 10.0.0.0/8, 127.0.0.1, fd00::/8)")
        }
        let isV4 = !parts[0].contains(":")
        var length = 128
        if parts.count == 2 {
            guard let bits = Int(parts[1]), bits >= 0, bits <= (isV4 ? 32 : 128) else {
                throw ParseError(description: "'\(trimmed)' has a prefix length that is not 0–\(isV4 ? 32 : 128)")
            }
            length = isV4 ? 96 + bits : bits
        }
        self.network = AddressRange.masked(address, length)
        self.prefixLength = length
        self.description = trimmed
    }

    /// Whether `address` (text, as the server reports a peer) is in this range.
    public func contains(_ address: String) -> Bool {
        guard let bytes = AddressRange.bytes(address) else { return false }
        return AddressRange.masked(bytes, prefixLength) == network
    }

    /// A comma-separated list; empty entries are skipped.
    public static func list(_ text: String) throws(ParseError) -> [AddressRange] {
        var out: [AddressRange] = []
        for part in text.split(separator: ",") where !part.trimmingCharacters(in: .whitespaces).isEmpty {
            out.append(try AddressRange(String(part)))
        }
        return out
    }

    /// The 16 bytes of an IPv6 address, or of an IPv4 address mapped into IPv6; nil for anything else.
    static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + withUnsafeBytes(of: v4.s_addr) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        return withUnsafeBytes(of: v6) { Array($0) }
    }

    static func masked(_ bytes: [UInt8], _ length: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bits = min(8, max(0, length - index * 8))
            return bits == 8 ? byte : byte & ~(UInt8(0xff) >> bits)
        }
    }
}

/// Who sent a request: the peer, or, when the peer is a trusted proxy, the last hop of its `X-Forwarded-For` (the
/// address the proxy itself saw; hops before it are whatever the client wrote). Used for per-sender limits, rejection
/// counts and samples, never for authentication.
public enum SenderAddress {
    /// The sender of a request from `peer` carrying these `X-Forwarded-For` values (all of them, in order).
    public static func resolve(peer: String?, forwardedFor: [String], trustedProxies: [AddressRange]) -> String? {
        guard let peer, !trustedProxies.isEmpty, trustedProxies.contains(where: { $0.contains(peer) }) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        guard let last = hops.last, let clean = address(last) else { return peer }
        return clean
    }

    /// The group a sender's share of a budget is kept under: the /24 of an IPv4 address, the /48 of an IPv6 one (what
    /// one party is commonly given: a stranger does not get a share per address it controls).
    public static func group(_ address: String?) -> String? {
        guard let address, let bytes = AddressRange.bytes(address) else { return address }
        if bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) {
            return bytes[12..<15].map { String($0) }.joined(separator: ".") + ".0/24"
        }
        return stride(from: 0, to: 6, by: 2).map { String(format: "%x", Int(bytes[$0]) << 8 | Int(bytes[$0 + 1])) }.joined(separator: ":")
            + "::/48"
    }

    /// One host within a group: an IPv4 address itself, the /64 of an IPv6 one, written as its first address (a single
    /// host is commonly given a whole /64, so an address a stranger rotates within one is still one host). The host's
    /// `group` is its address's.
    public static func host(_ address: String?) -> String? {
        guard let address, let bytes = AddressRange.bytes(address) else { return address }
        if bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) {
            return bytes[12..<16].map { String($0) }.joined(separator: ".")
        }
        return stride(from: 0, to: 8, by: 2).map { String(format: "%x", Int(bytes[$0]) << 8 | Int(bytes[$0 + 1])) }.joined(separator: ":")
            + "::"
    }

    /// An address as written in a forwarding header (`1.2.3.4`, `1.2.3.4:5678`, `[2001:db8::1]:443`, `2001:db8::1`),
    /// without its port; nil when it is none.
    static func address(_ hop: String) -> String? {
        var text = Substring(hop)
        if text.first == "[", let close = text.firstIndex(of: "]") {
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]
        }
        let candidate = String(text)
        return AddressRange.bytes(candidate) == nil ? nil : candidate
    }
}
