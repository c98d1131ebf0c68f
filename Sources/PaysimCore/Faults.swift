import Reconciliation
import TextFormats

/// Fault injection for the provider API paths (never /admin, never the cert URL). Rates are probabilities 0...1.
public struct FaultConfig: Sendable, Equatable {
    public var latencyMs: Int = 0
    public var latencyJitterMs: Int = 0
    /// Share of requests answered 500.
    public var errorRate: Double = 0
    /// Share of requests answered 429 with `Retry-After: retryAfter`.
    public var rate429: Double = 0
    public var retryAfter: Int = 1
    /// Share of requests whose connection is closed without an answer.
    public var dropRate: Double = 0
    /// Share of action calls (captures, voids, refunds, modifications) applied and then answered by closing the
    /// connection: the caller cannot know it happened (other requests pass).
    public var dropAfterApplyRate: Double = 0
    /// Share of action calls whose connection is closed before they are applied: the caller cannot know that
    /// nothing happened (other requests pass).
    public var dropBeforeApplyRate: Double = 0
    public var seed: UInt64 = 0
    /// The next this many action calls (captures, voids, refunds, modifications) are answered 429 with
    /// `Retry-After: retryAfter` before they are applied: a provider refusing a money call it has not processed.
    public var refuseActions429: Int = 0

    public init(
        latencyMs: Int = 0, latencyJitterMs: Int = 0, errorRate: Double = 0, rate429: Double = 0,
        retryAfter: Int = 1, dropRate: Double = 0, seed: UInt64 = 0
    ) {
        self.latencyMs = latencyMs; self.latencyJitterMs = latencyJitterMs; self.errorRate = errorRate
        self.rate429 = rate429; self.retryAfter = retryAfter; self.dropRate = dropRate; self.seed = seed
    }

    var json: JSONValue {
        .object([
            "latency_ms": .integer(latencyMs), "latency_jitter_ms": .integer(latencyJitterMs),
            "error_rate": .number(String(errorRate)), "rate_429": .number(String(rate429)),
            "retry_after": .integer(retryAfter), "drop_rate": .number(String(dropRate)),
            "drop_after_apply_rate": .number(String(dropAfterApplyRate)),
            "drop_before_apply_rate": .number(String(dropBeforeApplyRate)),
            "seed": .integer(seed), "refuse_actions_429": .integer(refuseActions429)
        ])
    }

    /// Reads a `POST /admin/faults` body; absent fields keep `base`'s values.
    static func parse(_ json: JSONValue, base: FaultConfig) throws(SimError) -> FaultConfig {
        guard json.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "expected a JSON object") }
        var config = base
        func rate(_ key: String) throws(SimError) -> Double? {
            guard let value = json[key], !value.isNull else { return nil }
            guard let text = value.scalarText, let rate = Double(text), rate >= 0, rate <= 1 else {
                throw SimError.admin(400, "invalid_field", "\(key) must be a number between 0 and 1")
            }
            return rate
        }
        func count(_ key: String) throws(SimError) -> Int? {
            guard let value = json[key], !value.isNull else { return nil }
            guard let n = value.integerValue, n >= 0, n <= 600_000 else {
                throw SimError.admin(400, "invalid_field", "\(key) must be a non-negative integer")
            }
            return Int(n)
        }
        if let v = try count("latency_ms") { config.latencyMs = v }
        if let v = try count("latency_jitter_ms") { config.latencyJitterMs = v }
        if let v = try rate("error_rate") { config.errorRate = v }
        if let v = try rate("rate_429") { config.rate429 = v }
        if let v = try count("retry_after") { config.retryAfter = v }
        if let v = try rate("drop_rate") { config.dropRate = v }
        if let v = try rate("drop_after_apply_rate") { config.dropAfterApplyRate = v }
        if let v = try rate("drop_before_apply_rate") { config.dropBeforeApplyRate = v }
        if let v = try count("refuse_actions_429") { config.refuseActions429 = v }
        if let value = json["seed"], !value.isNull {
            guard let text = value.scalarText, let seed = UInt64(text) else {
                throw SimError.admin(400, "invalid_field", "seed must be a non-negative integer")
            }
            config.seed = seed
        }
        guard config.errorRate + config.rate429 + config.dropRate + config.dropAfterApplyRate + config.dropBeforeApplyRate <= 1 else {
            throw SimError.admin(
                400, "invalid_field",
                "error_rate + rate_429 + drop_rate + drop_after_apply_rate + drop_before_apply_rate must not exceed 1")
        }
        return config
    }
}

/// What to do with one provider request.
public struct FaultDecision: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case pass
        case serverError
        case tooManyRequests(retryAfter: Int)
        case drop
        /// Apply an action call, then close the connection without answering.
        case dropAfterApply
        /// Close an action call's connection without applying it.
        case dropBeforeApply
    }
    public var delayMs: Int
    public var outcome: Outcome
}

/// Draws decisions from SplitMix64 seeded with `config.seed`: the n-th request after a reset always gets the
/// same decision. Exactly two draws per request, so the sequence does not depend on which faults are enabled.
public struct FaultInjector: Sendable {
    public private(set) var config: FaultConfig
    private var rng: SplitMix64

    public init(config: FaultConfig) {
        self.config = config
        rng = SplitMix64(seed: config.seed)
    }

    public var isActive: Bool {
        config.latencyMs > 0 || config.latencyJitterMs > 0 || config.errorRate > 0 || config.rate429 > 0
            || config.dropRate > 0 || config.dropAfterApplyRate > 0 || config.dropBeforeApplyRate > 0
    }

    /// Whether this action call is one of the next `refuseActions429` (counted down).
    public mutating func refusesAction() -> Bool {
        guard config.refuseActions429 > 0 else { return false }
        config.refuseActions429 -= 1
        return true
    }

    public mutating func decide() -> FaultDecision {
        let jitterDraw = rng.next()
        let u = rng.nextUnit()
        let jitter = config.latencyJitterMs > 0 ? Int(jitterDraw % UInt64(config.latencyJitterMs + 1)) : 0
        let delay = config.latencyMs + jitter
        var threshold = config.dropRate
        if u < threshold { return FaultDecision(delayMs: delay, outcome: .drop) }
        threshold += config.errorRate
        if u < threshold { return FaultDecision(delayMs: delay, outcome: .serverError) }
        threshold += config.rate429
        if u < threshold { return FaultDecision(delayMs: delay, outcome: .tooManyRequests(retryAfter: config.retryAfter)) }
        threshold += config.dropAfterApplyRate
        if u < threshold { return FaultDecision(delayMs: delay, outcome: .dropAfterApply) }
        threshold += config.dropBeforeApplyRate
        if u < threshold { return FaultDecision(delayMs: delay, outcome: .dropBeforeApply) }
        return FaultDecision(delayMs: delay, outcome: .pass)
    }
}
