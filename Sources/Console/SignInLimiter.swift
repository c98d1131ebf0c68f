/// How many sign-ins a name may try from an address, and an address in all, before they wait: a pure value, given
/// the time.
///
/// Every attempt counts when it starts (`attempt`), so attempts sent at once cannot all pass before the first is
/// judged; a success takes its own attempt back and forgets the name's failures from that address. Each attempt is
/// remembered for `window`. A name with `perName` attempts from one address, or an address with `perAddress`, is
/// refused until its oldest attempt leaves the window, without the password being checked (so guessing costs the
/// guesser time, not payrecon CPU). The name's count is per address: someone elsewhere guessing a person's password
/// cannot lock that person out. Memory is bounded: at most `maxKeys` keys, expired ones dropped first, then the
/// least recently used.
public struct SignInLimiter: Sendable {
    public var perName = 5
    public var perAddress = 20
    public var window: Duration = .seconds(15 * 60)
    public var maxKeys = 10_000

    /// Attempts by key (`n:` a name and an address, `a:` an address), oldest first, as instants on the caller's clock.
    private var attempts: [String: [Duration]] = [:]

    public init() {}

    public enum Decision: Sendable, Equatable {
        /// Go ahead; the attempt is counted.
        case allowed
        /// Refused without checking the password; try again after this long.
        case wait(Duration)
    }

    /// Whether `name` from `address` may try now (`now`: time since any fixed start, the same for every call); an
    /// allowed attempt is counted at once. `name` should be a valid user name or one placeholder for all invalid ones,
    /// so a key's size is bounded.
    public mutating func attempt(name: String, address: String, now: Duration) -> Decision {
        let keys = [(Self.nameKey(name, address), perName), ("a:" + address, perAddress)]
        var longest: Duration?
        for (key, limit) in keys {
            let list = recent(key, now: now)
            attempts[key] = list.isEmpty ? nil : list
            if list.count >= limit, let oldest = list.first { longest = max(longest ?? .zero, oldest + window - now) }
        }
        if let longest { return .wait(longest) }
        for (key, _) in keys { attempts[key, default: []].append(now) }
        if attempts.count > maxKeys { forget(now: now) }
        return .allowed
    }

    /// The attempt made at `at` succeeded: it no longer counts, and neither do the name's earlier ones from `address`.
    public mutating func succeeded(name: String, address: String, at: Duration) {
        attempts[Self.nameKey(name, address)] = nil
        let key = "a:" + address
        if var list = attempts[key], let i = list.lastIndex(of: at) {
            list.remove(at: i)
            attempts[key] = list.isEmpty ? nil : list
        }
    }

    static func nameKey(_ name: String, _ address: String) -> String { "n:" + address + "\u{0}" + name }

    private func recent(_ key: String, now: Duration) -> [Duration] {
        (attempts[key] ?? []).filter { now - $0 < window }
    }

    /// Drops what has left the window, then, if still over, the least recently used keys.
    private mutating func forget(now: Duration) {
        attempts = attempts.compactMapValues { list in
            let kept = list.filter { now - $0 < window }
            return kept.isEmpty ? nil : kept
        }
        guard attempts.count > maxKeys else { return }
        let byLast = attempts.sorted { ($0.value.last ?? .zero) < ($1.value.last ?? .zero) }
        for (key, _) in byLast.prefix(attempts.count - maxKeys) { attempts[key] = nil }
    }
}
