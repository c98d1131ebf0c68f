import Foundation

/// Whose uncached certificate URL is fetched when the budget allows one more fetch: a fair turn between sender
/// groups (an IPv4 /24, an IPv6 /48), not whoever asks first after a slot frees.
///
/// Under a flood the first ask after a slot frees is almost always the flood's, so "first come" gave a stranger with
/// three /24s every fetch at a cold start (0 of 45 genuine deliveries verified in 225 s). Here every ask the budget
/// refuses is remembered, by group; when a fetch is allowed, it goes to the group served least recently, and within
/// the turn order to the URL asked most often: PayPal retries a delivery naming the same URL, while each of a
/// stranger's random URLs is asked once and, once fetched and failed, not fetched again for a while. A stranger's
/// groups each get their turn, and nothing more.
///
/// A value, with the clock passed in: no I/O, no lock (the certificate cache holds it under its own).
struct CertificateFetchTurns {
    struct Ask: Equatable {
        var asks: Int
        var first: Date
        var last: Date
    }

    struct Group {
        var urls: [String: Ask] = [:]
        var lastAsk: Date
        var lastServed: Date?
    }

    private(set) var groups: [String: Group] = [:]
    let maxURLsPerGroup: Int
    let maxGroups: Int

    init(maxURLsPerGroup: Int = 16, maxGroups: Int = 1024) {
        self.maxURLsPerGroup = max(1, maxURLsPerGroup)
        self.maxGroups = max(1, maxGroups)
    }

    /// `group` asked for `url` at `now`. Bounded: a group keeps its `maxURLsPerGroup` most asked URLs (the most
    /// recently asked of equals), and the `maxGroups` groups that asked most recently are kept.
    mutating func record(url: String, group: String, now: Date) {
        if groups[group] == nil, groups.count >= maxGroups,
           let oldest = groups.min(by: { $0.value.lastAsk < $1.value.lastAsk })?.key {
            groups[oldest] = nil
        }
        var entry = groups[group] ?? Group(lastAsk: now)
        entry.lastAsk = now
        if var ask = entry.urls[url] {
            ask.asks += 1
            ask.last = now
            entry.urls[url] = ask
        } else {
            if entry.urls.count >= maxURLsPerGroup,
               let victim = entry.urls.min(by: { Self.keepsBefore($1.value, $0.value) })?.key {
                entry.urls[victim] = nil
            }
            entry.urls[url] = Ask(asks: 1, first: now, last: now)
        }
        groups[group] = entry
    }

    /// The next URL to fetch, and the group it is fetched for, among the groups `eligible` allows (the budget's
    /// rules for that group): the group served least recently (never served first); of equals, the one whose
    /// candidate was asked most often, then first. A group's candidate is its most asked URL (the earliest asked of
    /// equals).
    func next(eligible: (String) -> Bool) -> (url: String, group: String)? {
        var best: (url: String, group: String, served: Date, ask: Ask)?
        for (name, group) in groups where eligible(name) {
            guard let candidate = group.urls.min(by: { Self.fetchesBefore($0.value, $1.value) || ($0.value == $1.value && $0.key < $1.key) })
            else { continue }
            let served = group.lastServed ?? .distantPast
            if let current = best {
                if served > current.served { continue }
                if served == current.served {
                    if Self.fetchesBefore(current.ask, candidate.value) { continue }
                    if current.ask == candidate.value, current.group < name { continue }
                }
            }
            best = (candidate.key, name, served, candidate.value)
        }
        return best.map { ($0.url, $0.group) }
    }

    /// A fetch starts for `group`: its turn is taken.
    mutating func served(group: String, now: Date) {
        groups[group]?.lastServed = now
    }

    /// `url` needs no turn any more (its fetch started: it is in flight, then cached or known bad).
    mutating func forget(url: String) {
        for name in groups.keys where groups[name]?.urls[url] != nil {
            groups[name]?.urls[url] = nil
        }
    }

    /// Whether `a` is fetched before `b`: asked more often, then asked first.
    private static func fetchesBefore(_ a: Ask, _ b: Ask) -> Bool {
        a.asks != b.asks ? a.asks > b.asks : a.first < b.first
    }

    /// Whether `a` is kept before `b` when a group is full: asked more often, then asked more recently.
    private static func keepsBefore(_ a: Ask, _ b: Ask) -> Bool {
        a.asks != b.asks ? a.asks > b.asks : a.last > b.last
    }
}
