import Foundation

/// Whose uncached certificate URL a stranger's share of the fetch budget goes to: a fair turn between sender groups
/// (an IPv4 /24, an IPv6 /48), not whoever asks first after a slot frees.
///
/// Under a flood the first ask after a slot frees is almost always the flood's, so "first come" gave a stranger with
/// three /24s every fetch at a cold start (0 of 45 genuine deliveries verified in 225 s). Here every ask the budget
/// refuses is remembered, by group, for `askSeconds`; when a fetch is allowed, it goes to the group served least
/// recently (never served first), and of equals to the group waiting longest. A stranger's groups each get their
/// turn, and nothing more: how often a group asks, or how many URLs, buys it nothing across groups. When a group was
/// last served is kept apart from its asks, so a group pushed out by others' asks does not come back "never served".
///
/// A value, with the clock passed in: no I/O, no lock (the certificate cache holds it under its own).
struct CertificateFetchTurns {
    struct Ask: Equatable {
        var asks: Int
        var first: Date
        var last: Date
    }

    private(set) var asks: [String: [String: Ask]] = [:]
    /// Each group's last ask (kept beside `asks`: finding the oldest is one pass over the groups, not over every ask).
    private var lastAsk: [String: Date] = [:]
    private(set) var lastServed: [String: Date] = [:]
    let maxURLsPerGroup: Int
    let maxGroups: Int
    let askSeconds: TimeInterval

    init(maxURLsPerGroup: Int = 16, maxGroups: Int = 1024, askSeconds: TimeInterval = 600) {
        self.maxURLsPerGroup = max(1, maxURLsPerGroup)
        self.maxGroups = max(1, maxGroups)
        self.askSeconds = askSeconds
    }

    /// `group` asked for `url` at `now`. Bounded: a group keeps its `maxURLsPerGroup` most asked URLs (the most
    /// recently asked of equals); past `maxGroups` groups, the one whose last ask is oldest goes. `lastServed` keeps
    /// `4 × maxGroups` groups, the oldest served going first (which only moves them up the order they were near).
    mutating func record(url: String, group: String, now: Date) {
        if asks[group] == nil, asks.count >= maxGroups, let oldest = lastAsk.min(by: { $0.value < $1.value })?.key {
            asks[oldest] = nil
            lastAsk[oldest] = nil
        }
        lastAsk[group] = now
        var urls = asks[group] ?? [:]
        if var ask = urls[url] {
            ask.asks += 1
            ask.last = now
            urls[url] = ask
        } else {
            if urls.count >= maxURLsPerGroup, let victim = urls.min(by: { Self.keepsBefore($1.value, $0.value) })?.key {
                urls[victim] = nil
            }
            urls[url] = Ask(asks: 1, first: now, last: now)
        }
        asks[group] = urls
    }

    /// The next URL to fetch, and the group it is fetched for, among the groups `eligible` allows (the budget's rules
    /// for that group) with an ask of the last `askSeconds`: the group served least recently (never served first);
    /// of equals, the one whose oldest ask is oldest. A group's URL is its most asked (the earliest of equals).
    func next(now: Date, eligible: (String) -> Bool) -> (url: String, group: String)? {
        let since = now.addingTimeInterval(-askSeconds)
        var best: (url: String, group: String, served: Date, waiting: Date)?
        for (group, urls) in asks where eligible(group) {
            let open = urls.filter { $0.value.last > since }
            guard let candidate = open.min(by: { Self.fetchesBefore($0.value, $1.value) || ($0.value == $1.value && $0.key < $1.key) }),
                let waiting = open.values.map(\.first).min()
            else { continue }
            let served = lastServed[group] ?? .distantPast
            if let current = best, (current.served, current.waiting, current.group) < (served, waiting, group) { continue }
            best = (candidate.key, group, served, waiting)
        }
        return best.map { ($0.url, $0.group) }
    }

    /// A fetch starts for `group`: its turn is taken.
    mutating func served(group: String, now: Date) {
        if lastServed[group] == nil, lastServed.count >= 4 * maxGroups,
            let oldest = lastServed.min(by: { $0.value < $1.value })?.key
        {
            lastServed[oldest] = nil
        }
        lastServed[group] = now
    }

    /// `url` needs no turn any more (its fetch started: it is in flight, then cached or known bad).
    mutating func forget(url: String) {
        for group in asks.keys where asks[group]?[url] != nil {
            asks[group]?[url] = nil
        }
    }

    /// Asks older than `askSeconds` go (PayPal's retries ask again); a group with none left goes too.
    mutating func expire(now: Date) {
        let since = now.addingTimeInterval(-askSeconds)
        asks = asks.compactMapValues { urls in
            let open = urls.filter { $0.value.last > since }
            return open.isEmpty ? nil : open
        }
        lastAsk = lastAsk.filter { asks[$0.key] != nil }
    }

    /// Within a group, whether `a` is fetched before `b`: asked more often, then asked first.
    private static func fetchesBefore(_ a: Ask, _ b: Ask) -> Bool {
        a.asks != b.asks ? a.asks > b.asks : a.first < b.first
    }

    /// Whether `a` is kept before `b` when a group is full: asked more often, then asked more recently.
    private static func keepsBefore(_ a: Ask, _ b: Ask) -> Bool {
        a.asks != b.asks ? a.asks > b.asks : a.last > b.last
    }
}
