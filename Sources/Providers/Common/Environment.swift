import Foundation
import Reconciliation

/// Configuration from the environment. Every problem is reported with the variable's name and what to
/// set instead. Secrets are held, never printed; each may also be given as a file, `NAME_FILE=/path`, as container
/// platforms mount them.
public struct Environment: Sendable {
    public var values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) { self.values = values }

    /// The variable's value, trimmed; nil when unset or blank.
    public subscript(_ name: String) -> String? {
        guard let v = values[name]?.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
        return v
    }

    /// A secret: `NAME`, else the contents of the file `NAME_FILE` names (one trailing newline dropped).
    public func secret(_ name: String) throws(ConfigurationError) -> String? {
        if let v = self[name] { return v }
        guard let path = self[name + "_FILE"] else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("\(name)_FILE=\(path) cannot be read: point it at a file holding the secret")
        }
        var text = String(decoding: data, as: UTF8.self)
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { throw ConfigurationError("\(name)_FILE=\(path) is empty: it must hold the secret") }
        return text
    }

    public func duration(_ name: String, default fallback: String) throws(ConfigurationError) -> Int64 {
        let text = self[name] ?? fallback
        do { return try DurationParser.parse(text) } catch {
            throw ConfigurationError("\(name)=\(text) is not a duration: use a number with s, m, h or d (90s, 10m, 24h, 7d)")
        }
    }

    /// `PAYRECON_BACKFILL`: which providers the nightly `reconcile` backfills first, and how far back
    /// (`paypal=3d`, comma-separated); empty when unset.
    public func backfill() throws(ConfigurationError) -> [(provider: Provider, seconds: Int64)] {
        guard let text = self["PAYRECON_BACKFILL"], !text.isEmpty else { return [] }
        var out: [(provider: Provider, seconds: Int64)] = []
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let provider = Provider(rawValue: pair[0]) else {
                throw ConfigurationError("PAYRECON_BACKFILL=\(text): each entry is provider=duration (paypal=3d); '\(part)' is not")
            }
            guard let seconds = try? DurationParser.parse(pair[1]), seconds > 0 else {
                throw ConfigurationError("PAYRECON_BACKFILL=\(text): \(pair[1]) is not a duration (90s, 10m, 24h, 3d)")
            }
            out.append((provider, seconds))
        }
        return out
    }

    public func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let text = self[name] else { return fallback }
        guard let n = Int(text), range.contains(n) else {
            throw ConfigurationError("\(name)=\(text) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    public func choice(_ name: String, _ allowed: [String], default fallback: String) throws(ConfigurationError) -> String {
        let v = self[name] ?? fallback
        guard allowed.contains(v) else { throw ConfigurationError("\(name)=\(v) must be one of: \(allowed.joined(separator: ", "))") }
        return v
    }

    public func list(_ name: String, default fallback: String) -> [String] {
        (self[name] ?? fallback).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `PAYRECON_SIGNATURE_TOLERANCE`: the allowed distance between a webhook's signed timestamp and now (every
    /// provider's verifier takes it).
    /// A provider API base URL: `https://` (plain `http://` only for a loopback address — a simulator), so
    /// credentials never go in clear.
    public func baseURL(_ name: String, default fallback: String) throws(ConfigurationError) -> String {
        let text = self[name] ?? fallback
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else {
            throw ConfigurationError("\(name)=\(text) is not an absolute URL (e.g. https://api.example.com)")
        }
        if scheme == "https" { return text }
        // A loopback address literally (127.x.y.z, ::1, localhost), not a name that merely starts with "127.".
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        let ipv4Loopback = octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
        let loopback = host == "localhost" || ipv4Loopback || host == "::1" || host == "[::1]"
        guard scheme == "http", loopback else {
            throw ConfigurationError(
                "\(name)=\(text) must be https:// (plain http:// only for a loopback simulator): credentials would go in clear")
        }
        return text
    }

    public func signatureTolerance() throws(ConfigurationError) -> TimeInterval {
        TimeInterval(try duration("PAYRECON_SIGNATURE_TOLERANCE", default: "10m"))
    }

    /// A copy with `overrides` set (a command's flags over the environment).
    public func overriding(_ overrides: [String: String?]) -> Environment {
        var copy = self
        for (name, value) in overrides { if let value { copy.values[name] = value } }
        return copy
    }
}

/// A configuration value that cannot be used, with what to set instead (the CLI prints it and exits 2).
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ message: String) { description = message }
}
