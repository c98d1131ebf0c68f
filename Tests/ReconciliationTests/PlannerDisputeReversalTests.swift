import Testing
@testable import Reconciliation

// Rows 12–13 of the decision table: D > 0 → disputed, V > 0 → reversed, each with its money at risk;
// while D > 0 every refund is action_not_allowed; a refund needs money neither refunded nor reversed.
@Suite struct PlannerDisputeReversalTests {
    func snapshot(
        _ provider: Provider = .paypal, c: Int64, r: Int64 = 0, v: Int64 = 0, d: Int64 = 0,
        state: TransactionState = .captured
    ) -> Snapshot {
        var s = Fixture.snapshot(provider, .purchase, state, a: c, c: c, r: r)
        s.reversed = v
        s.disputed = d
        return s
    }

    @Test func aChargebackIsReversedNotOverRefunded() {
        // PAYMENT.CAPTURE.REVERSED: C = 100, V = 100, R = 0.
        let plan = Fixture.plan(Fixture.order(.paypal, .purchase, .fulfilled, amount: 10000), snapshot(c: 10000, v: 10000))
        #expect(plan.findings.map(\.kind) == [.reversed])
        #expect(plan.findings.first?.amountAtRisk == 10000)
        #expect(plan.actions.isEmpty)
    }

    @Test func anOpenDisputeIsDisputedWithItsAmount() {
        let plan = Fixture.plan(Fixture.order(.paypal, .purchase, .fulfilled, amount: 10000), snapshot(c: 10000, d: 4000))
        #expect(plan.findings.map(\.kind) == [.disputed])
        #expect(plan.findings.first?.amountAtRisk == 4000)
        #expect(plan.findings.first?.actual["disputed"] == "40.00")
    }

    @Test func refundsAreHeldWhileDisputed() {
        // The merchant wants 30.00 back to the buyer, but 40.00 is under dispute: refunding would pay twice.
        let plan = Fixture.plan(Fixture.order(.paypal, .purchase, .fulfilled, amount: 10000, refund: 3000), snapshot(c: 10000, d: 4000))
        #expect(plan.actions.isEmpty)
        #expect(Set(plan.findings.map(\.kind)) == [.actionNotAllowed, .disputed])
        let refusal = plan.findings.first { $0.kind == .actionNotAllowed }
        #expect(refusal?.detail.contains("under open dispute") == true)
        #expect(refusal?.amountAtRisk == 3000)
        // A cancelled order's refund waits too.
        let cancelled = Fixture.plan(Fixture.order(.paypal, .purchase, .cancelled, amount: 10000), snapshot(c: 10000, d: 10000))
        #expect(cancelled.actions.isEmpty)
        #expect(Set(cancelled.findings.map(\.kind)) == [.actionNotAllowed, .disputed])
    }

    @Test func theSameRefundIsEmittedOnceTheDisputeIsResolved() {
        let plan = Fixture.plan(Fixture.order(.paypal, .purchase, .fulfilled, amount: 10000, refund: 3000), snapshot(c: 10000, d: 0))
        #expect(plan.findings.isEmpty)
        #expect(plan.actions.map(\.kind) == [.refund])
        #expect(plan.actions.first?.amount == 3000)
    }

    @Test func aCancelledOrderWantsBackOnlyWhatWasNotReversed() {
        // 100 captured, 60 taken back by a chargeback: 40 is left to refund, not 100.
        let partly = Fixture.plan(
            Fixture.order(.pxp, .purchase, .cancelled, amount: 10000),
            {
                var s = Fixture.snapshot(.pxp, .purchase, .captured, a: 10000, c: 10000); s.reversed = 6000; return s
            }())
        #expect(partly.actions.map(\.amount) == [4000])
        #expect(partly.findings.map(\.kind) == [.reversed])
        // Fully reversed: nothing to refund, no refusal either.
        let fully = Fixture.plan(Fixture.order(.paypal, .purchase, .cancelled, amount: 10000), snapshot(c: 10000, v: 10000))
        #expect(fully.actions.isEmpty)
        #expect(fully.findings.map(\.kind) == [.reversed])
    }

    @Test func aRefundLargerThanWhatIsLeftAfterAReversalIsNotAllowed() {
        let plan = Fixture.plan(
            Fixture.order(.pxp, .purchase, .fulfilled, amount: 10000, refund: 5000),
            {
                var s = Fixture.snapshot(.pxp, .purchase, .captured, a: 10000, c: 10000); s.reversed = 8000; return s
            }())
        #expect(plan.actions.isEmpty)
        let refusal = plan.findings.first { $0.kind == .actionNotAllowed }
        #expect(refusal?.detail.contains("nor reversed") == true)
    }

    @Test func theMerchantIsNotComparedWhenTheAnswerDoesNotCarryIt() {
        var sale = snapshot(c: 2000)
        sale.merchant = nil
        sale.reportsMerchant = false
        let plan = Fixture.plan(Fixture.order(.paypal, .purchase, .fulfilled, amount: 2000, merchant: "M1"), sale)
        #expect(plan.findings.isEmpty)
    }

    @Test func oldSnapshotsDecodeWithNoReversalOrDispute() throws {
        let old =
            #"{"provider":"paypal","transactionRef":"O1","intent":"purchase","currency":{"code":"USD"},"value":100,"authorised":100,"captured":100,"refunded":0,"state":"captured","rawState":"COMPLETED"}"#
        let s = try JSONCoding.decode(Snapshot.self, old)
        #expect((s.reversed, s.disputed) == (0, 0))
        #expect(s.reportsMerchant)
    }
}
