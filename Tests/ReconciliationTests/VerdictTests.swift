import Testing
@testable import Reconciliation

/// The verdict table: each row an order, what the provider answered, and payrecon's actions, planned by the decision
/// table as a check plans them; then the verdict and a reason it must give.
@Suite struct VerdictTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var order: Order
        var snapshots: [Snapshot?]
        var actions: [EmittedAction] = []
        var outcome: Verdict.Outcome
        /// A reason the verdict must give (empty for fulfil).
        var says: String = ""
        var testDescription: String { name }
    }

    static func sale(_ state: TransactionState, c: Int64, r: Int64 = 0, rawState: String? = nil) -> Snapshot {
        Fixture.snapshot(.paypal, .purchase, state, a: c, c: c, r: r, merchant: nil, rawState: rawState)
    }

    /// `s` with a refund pending at the provider, as its mapping says it (`refundPending`, PendingMoneyTests).
    static func refundPending(_ s: Snapshot) -> Snapshot {
        var s = s
        s.refundPending = true
        return s
    }

    static let rows: [Row] = {
        let purchase = Fixture.order(.purchase, .open, amount: 2000)
        let auth = Fixture.order(.authorisation, .open, amount: 2000)
        let payout = Fixture.order(.payout, .open, amount: 2000)
        var disputed = Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000)
        disputed.disputed = 2000
        var reversed = Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000)
        reversed.reversed = 2000
        var pendingCapture = Fixture.snapshot(.authorisation, .authorised, a: 2000)
        pendingCapture.pendingCaptured = 2000
        var learnedOrder = Fixture.order(.paypal, .purchase, .open, amount: 2000)
        learnedOrder.transactionRefs = ["REF-1", "REF-LEARNED"]
        learnedOrder.learned = ["REF-LEARNED": "purchase_units[].reference_id"]
        var learnedSnapshot = Fixture.snapshot(.paypal, .purchase, .captured, a: 2000, c: 2000, merchant: nil)
        learnedSnapshot.transactionRef = "REF-LEARNED"
        return [
            Row(
                name: "a purchase captured for its amount", order: purchase,
                snapshots: [Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000)],
                outcome: .fulfil),
            Row(
                name: "a purchase partly refunded as the order wants", order: Fixture.order(.purchase, .open, amount: 2000, refund: 500),
                snapshots: [Fixture.snapshot(.purchase, .partiallyRefunded, a: 2000, c: 2000, r: 500)], outcome: .fulfil),
            Row(
                name: "a purchase captured short", order: purchase, snapshots: [Fixture.snapshot(.purchase, .captured, a: 1500, c: 1500)],
                outcome: .refuse, says: "amount_mismatch"),
            Row(
                name: "a purchase still pending", order: purchase, snapshots: [Fixture.snapshot(.purchase, .pending, a: 0)],
                outcome: .wait, says: "pending at the provider"),
            Row(
                name: "a purchase refunded in full, unwanted", order: purchase,
                snapshots: [Fixture.snapshot(.purchase, .refunded, a: 2000, c: 2000, r: 2000)], outcome: .refuse, says: "over_refunded"),
            Row(
                name: "a purchase the order wants refunded in full", order: Fixture.order(.purchase, .open, amount: 2000, refund: 2000),
                snapshots: [Fixture.snapshot(.purchase, .refunded, a: 2000, c: 2000, r: 2000)], outcome: .refuse, says: "nothing to fulfil"),
            Row(
                name: "an order the merchant cancelled", order: Fixture.order(.purchase, .cancelled, amount: 2000),
                snapshots: [Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000)], outcome: .refuse, says: "cancelled"),
            Row(name: "the provider does not know it", order: purchase, snapshots: [nil], outcome: .refuse, says: "missing_at_provider"),
            Row(name: "an open dispute", order: purchase, snapshots: [disputed], outcome: .refuse, says: "disputed"),
            Row(name: "a chargeback", order: purchase, snapshots: [reversed], outcome: .refuse, says: "taken back"),
            Row(
                name: "another currency", order: purchase,
                snapshots: [Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000, currency: .eur)],
                outcome: .refuse, says: "currency_mismatch"),
            Row(
                name: "another merchant", order: purchase,
                snapshots: [Fixture.snapshot(.purchase, .captured, a: 2000, c: 2000, merchant: "M2")],
                outcome: .refuse, says: "merchant_mismatch"),
            Row(
                name: "an authorisation authorised for its amount", order: auth,
                snapshots: [Fixture.snapshot(.authorisation, .authorised, a: 2000)],
                outcome: .fulfil),
            Row(
                name: "an authorisation authorised short", order: auth, snapshots: [Fixture.snapshot(.authorisation, .authorised, a: 1000)],
                outcome: .refuse, says: ""),  // the decision table's own finding says how (amount_mismatch or another)
            Row(
                name: "an authorisation whose capture is pending at the provider", order: auth, snapshots: [pendingCapture],
                outcome: .wait, says: "pending at the provider"),
            Row(
                name: "a capture payrecon sent, outcome unknown", order: auth,
                snapshots: [Fixture.snapshot(.authorisation, .authorised, a: 2000)],
                actions: [
                    EmittedAction(idempotencyKey: "pxp:ORD-1:capture:2000", kind: .capture, status: .pending, amount: 2000, inDoubt: true)
                ],
                outcome: .wait, says: "outcome is not known"),
            Row(
                name: "a payout executed", order: payout, snapshots: [Fixture.snapshot(.payout, .captured, a: 2000, c: 2000)],
                outcome: .fulfil),
            Row(
                name: "a payout not yet executed", order: payout, snapshots: [Fixture.snapshot(.payout, .pending, a: 0)], outcome: .wait,
                says: "pending"),
            // A pending refund counts in R (it may still complete): the order keeps what is left, but nothing ships while
            // it is pending. Each mapping's own raw state.
            Row(
                name: "a PayPal v1 refund pending",
                order: Fixture.order(.paypal, .purchase, .open, amount: 2000, refund: 500, merchant: nil),
                snapshots: [refundPending(sale(.partiallyRefunded, c: 2000, r: 500, rawState: "partially_refunded/refund_pending"))],
                outcome: .wait,
                says: "refund is pending"),
            Row(
                name: "a PayPal v2 refund pending",
                order: Fixture.order(.paypal, .purchase, .open, amount: 2000, refund: 500, merchant: nil),
                snapshots: [refundPending(sale(.partiallyRefunded, c: 2000, r: 500, rawState: "COMPLETED/REFUND_PENDING"))], outcome: .wait,
                says: "refund is pending"),
            Row(
                name: "a PXP refund pending", order: Fixture.order(.purchase, .open, amount: 2000, refund: 500),
                snapshots: [
                    refundPending(
                        Fixture.snapshot(.purchase, .partiallyRefunded, a: 2000, c: 2000, r: 500, rawState: "Captured/RefundPending"))
                ],
                outcome: .wait, says: "refund is pending"),
            Row(
                name: "a Paypercut refund pending",
                order: Fixture.order(.paypercut, .purchase, .open, amount: 2000, refund: 500, merchant: nil),
                snapshots: [
                    refundPending(
                        Fixture.snapshot(
                            .paypercut, .purchase, .partiallyRefunded, a: 2000, c: 2000, r: 500, merchant: nil,
                            rawState: "succeeded/refund_pending"))
                ], outcome: .wait, says: "refund is pending"),
            Row(
                name: "the buyer still completing it (3-D Secure)", order: purchase,
                snapshots: [Fixture.snapshot(.purchase, .actionRequired, a: 0, rawState: "PAYER_ACTION_REQUIRED")], outcome: .wait,
                says: "the buyer has still to complete"),
            Row(
                name: "the money only on a learned transaction, a listed attempt in another currency failed", order: learnedOrder,
                snapshots: [Fixture.snapshot(.paypal, .purchase, .failed, a: 0, currency: .eur, merchant: nil), learnedSnapshot],
                outcome: .refuse,
                says: "learned from purchase_units[].reference_id"),
            Row(
                name: "the money only on a learned transaction", order: learnedOrder,
                snapshots: [Fixture.snapshot(.paypal, .purchase, .failed, a: 0, merchant: nil), learnedSnapshot], outcome: .refuse,
                says: "learned from purchase_units[].reference_id")
        ]
    }()

    @Test(arguments: rows)
    func theVerdict(_ row: Row) {
        let transactions = zip(row.order.transactionRefs, row.snapshots).map { ref, s -> FetchedTransaction in
            var s = s
            s?.transactionRef = ref
            return FetchedTransaction(transactionRef: ref, snapshot: s)
        }
        let plan = Planner.plan(
            order: row.order, transactions: transactions, emitted: row.actions, now: Fixture.now,
            pendingMax: { _ in Fixture.pendingMax })
        let verdict = Verdict.decide(order: row.order, transactions: transactions, findings: plan.findings, actions: row.actions)
        #expect(verdict.outcome == row.outcome, "\(row.name): \(verdict.reasons)")
        if row.outcome == .fulfil {
            #expect(verdict.reasons.isEmpty, "\(row.name)")
        } else {
            #expect(
                !verdict.reasons.isEmpty && (row.says.isEmpty || verdict.reasons.contains { $0.contains(row.says) }),
                "\(row.name): \(verdict.reasons)")
        }
    }
}
