/// `PAYRECON_PENDING_MAX`: how long a transaction may stay pending or action_required before it is
/// `stale_pending` — a default, then `name=duration` entries where the name is a provider (`pxp`, `paypal`,
/// `paypercut`) or a payment method as the snapshot reports it (`card`, `blik`, `aeropay`, `echeck`…). A method entry
/// wins over a provider entry, which wins over the default. Example: `24h,aeropay=5d,blik=15m`.
public struct PendingWindows: Sendable, Hashable {
    public var defaultSeconds: Int64
    public var byProvider: [Provider: Int64]
    public var byMethod: [String: Int64]

    public init(defaultSeconds: Int64, byProvider: [Provider: Int64] = [:], byMethod: [String: Int64] = [:]) {
        self.defaultSeconds = defaultSeconds; self.byProvider = byProvider; self.byMethod = byMethod
    }

    /// The window for a transaction of `provider` paid with `method` (nil: the provider's or the default).
    public func seconds(provider: Provider, method: String?) -> Int64 {
        if let method, let s = byMethod[method.lowercased()] { return s }
        return byProvider[provider] ?? defaultSeconds
    }

    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Parses `24h,aeropay=5d,blik=15m`: the first entry without a name is the default (else `fallback`); names are
    /// case-insensitive; a duplicate name, an empty entry or a bad duration is an error that names it.
    public static func parse(_ text: String, fallback: Int64 = 86_400) throws(ParseError) -> PendingWindows {
        var windows = PendingWindows(defaultSeconds: fallback)
        var sawDefault = false
        var seen = Set<String>()
        for raw in text.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = trimmed(raw)
            guard !entry.isEmpty else { throw ParseError(description: "PAYRECON_PENDING_MAX=\(text) has an empty entry") }
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { trimmed($0) }
            func duration(_ t: String) throws(ParseError) -> Int64 {
                do { return try DurationParser.parse(t) } catch {
                    throw ParseError(description: "PAYRECON_PENDING_MAX entry '\(entry)': \(error) (use 90s, 10m, 24h, 7d)")
                }
            }
            if parts.count == 1 {
                guard !sawDefault else { throw ParseError(description: "PAYRECON_PENDING_MAX=\(text) has two defaults") }
                windows.defaultSeconds = try duration(parts[0]); sawDefault = true
                continue
            }
            let name = parts[0].lowercased()
            guard !name.isEmpty, seen.insert(name).inserted else {
                throw ParseError(
                    description: "PAYRECON_PENDING_MAX entry '\(entry)': \(name.isEmpty ? "no name" : "\(name) is given twice")")
            }
            let seconds = try duration(parts[1])
            if let provider = Provider(rawValue: name) { windows.byProvider[provider] = seconds } else { windows.byMethod[name] = seconds }
        }
        return windows
    }
}

private func trimmed(_ s: Substring) -> String {
    String(s.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
}

private func trimmed(_ s: String) -> String { trimmed(Substring(s)) }
