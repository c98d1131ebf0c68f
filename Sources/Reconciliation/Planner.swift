// The reconcile planner: order + provider snapshot + recorded actions → findings, new actions, superseded keys.
//
// The decision table (docs/reconciliation.md and docs/ARCHITECTURE.md), as implemented here. A = authorised, C = captured, R = refunded (snapshot), amt = order amount,
// rq = order refund_amount; "authorisation intents" = authorisation and estimated_authorisation.
//
// 0. No order, a snapshot                  → unknown_order (only).
//    An order, no snapshot                 → missing_at_provider (only).
//    Blocking, in this order, all reported: merchant_mismatch (order merchant non-empty and ≠ the snapshot's,
//    a missing snapshot merchant counts as different); site_mismatch (when the snapshot reports a site: the
//    provider's mapping says so; order site non-empty and ≠); currency_mismatch; intent_mismatch (exact).
//    Any of them → only those findings, no actions.
// P. payout intent (only these three checks, never an action):
//      money moved (captured, partially_refunded, refunded) and C ≠ amt → amount_mismatch
//        (before that C is 0 by nature; a pending or failed payout is covered by the next two checks);
//      fulfilled and failed or voided → state_mismatch;
//      pending or action_required for longer than pendingMax → stale_pending.
// Other intents. An open order whose transaction failed or was voided is not a discrepancy: nothing is checked.
//    Otherwise rows in order, each yielding at most one finding or one action (a refund spread over several
//    refund sources, e.g. captures, is one action per source, targets cumulative):
//  1. open, authorisation intents, authorised, amt > A   → increment amt − A (target amt) where allowed,
//                                                           else amount_mismatch
//  2. fulfilled, authorisation intents, authorised, C < amt ≤ A
//                                                         → capture amt − C (target amt) where allowed,
//                                                           else action_not_allowed
//  3. fulfilled, authorisation intents, authorised, amt > A
//                                                         → increment amt − A (target amt) where allowed,
//                                                           else action_not_allowed (the capture follows later)
//  4. purchase, captured / partially_refunded / refunded, C < amt → amount_mismatch
//  5. fulfilled, failed or voided                         → state_mismatch
//  6. cancelled, authorised, C = 0, A > 0                 → void A − C (target 0) where allowed, else action_not_allowed
//  7. cancelled, C − R > 0                                → refund C − R (target C) where allowed, else action_not_allowed
//  8. not cancelled, rq > R                               → refund rq − R (target rq) if rq ≤ C and allowed,
//                                                           else action_not_allowed
//  9. C > amt                                             → over_captured
// 10. R > (cancelled ? C : rq)                            → over_refunded
// 11. pending or action_required, now − createdAt > pendingMax → stale_pending (exactly pendingMax is not stale;
//     no createdAt, no verdict)
// 12. D > 0                                             → disputed (amount at risk D)
// 13. V > 0                                             → reversed (amount at risk V)
//
// V (reversed) is counted in C and never in R: a chargeback is not a refund the merchant made. A cancelled order
// wants C − R − V refunded (the payer has V back already). While D > 0 every refund is action_not_allowed.
//
// Where allowed (a denial names its reason in the finding's detail): the shared rules below, then what the
// provider's mapping put in `Snapshot.capabilities` (its own ids, statuses and missing operations):
//   capture: authorisation intent, state authorised, C < A; then `capabilities.capture`.
//   void:    as capture, and C = 0; then `capabilities.void`.
//   refund:  D = 0 and C − R − V ≥ the amount (> 0); then `capabilities.refund`: one call against a target, or spread over
//            refund sources holding the amount.
//   increment: `capabilities.increment` not unsupported; authorisation intent, state authorised, C < A; then allowed.

// Amount at risk (minor units): missing_at_provider, merchant/site/currency/intent mismatch, state_mismatch,
// stale_pending: amt; unknown_order: the transaction's value unless it failed or was voided (then 0);
// amount_mismatch: |amt − C| (row 1: amt − A); over_captured: C − amt; over_refunded: R − limit;
// action_not_allowed: the amount of the action that was needed; disputed: D; reversed: V.
//
// Idempotency: a planned action whose key was already recorded as pending, succeeded or failed is not emitted
// again (a failed one waits for an operator: retrying a refused capture on every check would hammer the provider);
// a superseded key is emitted again when the plan wants it back, if it was never sent; a key sent and superseded is
// never sent again (with another amount or target it would move other money under the same key): the need takes the
// key with a suffix, `…:2`, `…:3`. Recorded pending actions whose key the plan no
// longer wants (any reason, blocking findings included) are listed in `supersede`, except those in doubt (their call
// may have reached the provider): while one is in doubt nothing else is planned on its transaction.
// 14. a failed action the plan still wants, or one whose outcome is unknown → action_failed (amount at risk the
//     action's amount; detail the provider's answer).

/// What planning one order yields.
public struct Plan: Sendable, Hashable {
    /// Every discrepancy found by this check (each one counts an occurrence).
    public var findings: [Finding]
    /// Actions to record now (not already recorded).
    public var actions: [PlannedAction]
    /// Idempotency keys of recorded pending actions the order no longer calls for.
    public var supersede: [String]
    /// The rows that fired and the figures they saw (`payrecon explain`).
    public var decision: Decision

    public init(findings: [Finding] = [], actions: [PlannedAction] = [], supersede: [String] = [], decision: Decision = Decision()) {
        self.findings = findings; self.actions = actions; self.supersede = supersede; self.decision = decision
    }
}

/// The decision table as a pure function (see the table at the top of Planner.swift).
public enum Planner {
    /// Plans one order against the provider's answer.
    /// - Parameters:
    ///   - order: the stored order, nil when the provider's transaction names no stored order.
    ///   - snapshot: the provider's answer, nil when the provider does not know the transaction.
    ///   - emitted: actions already recorded for this order, any status.
    ///   - now: unix seconds.
    ///   - pendingMax: seconds after which a pending transaction is `stale_pending`.
    /// - Parameter executing: the key of the action the executor is about to call (left out of `emitted`): it is
    ///   never held back by another action in doubt.
    public static func plan(
        order: Order?, snapshot: Snapshot?, emitted: [EmittedAction], now: Int64,
        pendingMax: Int64, executing: String? = nil
    ) -> Plan {
        let (findings, wanted, decision) = decide(order: order, snapshot: snapshot, now: now, pendingMax: pendingMax)
        return finish(
            findings: findings, wanted: wanted, emitted: emitted, currency: order?.amount.currency, executing: executing,
            decision: decision)
    }

    /// What is new against what was recorded, and what is no longer wanted.
    ///
    /// An action in doubt (its call may have reached the provider, outcome unknown) is never superseded here, and
    /// while it is in doubt nothing else is planned on its transaction: the plan is made from answers that may not
    /// show the call yet, and acting on them could move the money twice (a refund of 5.00 in doubt and a new one of
    /// 8.00 would refund 13.00). The executor learns the outcome from the provider first. A failed action the plan
    /// still wants, or one whose outcome is unknown, is `action_failed` until an operator retries it or the order no
    /// longer calls for it.
    static func finish(
        findings: [Finding], wanted: [PlannedAction], emitted: [EmittedAction], currency: Currency?,
        executing: String? = nil, decision: Decision = Decision()
    ) -> Plan {
        var decision = decision
        let byKey = Dictionary(
            emitted.map { ($0.idempotencyKey, $0) },
            uniquingKeysWith: { first, second in first.status == .superseded ? second : first })
        let recorded = byKey.mapValues(\.status)
        let wanted = keyed(wanted, recorded: byKey)
        // While any action of the order is in doubt nothing new is planned on it: the order's transactions may be
        // listed differently from one check to the next (a retry learned, a re-import), so the hold is the order's,
        // not one transaction's.
        let doubtful = emitted.filter { $0.inDoubt && ($0.status == .pending || $0.status == .failed) }
        let doubtfulKeys = Set(doubtful.map(\.idempotencyKey))
        let actions = wanted.filter { action in
            if !doubtful.isEmpty, !doubtfulKeys.contains(action.idempotencyKey), action.idempotencyKey != executing { return false }
            guard let status = recorded[action.idempotencyKey] else { return true }
            return status == .superseded
        }
        let wantedKeys = Set(wanted.map(\.idempotencyKey))
        var supersede: [String] = []
        var seen = Set<String>()
        for action in emitted where action.status == .pending && !action.inDoubt && !wantedKeys.contains(action.idempotencyKey) {
            if seen.insert(action.idempotencyKey).inserted { supersede.append(action.idempotencyKey) }
        }
        var all = findings
        // A need the plan still has under a key that already succeeded (a refund the provider answered pending that
        // failed later; another part of a spread refund that failed): it can never be planned again under that key.
        for action in wanted where recorded[action.idempotencyKey] == .succeeded {
            let amount = Money.format(minorUnits: action.amount, exponent: action.currency.exponent) + " " + action.currency.code
            let finding = Finding(
                kind: .actionFailed, expected: ["action": action.kind.rawValue, "idempotency_key": action.idempotencyKey],
                actual: ["status": "succeeded, yet still needed"],
                detail: "\(action.kind.rawValue) of \(amount) is still needed, but \(action.idempotencyKey) already succeeded: "
                    + "the provider no longer shows what that call did; check it there",
                amountAtRisk: max(action.amount, 0))
            if let i = all.firstIndex(where: { $0.kind == .actionFailed }) { all[i] = join(all[i], finding) } else { all.append(finding) }
            decision.fired.append(.init(row: .actionFailed, yields: "action_failed (\(action.idempotencyKey) succeeded, yet still needed)"))
        }
        var failedSeen = Set<String>()
        for action in emitted where action.status == .failed && (wantedKeys.contains(action.idempotencyKey) || action.inDoubt) {
            guard failedSeen.insert(action.idempotencyKey).inserted else { continue }
            let amount =
                currency.map { Money.format(minorUnits: action.amount, exponent: $0.exponent) + " " + $0.code } ?? String(action.amount)
            let outcome = action.inDoubt ? "outcome unknown" : "failed"
            let finding = Finding(
                kind: .actionFailed,
                expected: ["action": action.kind.rawValue, "idempotency_key": action.idempotencyKey],
                actual: ["status": outcome],
                detail: "\(action.kind.rawValue) of \(amount) (\(action.idempotencyKey)) \(outcome): "
                    + (action.lastError ?? "no answer recorded")
                    + " — fix the cause, then `payrecon actions retry`",
                amountAtRisk: max(action.amount, 0))
            if let i = all.firstIndex(where: { $0.kind == .actionFailed }) { all[i] = join(all[i], finding) } else { all.append(finding) }
            decision.fired.append(.init(row: .actionFailed, yields: "action_failed (\(action.idempotencyKey) \(outcome))"))
        }
        return Plan(findings: all, actions: actions, supersede: supersede, decision: decision)
    }

    /// A key once sent is never sent again with another amount or target: a need that maps to a key that was sent and
    /// then superseded takes the key with a suffix (`…:2`, `…:3`, the first not sent and superseded), so planning again
    /// still yields the same key. A superseded key never sent is pending again as it is.
    static func keyed(_ wanted: [PlannedAction], recorded: [String: EmittedAction]) -> [PlannedAction] {
        wanted.map { action in
            var keyed = action
            var n = 1
            while let earlier = recorded[keyed.idempotencyKey], earlier.status == .superseded, earlier.sent {
                n += 1
                keyed.idempotencyKey = action.idempotencyKey + ":\(n)"
            }
            return keyed
        }
    }

    /// Findings and every action the order calls for now, recorded or not.
    static func decide(
        order: Order?, snapshot: Snapshot?, now: Int64,
        pendingMax: Int64
    ) -> ([Finding], [PlannedAction], Decision) {
        switch (order, snapshot) {
        case (nil, nil):
            return ([], [], Decision())
        case let (nil, snapshot?):
            return (
                [unknownOrder(snapshot)], [], Decision(fired: [.init(row: .unknownOrder, yields: DiscrepancyKind.unknownOrder.rawValue)])
            )
        case let (order?, nil):
            return (
                [missingAtProvider(order)], [],
                Decision(fired: [.init(row: .missingAtProvider, yields: DiscrepancyKind.missingAtProvider.rawValue)])
            )
        case let (order?, snapshot?):
            var check = Check(order: order, snapshot: snapshot, now: now, pendingMax: pendingMax)
            check.run()
            return (
                check.findings, check.actions, Decision(fired: check.fired, figures: Decision.Figures(order: order, snapshot: snapshot))
            )
        }
    }

    static func unknownOrder(_ snapshot: Snapshot) -> Finding {
        let value = Money.format(minorUnits: snapshot.value, exponent: snapshot.currency.exponent)
        let dead = snapshot.state == .failed || snapshot.state == .voided
        return Finding(
            kind: .unknownOrder, expected: [:],
            actual: [
                "transaction_ref": snapshot.transactionRef, "state": snapshot.state.rawValue,
                "amount": value, "currency": snapshot.currency.code
            ],
            detail: "\(snapshot.provider.rawValue) transaction \(snapshot.transactionRef) "
                + "(\(value) \(snapshot.currency.code), \(snapshot.state.rawValue)) matches no stored order",
            amountAtRisk: dead ? 0 : max(snapshot.value, 0))
    }

    /// `unknown_order` for a transaction that is not an order's own and cannot be linked to one (a PXP Refund
    /// transaction naming no parent): `detail` says why.
    public static func unknownOrder(provider: Provider, transactionRef: String, value: Money?, state: String, detail: String) -> Finding {
        var actual = ["transaction_ref": transactionRef, "state": state]
        if let value {
            actual["amount"] = Money.format(minorUnits: value.minorUnits, exponent: value.currency.exponent)
            actual["currency"] = value.currency.code
        }
        return Finding(kind: .unknownOrder, expected: [:], actual: actual, detail: detail, amountAtRisk: max(value?.minorUnits ?? 0, 0))
    }

    static func missingAtProvider(_ order: Order) -> Finding {
        var expected = ["transaction_ref": order.transactionRef]
        if let merchant = order.merchant, !merchant.isEmpty { expected["merchant"] = merchant }
        if let site = order.site, !site.isEmpty { expected["site"] = site }
        return Finding(
            kind: .missingAtProvider, expected: expected, actual: [:],
            detail: "\(order.provider.rawValue) does not know transaction \(order.transactionRef)",
            amountAtRisk: order.amount.minorUnits)
    }
}
