import Providers

/// What happens to a claimed delivery after one attempt, decided from values alone (no clock reads, no I/O):
/// done, another try after an exponential backoff with jitter (honouring a provider's Retry-After), or dead with
/// the reason.
///
/// The jitter is "equal jitter": the delay is in [ceiling/2, ceiling) with ceiling = base·2^(attempts−1) capped at
/// `maxDelay`. Full jitter ([0, ceiling)) spreads retries as well but lets an unlucky delivery retry almost at
/// once, over and over, and burn its attempt budget inside a short provider outage; half the ceiling as a floor keeps
/// the backoff exponential for every delivery.
public struct DeliveryAttempt: Sendable {
    /// How a processed delivery ends: `done` with what it re-checked, or `ignored` with why it names no
    /// payment. Never done having done nothing.
    public enum Outcome: Sendable, Equatable {
        case done(String)
        case ignored(String)

        public var status: String {
            switch self {
            case .done: "done"
            case .ignored: "ignored"
            }
        }

        public var text: String {
            switch self {
            case .done(let t), .ignored(let t): t
            }
        }
    }

    public enum Result: Sendable, Equatable {
        case processed(Outcome)
        /// The provider could not answer now (timeout, 429, 5xx): try again later.
        case transient(Transient)
        /// Retrying will not help (e.g. malformed stored body, provider says 4xx); still retried until the budget
        /// runs out, because credentials and configuration get fixed.
        case permanent(reason: String)

        /// `.transient` of `reason`, with the wait the other side asked for.
        public static func transient(reason: String, retryAfter: Duration?) -> Self {
            .transient(Transient(reason, retryAfter: retryAfter))
        }
    }

    public enum Decision: Sendable, Equatable {
        case done(Outcome)
        case retry(after: Duration, reason: String)
        case dead(reason: String)
    }

    public var maxAttempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration
    /// No retry comes sooner than this, whatever the base (a zero base would otherwise spin).
    public static let minimumDelay = Duration.milliseconds(50)

    public init(maxAttempts: Int = 10, baseDelay: Duration = .seconds(2), maxDelay: Duration = .seconds(900)) {
        self.maxAttempts = maxAttempts; self.baseDelay = baseDelay; self.maxDelay = maxDelay
    }

    /// `attempts` counts this one (1 after the first try). `random` in [0, 1) supplies the jitter.
    public func decide(_ result: Result, attempts: Int, random: Double) -> Decision {
        let reason: String, retryAfter: Duration?
        switch result {
        case .processed(let outcome): return .done(outcome)
        case .transient(let t): reason = t.reason; retryAfter = t.retryAfter
        case .permanent(let r): reason = r; retryAfter = nil
        }
        if attempts >= maxAttempts { return .dead(reason: "gave up after \(attempts) attempts: \(reason)") }
        let ceiling = min(maxDelay, baseDelay * (1 << min(max(attempts - 1, 0), 30)))
        let jitter = random.isNaN ? 0 : min(max(random, 0), 1)
        var delay = ceiling / 2 + ceiling / 2 * jitter  // spread retries of many deliveries, never below half the ceiling
        if let retryAfter { delay = max(delay, retryAfter) }
        return .retry(after: max(delay, Self.minimumDelay), reason: reason)
    }
}
