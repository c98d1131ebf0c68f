import Foundation
import Synchronization

/// The rate limiter, as a pure value with the clock handed in: requests are spaced evenly, `interval` apart (a
/// request that finds the limiter idle goes at once; idle time is not saved up into a burst). After a 429 the
/// provider is asked half as often for `slowDownSeconds`.
public struct RateLimiter: Sendable, Equatable {
    public let interval: Double
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
}

/// `PXP_MAX_RPS`, `PAYPAL_MAX_RPS`, `PAYPERCUT_MAX_RPS`: at most `perSecond` requests a second from this
/// process to one provider, fetches, actions, token calls and retries together (the sweep, the worker and the
/// executor share the provider's transport). A caller waits for its slot in a `Task.sleep`, holding no thread.
public final class RateLimitedTransport: ProviderTransport {
    let base: any ProviderTransport
    let limiter: Mutex<RateLimiter>
    private let clock: @Sendable () -> Double

    public init(base: any ProviderTransport, perSecond: Double,
                clock: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }) {
        self.base = base; self.limiter = Mutex(RateLimiter(perSecond: perSecond)); self.clock = clock
    }

    public func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        let wait = limiter.withLock { $0.reserve(now: clock()) }
        if wait > 0 { try await Task.sleep(for: .nanoseconds(Int64(wait * 1e9))) }
        let response = try await base.send(request)
        if response.status == 429 { limiter.withLock { $0.throttled(now: clock()) } }
        return response
    }

    /// The variable that limits `provider` (`PXP_MAX_RPS`), and its value when set: a positive number.
    public static func limit(for provider: String, in env: Environment) throws(ConfigurationError) -> Double? {
        let name = provider.uppercased() + "_MAX_RPS"
        guard let text = env[name], !text.isEmpty else { return nil }
        guard let value = Double(text), value.isFinite, value > 0, value <= 100_000 else {
            throw ConfigurationError("\(name)=\(text) must be a positive number of requests per second (e.g. 20 or 0.5), or unset for no limit")
        }
        return value
    }
}
