import Providers
import Testing
@testable import Reconciliation

/// 20,000 seeded random orders and snapshots: whatever the mix, the planner never asks for an action the provider
/// does not allow, never for an amount ≤ 0, never acts alongside a blocking finding, and is idempotent.
@Suite struct PlannerPropertyTests {
    @Test func randomOrdersNeverYieldForbiddenActions() {
        var random = SplitMix64(seed: 0x5EED_2025)
        var counts: [ActionKind: Int] = [:]
        var findingCounts: [DiscrepancyKind: Int] = [:]
        for iteration in 0..<20_000 {
            let (order, snapshot, targets) = Self.randomCase(&random)
            let now = Fixture.now
            let plan = Planner.plan(
                order: order, snapshot: snapshot, emitted: [], now: now,
                pendingMax: Fixture.pendingMax)
            for action in plan.actions { counts[action.kind, default: 0] += 1 }
            for finding in plan.findings { findingCounts[finding.kind, default: 0] += 1 }
            let problems = Self.violations(order: order, snapshot: snapshot, targets: targets, plan: plan)
            if !problems.isEmpty {
                Issue.record("case \(iteration): \(problems)\norder: \(order)\nsnapshot: \(snapshot)\nplan: \(plan)")
                return
            }
            // Idempotent: recording the actions as pending and planning again adds nothing and supersedes nothing.
            let recorded = plan.actions.map {
                EmittedAction(idempotencyKey: $0.idempotencyKey, kind: $0.kind, status: .pending, amount: $0.amount)
            }
            let again = Planner.plan(
                order: order, snapshot: snapshot, emitted: recorded, now: now,
                pendingMax: Fixture.pendingMax)
            if !again.actions.isEmpty || !again.supersede.isEmpty || again.findings != plan.findings {
                Issue.record("case \(iteration): not idempotent: \(again)")
                return
            }
        }
        // The generator reaches every action and every finding an order with a snapshot can produce.
        #expect(Set(counts.keys) == Set(ActionKind.allCases))
        // (action_failed needs a failed action recorded: PlannerIdempotencyTests.)
        #expect(
            Set(findingCounts.keys)
                == Set(DiscrepancyKind.allCases).subtracting(
                    [.unknownOrder, .missingAtProvider, .actionFailed] + DiscrepancyKind.settlementKinds))
    }

    static func violations(order: Order, snapshot: Snapshot, targets: ActionTargets, plan: Plan) -> [String] {
        var problems: [String] = []
        let a = snapshot.authorised, c = snapshot.captured, r = snapshot.refunded, amt = order.amount.minorUnits
        let blocking = plan.findings.filter(\.kind.isBlocking)
        if !blocking.isEmpty {
            if !plan.actions.isEmpty { problems.append("actions next to a blocking finding") }
            if blocking.count != plan.findings.count { problems.append("non-blocking finding next to a blocking one") }
        }
        if order.intent == .payout, !plan.actions.isEmpty { problems.append("action on a payout") }
        if Set(plan.actions.map(\.idempotencyKey)).count != plan.actions.count { problems.append("duplicate keys") }
        for finding in plan.findings where finding.amountAtRisk < 0 { problems.append("negative risk") }
        if plan.findings.contains(where: { $0.kind == .stalePending }),
            !(snapshot.state == .pending || snapshot.state == .actionRequired)
        {
            problems.append("stale_pending outside pending states")
        }
        let refunds = plan.actions.filter { $0.kind == .refund }.reduce(Int64(0)) { $0 + $1.amount }
        let v = snapshot.reversed
        if refunds > 0, refunds > c - r - v { problems.append("refunds \(refunds) above C − R − V") }
        if refunds > 0, snapshot.disputed > 0 { problems.append("a refund while \(snapshot.disputed) is disputed") }
        let disputedFinding = plan.findings.first { $0.kind == .disputed }
        if blocking.isEmpty, order.intent != .payout, snapshot.disputed > 0, disputedFinding?.amountAtRisk != snapshot.disputed,
            !(order.fulfilment == .open && (snapshot.state == .failed || snapshot.state == .voided))
        {
            problems.append("disputed missing or with the wrong amount")
        }

        for action in plan.actions {
            if action.amount <= 0 { problems.append("\(action.kind) amount \(action.amount) ≤ 0") }
            if action.currency != order.amount.currency { problems.append("currency") }
            let key = "\(order.provider.rawValue):\(order.orderID):\(action.kind.rawValue):\(action.target)"
            if action.idempotencyKey != key { problems.append("key \(action.idempotencyKey)") }
            let authorisation = snapshot.intent.isAuthorisation && snapshot.state == .authorised
            switch action.kind {
            case .capture:
                if !authorisation || c >= a { problems.append("capture without an open authorisation") }
                if action.amount != amt - c || action.target != amt || amt > a { problems.append("capture amount") }
                if order.fulfilment != .fulfilled { problems.append("capture of an unfulfilled order") }
                problems += providerRule(snapshot, targets, action, void: false)
            case .void:
                if !authorisation || c != 0 { problems.append("void without an uncaptured authorisation") }
                if action.amount != a - c || action.target != 0 { problems.append("void amount") }
                if order.fulfilment != .cancelled { problems.append("void of an uncancelled order") }
                problems += providerRule(snapshot, targets, action, void: true)
            case .increment:
                if snapshot.provider != .pxp || !authorisation { problems.append("increment not allowed") }
                if action.amount != amt - a || action.target != amt { problems.append("increment amount") }
                if action.providerTarget != targets.systemTransactionID || action.providerTarget == nil {
                    problems.append("increment target")
                }
            case .refund:
                if c - r <= 0 { problems.append("refund without captured money") }
                if action.target > c { problems.append("refund target above C") }
                switch snapshot.provider {
                case .pxp:
                    if action.providerTarget == nil || action.providerTarget != targets.systemTransactionID {
                        problems.append("pxp refund target")
                    }
                case .paypal:
                    guard let capture = targets.refundableCaptures.first(where: { $0.id == action.providerTarget }),
                        capture.amount - capture.refunded >= action.amount
                    else { problems.append("paypal refund on a capture without that much"); break }
                case .paypercut:
                    if action.providerTarget != snapshot.transactionRef { problems.append("paypercut refund target") }
                }
            }
        }
        return problems
    }

    static func providerRule(_ snapshot: Snapshot, _ targets: ActionTargets, _ action: PlannedAction, void: Bool) -> [String] {
        switch snapshot.provider {
        case .pxp:
            return action.providerTarget != nil && action.providerTarget == targets.systemTransactionID
                ? [] : ["pxp target"]
        case .paypal:
            guard let id = targets.authorizationID, action.providerTarget == id else { return ["paypal authorization"] }
            if void { return targets.authorizationStatus == "CREATED" ? [] : ["paypal void not CREATED"] }
            return targets.authorizationStatus.map { ["CREATED", "PARTIALLY_CAPTURED"].contains($0) } ?? true
                ? [] : ["paypal capture status"]
        case .paypercut:
            return snapshot.rawState == "requires_capture" && action.providerTarget == snapshot.transactionRef
                ? [] : ["paypercut requires_capture"]
        }
    }

    // MARK: generator

    static func pick<T>(_ values: [T], _ random: inout SplitMix64) -> T {
        values[Int(random.next() % UInt64(values.count))]
    }

    static func chance(_ percent: UInt64, _ random: inout SplitMix64) -> Bool { random.next() % 100 < percent }

    /// Amounts cluster around a few values so that equalities and ±1 boundaries come up often.
    static func amount(_ random: inout SplitMix64, near base: Int64? = nil) -> Int64 {
        let anchors: [Int64] = [0, 1, 999, 1000, 1001, 1500, 2000]
        let anchor = base.flatMap { chance(60, &random) ? $0 : nil } ?? pick(anchors, &random)
        return max(0, anchor + pick([-1, 0, 0, 0, 1, 500], &random))
    }

    static func randomCase(_ random: inout SplitMix64) -> (Order, Snapshot, ActionTargets) {
        let provider = pick(Provider.allCases, &random)
        let intents: [Intent] = provider == .pxp ? Intent.allCases : [.authorisation, .purchase, .payout]
        let intent = pick(intents, &random)
        let amt = amount(&random)
        let a = amount(&random, near: amt)
        let c = chance(40, &random) ? 0 : amount(&random, near: chance(50, &random) ? a : amt)
        let r = chance(50, &random) ? 0 : amount(&random, near: c)
        let refund = chance(50, &random) ? 0 : amount(&random, near: c)
        let currency: Currency = chance(3, &random) ? .eur : .usd
        let order = Order(
            provider: provider, orderID: "ORD-\(random.next() % 1000)",
            merchant: pick(["M1", "M1", "M1", ""], &random), site: pick(["S1", "S1", "S1", ""], &random),
            transactionRef: "REF-1", intent: intent, amount: Money(minorUnits: amt, currency: .usd),
            fulfilment: pick(Fulfilment.allCases, &random), refundAmount: refund)
        let state = pick(TransactionState.allCases, &random)
        let snapshotIntent = chance(3, &random) ? pick(intents, &random) : intent
        var captures: [CaptureRef] = []
        if provider == .paypal, c > 0, !chance(10, &random) {
            let split = chance(50, &random) ? c / 2 : c
            captures.append(CaptureRef(id: "CAP-1", amount: split, refunded: min(r, split)))
            if split < c { captures.append(CaptureRef(id: "CAP-2", amount: c - split, refunded: max(0, r - split))) }
        }
        let targets = ActionTargets(
            systemTransactionID: provider == .pxp && !chance(10, &random) ? "SYS-1" : nil,
            authorizationID: provider == .paypal && !chance(20, &random) ? "AUTH-1" : nil,
            authorizationStatus: provider == .paypal
                ? pick(["CREATED", "PARTIALLY_CAPTURED", "CAPTURED", "VOIDED", "PENDING"], &random) : nil,
            refundableCaptures: captures)
        let rawState =
            provider == .paypercut
            ? pick(["requires_capture", "requires_capture", "succeeded", "processing", "canceled"], &random)
            : state.rawValue
        let snapshot = Snapshot(
            provider: provider, transactionRef: "REF-1", merchant: chance(3, &random) ? "M2" : "M1",
            site: chance(3, &random) ? "S2" : "S1", reportsSite: provider == .pxp, intent: snapshotIntent, currency: currency,
            value: max(a, c),
            authorised: a, captured: c, refunded: r, state: state, rawState: rawState,
            createdAt: chance(10, &random) ? nil : Fixture.now - Fixture.pendingMax + pick([-1000, -1, 0, 1, 1000], &random),
            capabilities: targets.capabilities(provider, transactionRef: "REF-1", rawState: rawState),
            reversed: c > 0 && chance(10, &random) ? min(c, amount(&random, near: c)) : 0,
            disputed: c > 0 && chance(10, &random) ? amount(&random, near: c) : 0)
        return (order, snapshot, targets)
    }
}
