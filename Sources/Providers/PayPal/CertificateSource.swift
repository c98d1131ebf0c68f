import Foundation
import Synchronization

/// Where the PayPal verifier gets the PEM served at a `PAYPAL-CERT-URL`. The verifier only asks for URLs under an
/// allowed prefix. The network fetcher (over the HTTP client) is wired by the receiver; this room has none.
public protocol CertificateSource: Sendable {
    /// The PEM bytes served at `url`; throws when they cannot be had.
    func pem(for url: String) throws -> [UInt8]
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
/// turn into a fetch storm (contract §4):
/// - one fetch at a time per URL: callers missing the same URL wait for that one fetch;
/// - a URL whose fetch (or validation) failed is not fetched again for `failureTTL` (5 minutes): those deliveries
///   are refused at once;
/// - at most `maxNewURLsPerMinute` (10) distinct uncached URLs are fetched per minute; beyond that, refused at once;
/// - only what `validate` accepts (parsed, chained to the trust roots, the CN PayPal signs with) is cached.
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
        /// Callers waiting for it (counted under the source's lock, while the fetch is in flight).
        var waiters = 0
    }

    public struct Refused: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    private let upstream: any CertificateSource
    private let validate: @Sendable ([UInt8]) throws -> Void
    public let maxEntries: Int
    public let ttl: TimeInterval
    public let failureTTL: TimeInterval
    public let maxNewURLsPerMinute: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    /// - Parameter validate: throws when the PEM is not a certificate to cache (the verifier's checks).
    public init(upstream: any CertificateSource, maxEntries: Int = 32, ttl: TimeInterval = 86_400, failureTTL: TimeInterval = 300,
                maxNewURLsPerMinute: Int = 10, validate: @escaping @Sendable ([UInt8]) throws -> Void = { _ in },
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.upstream = upstream
        self.validate = validate
        self.maxEntries = max(1, maxEntries)
        self.ttl = ttl
        self.failureTTL = failureTTL
        self.maxNewURLsPerMinute = max(1, maxNewURLsPerMinute)
        self.clock = clock
    }

    public func pem(for url: String) throws -> [UInt8] {
        let now = clock()
        enum Step { case cached([UInt8]), wait(Fetch), fetch(Fetch), refuse(String) }
        let step: Step = state.withLock { state in
            if let entry = state.entries[url], entry.expires > now {
                state.hits += 1
                return .cached(entry.pem)
            }
            state.misses += 1
            if let failed = state.failures[url] {
                if failed.until > now {
                    return .refuse("it failed less than \(Int(failureTTL / 60)) minutes ago (\(failed.reason)); not fetched again yet")
                }
                state.failures[url] = nil
            }
            if let fetch = state.inFlight[url] { fetch.waiters += 1; return .wait(fetch) }
            state.recentFetches.removeAll { $0 <= now.addingTimeInterval(-60) }
            guard state.recentFetches.count < maxNewURLsPerMinute else {
                return .refuse("\(maxNewURLsPerMinute) uncached certificate URLs were fetched in the last minute; not fetched")
            }
            state.recentFetches.append(now)
            state.fetches += 1
            let fetch = Fetch()
            state.inFlight[url] = fetch
            return .fetch(fetch)
        }
        switch step {
        case .cached(let pem): return pem
        case .refuse(let reason): throw Refused(reason: reason)
        case .wait(let fetch):
            fetch.done.wait()
            return try fetch.result.get()
        case .fetch(let fetch):
            let result: Result<[UInt8], any Error>
            do {
                let pem = try upstream.pem(for: url)
                try validate(pem)
                result = .success(pem)
            } catch {
                result = .failure(error)
            }
            fetch.result = result
            let waiters = state.withLock { state -> Int in
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
                return fetch.waiters   // none can join now: the fetch is no longer in flight
            }
            for _ in 0..<waiters { fetch.done.signal() }
            return try result.get()
        }
    }

    /// Number of URLs cached now (expired ones included until evicted).
    public var count: Int { state.withLock { $0.entries.count } }

    /// Lookups answered from the cache, lookups that went upstream, and fetches actually made.
    public var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
    public var fetches: Int { state.withLock { $0.fetches } }
}
