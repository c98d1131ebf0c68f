import Providers
import Reconciliation
import Testing
@testable import Worker

/// `ActionAttempt`, the executor's decisions as a state machine: each row is a claim and the events fed to it, with
/// the step expected after each. No PostgreSQL, no provider: what the executor does with each step is tested end to
/// end elsewhere (ActionSafetyTests, PXPUnknownOutcomeTests, MoneyByConstructionTests).
@Suite struct ActionAttemptTests {
    typealias A = ActionAttempt

    enum Event: Sendable, CustomStringConvertible {
        case claimed, inquired(A.Inquired), replanned(A.Replanned), evidence(Bool), confirmed(A.Confirmed), called(A.Answer)
        case recorded(A.Recorded), rechecked, leaseLost
        var description: String { "\(self)" }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var claim: A.Claim
        var steps: [(Event, String)]
        var testDescription: String { name }
    }

    static let c100 = A.Call(amount: 100, providerTarget: "T")
    static let c70 = A.Call(amount: 70, providerTarget: "T")
    static let c100other = A.Call(amount: 100, providerTarget: "T2")

    static func claim(
        inDoubt: Bool = false, sent: A.Call? = nil, attempts: Int = 1, withinGrace: Bool = false, dedupe: Bool = false
    ) -> A.Claim {
        A.Claim(
            inDoubt: inDoubt, sent: sent, attempts: attempts, withinGrace: withinGrace, graceSeconds: 120, providerDeduplicatesKeys: dedupe)
    }

    /// A step in a few words: what the table compares (an outcome's text is for people, its fields decide).
    static func describe(_ step: A.Step) -> String {
        switch step {
        case .inquire(let others): return others ? "inquire+others" : "inquire"
        case .replan(let inquiring): return inquiring ? "replan" : "replan(inquired)"
        case .keepEvidence(let decided, let planned): return "evidence(\(decided)\(planned ? ", planned" : ""))"
        case .confirm(let c): return "confirm(\(c.amount))"
        case .call(let c): return "call(\(c.amount))"
        case .record(let o):
            var parts = [o.status.rawValue]
            if let d = o.inDoubt { parts.append("inDoubt=\(d)") }
            if let n = o.notBefore { parts.append("notBefore=\(n.components.seconds)") }
            if o.recheck { parts.append("recheck") }
            return "record(" + parts.joined(separator: ", ") + ")"
        case .recheck: return "recheck"
        case .done(let s): return "done(\(s.rawValue))"
        }
    }

    static let fresh = claim()
    static let inDoubt = claim(inDoubt: true, sent: c100, withinGrace: false)

    /// The path to a call, from a fresh claim.
    static let toCall: [(Event, String)] = [
        (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(true), "confirm(100)"),
        (.confirmed(.held), "call(100)")
    ]

    static let rows: [Row] = [
        // A fresh claim: re-fetch and re-plan, then the call with the fresh plan's amount.
        Row(
            name: "applied", claim: fresh,
            steps: toCall + [
                (.called(.applied(providerRef: "P")), "record(succeeded, inDoubt=false, recheck)"), (.recorded(.kept), "recheck"),
                (.rechecked, "done(succeeded)")
            ]),
        Row(
            name: "the fresh plan no longer wants it: superseded, with the evidence of why", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.notWanted("clean")), "evidence(not sent)"),
                (.evidence(true), "record(superseded, inDoubt=false, recheck)"),
                (.recorded(.kept), "recheck"), (.rechecked, "done(superseded)")
            ]),
        Row(
            name: "not wanted, and its evidence cannot be kept: nothing recorded but a retry", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.notWanted("clean")), "evidence(not sent)"), (.evidence(false), "record(pending)"),
                (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "the re-fetch cannot be made now", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.transient("timeout")), "record(pending)"), (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "the re-fetch fails for good", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.failed("401")), "record(failed)"), (.recorded(.kept), "done(failed)")
            ]),
        Row(
            name: "no call without the evidence of the re-fetch that decided it", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(false), "record(pending)")
            ]),
        Row(
            name: "the fence refuses the confirm: nothing sent, nothing recorded", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(true), "confirm(100)"),
                (.confirmed(.lost), "done(pending)")
            ]),
        Row(
            name: "the confirm cannot be written: nothing sent", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(true), "confirm(100)"),
                (.confirmed(.failed("db")), "record(pending)")
            ]),
        // What the provider answers.
        Row(
            name: "429: not processed, sent again as it was after Retry-After", claim: fresh,
            steps: toCall + [
                (.called(.notProcessed(reason: "HTTP 429", retryAfter: .seconds(1))), "record(pending, inDoubt=false, notBefore=1)"),
                (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "429 without Retry-After: a backoff", claim: claim(attempts: 3),
            steps: toCall + [
                (.called(.notProcessed(reason: "HTTP 429", retryAfter: nil)), "record(pending, inDoubt=false, notBefore=8)")
            ]),
        Row(
            name: "429 on every attempt: failed, for an operator", claim: claim(attempts: A.attemptsWhileRefusedUnprocessed),
            steps: toCall + [
                (.called(.notProcessed(reason: "HTTP 429", retryAfter: .seconds(1))), "record(failed, inDoubt=false, recheck)")
            ]),
        Row(
            name: "refused by the provider: failed, then the order re-checked", claim: fresh,
            steps: toCall + [
                (.called(.permanent(.refused(status: 422, body: "x"))), "record(failed, inDoubt=false, recheck)"),
                (.recorded(.kept), "recheck"), (.rechecked, "done(failed)")
            ]),
        Row(
            name: "never sent (no client): failed, nothing to re-check", claim: fresh,
            steps: toCall + [
                (.called(.permanent(.notSent("no client"))), "record(failed, inDoubt=false)")
            ]),
        Row(
            name: "declined in a readable answer (a refund answered FAILED): failed, then the order re-checked", claim: fresh,
            steps: toCall + [
                (.called(.permanent(.declined("FAILED"))), "record(failed, inDoubt=false, recheck)"), (.recorded(.kept), "recheck")
            ]),
        Row(
            name: "answered unreadably (no state, or over the size cap): it may have been applied, so in doubt", claim: fresh,
            steps: toCall + [
                (.called(.permanent(.unreadable("no systemTransactionId/state"))), "record(pending, inDoubt=true)"),
                (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "a key in use on a key never sent: refused", claim: fresh,
            steps: toCall + [
                (.called(.keyInUse("idempotency_error")), "record(failed, inDoubt=false, recheck)")
            ]),
        Row(
            name: "outcome unknown: in doubt", claim: fresh,
            steps: toCall + [
                (.called(.unknown("timeout")), "record(pending, inDoubt=true)"), (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "outcome unknown, then a 429 asking to wait: in doubt, asked after the wait (at most 300 s)", claim: fresh,
            steps: toCall + [
                (.called(.unknown("timeout, then HTTP 429", retryAfter: .seconds(60))), "record(pending, inDoubt=true, notBefore=60)"),
                (.recorded(.kept), "done(pending)")
            ]),
        Row(
            name: "outcome unknown, a 429 asking for a day: asked after 300 s", claim: fresh,
            steps: toCall + [
                (.called(.unknown("timeout, then HTTP 429", retryAfter: .seconds(86_400))), "record(pending, inDoubt=true, notBefore=300)")
            ]),
        Row(
            name: "the provider does not know the transaction", claim: fresh,
            steps: toCall + [
                (.called(.targetUnknown), "record(failed, inDoubt=false)")
            ]),
        Row(
            name: "the outcome's record is refused by the fence (the lease was lost)", claim: fresh,
            steps: toCall + [
                (.called(.applied(providerRef: "P")), "record(succeeded, inDoubt=false, recheck)"), (.recorded(.lost), "done(pending)")
            ]),
        Row(
            name: "the outcome cannot be written", claim: fresh,
            steps: toCall + [
                (.called(.applied(providerRef: "P")), "record(succeeded, inDoubt=false, recheck)"), (.recorded(.failed), "done(pending)")
            ]),
        // A call in doubt is asked about first.
        Row(
            name: "in doubt, found made: succeeded, whatever came of the evidence", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.made(providerRef: "P")), "evidence(settled)"),
                (.evidence(false), "record(succeeded, inDoubt=false, recheck)"),
                (.recorded(.kept), "recheck"), (.rechecked, "done(succeeded)")
            ]),
        Row(
            name: "in doubt, refused", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.refused("Refused")), "evidence(settled)"),
                (.evidence(true), "record(failed, inDoubt=false, recheck)")
            ]),
        Row(
            name: "in doubt, still pending at the provider", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.stillPending), "record(pending)")
            ]),
        Row(
            name: "in doubt, the provider cannot be asked", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.unreachable("timeout")), "record(pending)")
            ]),
        Row(
            name: "in doubt, not made, within the grace: not trusted yet", claim: claim(inDoubt: true, sent: c100, withinGrace: true),
            steps: [
                (.claimed, "inquire+others"), (.inquired(.notMade), "record(pending)")
            ]),
        Row(
            name: "in doubt, not made after the grace, wanted as sent: sent again as it was", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.notMade), "replan(inquired)"),
                (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"), (.confirmed(.held), "call(100)")
            ]),
        Row(
            name: "in doubt, not made after the grace, now wanted for less: superseded, a key of its own follows", claim: inDoubt,
            steps: [
                (.claimed, "inquire+others"), (.inquired(.notMade), "replan(inquired)"), (.replanned(.wanted(c70)), "evidence(not sent)"),
                (.evidence(true), "record(superseded, inDoubt=false, recheck)")
            ]),
        Row(
            name: "in doubt, nobody can tell, a deduplicating provider: re-sent only as sent",
            claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)")
            ]),
        Row(
            name: "in doubt, deduplicating, wanted for less within the grace: waits",
            claim: claim(inDoubt: true, sent: c100, withinGrace: true, dedupe: true),
            steps: [(.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c70)), "record(pending)")]),
        Row(
            name: "in doubt, deduplicating, wanted on another capture after the grace: superseded",
            claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100other)), "evidence(not sent)"),
                (.evidence(true), "record(superseded, inDoubt=false, recheck)")
            ]),
        Row(
            name: "in doubt, deduplicating, not wanted within the grace: waits, no evidence",
            claim: claim(inDoubt: true, sent: c100, withinGrace: true, dedupe: true),
            steps: [(.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.notWanted("clean")), "record(pending)")]),
        Row(
            name: "in doubt, deduplicating, 409 idempotency_error on the re-send: still in doubt",
            claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"), (.called(.keyInUse("idempotency_error")), "record(pending, inDoubt=true)")
            ]),
        // The re-send of a call in doubt is answered for itself only: the first call is still unaccounted for.
        Row(
            name: "in doubt, the re-send answered 429: still in doubt", claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"),
                (.called(.notProcessed(reason: "HTTP 429", retryAfter: .seconds(7200))), "record(pending, notBefore=300)")
            ]),
        Row(
            name: "in doubt, the re-send refused: failed, still in doubt", claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"), (.called(.permanent(.refused(status: 422, body: "x"))), "record(failed, recheck)")
            ]),
        Row(
            name: "in doubt, the re-send finds no transaction: failed, still in doubt",
            claim: claim(inDoubt: true, sent: c100, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"), (.called(.targetUnknown), "record(failed)")
            ]),
        Row(
            name: "in doubt, a key in use on every attempt: failed as outcome unknown, for an operator",
            claim: claim(inDoubt: true, sent: c100, attempts: A.attemptsBeforeOutcomeUnknown, dedupe: true),
            steps: [
                (.claimed, "inquire"), (.inquired(.unknown), "replan(inquired)"), (.replanned(.wanted(c100)), "evidence(call, planned)"),
                (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"), (.called(.keyInUse("idempotency_error")), "record(failed, inDoubt=true, recheck)")
            ]),
        Row(
            name: "a 429 asking for hours holds the action back at most five minutes", claim: fresh,
            steps: toCall + [
                (.called(.notProcessed(reason: "HTTP 429", retryAfter: .seconds(86_400))), "record(pending, inDoubt=false, notBefore=300)")
            ]),
        Row(
            name: "in doubt, nobody can tell, asked again", claim: claim(inDoubt: true, sent: c100, attempts: 2),
            steps: [
                (.claimed, "inquire+others"), (.inquired(.unknown), "record(pending)")
            ]),
        Row(
            name: "in doubt, nobody can tell after the last attempt: failed, still in doubt",
            claim: claim(inDoubt: true, sent: c100, attempts: A.attemptsBeforeOutcomeUnknown),
            steps: [
                (.claimed, "inquire+others"), (.inquired(.unknown), "evidence(settled)"),
                (.evidence(true), "record(failed, inDoubt=true, recheck)")
            ]),
        // Sent before and not in doubt (a 429, an operator's retry): again only as sent.
        Row(
            name: "sent before, wanted as sent: sent again", claim: claim(sent: c100, attempts: 2),
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(true), "confirm(100)")
            ]),
        Row(
            name: "sent before, wanted for less: superseded, never sent with another amount", claim: claim(sent: c100, attempts: 2),
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c70)), "evidence(not sent)"),
                (.evidence(true), "record(superseded, inDoubt=false, recheck)")
            ]),
        Row(
            name: "sent before, a key in use: in doubt", claim: claim(sent: c100, attempts: 2),
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.evidence(true), "confirm(100)"),
                (.confirmed(.held), "call(100)"),
                (.called(.keyInUse("idempotency_error")), "record(pending, inDoubt=true)")
            ]),
        // The lease, and events a state does not take.
        Row(
            name: "the lease lost before the call: nothing sent", claim: fresh,
            steps: [
                (.claimed, "replan"), (.replanned(.wanted(c100)), "evidence(call, planned)"), (.leaseLost, "done(pending)")
            ]),
        Row(name: "the lease lost during the call: its record is fenced", claim: fresh, steps: toCall + [(.leaseLost, "done(pending)")]),
        Row(
            name: "an answer before any call ends the attempt, recording nothing", claim: fresh,
            steps: [(.called(.applied(providerRef: "P")), "done(pending)")]),
        Row(
            name: "an inquiry's answer for a claim not in doubt ends it", claim: fresh,
            steps: [(.claimed, "replan"), (.inquired(.notMade), "done(pending)")])
    ]

    static func feed(_ m: inout A, _ e: Event) -> A.Step {
        switch e {
        case .claimed: m.claimed()
        case .inquired(let s): m.inquired(s)
        case .replanned(let r): m.replanned(r)
        case .evidence(let k): m.evidenceKept(k)
        case .confirmed(let c): m.confirmed(c)
        case .called(let a): m.called(a)
        case .recorded(let r): m.recorded(r)
        case .rechecked: m.rechecked()
        case .leaseLost: m.leaseLost()
        }
    }

    @Test(arguments: rows)
    func transitions(_ row: Row) {
        var m = A(row.claim)
        for (i, (event, expected)) in row.steps.enumerated() {
            #expect(Self.describe(Self.feed(&m, event)) == expected, "step \(i + 1): \(event)")
        }
    }

    /// Every outcome the machine can record says why, and a call is only ever made with what the plan or the first
    /// send said: the amount a call carries is the one in the `wanted` it follows.
    @Test func everyRecordSaysWhyAndEveryCallCarriesTheWantedAmount() {
        for row in Self.rows {
            var m = A(row.claim)
            var lastWanted: A.Call?
            for (event, _) in row.steps {
                if case .replanned(.wanted(let c)) = event { lastWanted = c }
                switch Self.feed(&m, event) {
                case .record(let o) where o.status != .succeeded:
                    #expect(!(o.error ?? "").isEmpty, "\(row.name): a \(o.status) outcome without a reason")
                case .call(let c), .confirm(let c):
                    #expect(c == lastWanted, "\(row.name)")
                    if let sent = row.claim.sent { #expect(c == sent, "\(row.name): a key sent before goes again only as sent") }
                default: break
                }
            }
        }
    }

    @Test func anUnexpectedEventIsSaid() {
        var m = A(Self.fresh)
        _ = m.confirmed(.held)
        #expect(m.fault?.contains("confirmed") == true)
    }
}
