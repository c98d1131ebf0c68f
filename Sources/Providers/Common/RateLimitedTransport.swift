import Foundation
import Reconciliation
import Synchronization

/// The rate limiter, as a pure value with the clock handed in: requests are spaced evenly, `interval` apart (a
/// request that finds the limiter idle goes at once; idle time is not saved up into a burst). After a 429 the
/// provider is asked half as often for `slowDownSeconds`.
public struct RateLimiter: Sendable, Equatable {
    public private(set) var interval: Double
    public let slowDownSeconds: Double
    public private(set) var next: Double = 0
    public private(set) var slowUntil: Double = -.infinity

    public init(perSecond: Double, slowDownSeconds: Double = 30) {
        interval = 1 / perSecond; self.slowDownSeconds = slowDownSeconds
    }

    /// Takes the next slot; returns how long to wait for it from `now` (0: go now).
    public mutating func reserve(now: Double) -> Double {
        let gap = now < slowUntil ? interval * 2 : interval
        let slot = max(now, next)
        next = slot + gap
        return slot - now
    }

    /// The provider answered 429: slow down for a while.
    public mutating func throttled(now: Double) { slowUntil = now + slowDownSeconds }

    /// A new rate from the next slot on; the slots booked and a slow-down after a 429 stand.
    public mutating func setRate(perSecond: Double) { interval = 1 / perSecond }
}

/// One provider's limiter: every transport built for that provider in this process takes its slots here.
public final class SharedRateLimiter: Sendable {
    let state: Mutex<RateLimiter>
    init(perSecond: Double) { state = Mutex(RateLimiter(perSecond: perSecond)) }
    /// The limiter as it stands.
    public var current: RateLimiter { state.withLock { $0 } }
}

/// A process's limiters, one per provider, kept while the provider APIs are built again (SIGHUP re-reads secrets and
/// rebuilds each API and its transport): the schedule and a slow-down after a 429 carry over, so requests still
/// going out on the old transport and new ones on the new take one budget, not two each starting afresh. A changed
/// `<PROVIDER>_MAX_RPS` applies from the next request.
public final class RateLimiters: Sendable {
    private let byProvider = Mutex<[Provider: SharedRateLimiter]>([:])
    public init() {}

    /// `provider`'s limiter, if one was made.
    public func existing(for provider: Provider) -> SharedRateLimiter? { byProvider.withLock { $0[provider] } }

    /// `provider`'s limiter at `perSecond`: the one it had, when it had one.
    public func limiter(for provider: Provider, perSecond: Double) -> SharedRateLimiter {
        byProvider.withLock { all in
            if let kept = all[provider] {
                kept.state.withLock { $0.setRate(perSecond: perSecond) }
                return kept
            }
            let made = SharedRateLimiter(perSecond: perSecond)
            all[provider] = made
            return made
        }
    }
}

/// `PXP_MAX_RPS`, `PAYPAL_MAX_RPS`, `PAYPERCUT_MAX_RPS`: at most `perSecond` requests a second from this
/// process to one provider, fetches, actions, token calls and retries together (the sweep, the worker and the
/// executor share the provider's transport). A caller waits for its slot in a `Task.sleep`, holding no thread.
public final class RateLimitedTransport: ProviderTransport {
    let base: any ProviderTransport
    let limiter: SharedRateLimiter
    private let clock: @Sendable () -> Double
    public static let uptime: @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// With a limiter of its own.
    public convenience init(
        base: any ProviderTransport, perSecond: Double, clock: @escaping @Sendable () -> Double = RateLimitedTransport.uptime
    ) {
        self.init(base: base, limiter: SharedRateLimiter(perSecond: perSecond), clock: clock)
    }

    /// With `limiter`, shared with the provider's other transports (`RateLimiters`).
    public init(
        base: any ProviderTransport, limiter: SharedRateLimiter, clock: @escaping @Sendable () -> Double = RateLimitedTransport.uptime
    ) {
        self.base = base; self.limiter = limiter; self.clock = clock
    }

    public func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        let wait = limiter.state.withLock { $0.reserve(now: clock()) }
        if wait > 0 { try await Task.sleep(for: .nanoseconds(Int64(wait * 1e9))) }
        let response = try await base.send(request)
        if response.status == 429 { limiter.state.withLock { $0.throttled(now: clock()) } }
        return response
    }

    /// The variable that limits `provider` (`PXP_MAX_RPS`), and its value when set: a positive number.
    public static func limit(for provider: Provider, in env: Environment) throws(ConfigurationError) -> Double? {
        let name = provider.rawValue.uppercased() + "_MAX_RPS"
        guard let text = env[name], !text.isEmpty else { return nil }
        guard let value = Double(text), value.isFinite, value > 0, value <= 100_000 else {
            throw ConfigurationError(
                "\(name)=\(text) must be a positive number of requests per second (e.g. 20 or 0.5), or unset for no limit")
        }
        return value
    }
}
