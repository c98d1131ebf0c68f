import Foundation
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
    /// Fetches `url` if a fetch is allowed, without blocking the caller; `then` runs (on any thread) once
    /// `pemWithoutWaiting` can answer, or at once when there is nothing to wait for.
    func prefetch(_ url: String, then: @escaping @Sendable () -> Void)
}

extension CertificateSource {
    /// Sources without a network (fixed, unavailable) always answer at once.
    public func pemWithoutWaiting(for url: String) throws -> [UInt8]? { try pem(for: url) }
    public func prefetch(_ url: String, then: @escaping @Sendable () -> Void) { then() }
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

/// A thread-safe, bounded, expiring cache in front of another `CertificateSource`, keyed by URL, that no sender can
/// turn into a fetch storm:
/// - one fetch at a time per URL: callers missing the same URL wait for that one fetch (`prefetch` callers without a
///   thread: their continuation is kept, at most `maxWaiters` of them; beyond that they are answered at once);
/// - a URL whose fetch (or validation) failed is not fetched again for `failureTTL` (5 minutes): those deliveries
///   are refused at once;
/// - at most `maxNewURLsPerMinute` (10) distinct uncached URLs are fetched per minute; beyond that, refused at once;
/// - only what `validate` accepts (parsed, chained to the trust roots, the CN PayPal serves from that URL's host) is
///   cached.
///
/// PayPal serves each cert with `max-age=86400`, and a cert URL names one certificate (the id changes when PayPal
/// rotates), so a day's TTL is safe. When full, expired entries go first, then the least recently fetched.
public final class CachingCertificateSource: CertificateSource {
    private struct Entry {
        var pem: [UInt8]
        var expires: Date
        var stored: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var failures: [String: (until: Date, reason: String)] = [:]
        var inFlight: [String: Fetch] = [:]
        var recentFetches: [Date] = []
        var counter: UInt64 = 0
        var hits = 0
        var misses = 0
        var fetches = 0
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
    private let validate: @Sendable (_ url: String, _ pem: [UInt8]) throws -> Void
    public let maxEntries: Int
    public let ttl: TimeInterval
    public let failureTTL: TimeInterval
    public let maxNewURLsPerMinute: Int
    /// Most `prefetch` continuations kept waiting on fetches at once (each holds a delivery's body).
    public let maxWaiters: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    /// - Parameter validate: throws when the PEM served at the URL is not a certificate to cache (the verifier's checks,
    ///   which depend on the URL: each of PayPal's hosts serves one name).
    public init(upstream: any CertificateSource, maxEntries: Int = 32, ttl: TimeInterval = 86_400, failureTTL: TimeInterval = 300,
                maxNewURLsPerMinute: Int = 10, maxWaiters: Int = 256,
                validate: @escaping @Sendable (_ url: String, _ pem: [UInt8]) throws -> Void = { _, _ in },
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.upstream = upstream
        self.validate = validate
        self.maxEntries = max(1, maxEntries)
        self.ttl = ttl
        self.failureTTL = failureTTL
        self.maxNewURLsPerMinute = max(1, maxNewURLsPerMinute)
        self.maxWaiters = max(0, maxWaiters)
        self.clock = clock
    }

    private enum Step { case cached([UInt8]), wait(Fetch), fetch(Fetch), refuse(String), fetchAllowed }

    /// What to do for `url` now. `join`: whether the caller takes part (waits on a fetch in flight, or starts one);
    /// without it nothing changes but the hit count.
    private func step(for url: String, now: Date, join: Bool) -> Step {
        state.withLock { decide(&$0, url: url, now: now, join: join) }
    }

    private func decide(_ state: inout State, url: String, now: Date, join: Bool) -> Step {
        if let entry = state.entries[url], entry.expires > now {
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
        state.recentFetches.removeAll { $0 <= now.addingTimeInterval(-60) }
        guard state.recentFetches.count < maxNewURLsPerMinute else {
            state.misses += 1
            return .refuse("\(maxNewURLsPerMinute) uncached certificate URLs were fetched in the last minute; not fetched")
        }
        guard join else { return .fetchAllowed }
        state.misses += 1
        state.recentFetches.append(now)
        state.fetches += 1
        let fetch = Fetch()
        state.inFlight[url] = fetch
        return .fetch(fetch)
    }

    public func pem(for url: String) throws -> [UInt8] {
        switch step(for: url, now: clock(), join: true) {
        case .cached(let pem): return pem
        case .refuse(let reason): throw Refused(reason: reason)
        case .wait(let fetch):
            fetch.done.wait()
            return try fetch.result.get()
        case .fetch(let fetch):
            return try complete(fetch, url: url).get()
        case .fetchAllowed:
            throw Refused(reason: "not fetched")  // not reached: only asked for without joining
        }
    }

    public func pemWithoutWaiting(for url: String) throws -> [UInt8]? {
        switch step(for: url, now: clock(), join: false) {
        case .cached(let pem): return pem
        case .refuse(let reason): throw Refused(reason: reason)
        case .wait, .fetch, .fetchAllowed: return nil
        }
    }

    public func prefetch(_ url: String, then: @escaping @Sendable () -> Void) {
        // One decision under the lock: join the fetch in flight (bounded), or start one if the rules allow, or
        // nothing to wait for. (Two locks let another caller start the fetch in between.)
        enum Plan { case kept, now, start(Fetch) }
        let now = clock()
        let plan: Plan = state.withLock { state in
            if let fetch = state.inFlight[url] {
                let waiting = state.inFlight.values.reduce(0) { $0 + $1.continuations.count }
                guard waiting < maxWaiters else { return .now }  // pemWithoutWaiting still answers nil: refused
                fetch.continuations.append(then)
                return .kept
            }
            guard case .fetch(let fetch) = decide(&state, url: url, now: now, join: true) else { return .now }
            fetch.continuations.append(then)
            return .start(fetch)
        }
        switch plan {
        case .kept: return
        case .now: then()
        case .start(let fetch):
            // On a thread of its own (at most maxNewURLsPerMinute a minute): no caller's thread waits for the fetch.
            let thread = Thread { [self] in
                ThreadName.set("paypal-cert")
                _ = complete(fetch, url: url)
            }
            thread.start()
        }
    }

    /// Makes `fetch` on this thread, records its outcome, wakes its blocked waiters and runs its continuations.
    private func complete(_ fetch: Fetch, url: String) -> Result<[UInt8], any Error> {
        let result: Result<[UInt8], any Error>
        do {
            let pem = try upstream.pem(for: url)
            try validate(url, pem)
            result = .success(pem)
        } catch {
            result = .failure(error)
        }
        let now = clock()
        fetch.result = result
        let (waiters, continuations) = state.withLock { state -> (Int, [@Sendable () -> Void]) in
            state.inFlight[url] = nil
            switch result {
            case .success(let pem):
                if state.entries.count >= maxEntries { state.entries = state.entries.filter { $0.value.expires > now } }
                while state.entries.count >= maxEntries,
                      let oldest = state.entries.min(by: { $0.value.stored < $1.value.stored })?.key {
                    state.entries[oldest] = nil
                }
                state.counter += 1
                state.entries[url] = Entry(pem: pem, expires: now.addingTimeInterval(ttl), stored: state.counter)
            case .failure(let error):
                // Bounded like the cache: the oldest failures go first.
                if state.failures.count >= 1024, let oldest = state.failures.min(by: { $0.value.until < $1.value.until })?.key {
                    state.failures[oldest] = nil
                }
                state.failures[url] = (now.addingTimeInterval(failureTTL), String(String(describing: error).prefix(200)))
            }
            return (fetch.waiters, fetch.continuations)   // none can join now: the fetch is no longer in flight
        }
        for _ in 0..<waiters { fetch.done.signal() }
        for continuation in continuations { continuation() }
        return result
    }

    /// Number of URLs cached now (expired ones included until evicted).
    public var count: Int { state.withLock { $0.entries.count } }

    /// Lookups answered from the cache, lookups that went upstream, and fetches actually made.
    public var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
    public var fetches: Int { state.withLock { $0.fetches } }
}
