/// How many failed sign-ins a name and an address may have before they wait: a pure value, given the time.
///
/// Each failure is remembered for `window`. A name with `perName` failures in it, or an address with `perAddress`,
/// is refused until its oldest failure leaves the window, without the password being checked (so guessing costs the
/// guesser time, not payrecon CPU). A success forgets the name's failures, not the address's: one right password
/// does not reset a spray across many names from one place. Memory is bounded: at most `maxKeys` names and addresses
/// are remembered, the least recently failing forgotten first.
public struct SignInLimiter: Sendable {
    public var perName = 5
    public var perAddress = 20
    public var window: Duration = .seconds(15 * 60)
    public var maxKeys = 10_000

    /// Failures by key (`n:` a name, `a:` an address), oldest first, as instants on the caller's clock.
    private var failures: [String: [Duration]] = [:]

    public init() {}

    public enum Decision: Sendable, Equatable {
        case allowed
        /// Refused without checking the password; try again after this long.
        case wait(Duration)
    }

    /// Whether `name` from `address` may try now (`now`: time since any fixed start, the same for every call).
    public mutating func check(name: String, address: String, now: Duration) -> Decision {
        let waits = [wait(for: "n:" + name, limit: perName, now: now), wait(for: "a:" + address, limit: perAddress, now: now)]
        guard let longest = waits.compactMap({ $0 }).max() else { return .allowed }
        return .wait(longest)
    }

    public mutating func failed(name: String, address: String, now: Duration) {
        for key in ["n:" + name, "a:" + address] {
            var list = recent(key, now: now)
            list.append(now)
            failures[key] = list
        }
        if failures.count > maxKeys { forgetOldest() }
    }

    public mutating func succeeded(name: String) {
        failures["n:" + name] = nil
    }

    private mutating func wait(for key: String, limit: Int, now: Duration) -> Duration? {
        let list = recent(key, now: now)
        failures[key] = list.isEmpty ? nil : list
        guard list.count >= limit, let oldest = list.first else { return nil }
        return oldest + window - now
    }

    private func recent(_ key: String, now: Duration) -> [Duration] {
        (failures[key] ?? []).filter { now - $0 < window }
    }

    private mutating func forgetOldest() {
        let byLast = failures.sorted { ($0.value.last ?? .zero) < ($1.value.last ?? .zero) }
        for (key, _) in byLast.prefix(failures.count - maxKeys) { failures[key] = nil }
    }
}
