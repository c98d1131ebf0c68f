import Crypto
import Foundation
import HTTP
import Observability
import Synchronization

/// Where the PayPal verifier gets the PEM served at a `PAYPAL-CERT-URL`. The verifier only asks for URLs under an
/// allowed prefix. The network fetcher (over the HTTP client) is wired by the receiver; this room has none.
public protocol CertificateSource: Sendable {
    /// The PEM bytes served at `url`; throws when they cannot be had. May wait on the network.
    func pem(for url: String) throws -> [UInt8]
    /// The PEM when it is at hand without waiting; throws when it is known not to be had; nil when only a fetch can
    /// tell (then `prefetch`, and ask again).
    func pemWithoutWaiting(for url: String) throws -> [UInt8]?
    /// Fetches `url` if a fetch is allowed for `sender` (the address the delivery came from, nil when unknown: the
    /// budget is kept by its group, `SenderAddress.group`, and turns within a trusted group by host),
    /// without blocking the caller; `then` runs (on any thread) once `pemWithoutWaiting` can answer, or at once when
    /// there is nothing to wait for.
    func prefetch(_ url: String, sender: String?, then: @escaping @Sendable () -> Void)
    /// The certificate at `url` as already validated (chained, its name checked for the URL), when this source keeps
    /// one: the verifier then checks the signature first and the chain only as its validity window.
    func signingCertificate(for url: String) -> SigningCertificate?
    /// The certificate at `url` has just verified a delivery's signature.
    func verifiedDelivery(with url: String)
    /// A delivery from `sender` (an address; `SenderAddress.group` gives its group) was verified: its group's later
    /// fetches come out of a reserve strangers cannot spend, and the host's own go first within the group.
    func trust(sender: String)
}

extension CertificateSource {
    /// Sources without a network (fixed, unavailable) always answer at once.
    public func pemWithoutWaiting(for url: String) throws -> [UInt8]? { try pem(for: url) }
    public func prefetch(_ url: String, sender: String?, then: @escaping @Sendable () -> Void) { then() }
    public func prefetch(_ url: String, then: @escaping @Sendable () -> Void) { prefetch(url, sender: nil, then: then) }
    public func signingCertificate(for url: String) -> SigningCertificate? { nil }
    public func verifiedDelivery(with url: String) {}
    public func trust(sender: String) {}
}

/// A PayPal signing certificate as validated: its leaf, and the window in which its whole chain is valid.
public struct SigningCertificate: Sendable {
    public let leaf: X509Certificate
    public let validity: DateInterval
    public init(leaf: X509Certificate, validity: DateInterval) { self.leaf = leaf; self.validity = validity }
}

/// What validating a served PEM gives the cache: until when it may be kept, and (for the verifier's fast path) the
/// validated certificate.
public struct ValidatedCertificate: Sendable {
    public var keepUntil: Date
    public var signing: SigningCertificate?
    public init(keepUntil: Date, signing: SigningCertificate? = nil) { self.keepUntil = keepUntil; self.signing = signing }
}

/// Serves one fixed PEM for every URL (`payrecon verify --cert FILE`, tests).
public struct FixedCertificateSource: CertificateSource {
    public let pemBytes: [UInt8]
    public init(pem: [UInt8]) { self.pemBytes = pem }
    public func pem(for url: String) throws -> [UInt8] { pemBytes }
}

/// Refuses every fetch: for verifying offline with no certificate at hand.
public struct UnavailableCertificateSource: CertificateSource {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String { "no certificate source configured" }
    }
    public init() {}
    public func pem(for url: String) throws -> [UInt8] { throw Unavailable() }
}

/// A thread-safe, bounded cache of validated certificates in front of another `CertificateSource`, keyed by URL,
/// that no sender can turn into a fetch storm nor use to keep genuine deliveries from verifying:
/// - one fetch at a time per URL: callers missing the same URL wait for that one fetch (`prefetch` callers without a
///   thread: their continuation is kept, at most `maxWaiters` of them; beyond that they are answered at once);
/// - a URL whose fetch (or validation) failed is not fetched again for `failureTTL` (5 minutes): those deliveries
///   are refused at once;
/// - at most `maxNewURLsPerMinute` (10) distinct uncached URLs are fetched per minute, and at most
///   `maxNewURLsPerSenderPerMinute` (2) of them for one sender (an IPv4 /24, an IPv6 /48: `SenderAddress.group`): a
///   stranger's stream of random URLs spends its own share. Senders of no verified delivery get 5 of the 10 together;
///   senders that delivered a verified delivery before (`trust(sender:)`, kept across restarts with the certificates)
///   may use all 10, so the 5 kept for them (`maxTrustedURLsPerMinute`) are never spent by a stranger, however many
///   addresses the stranger has: a new genuine URL (PayPal rotates them) is fetched within a minute of PayPal's first
///   delivery naming it;
/// - strangers' fetches go by turns (`CertificateFetchTurns`), not to whoever asks first after a slot frees: every
///   ask is remembered by sender group for 10 minutes, and the group served least recently is served next (of
///   equals, the one waiting longest). At a cold start, when PayPal's group is not trusted yet, a flood from a few
///   groups gets one turn per group, and a retried genuine URL is fetched within a round of turns, whether or not
///   its request still waits (PayPal's next retry then finds the certificate cached). A trusted group's ask never
///   waits behind strangers' asks; within trusted groups a host (an IPv4 address, an IPv6 /64: `SenderAddress.host`)
///   that delivered a verified delivery itself goes first and may use the whole budget, any other has 2 a minute, and
///   they take turns, so one address inside PayPal's /24 asking for random URLs gets its turn, not every fetch the
///   group may make. `pemWithoutWaiting` never refuses for the budget: `prefetch`, with the sender, remembers the
///   ask, so its turn comes however long a flood keeps the budget spent;
/// - only what `validate` accepts (parsed, chained to the trust roots, the CN PayPal serves from that URL's host) is
///   cached, and kept until what `validate` says (the chain's notAfter), not on a timer;
/// - when full, expired entries go first, then those that never verified a delivery (oldest first), and only then the
///   least recently used of those that did: a stranger's entry never pushes out one a genuine delivery uses;
/// - a certificate is handed to `persist` the first time it verifies a delivery (the receiver keeps it in the
///   database, and `restore` brings it back at start, so a restart starts warm).
public final class CachingCertificateSource: CertificateSource {
    private struct Entry {
        var pem: [UInt8]
        var keepUntil: Date
        var signing: SigningCertificate?
        var stored: UInt64
        /// When it last verified a delivery; nil for a certificate only fetched so far.
        var verified: Date?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var failures: [String: (until: Date, reason: String)] = [:]
        var inFlight: [String: Fetch] = [:]
        /// The last minute's fetches: for which sender group and host (`SenderAddress.host`), and whether trusted.
        var recentFetches: [(at: Date, sender: String, host: String, trusted: Bool)] = []
        var counter: UInt64 = 0
        var hits = 0
        var misses = 0
        var fetches = 0
        var persist: (@Sendable (_ url: String, _ pem: [UInt8], _ keepUntil: Date) -> Void)?
        /// Sender groups that delivered a verified delivery, and when they last did (bounded: `maxTrustedSenders`).
        var trusted: [String: Date] = [:]
        /// Hosts that delivered a verified delivery themselves, and when they last did (in memory only; bounded:
        /// `maxVerifiedHosts`): inside a trusted group they go first, and are not held to a host's share.
        var verifiedHosts: [String: Date] = [:]
        var persistSender: (@Sendable (_ sender: String, _ keepUntil: Date) -> Void)?
        var refused = 0
        /// Strangers' asks, by sender group: whose fetch is next.
        var turns = CertificateFetchTurns()
        /// Trusted groups' asks, by host (`SenderAddress.host`): one address inside a trusted group does not get
        /// every fetch the group may make.
        var trustedTurns = CertificateFetchTurns()
        var lastTurnScan = Date.distantPast
        var lastExpiry = Date.distantPast
    }

    /// One fetch of one URL; later callers for the same URL wait on it.
    private final class Fetch: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        var result: Result<[UInt8], any Error> = .failure(Refused(reason: "not fetched"))
        /// Callers blocked on `done` (counted under the source's lock, while the fetch is in flight).
        var waiters = 0
        /// `prefetch` continuations to run once it ended (under the source's lock, while in flight).
        var continuations: [@Sendable () -> Void] = []
    }

    public struct Refused: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    private let upstream: any CertificateSource
    private let validate: @Sendable (_ url: String, _ pem: [UInt8], _ now: Date) throws -> ValidatedCertificate
    public let maxEntries: Int
    public let failureTTL: TimeInterval
    public let maxNewURLsPerMinute: Int
    public let maxNewURLsPerSenderPerMinute: Int
    /// Of `maxNewURLsPerMinute`, the fetches a minute kept for trusted senders: strangers together get the rest.
    public let maxTrustedURLsPerMinute = 5
    /// Trusted sender groups kept (the most recent); a trusted sender is kept `trustSeconds` after its last delivery.
    public let maxTrustedSenders = 256
    /// Hosts kept as having delivered a verified delivery themselves (the most recent).
    public let maxVerifiedHosts = 1024
    public let trustSeconds: TimeInterval = 30 * 86_400
    /// Most `prefetch` continuations kept waiting on fetches at once (each holds a delivery's body).
    public let maxWaiters: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    /// - Parameter validate: throws when the PEM served at the URL is not a certificate to cache (the verifier's checks,
    ///   which depend on the URL: each of PayPal's hosts serves one name); says until when it may be kept.
    public init(
        upstream: any CertificateSource, maxEntries: Int = 32, failureTTL: TimeInterval = 300,
        maxNewURLsPerMinute: Int = 10, maxNewURLsPerSenderPerMinute: Int = 2, maxWaiters: Int = 256,
        validate: @escaping @Sendable (_ url: String, _ pem: [UInt8], _ now: Date) throws -> ValidatedCertificate,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.upstream = upstream
        self.validate = validate
        self.maxEntries = max(1, maxEntries)
        self.failureTTL = failureTTL
        self.maxNewURLsPerMinute = max(1, maxNewURLsPerMinute)
        self.maxNewURLsPerSenderPerMinute = max(1, maxNewURLsPerSenderPerMinute)
        self.maxWaiters = max(0, maxWaiters)
        self.clock = clock
    }

    /// A cache whose entries are kept `ttl` after their fetch, whatever they are (tests of the cache's own rules).
    public convenience init(
        upstream: any CertificateSource, maxEntries: Int = 32, ttl: TimeInterval = 86_400, failureTTL: TimeInterval = 300,
        maxNewURLsPerMinute: Int = 10, maxNewURLsPerSenderPerMinute: Int = 2, maxWaiters: Int = 256,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            upstream: upstream, maxEntries: maxEntries, failureTTL: failureTTL, maxNewURLsPerMinute: maxNewURLsPerMinute,
            maxNewURLsPerSenderPerMinute: maxNewURLsPerSenderPerMinute, maxWaiters: maxWaiters,
            validate: { _, _, now in ValidatedCertificate(keepUntil: now.addingTimeInterval(ttl)) }, clock: clock)
    }

    private enum Step {
        case cached([UInt8]), wait(Fetch), fetch(Fetch), refuse(String), fetchAllowed
        /// The turn went to another URL, whose fetch starts now (nobody waits on it); this ask is refused.
        case fetchOther(String, Fetch)
    }

    /// What to do for `url` now. `join`: whether the caller takes part (waits on a fetch in flight, or starts one);
    /// without it nothing changes but the hit count.
    private func step(for url: String, sender: String?, now: Date, join: Bool) -> Step {
        state.withLock { decide(&$0, url: url, sender: sender, now: now, join: join) }
    }

    private func decide(_ state: inout State, url: String, sender: String?, now: Date, join: Bool) -> Step {
        if let entry = state.entries[url], entry.keepUntil > now {
            state.hits += 1
            return .cached(entry.pem)
        }
        if let failed = state.failures[url] {
            if failed.until > now {
                state.misses += 1
                return .refuse("it failed less than \(Int(failureTTL / 60)) minutes ago (\(failed.reason)); not fetched again yet")
            }
            state.failures[url] = nil
        }
        if let fetch = state.inFlight[url] {
            if join { state.misses += 1; fetch.waiters += 1 }
            return .wait(fetch)
        }
        state.recentFetches.removeAll { $0.at <= now.addingTimeInterval(-60) }
        // Asked without waiting (`pemWithoutWaiting`, the receiver's first look): whether a fetch is allowed is for
        // `prefetch` to say, with the sender, which remembers the ask even when the budget is spent (refused here, the
        // delivery would be answered 401 without its ask ever taking a turn).
        guard join || sender != nil else { return .fetchAllowed }
        // Without a sender (`pem(for:)`, which `payrecon verify` uses) only the budget a minute applies, and no turn.
        guard let sender else {
            guard state.recentFetches.count < maxNewURLsPerMinute else {
                state.misses += 1; state.refused += 1
                return .refuse("\(maxNewURLsPerMinute) uncached certificate URLs were fetched in the last minute; not fetched")
            }
            guard join else { return .fetchAllowed }
            state.misses += 1
            state.recentFetches.append((now, "", "", false))
            return startFetch(&state, url: url)
        }
        // The budget is kept by group (an IPv4 /24, an IPv6 /48); turns within a trusted group by host.
        let group = SenderAddress.group(sender) ?? sender
        let refusal = budgetRefusal(state, sender: group, now: now)
        guard join else { return refusal.map { .refuse($0) } ?? .fetchAllowed }
        state.misses += 1
        if state.lastExpiry.addingTimeInterval(60) <= now {
            state.turns.expire(now: now)
            state.trustedTurns.expire(now: now)
            state.lastExpiry = now
        }
        // A sender of verified deliveries (PayPal's groups) never waits behind strangers' asks: an old stranger ask
        // never takes a rotated genuine URL's fetch. Within trusted groups the fetch goes by turns between hosts, so
        // one address inside PayPal's /24 asking for random URLs gets its turn, not every fetch.
        if isTrusted(state, group, now: now) {
            return trustedTurn(&state, url: url, sender: sender, refusal: refusal, now: now)
        }
        return strangerTurn(&state, url: url, group: group, refusal: refusal, now: now)
    }

    /// A trusted group's ask, remembered by its host: refused when the group's budget is spent, else the fetch goes
    /// by turns between the group's hosts, those that delivered a verified delivery themselves first.
    private func trustedTurn(_ state: inout State, url: String, sender: String, refusal: String?, now: Date) -> Step {
        let host = SenderAddress.host(sender) ?? sender
        state.trustedTurns.record(url: url, group: host, now: now)
        if let refusal {
            state.refused += 1
            return .refuse(refusal)
        }
        return takeTurn(
            &state, \.trustedTurns, asked: url, now: now, refusal: hostRefusal(state, host: host, now: now),
            eligible: { state, host in hostRefusal(state, host: host, now: now) == nil },
            first: { state, host in isVerifiedHost(state, host, now: now) })
    }

    /// A stranger group's ask, remembered: refused while strangers' share of the minute's fetches is spent, else the
    /// fetch goes by turns between groups.
    private func strangerTurn(_ state: inout State, url: String, group: String, refusal: String?, now: Date) -> Step {
        // The ask is remembered; the fetch a turn allows goes to the group served least recently (this one or
        // another), the scan only when this sender may fetch or once a second (it reads every group's asks).
        state.turns.record(url: url, group: group, now: now)
        let strangers = maxNewURLsPerMinute - min(maxTrustedURLsPerMinute, maxNewURLsPerMinute / 2)
        guard state.recentFetches.count < maxNewURLsPerMinute, state.recentFetches.lazy.filter({ !$0.trusted }).count < strangers,
            refusal == nil || state.lastTurnScan.addingTimeInterval(1) <= now
        else {
            state.refused += 1
            return .refuse(refusal ?? "another sender group has the turn for a certificate fetch")
        }
        state.lastTurnScan = now
        return takeTurn(
            &state, \.turns, asked: url, now: now, refusal: refusal,
            eligible: { state, group in budgetRefusal(state, sender: group, now: now) == nil })
    }

    /// A fetch is allowed: it goes to the next turn in `turns` (the asker's own URL or another's, whose fetch then starts
    /// with nobody waiting and the asker is refused), among those `first` picks if any, else among all `eligible`.
    /// `refusal`: why the asker itself may not fetch, if so.
    private func takeTurn(
        _ state: inout State, _ turns: WritableKeyPath<State, CertificateFetchTurns>, asked url: String, now: Date,
        refusal: String? = nil, eligible: (State, String) -> Bool,
        first: (State, String) -> Bool = { _, _ in false }
    ) -> Step {
        func pick(_ state: State) -> (url: String, group: String)? {
            state[keyPath: turns].next(now: now, eligible: { eligible(state, $0) && first(state, $0) })
                ?? state[keyPath: turns].next(now: now, eligible: { eligible(state, $0) })
        }
        var next = pick(state)
        // An ask answered since (restored, fetched without a sender) needs no turn.
        while let stale = next, stale.url != url,
            state.entries[stale.url].map({ $0.keepUntil > now }) == true
                || state.inFlight[stale.url] != nil || state.failures[stale.url].map({ $0.until > now }) == true
        {
            state[keyPath: turns].forget(url: stale.url)
            next = pick(state)
        }
        guard let turn = next else {
            state.refused += 1
            return .refuse(refusal ?? "no certificate fetch is allowed now")
        }
        state[keyPath: turns].served(group: turn.group, now: now)
        let group = SenderAddress.group(turn.group) ?? turn.group
        state.recentFetches.append((now, group, turn.group, isTrusted(state, group, now: now)))
        let started = startFetch(&state, url: turn.url)
        guard turn.url != url, case .fetch(let fetch) = started else { return started }
        state.refused += 1
        return .fetchOther(turn.url, fetch)
    }

    private func isTrusted(_ state: State, _ sender: String, now: Date) -> Bool {
        state.trusted[sender].map { $0.addingTimeInterval(trustSeconds) > now } ?? false
    }

    private func isVerifiedHost(_ state: State, _ host: String, now: Date) -> Bool {
        state.verifiedHosts[host].map { $0.addingTimeInterval(trustSeconds) > now } ?? false
    }

    /// Why a host inside a trusted group may not have another fetch now: one that never delivered a verified delivery
    /// itself gets a stranger group's share (2 a minute), so one address of many in PayPal's /24 cannot spend all 10.
    private func hostRefusal(_ state: State, host: String, now: Date) -> String? {
        guard !isVerifiedHost(state, host, now: now),
            state.recentFetches.lazy.filter({ $0.host == host }).count >= maxNewURLsPerSenderPerMinute
        else { return nil }
        return "\(maxNewURLsPerSenderPerMinute) uncached certificate URLs were fetched for this address in the last minute; not fetched"
    }

    /// Why the budget allows `sender` (a group) no fetch now, or nil when it allows one: 10 a minute in all; senders of
    /// no verified delivery 5 together and 2 each.
    private func budgetRefusal(_ state: State, sender: String, now: Date) -> String? {
        let recent = state.recentFetches.lazy  // the last minute's (`decide` dropped older ones)
        guard recent.count < maxNewURLsPerMinute else {
            return "\(maxNewURLsPerMinute) uncached certificate URLs were fetched in the last minute; not fetched"
        }
        guard !isTrusted(state, sender, now: now) else { return nil }
        guard recent.filter({ $0.sender == sender }).count < maxNewURLsPerSenderPerMinute else {
            return "\(maxNewURLsPerSenderPerMinute) uncached certificate URLs were fetched for this sender in the last minute; not fetched"
        }
        // Half of a small budget at most: with 1 or 2 a minute (tests), a stranger still has a share.
        let strangers = maxNewURLsPerMinute - min(maxTrustedURLsPerMinute, maxNewURLsPerMinute / 2)
        guard recent.filter({ !$0.trusted }).count < strangers else {
            return "\(strangers) uncached certificate URLs were fetched for senders of no verified delivery in the last minute; not fetched"
        }
        return nil
    }

    private func startFetch(_ state: inout State, url: String) -> Step {
        state.turns.forget(url: url)
        state.trustedTurns.forget(url: url)
        state.fetches += 1
        let fetch = Fetch()
        state.inFlight[url] = fetch
        return .fetch(fetch)
    }

    public func pem(for url: String) throws -> [UInt8] {
        switch step(for: url, sender: nil, now: clock(), join: true) {
        case .cached(let pem): return pem
        case .refuse(let reason): throw Refused(reason: reason)
        case .wait(let fetch):
            fetch.done.wait()
            return try fetch.result.get()
        case .fetch(let fetch):
            return try complete(fetch, url: url).get()
        case .fetchAllowed, .fetchOther:
            throw Refused(reason: "not fetched")  // not reached: only asked for without joining, or with a sender
        }
    }

    public func pemWithoutWaiting(for url: String) throws -> [UInt8]? {
        switch step(for: url, sender: nil, now: clock(), join: false) {
        case .cached(let pem): return pem
        case .refuse(let reason): throw Refused(reason: reason)
        case .wait, .fetch, .fetchAllowed, .fetchOther: return nil
        }
    }

    public func signingCertificate(for url: String) -> SigningCertificate? {
        let now = clock()
        return state.withLock { state in
            guard let entry = state.entries[url], entry.keepUntil > now, let signing = entry.signing else { return nil }
            state.hits += 1
            return signing
        }
    }

    public func verifiedDelivery(with url: String) {
        let now = clock()
        let save: (@Sendable () -> Void)? = state.withLock { state in
            guard var entry = state.entries[url] else { return nil }
            let first = entry.verified == nil
            entry.verified = now
            state.entries[url] = entry
            guard first, let persist = state.persist else { return nil }
            return { [pem = entry.pem, keepUntil = entry.keepUntil] in persist(url, pem, keepUntil) }
        }
        save?()
    }

    public func trust(sender address: String) {
        let now = clock()
        let sender = SenderAddress.group(address) ?? address, host = SenderAddress.host(address) ?? address
        let save: (@Sendable () -> Void)? = state.withLock { state in
            let known = state.trusted[sender]
            state.trusted[sender] = now
            if state.trusted.count > maxTrustedSenders, let oldest = state.trusted.min(by: { $0.value < $1.value })?.key {
                state.trusted[oldest] = nil
            }
            state.verifiedHosts[host] = now
            if state.verifiedHosts.count > maxVerifiedHosts, let oldest = state.verifiedHosts.min(by: { $0.value < $1.value })?.key {
                state.verifiedHosts[oldest] = nil
            }
            // Saved when new, and again at most once a day (its keep-until moves on).
            guard known.map({ $0.addingTimeInterval(86_400) <= now }) ?? true, let persist = state.persistSender else { return nil }
            let until = now.addingTimeInterval(trustSeconds)
            return { persist(sender, until) }
        }
        save?()
    }

    /// Sender groups restored from an earlier run, with when their trust ends. What the database says is capped by
    /// what a delivery could have proved: last seen no later than now (so at most `trustSeconds` more). A row dated
    /// into the future (by whoever could write the table) neither lasts longer nor outranks a group seen since when
    /// the oldest is pushed out.
    public func restoreTrusted(_ senders: [(sender: String, until: Date)]) {
        let now = clock()
        state.withLock { state in
            for (sender, until) in senders where until > now && state.trusted.count < maxTrustedSenders {
                state.trusted[sender] = min(until.addingTimeInterval(-trustSeconds), now)
            }
        }
    }

    /// Where a newly trusted sender group goes (called on the verifying thread: must not block).
    public func persistTrusted(with save: @escaping @Sendable (_ sender: String, _ keepUntil: Date) -> Void) {
        state.withLock { $0.persistSender = save }
    }

    /// Fetches refused by the budget (per sender or per minute) since start.
    public var refusedFetches: Int { state.withLock { $0.refused } }

    public func prefetch(_ url: String, sender: String?, then: @escaping @Sendable () -> Void) {
        // One decision under the lock: join the fetch in flight (bounded), or start one if the rules allow, or
        // nothing to wait for. (Two locks let another caller start the fetch in between.)
        enum Plan { case kept, now, start(String, Fetch, then: (@Sendable () -> Void)?) }
        let now = clock()
        let plan: Plan = state.withLock { state in
            if let fetch = state.inFlight[url] {
                let waiting = state.inFlight.values.reduce(0) { $0 + $1.continuations.count }
                guard waiting < maxWaiters else { return .now }  // pemWithoutWaiting still answers nil: refused
                fetch.continuations.append(then)
                return .kept
            }
            switch decide(&state, url: url, sender: sender, now: now, join: true) {
            case .fetch(let fetch):
                fetch.continuations.append(then)
                return .start(url, fetch, then: nil)
            case .fetchOther(let other, let fetch): return .start(other, fetch, then: then)
            default: return .now
            }
        }
        switch plan {
        case .kept: return
        case .now: then()
        case .start(let fetched, let fetch, let then):
            // On a thread of its own (at most maxNewURLsPerMinute a minute): no caller's thread waits for the fetch.
            let thread = Thread { [self] in
                ThreadName.set("paypal-cert")
                _ = complete(fetch, url: fetched)
            }
            thread.start()
            then?()  // the turn went to another group's URL: this ask is answered now (refused)
        }
    }

    /// Makes `fetch` on this thread, records its outcome, wakes its blocked waiters and runs its continuations.
    private func complete(_ fetch: Fetch, url: String) -> Result<[UInt8], any Error> {
        let result: Result<(pem: [UInt8], validated: ValidatedCertificate), any Error>
        do {
            let pem = try upstream.pem(for: url)
            result = .success((pem, try validate(url, pem, clock())))
        } catch {
            result = .failure(error)
        }
        let now = clock()
        fetch.result = result.map(\.pem)
        let (waiters, continuations) = state.withLock { state -> (Int, [@Sendable () -> Void]) in
            state.inFlight[url] = nil
            switch result {
            case .success(let fetched):
                insert(&state, url: url, pem: fetched.pem, validated: fetched.validated, verified: nil, now: now)
            case .failure(let error):
                // Bounded like the cache: the oldest failures go first.
                if state.failures.count >= 1024, let oldest = state.failures.min(by: { $0.value.until < $1.value.until })?.key {
                    state.failures[oldest] = nil
                }
                state.failures[url] = (now.addingTimeInterval(failureTTL), String(String(describing: error).prefix(200)))
            }
            return (fetch.waiters, fetch.continuations)  // none can join now: the fetch is no longer in flight
        }
        for _ in 0..<waiters { fetch.done.signal() }
        for continuation in continuations { continuation() }
        return fetch.result
    }

    /// Makes room (expired entries, then those that never verified a delivery, oldest first, then the least recently
    /// used of the rest) and stores the entry.
    private func insert(_ state: inout State, url: String, pem: [UInt8], validated: ValidatedCertificate, verified: Date?, now: Date) {
        if state.entries[url] == nil, state.entries.count >= maxEntries {
            state.entries = state.entries.filter { $0.value.keepUntil > now }
        }
        while state.entries[url] == nil, state.entries.count >= maxEntries,
            let victim = state.entries.min(by: { Self.evictsBefore($0.value, $1.value) })?.key
        {
            state.entries[victim] = nil
        }
        state.counter += 1
        let wasVerified = state.entries[url]?.verified
        state.entries[url] = Entry(
            pem: pem, keepUntil: validated.keepUntil, signing: validated.signing, stored: state.counter,
            verified: verified ?? wasVerified)
    }

    /// Whether `a` goes before `b` when room is needed.
    private static func evictsBefore(_ a: Entry, _ b: Entry) -> Bool {
        switch (a.verified, b.verified) {
        case (nil, nil): a.stored < b.stored
        case (nil, _): true
        case (_, nil): false
        case (let x?, let y?): x < y
        }
    }

    /// Certificates kept from an earlier run (`persist`): each validated again now, and kept as having verified a
    /// delivery (it had, or it would not have been kept). Returns how many were restored.
    @discardableResult
    public func restore(_ kept: [(url: String, pem: [UInt8])]) -> Int {
        let now = clock()
        var restored = 0
        for (url, pem) in kept {
            guard let validated = try? validate(url, pem, now), validated.keepUntil > now else { continue }
            state.withLock { insert(&$0, url: url, pem: pem, validated: validated, verified: now, now: now) }
            restored += 1
        }
        return restored
    }

    /// Where a certificate goes the first time it verifies a delivery (called on the verifying thread: it must not
    /// block).
    public func persist(with save: @escaping @Sendable (_ url: String, _ pem: [UInt8], _ keepUntil: Date) -> Void) {
        state.withLock { $0.persist = save }
    }

    /// Number of URLs cached now (expired ones included until evicted).
    public var count: Int { state.withLock { $0.entries.count } }

    /// Whether `url` is cached now.
    public func contains(_ url: String) -> Bool { state.withLock { $0.entries[url] != nil } }

    /// Lookups answered from the cache, lookups that went upstream, and fetches actually made.
    public var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
    public var fetches: Int { state.withLock { $0.fetches } }
    /// Fetches started and not ended (tests wait for them).
    var fetchesInFlight: Int { state.withLock { $0.inFlight.count } }
}
