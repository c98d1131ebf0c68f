import Providers
import Reconciliation

/// One attempt at an action, from its claim to its recorded outcome, as a value fed what each step found
/// (postgres-nio's connection state machines; `DeliveryAttempt` and `WakeupStateMachine` here). It does no I/O and
/// reads no clock: `ActionExecutor` performs each `Step` it returns and feeds back what came of it. Every decision of
/// the executor that can move money is a transition here, and each is a row of `ActionAttemptTests`.
///
/// The rules it keeps:
/// - A call in doubt is asked about before anything else, and is never sent again on a guess.
/// - Just before a call the order is re-fetched and planned again; the call goes only when that plan still wants the
///   key, with the plan's amount.
/// - A key once sent is sent again only as it was first sent (its amount and provider target): when the fresh plan
///   wants another amount or target, the action waits while its first call may still show (in doubt, within the
///   grace), then is superseded, and the planner gives the need a key of its own (`…:2`).
/// - A call refused before it was processed (429) is sent again after its Retry-After, as it was.
/// - A provider saying an earlier request under the key reached it (Paypercut's `idempotency_error`) keeps a call in
///   doubt in doubt.
public struct ActionAttempt: Sendable {
    /// What was sent (or is to be sent) under the key.
    public struct Call: Sendable, Equatable, CustomStringConvertible {
        public var amount: Int64
        public var providerTarget: String?
        public init(amount: Int64, providerTarget: String?) { self.amount = amount; self.providerTarget = providerTarget }
        public var description: String { "\(amount) on \(providerTarget ?? "the transaction")" }
    }

    /// What the claimed action's row says, with the facts that depend on the clock worked out by the caller.
    public struct Claim: Sendable, Equatable {
        /// Its last call may have reached the provider, outcome unknown.
        public var inDoubt: Bool
        /// The call sent under its key, nil when none was ever sent.
        public var sent: Call?
        /// This claim's attempt number (1 for the first).
        public var attempts: Int
        /// Its last call was sent less than the grace ago (`PAYRECON_IN_DOUBT_GRACE`).
        public var withinGrace: Bool
        public var graceSeconds: Int
        /// The provider answers a repeated idempotency key with the first result.
        public var providerDeduplicatesKeys: Bool

        public init(inDoubt: Bool, sent: Call?, attempts: Int, withinGrace: Bool, graceSeconds: Int, providerDeduplicatesKeys: Bool) {
            self.inDoubt = inDoubt; self.sent = sent; self.attempts = attempts; self.withinGrace = withinGrace
            self.graceSeconds = graceSeconds; self.providerDeduplicatesKeys = providerDeduplicatesKeys
        }
    }

    /// What the provider said of the call in doubt.
    public enum Inquired: Sendable, Equatable {
        case made(providerRef: String)
        case refused(String)
        case stillPending
        /// It does not know the call, and that can be trusted.
        case notMade
        /// It could not tell.
        case unknown
        /// It could not be asked now (the provider or the database).
        case unreachable(String)
    }

    /// What the fresh plan wants of the key.
    public enum Replanned: Sendable, Equatable {
        case wanted(Call)
        case notWanted(String)
        /// The re-fetch could not be made now.
        case transient(String)
        /// The re-fetch failed for good (a provider 4xx, an unreadable answer).
        case failed(String)
    }

    /// What came of the step before the call.
    public enum Confirmed: Sendable, Equatable {
        /// The fence held and the lease was extended: send.
        case held
        /// Another executor holds the action now: nothing is sent.
        case lost
        /// The database could not record it: nothing is sent.
        case failed(String)
    }

    /// What the provider answered the call.
    public enum Answer: Sendable, Equatable {
        case applied(providerRef: String)
        /// Refused before it was processed (429): sent again, as it was, after the delay.
        case notProcessed(reason: String, retryAfter: Duration?)
        /// Refused (a 4xx), declined, answered unreadably, or never sent (`ProviderFailure` says which).
        case permanent(ProviderFailure)
        /// The provider says an earlier request under this key reached it (Paypercut 409 `idempotency_error`).
        case keyInUse(String)
        /// Timeout, 5xx, a cut connection, a provider that has not decided yet, or what was answered could not be
        /// kept: it may have been applied. `retryAfter`: how long the provider asked to be left alone (a 429 after an
        /// attempt that may have reached it), which the inquiry before any re-send waits out.
        case unknown(String, retryAfter: Duration? = nil)
        /// The provider does not know the transaction to act on.
        case targetUnknown
    }

    /// What the executor does next.
    public enum Step: Sendable, Equatable {
        /// Ask the provider what came of the call in doubt (`askOthers`: with other orders' calls as evidence that
        /// its "not found" can be trusted).
        case inquire(askOthers: Bool)
        /// Re-fetch every transaction of the order and plan it again (`inquiring`: ask about calls in doubt first).
        case replan(inquiring: Bool)
        /// Keep the answers read as evidence, with their bodies (`planned`: the key goes on to its call).
        case keepEvidence(decided: String, planned: Bool)
        /// Record the links the call will make, then check the fence and extend the lease, with what is sent.
        case confirm(Call)
        /// Make the call.
        case call(Call)
        /// Record the outcome under the fence.
        case record(Outcome)
        /// Check the order again, so its findings show what the provider holds now.
        case recheck
        /// The attempt is over, with this status (pending when another executor holds the action now).
        case done(ActionStatus)
    }

    public struct Outcome: Sendable, Equatable {
        public var status: ActionStatus
        public var providerRef: String?
        public var error: String?
        /// Whether a call may have reached the provider with its outcome unknown; nil keeps what is recorded.
        public var inDoubt: Bool?
        /// Not claimed again for this long (a 429's Retry-After).
        public var notBefore: Duration?
        /// Check the order once the outcome is recorded.
        public var recheck: Bool

        public init(
            _ status: ActionStatus, ref: String? = nil, error: String? = nil, inDoubt: Bool? = nil, notBefore: Duration? = nil,
            recheck: Bool = false
        ) {
            self.status = status; self.providerRef = ref; self.error = error; self.inDoubt = inDoubt; self.notBefore = notBefore
            self.recheck = recheck
        }
    }

    enum State: Sendable, Equatable {
        case claimed
        case inquiring
        case replanning
        /// Keeping evidence; then `next` (`required`: not without it).
        case keepingEvidence(then: Step, required: Bool)
        case confirming(Call)
        case calling(Call)
        case recording(Outcome)
        case rechecking(ActionStatus)
        case finished
    }

    /// Attempts of a call in doubt the provider cannot tell about, before it fails as outcome unknown (each asks again
    /// and sends nothing).
    public static let attemptsBeforeOutcomeUnknown = 4
    /// Attempts of a call refused before it was processed (429) before the action fails.
    public static let attemptsWhileRefusedUnprocessed = 8
    /// The longest a 429's Retry-After holds an action back (the wait is a lease: a check does not supersede a leased
    /// action, so a provider asking for hours would hold the order's findings that long).
    public static let longestWait = 300

    public let claim: Claim
    private(set) var state: State = .claimed
    /// Set when an event came that the state does not take (the executor logs it).
    public private(set) var fault: String?

    public init(_ claim: Claim) { self.claim = claim }

    /// The attempt starts: a call in doubt is asked about first, anything else is re-fetched and planned again.
    public mutating func claimed() -> Step {
        guard state == .claimed else { return unexpected("claimed") }
        if claim.inDoubt {
            state = .inquiring
            return .inquire(askOthers: !claim.providerDeduplicatesKeys)
        }
        state = .replanning
        return .replan(inquiring: true)
    }

    /// What the inquiry about the call in doubt found. Its evidence is kept as decided "settled" (the doubt is: the word
    /// `explain` reads, in every evidence row since actions were first executed).
    public mutating func inquired(_ s: Inquired) -> Step {
        guard state == .inquiring else { return unexpected("inquired") }
        switch s {
        case .unreachable(let why):
            return record(Outcome(.pending, error: "outcome of the last call still unknown; will ask again: \(why)"))
        case .made(let ref):
            return keepEvidence("settled", required: false, then: Outcome(.succeeded, ref: ref, inDoubt: false, recheck: true))
        case .refused(let why):
            return keepEvidence("settled", required: false, then: Outcome(.failed, error: why, inDoubt: false, recheck: true))
        case .stillPending:
            return record(Outcome(.pending, error: "the provider reports the call pending; asked again next time"))
        case .notMade where claim.withinGrace:
            return record(
                Outcome(
                    .pending, error: "the provider does not show the last call yet; trusted only \(claim.graceSeconds) s after it was sent")
            )
        case .notMade:
            state = .replanning
            return .replan(inquiring: false)
        case .unknown where claim.providerDeduplicatesKeys:
            state = .replanning  // a repeated key is answered with the first result: re-sent only as it was sent
            return .replan(inquiring: false)
        case .unknown where claim.attempts < Self.attemptsBeforeOutcomeUnknown:
            return record(Outcome(.pending, error: "outcome of the last call unknown; the provider will be asked again"))
        case .unknown:
            let why =
                "outcome unknown: the call may have been applied, and the provider cannot be asked whether it was "
                + "(it does not find it, and that it would is not known). Nothing is sent again automatically. Check the "
                + "transaction with the provider; if the call was not applied, run `payrecon actions retry`"
            return keepEvidence("settled", required: false, then: Outcome(.failed, error: why, inDoubt: true, recheck: true))
        }
    }

    public mutating func replanned(_ r: Replanned) -> Step {
        guard state == .replanning else { return unexpected("replanned") }
        switch r {
        case .transient(let why):
            return record(Outcome(.pending, error: "will retry: \(why)"))
        case .failed(let why):
            return record(Outcome(.failed, error: why))
        case .notWanted where claim.inDoubt && claim.withinGrace:
            // The fresh answer may not show the last call yet: it is not given up on sooner than the grace.
            return record(
                Outcome(.pending, error: "the order may no longer call for it; decided once the last call is \(claim.graceSeconds) s old"))
        case .notWanted(let why):
            return keepEvidence(
                "not sent", required: true,
                then: Outcome(
                    .superseded, error: "not sent: the fresh plan no longer wants it (\(why))",
                    inDoubt: false, recheck: true))
        case .wanted(let call):
            guard let sent = claim.sent, sent != call else {
                state = .keepingEvidence(then: .confirm(call), required: true)
                return .keepEvidence(decided: "call", planned: true)
            }
            // Never sent again with another amount or target.
            if claim.inDoubt && claim.withinGrace {
                return record(
                    Outcome(
                        .pending,
                        error: "first sent as \(sent); the fresh plan wants \(call): not sent again with another amount "
                            + "or target; waiting for the first call to show (\(claim.graceSeconds) s after it was sent)"))
            }
            return keepEvidence(
                "not sent", required: true,
                then: Outcome(
                    .superseded,
                    error: "not sent again: first sent as \(sent), the fresh plan wants \(call); a key once sent is never sent with "
                        + "another amount or target, so the need is planned under a key of its own", inDoubt: false, recheck: true))
        }
    }

    /// `kept`: the evidence was written. What an inquiry found decides the action whether or not its evidence could be
    /// kept; a call, or a decision not to send, goes on only with the evidence of the re-fetch that decided it.
    public mutating func evidenceKept(_ kept: Bool) -> Step {
        guard case .keepingEvidence(let next, let required) = state else { return unexpected("evidenceKept") }
        if required && !kept { return record(Outcome(.pending, error: "will retry: the evidence of the re-fetch could not be kept")) }
        switch next {
        case .confirm(let call):
            state = .confirming(call)
            return next
        case .record(let outcome):
            return record(outcome)
        default:
            return unexpected("evidenceKept")
        }
    }

    public mutating func confirmed(_ c: Confirmed) -> Step {
        guard case .confirming(let call) = state else { return unexpected("confirmed") }
        switch c {
        case .held:
            state = .calling(call)
            return .call(call)
        case .lost:
            state = .finished
            return .done(.pending)
        case .failed(let why):
            return record(Outcome(.pending, error: "will retry: \(why)"))  // nothing sent
        }
    }

    /// Answered: what it came to. A call that was in doubt before this one stays in doubt whatever this one's answer
    /// says of itself (a 429, a refusal): only the provider showing the first call's outcome settles it.
    public mutating func called(_ answer: Answer) -> Step {
        guard case .calling = state else { return unexpected("called") }
        let earlier: Bool? = claim.inDoubt ? nil : false  // nil keeps in_doubt as it is: true
        switch answer {
        case .applied(let ref):
            return record(Outcome(.succeeded, ref: ref, inDoubt: false, recheck: true))
        case .notProcessed(let reason, let after) where claim.attempts < Self.attemptsWhileRefusedUnprocessed:
            // Whole seconds, as a Retry-After gives them.
            let delay = min(Self.longestWait, after.map { Int($0.components.seconds) } ?? min(300, 1 << min(claim.attempts, 8)))
            return record(
                Outcome(
                    .pending, error: "refused before it was processed (\(reason)): sent again as it was after \(delay) s",
                    inDoubt: earlier, notBefore: .seconds(delay)))
        case .notProcessed(let reason, _):
            return record(
                Outcome(
                    .failed,
                    error: "refused before it was processed \(claim.attempts) times (\(reason)); run "
                        + "`payrecon actions retry` once the provider takes calls again", inDoubt: earlier, recheck: true))
        case .permanent(.unreadable(let reason)):
            // Answered, and the answer cannot be read: it may have been applied, as after a timeout.
            return called(.unknown("the provider's answer could not be read: \(reason)"))
        case .permanent(let failure):
            // A call that reached the provider may have moved money whatever it answered: its order is checked again.
            return record(Outcome(.failed, error: failure.description, inDoubt: earlier, recheck: failure.reachedProvider))
        case .keyInUse(let body) where (claim.inDoubt || claim.sent != nil) && claim.attempts < Self.attemptsBeforeOutcomeUnknown:
            // The 409 proves an earlier request under this key arrived: what it did is not known yet.
            return record(
                Outcome(
                    .pending,
                    error: "the provider says an earlier request under this key reached it (\(body)); in doubt "
                        + "until it shows what that request did", inDoubt: true))
        case .keyInUse(let body) where claim.inDoubt || claim.sent != nil:
            return record(
                Outcome(
                    .failed,
                    error: "outcome unknown: the provider says an earlier request under this key reached it (\(body)), "
                        + "and shows nothing of what it did. Check the transaction with the provider; if nothing was applied, run "
                        + "`payrecon actions retry`", inDoubt: true, recheck: true))
        case .keyInUse(let body):
            return record(Outcome(.failed, error: "provider answered 409: \(body)", inDoubt: false, recheck: true))
        case .unknown(let reason, let after):
            return record(
                Outcome(
                    .pending, error: "outcome unknown, asked before any re-send: \(reason)", inDoubt: true,
                    notBefore: after.map { min($0, .seconds(Self.longestWait)) }))
        case .targetUnknown:
            return record(Outcome(.failed, error: "the provider does not know the transaction to act on", inDoubt: earlier))
        }
    }

    /// What came of writing the outcome under the fence.
    public enum Recorded: Sendable, Equatable {
        case kept
        /// The fence refused it: another executor holds the action (it will ask the provider itself).
        case lost
        /// The database could not write it: the lease runs out and another attempt decides.
        case failed
    }

    public mutating func recorded(_ r: Recorded) -> Step {
        guard case .recording(let outcome) = state else { return unexpected("recorded") }
        switch r {
        case .kept where outcome.recheck:
            state = .rechecking(outcome.status)
            return .recheck
        case .kept:
            state = .finished
            return .done(outcome.status)
        case .lost, .failed:
            state = .finished
            return .done(.pending)
        }
    }

    public mutating func rechecked() -> Step {
        guard case .rechecking(let status) = state else { return unexpected("rechecked") }
        state = .finished
        return .done(status)
    }

    /// The lease ran out while the attempt was under way: before the call nothing is sent; from the call on its
    /// outcome is recorded only under the fence, which refuses it.
    public mutating func leaseLost() -> Step {
        switch state {
        case .claimed, .inquiring, .replanning, .keepingEvidence, .confirming:
            state = .finished
            return .done(.pending)
        case .calling, .recording, .rechecking, .finished:
            return .done(.pending)
        }
    }

    // MARK: -

    private mutating func record(_ outcome: Outcome) -> Step {
        state = .recording(outcome)
        return .record(outcome)
    }

    private mutating func keepEvidence(_ decided: String, required: Bool, then outcome: Outcome) -> Step {
        state = .keepingEvidence(then: .record(outcome), required: required)
        return .keepEvidence(decided: decided, planned: false)
    }

    /// An event the state does not take: a bug in the caller, said in `fault`. The attempt ends recording nothing (the
    /// lease runs out and another attempt starts from what the provider shows).
    private mutating func unexpected(_ event: String) -> Step {
        fault = "\(event) in state \(state)"
        state = .finished
        return .done(.pending)
    }
}
