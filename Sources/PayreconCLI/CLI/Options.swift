import Foundation
import Reconciliation
import Store

/// Anything a command lists in `options:`.
public protocol CommandOption: Sendable {
    var spec: Command.Option { get }
}

/// An option that takes a value, with how the value is read: declared once in `Options`, used by name.
public struct OptionKey<Value: Sendable>: CommandOption {
    public let spec: Command.Option
    let read: @Sendable (String) throws(UsageError) -> Value

    init(_ name: String, _ valueName: String, _ help: String, read: @escaping @Sendable (String) throws(UsageError) -> Value) {
        spec = Command.Option(name: name, value: valueName, help: help); self.read = read
    }

    /// The same option with other help text (the help says what it means for that command).
    func help(_ text: String) -> OptionKey<Value> { OptionKey(spec.name, spec.value ?? "", text, read: read) }
}

extension OptionKey where Value == String {
    /// Any non-empty text.
    init(_ name: String, _ valueName: String, _ help: String) {
        self.init(name, valueName, help) { (text: String) throws(UsageError) -> String in
            guard !text.isEmpty else { throw UsageError("\(name) needs a value (\(valueName))") }
            return text
        }
    }
}

/// An option without a value.
public struct FlagKey: CommandOption {
    public let spec: Command.Option
    init(_ name: String, _ help: String) { spec = Command.Option(name: name, value: nil, help: help) }
}

/// Every option of every command, declared once.
public enum Options {
    // Shared
    public static let databaseURL = OptionKey<String>("--database-url", "URL", "Override DATABASE_URL.")
    public static let provider = OptionKey<Provider>("--provider", "P", "Only \(names(Provider.self)).") {
        (p: String) throws(UsageError) -> Provider in
        try oneOf(Provider.self, p, "--provider")
    }
    public static let since = OptionKey<String>("--since", "DURATION", "Only within DURATION (90s, 10m, 24h, 7d).") {
        (text: String) throws(UsageError) -> String in
        do { _ = try DurationParser.parse(text) } catch { throw UsageError("--since: \(error)") }
        return text
    }
    public static func limit(default fallback: Int, max: Int) -> OptionKey<Int> {
        OptionKey<Int>("--limit", "N", "At most N (default \(fallback)).") { (v: String) throws(UsageError) -> Int in
            try wholeNumber("--limit", v, 1...max)
        }
    }

    // serve
    public static let listen = OptionKey<String>("--listen", "HOST:PORT", "Override PAYRECON_LISTEN (default 127.0.0.1:8080).")
    public static let threads = OptionKey<Int>("--threads", "N", "HTTP worker threads (default: 4).") {
        (v: String) throws(UsageError) -> Int in
        try wholeNumber("--threads", v, 1...256)
    }
    public static let portFile = OptionKey<String>("--port-file", "FILE", "Write the bound port here once listening (useful with port 0).")

    // work
    public static let once = FlagKey("--once", "Exit when nothing is due (instead of waiting for new deliveries).")
    public static let batch = OptionKey<Int>(
        "--batch", "N", "Provider calls in flight at once (default 32); twice as many deliveries are in hand."
    ) { (v: String) throws(UsageError) -> Int in
        try wholeNumber("--batch", v, 1...256)
    }
    public static let lease = OptionKey<Duration>(
        "--lease", "DURATION", "Lease on a claimed delivery, renewed while working (default 60s)."
    ) {
        (v: String) throws(UsageError) -> Duration in
        let seconds = try duration(v, flag: "--lease")
        guard seconds >= 1 else {
            throw UsageError("--lease \(v) must be at least 1s: a lease of nothing lets a second worker take what the first holds")
        }
        // A worker that dies holds what it claimed for a whole lease: a day at most.
        guard seconds <= 86_400 else {
            throw UsageError("--lease \(v) must be at most 1d: what a stopped worker held waits a whole lease before another takes it")
        }
        return .seconds(seconds)
    }
    public static let maxAttempts = OptionKey<Int>("--max-attempts", "N", "Attempts before a delivery is dead (default 10).") {
        (v: String) throws(UsageError) -> Int in try wholeNumber("--max-attempts", v, 1...100)
    }

    // reconcile
    public static let all = FlagKey("--all", "Every order, whatever its age.")
    public static let concurrency = OptionKey<Int>("--concurrency", "N", "Provider calls in flight at once (default 16).") {
        (v: String) throws(UsageError) -> Int in try wholeNumber("--concurrency", v, 1...1024)
    }

    // report, actions list
    public static let output = OptionKey<String>("--output", "FILE", "Write to FILE (atomically) instead of stdout.") {
        (path: String) throws(UsageError) -> String in
        guard !path.isEmpty else { throw UsageError("--output needs a file name") }
        return path
    }
    public static let kind = OptionKey<DiscrepancyKind>("--kind", "K", "Only this discrepancy kind (e.g. amount_mismatch).") {
        (k: String) throws(UsageError) -> DiscrepancyKind in try oneOf(DiscrepancyKind.self, k, "--kind")
    }
    public static let failOnOpen = FlagKey("--fail-on-open", "Exit 1 when a listed discrepancy is open (after printing).")
    public static let order = OptionKey<String>("--order", "ID", "Only the actions of this order.")
    public static let actionStatus = OptionKey<ActionStatus>(
        "--status", "pending|succeeded|failed|superseded", "Only actions in this state."
    ) {
        (s: String) throws(UsageError) -> ActionStatus in try oneOf(ActionStatus.self, s, "--status")
    }
    public static func format(_ allowed: [String]) -> OptionKey<String> {
        OptionKey<String>("--format", allowed.joined(separator: "|"), "Output format (default \(allowed[0])).") {
            (v: String) throws(UsageError) -> String in
            guard allowed.contains(v) else {
                throw UsageError("--format must be one of \(allowed.joined(separator: ", ")), not '\(v.terminalSafe)'")
            }
            return v
        }
    }
    public static func status(_ allowed: [String], help: String) -> OptionKey<String> {
        OptionKey<String>("--status", allowed.joined(separator: "|"), help) { (v: String) throws(UsageError) -> String in
            guard allowed.contains(v) else {
                throw UsageError("--status must be one of \(allowed.joined(separator: ", ")), not '\(v.terminalSafe)'")
            }
            return v
        }
    }

    // events retry
    public static let dead = FlagKey("--dead", "Every dead delivery.")

    // verify
    public static let body = OptionKey<String>("--body", "FILE", "The raw body bytes, exactly as delivered.")
    public static let headers = OptionKey<String>("--headers", "FILE", "A JSON object of header names to values.")
    public static let webhookID = OptionKey<String>("--webhook-id", "ID", "PayPal: the listener's webhook id (default PAYPAL_WEBHOOK_ID).")
    public static let cert = OptionKey<String>(
        "--cert", "FILE", "PayPal: the signing certificate PEM (else PAYPAL-CERT-URL is fetched, if allowed).")
    public static let roots = OptionKey<String>(
        "--roots", "FILE", "PayPal: trust roots PEM (default PAYPAL_TRUST_ROOTS, else the shipped DigiCert roots).")
    public static let key = OptionKey<String>(
        "--key", "K",
        "PXP: the webhook key (default PXP_WEBHOOK_KEY); Paypercut: the secret (default PAYPERCUT_WEBHOOK_SECRET). Prefer the variable or NAME_FILE: arguments are visible to other users."
    )
    public static let at = OptionKey<String>(
        "--at", "TIME|transmission",
        "Evaluate time checks at TIME (ISO 8601 or unix seconds) or at the delivery's own timestamp (default: now).")

    // MARK: readers

    /// `PROVIDER:ORDER_ID` (`pxp:ORD-1`) as `explain --order` and `check` take it; `what` names the argument in errors.
    static func orderKey(_ key: String, what: String) throws(UsageError) -> (provider: Provider, orderID: String) {
        let parts = key.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[1].isEmpty else {
            throw UsageError("\(what) takes PROVIDER:ORDER_ID (pxp:ORD-1), not '\(key.terminalSafe)'")
        }
        guard let provider = Provider(rawValue: parts[0]) else {
            throw UsageError(
                "\(what): unknown provider '\(parts[0].terminalSafe)'; one of \(Provider.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return (provider, parts[1])
    }

    /// A row's id as a command's ID argument takes it: a number, positive where `of` names what it is
    /// ("a discrepancy id"); the text is the user's, shown escaped.
    static func id(_ text: String, of what: String? = nil) throws(UsageError) -> Int64 {
        guard let id = Int64(text), what == nil || id > 0 else {
            throw UsageError("ID must be \(what.map { "\($0) (a positive number)" } ?? "a number"), not '\(text.terminalSafe)'")
        }
        return id
    }

    static func names<T: RawRepresentable & CaseIterable>(_: T.Type) -> String where T.RawValue == String {
        T.allCases.map(\.rawValue).joined(separator: ", ")
    }

    static func oneOf<T: RawRepresentable & CaseIterable>(_: T.Type, _ text: String, _ flag: String) throws(UsageError) -> T
    where T.RawValue == String {
        guard let value = T(rawValue: text) else { throw UsageError("\(flag) must be one of \(names(T.self)), not '\(text.terminalSafe)'") }
        return value
    }

    static func wholeNumber(_ flag: String, _ text: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let n = Int(text), range.contains(n) else {
            throw UsageError("\(flag) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text.terminalSafe)'")
        }
        return n
    }

    static func duration(_ text: String, flag: String) throws(UsageError) -> Int64 {
        do { return try DurationParser.parse(text) } catch {
            throw UsageError("\(flag) \(text.terminalSafe) is not a duration: use a number with s, m, h or d (90s, 10m, 24h, 7d)")
        }
    }
}
