import Testing
@testable import Reconciliation

/// A learned transaction is evidence, never authority: a transaction payrecon linked to an order because a provider's
/// reference field named it counts in the order's findings, but no action targets it and no action is planned only
/// for the money it holds (`action_not_allowed`, naming the transaction and the field). Listed by the merchant (a
/// re-import), the same transaction is acted on as before. Each row is planned twice: learned, then listed.
@Suite struct PlannerLearnedTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var provider: Provider = .paypal
        var intent: Intent = .purchase
        var fulfilment: Fulfilment = .fulfilled
        var amount: Int64 = 5000
        var refund: Int64 = 0
        /// (state, A, C, R) of the merchant's own T1, then of the learned T2.
        var own: (TransactionState, Int64, Int64, Int64)
        var learned: (TransactionState, Int64, Int64, Int64)
        /// Learned: the findings, and the actions (key → amount).
        var kinds: [DiscrepancyKind]
        var actions: [String: Int64]
        /// Listed by the merchant: the actions then.
        var listedActions: [String: Int64]
        var testDescription: String { name }
    }

    static let field = "PayPal purchase_units[0].reference_id"

    static let cases: [Case] = [
        // The review's case: a cancelled order's own payment was refunded; another storefront's 80.00 payment carries
        // the same reference_id. Its money shows (over_captured), and nothing refunds it.
        Case(
            name: "cancelled, own payment refunded, another's payment learned", fulfilment: .cancelled,
            own: (.refunded, 5000, 5000, 5000), learned: (.captured, 8000, 8000, 0),
            kinds: [.actionNotAllowed, .overCaptured], actions: [:],
            listedActions: ["paypal:ORD-1:refund:8000:T2": 8000]),
        Case(
            name: "refund_amount whose captured money is all on the learned one", refund: 3000,
            own: (.failed, 0, 0, 0), learned: (.captured, 5000, 5000, 0),
            kinds: [.actionNotAllowed], actions: [:],
            listedActions: ["paypal:ORD-1:refund:3000:T2": 3000]),
        Case(
            name: "refund larger than what the own payment holds: nothing spills onto the learned one", amount: 10000, refund: 7000,
            own: (.captured, 5000, 5000, 0), learned: (.captured, 5000, 5000, 0),
            kinds: [.actionNotAllowed], actions: [:],
            listedActions: ["paypal:ORD-1:refund:5000:T1": 5000, "paypal:ORD-1:refund:2000:T2": 2000]),
        Case(
            name: "refund the own payment holds: taken from it alone", amount: 10000, refund: 3000,
            own: (.captured, 5000, 5000, 0), learned: (.captured, 5000, 5000, 0),
            kinds: [], actions: ["paypal:ORD-1:refund:3000:T1": 3000],
            listedActions: ["paypal:ORD-1:refund:3000:T1": 3000]),
        Case(
            name: "fulfilled authorisation held only by the learned one: no capture", provider: .pxp, intent: .authorisation,
            own: (.failed, 0, 0, 0), learned: (.authorised, 5000, 0, 0),
            kinds: [.actionNotAllowed], actions: [:],
            listedActions: ["pxp:ORD-1:capture:5000:T2": 5000]),
        Case(
            name: "cancelled authorisation held only by the learned one: no void", provider: .pxp, intent: .authorisation,
            fulfilment: .cancelled, own: (.failed, 0, 0, 0), learned: (.authorised, 5000, 0, 0),
            kinds: [.actionNotAllowed], actions: [:],
            listedActions: ["pxp:ORD-1:void:0:T2": 5000]),
        Case(
            name: "open order above the learned authorisation: no increment", provider: .pxp, intent: .authorisation,
            fulfilment: .open, amount: 7000, own: (.failed, 0, 0, 0), learned: (.authorised, 5000, 0, 0),
            kinds: [.amountMismatch], actions: [:],
            listedActions: ["pxp:ORD-1:increment:7000:T2": 2000]),
        Case(
            name: "cancelled: own voided, learned authorised and own authorised: only the own one is voided", provider: .pxp,
            intent: .authorisation, fulfilment: .cancelled, own: (.authorised, 5000, 0, 0), learned: (.authorised, 3000, 0, 0),
            kinds: [.actionNotAllowed], actions: ["pxp:ORD-1:void:0:T1": 5000],
            listedActions: ["pxp:ORD-1:void:0:T1": 5000, "pxp:ORD-1:void:0:T2": 3000])
    ]

    static func plan(_ c: Case, learned: Bool) -> Plan {
        var order = Fixture.order(c.provider, c.intent, c.fulfilment, amount: c.amount, refund: c.refund)
        order.transactionRefs = ["T1", "T2"]
        order.transactionRef = "T1"
        if learned { order.learned = ["T2": field] }
        let fetched = [("T1", c.own), ("T2", c.learned)].map { ref, t in
            FetchedTransaction(transactionRef: ref, snapshot: PlannerTransactionsTests.snapshot(c.provider, c.intent, ref, t))
        }
        return Planner.plan(order: order, transactions: fetched, emitted: [], now: Fixture.now, pendingMax: { _ in Fixture.pendingMax })
    }

    @Test(arguments: cases)
    func learnedMoneyNeverMoves(_ c: Case) {
        let plan = Self.plan(c, learned: true)
        #expect(plan.findings.map(\.kind.rawValue).sorted() == c.kinds.map(\.rawValue).sorted())
        #expect(Dictionary(uniqueKeysWithValues: plan.actions.map { ($0.idempotencyKey, $0.amount) }) == c.actions)
        #expect(!plan.actions.contains { $0.transactionRef == "T2" }, "no action targets the learned transaction")
        // The refusal says which transaction, the field, and what the merchant can do.
        if let refusal = plan.findings.first(where: { $0.kind == .actionNotAllowed }) {
            #expect(
                refusal.detail.contains("T2") && refusal.detail.contains(Self.field) && refusal.detail.contains("transaction_ref"),
                "\(refusal.detail)")
        }
        let listed = Self.plan(c, learned: false)
        #expect(Dictionary(uniqueKeysWithValues: listed.actions.map { ($0.idempotencyKey, $0.amount) }) == c.listedActions)
    }
}
