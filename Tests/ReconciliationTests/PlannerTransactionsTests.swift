import Testing
@testable import Reconciliation

/// An order paid in several attempts or transactions, reconciled as one: order-level rules over
/// several snapshots.
@Suite struct PlannerTransactionsTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var provider: Provider = .pxp
        var intent: Intent = .authorisation
        var fulfilment: Fulfilment = .fulfilled
        var amount: Int64 = 10000
        var refund: Int64 = 0
        /// (state, A, C, R) per transaction T1, T2…; nil: the provider does not know it.
        var transactions: [(TransactionState, Int64, Int64, Int64)?]
        var kinds: [DiscrepancyKind]
        /// idempotency key → amount.
        var actions: [String: Int64]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "every attempt failed: state_mismatch, as before",
            transactions: [(.failed, 0, 0, 0), (.failed, 0, 0, 0)], kinds: [.stateMismatch], actions: [:]),
        Case(
            name: "a refused attempt, then an authorised one: capture the second, nothing else",
            transactions: [(.failed, 0, 0, 0), (.authorised, 10000, 0, 0)], kinds: [],
            actions: ["pxp:ORD-1:capture:10000:T2": 10000]),
        Case(
            name: "a voided attempt, then a captured purchase: clean", intent: .purchase,
            transactions: [(.voided, 0, 0, 0), (.captured, 10000, 10000, 0)], kinds: [], actions: [:]),
        Case(
            name: "two partial captures make the order total: clean", intent: .purchase,
            transactions: [(.captured, 6000, 6000, 0), (.captured, 4000, 4000, 0)], kinds: [], actions: [:]),
        Case(
            name: "two partial captures short of the total: amount_mismatch on the sum", intent: .purchase,
            transactions: [(.captured, 6000, 6000, 0), (.captured, 3000, 3000, 0)], kinds: [.amountMismatch], actions: [:]),
        Case(
            name: "a refund spread over two transactions, in order", intent: .purchase, refund: 8000,
            transactions: [(.captured, 6000, 6000, 0), (.captured, 4000, 4000, 0)], kinds: [],
            actions: ["pxp:ORD-1:refund:6000:T1": 6000, "pxp:ORD-1:refund:2000:T2": 2000]),
        Case(
            name: "the rest of a spread refund after the first part is done", intent: .purchase, refund: 8000,
            transactions: [(.refunded, 6000, 6000, 6000), (.captured, 4000, 4000, 0)], kinds: [],
            actions: ["pxp:ORD-1:refund:2000:T2": 2000]),
        Case(
            name: "over-capture across transactions", intent: .purchase,
            transactions: [(.captured, 10000, 10000, 0), (.captured, 10000, 10000, 0)], kinds: [.overCaptured], actions: [:]),
        Case(
            name: "cancelled: each uncaptured authorisation is voided", fulfilment: .cancelled,
            transactions: [(.authorised, 6000, 0, 0), (.failed, 0, 0, 0), (.authorised, 4000, 0, 0)], kinds: [],
            actions: ["pxp:ORD-1:void:0:T1": 6000, "pxp:ORD-1:void:0:T3": 4000]),
        Case(
            name: "a transaction the provider does not know blocks the order",
            transactions: [(.authorised, 10000, 0, 0), nil], kinds: [.missingAtProvider], actions: [:]),
        Case(
            name: "PayPal: a refund over captures on two provider orders", provider: .paypal, intent: .purchase, refund: 7000,
            transactions: [(.captured, 5000, 5000, 0), (.captured, 5000, 5000, 0)], kinds: [],
            actions: ["paypal:ORD-1:refund:5000:T1": 5000, "paypal:ORD-1:refund:2000:T2": 2000]),
        // Targets are the transaction's own totals, never the order's (T1 6.00 + T2 4.00 raised to 12.00: T1 to 8.00).
        Case(
            name: "an increment raises one transaction to its own new total", fulfilment: .open, amount: 12000,
            transactions: [(.authorised, 6000, 0, 0), (.authorised, 4000, 0, 0)], kinds: [],
            actions: ["pxp:ORD-1:increment:8000:T1": 2000]),
        Case(
            name: "a capture on the second authorisation targets its own captured total", amount: 10000,
            transactions: [(.authorised, 6000, 6000, 0), (.authorised, 4000, 0, 0)], kinds: [],
            actions: ["pxp:ORD-1:capture:4000:T2": 4000]),
        Case(
            name: "a refund of the second part keys on that part's refunded total", intent: .purchase, refund: 9000,
            transactions: [(.refunded, 6000, 6000, 6000), (.partiallyRefunded, 4000, 4000, 1000)], kinds: [],
            actions: ["pxp:ORD-1:refund:3000:T2": 2000])
    ]

    static func snapshot(_ provider: Provider, _ intent: Intent, _ ref: String, _ t: (TransactionState, Int64, Int64, Int64)) -> Snapshot {
        var s = Fixture.snapshot(provider, intent, t.0, a: t.1, c: t.2, r: t.3)
        s.transactionRef = ref
        // Each transaction acts on its own provider ids.
        switch provider {
        case .pxp:
            s.capabilities = Capabilities(
                capture: .allowed(target: "SYS-" + ref), void: .allowed(target: "SYS-" + ref),
                increment: .allowed(target: "SYS-" + ref), refund: .against(target: "SYS-" + ref))
        case .paypal:
            s.capabilities = Capabilities(
                capture: .allowed(target: "AUTH-" + ref), void: .allowed(target: "AUTH-" + ref),
                increment: .unsupported("paypal does not support incremental authorisation"),
                refund: .spread(
                    t.2 > t.3 ? [RefundSource(id: "CAP-" + ref, amount: t.2, refunded: t.3)] : [],
                    sources: "PayPal captures"))
        case .paypercut:
            s.capabilities = Capabilities(
                capture: .allowed(target: ref), void: .allowed(target: ref),
                increment: .unsupported("no"), refund: .against(target: ref))
        }
        return s
    }

    @Test(arguments: cases)
    func orderLevelRules(_ c: Case) {
        let refs = c.transactions.indices.map { "T\($0 + 1)" }
        var order = Fixture.order(c.provider, c.intent, c.fulfilment, amount: c.amount, refund: c.refund)
        order.transactionRefs = refs
        order.transactionRef = refs[0]
        let fetched = zip(refs, c.transactions).map { ref, t in
            FetchedTransaction(transactionRef: ref, snapshot: t.map { Self.snapshot(c.provider, c.intent, ref, $0) })
        }
        let plan = Planner.plan(order: order, transactions: fetched, emitted: [], now: Fixture.now, pendingMax: { _ in Fixture.pendingMax })
        #expect(plan.findings.map(\.kind).sorted { $0.rawValue < $1.rawValue } == c.kinds.sorted { $0.rawValue < $1.rawValue })
        #expect(Dictionary(uniqueKeysWithValues: plan.actions.map { ($0.idempotencyKey, $0.amount) }) == c.actions)
        for action in plan.actions {
            let ref = String(action.idempotencyKey.split(separator: ":").last!)
            #expect(action.transactionRef == ref)
            #expect(action.providerTarget?.hasSuffix(ref) == true, "\(action.providerTarget ?? "nil") acts on \(ref)")
        }
        // Planning again with the actions recorded adds nothing.
        let recorded = plan.actions.map {
            EmittedAction(idempotencyKey: $0.idempotencyKey, kind: $0.kind, status: .pending, amount: $0.amount)
        }
        let again = Planner.plan(
            order: order, transactions: fetched, emitted: recorded, now: Fixture.now, pendingMax: { _ in Fixture.pendingMax })
        #expect(again.actions.isEmpty && again.supersede.isEmpty)
    }

    @Test func aPendingAttemptIsStaleOnItsOwnWindow() {
        var order = Fixture.order(.pxp, .purchase, .fulfilled, amount: 10000)
        order.transactionRefs = ["T1", "T2"]
        var blik = Self.snapshot(.pxp, .purchase, "T1", (.pending, 0, 0, 0))
        blik.method = "blik"
        blik.createdAt = Fixture.now - 3600
        let paid = Self.snapshot(.pxp, .purchase, "T2", (.captured, 10000, 10000, 0))
        let plan = Planner.plan(
            order: order, transactions: [.init(transactionRef: "T1", snapshot: blik), .init(transactionRef: "T2", snapshot: paid)],
            emitted: [], now: Fixture.now, pendingMax: { $0?.method == "blik" ? 900 : 86_400 })
        #expect(plan.findings.map(\.kind) == [.stalePending])
        #expect(plan.findings.first?.detail.hasPrefix("transaction T1:") == true)
    }

    @Test func aSingleTransactionOrderIsPlannedExactlyAsBefore() {
        let order = Fixture.order(.pxp, .authorisation, .fulfilled, amount: 10000)
        let s = Fixture.snapshot(.pxp, .authorisation, .authorised, a: 10000)
        let one = Planner.plan(
            order: order, transactions: [.init(transactionRef: "REF-1", snapshot: s)], emitted: [], now: Fixture.now,
            pendingMax: { _ in Fixture.pendingMax })
        #expect(one == Planner.plan(order: order, snapshot: s, emitted: [], now: Fixture.now, pendingMax: Fixture.pendingMax))
        #expect(one.actions.map(\.idempotencyKey) == ["pxp:ORD-1:capture:10000"])
        #expect(one.actions.first?.transactionRef == nil)
    }
}
