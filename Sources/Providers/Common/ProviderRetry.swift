// Retrying transient provider failures: exponential backoff with full jitter, honouring Retry-After.

/// How a call is retried. Sleep and randomness are injectable so tests run instantly and deterministically.
public struct RetryPolicy: Sendable {
    /// Total attempts, including the first (1 = no retry).
    public var maxAttempts: Int
    /// The backoff cap doubles from this on each retry: base, 2·base, 4·base … up to `maxDelay`.
    public var baseDelay: Duration
    /// Longest wait between attempts. A Retry-After above it ends the retries early and hands the transient
    /// outcome (with its Retry-After) back to the caller, who can schedule the work instead of blocking on it.
    public var maxDelay: Duration
    /// Sleeps; throwing (e.g. on cancellation) stops retrying.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// A uniform random integer in `0...upperBound` (milliseconds of jitter).
    public var random: @Sendable (Int64) -> Int64

    public init(
        maxAttempts: Int, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(10),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        random: @escaping @Sendable (Int64) -> Int64 = { Int64.random(in: 0...$0) }
    ) {
        precondition(maxAttempts >= 1, "maxAttempts must be at least 1")
        self.maxAttempts = maxAttempts; self.baseDelay = baseDelay; self.maxDelay = maxDelay
        self.sleep = sleep; self.random = random
    }

    /// One attempt, no retry.
    public static let none = RetryPolicy(maxAttempts: 1)
    /// Three attempts, 200 ms base, 10 s cap: enough to ride out a blip inside one reconcile step; longer outages
    /// are the worker's to retry with its own schedule.
    public static let standard = RetryPolicy(maxAttempts: 3)

    /// The wait before retry number `retry` (0 for the first retry), or nil to stop retrying.
    func delay(beforeRetry retry: Int, retryAfter: Duration?) -> Duration? {
        let capMillis = milliseconds(maxDelay)
        if let wanted = retryAfter { return wanted > maxDelay ? nil : wanted }
        let base = milliseconds(baseDelay)
        let shift = min(retry, 30)
        let (grown, overflow) = base.multipliedReportingOverflow(by: Int64(1) << shift)
        let cap = overflow ? capMillis : min(capMillis, grown)
        return .milliseconds(random(max(0, cap)))
    }

    private func milliseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}

/// Runs `operation` until it is not transient or the policy gives up; returns the last outcome, except that once an
/// attempt may have reached the provider, a last one not sent or refused before it was processed (a 429) leaves the
/// call in doubt: a transient saying so (with the 429's wait).
public func retrying<T: Sendable>(
    _ policy: RetryPolicy,
    _ operation: () async -> ProviderOutcome<T>
) async -> ProviderOutcome<T> {
    var outcome = await operation()
    var retry = 0
    // Whether an attempt so far may have reached the provider (a timeout, a 5xx: not a 429, refused before processing).
    var mayHaveReached = false
    while case .transient(let transient) = outcome, retry + 1 < policy.maxAttempts {
        if !ProviderOutcomeClassifier.refusedBeforeProcessing(transient.reason) { mayHaveReached = true }
        guard let wait = policy.delay(beforeRetry: retry, retryAfter: transient.retryAfter) else { break }
        do { try await policy.sleep(wait) } catch { break }
        retry += 1
        outcome = await operation()
    }
    // A later attempt never sent (its token refused, say) does not make the call one never sent: an earlier one may
    // have reached the provider, so the call stays in doubt.
    if mayHaveReached, case .permanent(let failure) = outcome, !failure.reachedProvider {
        return .transient(
            reason: "an earlier attempt may have reached the provider, and the last was not sent: \(failure.text)",
            retryAfter: nil)
    }
    // Nor does a later attempt refused before it was processed (a 429): the call is in doubt, with the 429's wait.
    if mayHaveReached, case .transient(let last) = outcome, ProviderOutcomeClassifier.refusedBeforeProcessing(last.reason) {
        return .transient(
            Transient(
                "an earlier attempt may have reached the provider, and the last was refused before it was processed (\(last.reason))",
                retryAfter: last.retryAfter))
    }
    return outcome
}

/// `retrying` with the policy's parameters spelled out.
public func retrying<T: Sendable>(
    maxAttempts: Int, baseDelay: Duration, maxDelay: Duration = .seconds(10),
    sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
    random: @escaping @Sendable (Int64) -> Int64 = { Int64.random(in: 0...$0) },
    _ operation: () async -> ProviderOutcome<T>
) async -> ProviderOutcome<T> {
    await retrying(
        RetryPolicy(maxAttempts: maxAttempts, baseDelay: baseDelay, maxDelay: maxDelay, sleep: sleep, random: random),
        operation)
}
