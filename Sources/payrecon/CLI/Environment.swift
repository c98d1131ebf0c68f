import Foundation
import Reconciliation

/// Configuration from the environment (contract §3); a flag may override. Every problem is reported with the
/// variable's name and what to set instead. Secrets are held, never printed.
struct Environment: Sendable {
    var values: [String: String]

    init(_ values: [String: String] = ProcessInfo.processInfo.environment) { self.values = values }

    subscript(_ name: String) -> String? {
        guard let v = values[name]?.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
        return v
    }

    func databaseURL(flag: String? = nil) throws(FatalError) -> String {
        if let flag, !flag.isEmpty { return flag }
        guard let url = self["DATABASE_URL"] else {
            throw FatalError("DATABASE_URL is not set: set it to a libpq connection string "
                + "(e.g. postgresql://user@localhost:5432/payrecon), or run scripts/demo, which starts a local database")
        }
        return url
    }

    func duration(_ name: String, default fallback: String) throws(FatalError) -> Int64 {
        let text = self[name] ?? fallback
        do { return try DurationParser.parse(text) } catch {
            throw FatalError("\(name)=\(text) is not a duration: use a number with s, m, h or d (90s, 10m, 24h, 7d)")
        }
    }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(FatalError) -> Int {
        guard let text = self[name] else { return fallback }
        guard let n = Int(text), range.contains(n) else {
            throw FatalError("\(name)=\(text) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    func choice(_ name: String, _ allowed: [String], default fallback: String) throws(FatalError) -> String {
        let v = self[name] ?? fallback
        guard allowed.contains(v) else { throw FatalError("\(name)=\(v) must be one of: \(allowed.joined(separator: ", "))") }
        return v
    }

    func list(_ name: String, default fallback: String) -> [String] {
        (self[name] ?? fallback).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `host:port` for the receiver.
    func listenAddress(flag: String?) throws(FatalError) -> (host: String, port: UInt16) {
        let text = flag ?? self["PAYRECON_LISTEN"] ?? "127.0.0.1:8080"
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw FatalError("PAYRECON_LISTEN=\(text) must be host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }
}
