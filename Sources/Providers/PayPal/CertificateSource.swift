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

/// A thread-safe, bounded, expiring cache in front of another `CertificateSource`, keyed by URL.
///
/// PayPal serves each cert with `max-age=86400`, and a cert URL names one certificate (the id changes when PayPal
/// rotates), so a day's TTL is safe. Only successful fetches are cached. When full, expired entries go first, then
/// the least recently fetched. Two threads missing the same URL at once may both fetch it (the fetch runs outside
/// the lock so one slow URL never blocks lookups of the others).
public final class CachingCertificateSource: CertificateSource {
    private struct Entry {
        var pem: [UInt8]
        var expires: Date
        var stored: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var counter: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let upstream: any CertificateSource
    public let maxEntries: Int
    public let ttl: TimeInterval
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    public init(upstream: any CertificateSource, maxEntries: Int = 32, ttl: TimeInterval = 86_400,
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.upstream = upstream
        self.maxEntries = max(1, maxEntries)
        self.ttl = ttl
        self.clock = clock
    }

    public func pem(for url: String) throws -> [UInt8] {
        let now = clock()
        let cached: [UInt8]? = state.withLock { state in
            if let entry = state.entries[url], entry.expires > now {
                state.hits += 1
                return entry.pem
            }
            state.misses += 1
            return nil
        }
        if let cached { return cached }
        let fetched = try upstream.pem(for: url)
        state.withLock { state in
            state.entries[url] = nil
            if state.entries.count >= maxEntries {
                state.entries = state.entries.filter { $0.value.expires > now }
            }
            while state.entries.count >= maxEntries,
                  let oldest = state.entries.min(by: { $0.value.stored < $1.value.stored })?.key {
                state.entries[oldest] = nil
            }
            state.counter += 1
            state.entries[url] = Entry(pem: fetched, expires: now.addingTimeInterval(ttl), stored: state.counter)
        }
        return fetched
    }

    /// Number of URLs cached now (expired ones included until evicted).
    public var count: Int { state.withLock { $0.entries.count } }

    /// Lookups answered from the cache and lookups that went upstream.
    public var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}
