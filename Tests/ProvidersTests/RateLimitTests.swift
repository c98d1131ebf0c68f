import Foundation
import Synchronization
import Testing
@testable import Providers

/// `<PROVIDER>_MAX_RPS`: requests to one provider are spaced to the limit, concurrent callers
/// included; a bad value is a clear configuration error.
@Suite struct RateLimitTests {
    /// Pure: the clock is a number. A burst is spaced `1 / rate` apart; idle time is not saved up.
    @Test func burstsAreSpacedAndIdleTimeIsNotSavedUp() {
        var limiter = RateLimiter(perSecond: 20)
        let burst = [0, 0, 0, 0].map { limiter.reserve(now: $0) }
        #expect(zip(burst, [0, 0.05, 0.1, 0.15]).allSatisfy { abs($0 - $1) < 1e-9 }, "\(burst)")
        // Ten seconds idle, then a burst again: the first goes at once, the rest are spaced as before.
        let later = [10, 10, 10].map { limiter.reserve(now: $0) }
        #expect(later[0] == 0)
        #expect(abs(later[1] - 0.05) < 1e-9 && abs(later[2] - 0.1) < 1e-9)
        // Requests arriving slower than the limit never wait.
        var slow = RateLimiter(perSecond: 2)
        #expect([0, 1, 2, 3].map { slow.reserve(now: $0) } == [0, 0, 0, 0])
    }

    @Test func a429HalvesTheRateForAWhile() {
        var limiter = RateLimiter(perSecond: 10, slowDownSeconds: 30)
        #expect(limiter.reserve(now: 0) == 0)
        limiter.throttled(now: 0)
        // Inside the slow-down, slots are 0.2 s apart instead of 0.1.
        #expect(abs(limiter.reserve(now: 0) - 0.1) < 1e-9)  // the slot booked before the 429 still stands
        #expect(abs(limiter.reserve(now: 0) - 0.3) < 1e-9)
        // After it, back to the limit.
        #expect(limiter.reserve(now: 100) == 0)
        #expect(abs(limiter.reserve(now: 100) - 0.1) < 1e-9)
    }

    /// The transport feeds 429s to the limiter and sends every request (nothing is dropped).
    @Test func theTransportSendsEverythingAndSlowsDownOn429() async throws {
        let base = ScriptedTransport([.success(ProviderResponse(status: 200)), .success(ProviderResponse(status: 429))])
        let clock = Mutex<Double>(0)
        let limited = RateLimitedTransport(base: base, perSecond: 1000, clock: { clock.withLock { $0 } })
        _ = try await limited.send(ProviderRequest(method: "GET", url: "https://p/a"))
        #expect(limited.limiter.current.slowUntil == -.infinity)
        _ = try await limited.send(ProviderRequest(method: "GET", url: "https://p/b"))
        #expect(limited.limiter.current.slowUntil == 30)
        #expect(base.requests.count == 2)
    }

    /// SIGHUP builds every provider API and its transport again: the provider's limiter is the same one, so a slot
    /// booked on the old transport (a request still going out) is one the new transport waits behind, a changed rate
    /// applies from the next request, and a slow-down after a 429 stands: a fresh limiter per rebuild would make two
    /// budgets at once and forget the 429's slow-down.
    @Test func aReloadKeepsEachProvidersLimiter() async throws {
        let limiters = RateLimiters()
        let before = try ConfiguredProviders(
            environment: Environment(["PXP_MAX_RPS": "1000"]), transport: ScriptedTransport([]), limiters: limiters)
        let kept = try #require(limiters.existing(for: .pxp))
        #expect(limiters.existing(for: .paypal) == nil, "no PAYPAL_MAX_RPS: no limiter")
        let after = try ConfiguredProviders(
            environment: Environment(["PXP_MAX_RPS": "500"]), transport: ScriptedTransport([]), limiters: limiters)
        #expect(limiters.existing(for: .pxp) === kept)
        #expect(kept.current.interval == 1.0 / 500)
        _ = (before, after)

        // Two transports of one provider (the old and the rebuilt) take their slots from one schedule.
        let clock = Mutex<Double>(0)
        let base = ScriptedTransport([.success(ProviderResponse(status: 429)), .success(ProviderResponse(status: 200))])
        let old = RateLimitedTransport(base: base, limiter: limiters.limiter(for: .pxp, perSecond: 1000), clock: { clock.withLock { $0 } })
        _ = try await old.send(ProviderRequest(method: "GET", url: "https://p/a"))  // the slot at 0, answered 429
        let new = RateLimitedTransport(base: base, limiter: limiters.limiter(for: .pxp, perSecond: 1000), clock: { clock.withLock { $0 } })
        _ = try await new.send(ProviderRequest(method: "GET", url: "https://p/b"))  // waits for the slot at 1 ms
        let shared = kept.current
        #expect(shared.slowUntil == 30, "the 429 on the old transport slows the new one")
        // Slots at 0 and 1 ms on one schedule, the next 2 ms after (slowed); two limiters would each stand at 1 ms.
        #expect(abs(shared.next - 0.003) < 1e-9, "\(shared.next)")
    }

    @Test func unsetMeansUnlimitedAndABadValueIsAnError() throws {
        #expect(try RateLimitedTransport.limit(for: .pxp, in: Environment([:])) == nil)
        #expect(try RateLimitedTransport.limit(for: .paypal, in: Environment(["PAYPAL_MAX_RPS": "0.5"])) == 0.5)
        for bad in ["0", "-3", "fast", "nan", "inf"] {
            let error = #expect(throws: ConfigurationError.self) {
                try RateLimitedTransport.limit(for: .paypercut, in: Environment(["PAYPERCUT_MAX_RPS": bad]))
            }
            #expect(error?.description.contains("PAYPERCUT_MAX_RPS=\(bad) must be a positive number") == true)
        }
        #expect(throws: ConfigurationError.self) {
            try ConfiguredProviders(environment: Environment(["PXP_MAX_RPS": "x"]), transport: ScriptedTransport([]))
        }
    }
}
