import Testing
import Worker

/// `DeliveryAttempt.decide`: the delivery lease's outcome as a pure function of (result, attempts, random).
@Suite("DeliveryAttempt")
struct DeliveryAttemptTests {
    let policy = DeliveryAttempt(maxAttempts: 10, baseDelay: .seconds(2), maxDelay: .seconds(900))

    /// The retry's delay in seconds (a Duration's whole attoseconds: the figures below are exact).
    func delay(_ d: DeliveryAttempt.Decision) -> Double? {
        if case .retry(let after, _) = d { return Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18 }
        return nil
    }

    @Test func processedIsDoneWhateverTheAttempt() {
        for attempts in [1, 5, 10, 11] {
            #expect(policy.decide(.processed(.done("re-checked")), attempts: attempts, random: 0.5) == .done(.done("re-checked")))
            #expect(
                policy.decide(.processed(.ignored("names no payment")), attempts: attempts, random: 0.5)
                    == .done(.ignored("names no payment")))
        }
    }

    @Test(arguments: [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 32.0), (9, 512.0)])
    func backoffCeilingDoublesPerAttempt(attempts: Int, ceiling: Double) throws {
        let low = try #require(delay(policy.decide(.transient(reason: "500", retryAfter: nil), attempts: attempts, random: 0)))
        let high = try #require(
            delay(policy.decide(.transient(reason: "500", retryAfter: nil), attempts: attempts, random: 0.999_999)))
        #expect(low == ceiling / 2)
        #expect(high < ceiling && high > ceiling * 0.99)
    }

    @Test func delayGrowsWithAttemptsForEveryJitter() throws {
        for random in [0.0, 0.3, 0.999] {
            var previous = 0.0
            for attempts in 1...9 {
                let d = try #require(
                    delay(policy.decide(.transient(reason: "timeout", retryAfter: nil), attempts: attempts, random: random)))
                #expect(d > previous, "attempt \(attempts) random \(random)")
                previous = d
            }
        }
    }

    @Test func delayIsCappedAtMaxDelay() throws {
        let capped = DeliveryAttempt(maxAttempts: 100, baseDelay: .seconds(2), maxDelay: .seconds(900))
        for attempts in [10, 20, 40, 64, 99] {
            let d = try #require(delay(capped.decide(.transient(reason: "x", retryAfter: nil), attempts: attempts, random: 0.999)))
            #expect(d <= 900 && d >= 450)
        }
    }

    @Test(arguments: [0.0, 0.25, 0.5, 0.75, 0.999_999])
    func jitterStaysWithinHalfToFullCeiling(random: Double) throws {
        let d = try #require(delay(policy.decide(.transient(reason: "x", retryAfter: nil), attempts: 4, random: random)))
        #expect(d >= 8 && d < 16)
        let after = policy.decide(.transient(reason: "x", retryAfter: nil), attempts: 4, random: random)
        #expect(after == .retry(after: .seconds(8) + .seconds(8) * random, reason: "x"))
    }

    @Test(arguments: [-1.0, 1.5, Double.nan])
    func randomOutsideTheUnitIntervalIsClamped(random: Double) throws {
        let d = try #require(delay(policy.decide(.transient(reason: "x", retryAfter: nil), attempts: 4, random: random)))
        // NaN clamps to 0 through max/min: never a NaN or negative delay.
        #expect(d >= 8 && d <= 16)
    }

    @Test func retryAfterIsAFloor() throws {
        let d = try #require(delay(policy.decide(.transient(reason: "429", retryAfter: .seconds(120)), attempts: 1, random: 0.9)))
        #expect(d == 120)
        // A Retry-After below the backoff does not shorten it.
        let longer = try #require(delay(policy.decide(.transient(reason: "429", retryAfter: .seconds(1)), attempts: 6, random: 0)))
        #expect(longer == 32)
    }

    @Test func permanentFailuresAreRetriedUntilTheBudgetRunsOut() throws {
        let d = policy.decide(.permanent(reason: "401 invalid credentials"), attempts: 3, random: 0)
        #expect(delay(d) == 4)
        guard case .retry(_, let reason) = d else { Issue.record("expected a retry"); return }
        #expect(reason == "401 invalid credentials")
    }

    @Test(arguments: [10, 11, 50])
    func deadAtMaxAttemptsWithTheReason(attempts: Int) {
        let d = policy.decide(.transient(reason: "PXP answered 503", retryAfter: nil), attempts: attempts, random: 0.5)
        #expect(d == .dead(reason: "gave up after \(attempts) attempts: PXP answered 503"))
    }

    @Test func lastAttemptBeforeTheBudgetStillRetries() {
        #expect(delay(policy.decide(.transient(reason: "x", retryAfter: nil), attempts: 9, random: 0)) == 256)
        let two = DeliveryAttempt(maxAttempts: 2)
        #expect(delay(two.decide(.transient(reason: "x", retryAfter: nil), attempts: 1, random: 0)) == 1)
        #expect(two.decide(.permanent(reason: "bad"), attempts: 2, random: 0) == .dead(reason: "gave up after 2 attempts: bad"))
    }

    /// An attempt count below 1 (never claimed) is read as the first attempt: the base delay, not a zero ceiling.
    @Test func anAttemptCountBelowOneIsTheFirst() {
        for attempts in [0, -1] {
            #expect(delay(policy.decide(.transient(reason: "x", retryAfter: nil), attempts: attempts, random: 0)) == 1)
        }
    }

    @Test func oneAttemptBudgetIsDeadAtOnce() {
        let once = DeliveryAttempt(maxAttempts: 1)
        #expect(
            once.decide(.transient(reason: "timeout", retryAfter: .seconds(5)), attempts: 1, random: 0)
                == .dead(reason: "gave up after 1 attempts: timeout"))
    }

    @Test func tinyBaseDelayHasAFloor() throws {
        let fast = DeliveryAttempt(maxAttempts: 5, baseDelay: .zero, maxDelay: .seconds(1))
        #expect(try #require(delay(fast.decide(.transient(reason: "x", retryAfter: nil), attempts: 1, random: 0))) == 0.05)
    }
}
