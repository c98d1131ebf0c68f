import Testing
@testable import Reconciliation

/// `payrecon explain` shows the decision-table rows that fired: every finding and every action a plan holds is
/// yielded by a fired row, and every fired row yields something the plan holds (the rows are named as the planner
/// yields, never worked out afterwards).
struct DecisionTests {
    /// The finding kind or action kind a fired row yielded ("capture 10.00 USD (key)", "action_not_allowed: …").
    static func yielded(_ fired: Decision.Fired) -> String {
        String(fired.yields.prefix { $0 != " " && $0 != ":" })
    }

    @Test(arguments: pxpCases + paypalCases + otherCases)
    func everyFindingAndActionIsYieldedByAFiredRow(_ c: TableCase) {
        let plan = Fixture.plan(c.order, c.snapshot, now: c.now)
        let yielded = plan.decision.fired.map(Self.yielded)
        #expect(
            Set(yielded.filter { DiscrepancyKind(rawValue: $0) != nil }) == Set(plan.findings.map(\.kind.rawValue)),
            "\(plan.decision.fired)")
        #expect(
            yielded.filter { ActionKind(rawValue: $0) != nil }.sorted() == plan.actions.map(\.kind.rawValue).sorted(),
            "\(plan.decision.fired)")
        for action in plan.actions {
            #expect(plan.decision.fired.contains { $0.yields.contains("(\(action.idempotencyKey))") }, "\(action.idempotencyKey)")
        }
        if c.order != nil, c.snapshot != nil {
            #expect(plan.decision.figures?.amount == c.order?.amount.minorUnits && plan.decision.figures?.captured == c.snapshot?.captured)
        }
    }

    /// Rows that yield the same kind are told apart: an increment on an open order is row 1, on a fulfilled one row
    /// 3; a refund on a cancelled order row 7, on another row 8; amount_mismatch of a purchase row 4.
    @Test func rowsThatYieldTheSameKindAreToldApart() {
        typealias F = Fixture
        func rows(_ order: Order, _ snapshot: Snapshot) -> [DecisionRow] { F.plan(order, snapshot).decision.fired.map(\.row) }
        #expect(rows(F.order(.authorisation, .open, amount: 1200), F.snapshot(.authorisation, .authorised, a: 1000)) == [.incrementOpen])
        #expect(
            rows(F.order(.authorisation, .fulfilled, amount: 1200), F.snapshot(.authorisation, .authorised, a: 1000)) == [
                .incrementFulfilled
            ])
        #expect(
            rows(F.order(.purchase, .cancelled, amount: 1000), F.snapshot(.purchase, .captured, a: 1000, c: 1000)) == [.cancelledRefund])
        #expect(
            rows(F.order(.purchase, .fulfilled, amount: 1000, refund: 300), F.snapshot(.purchase, .captured, a: 1000, c: 1000)) == [
                .refundAmount
            ])
        #expect(rows(F.order(.purchase, .fulfilled, amount: 1000), F.snapshot(.purchase, .captured, a: 900, c: 900)) == [.purchaseShort])
        #expect(
            rows(F.order(.purchase, .fulfilled, amount: 1000), F.snapshot(.purchase, .captured, a: 1000, c: 1000)) == [],
            "a clean order fires no row")
        #expect(F.plan(nil, F.snapshot(.purchase, .captured, a: 1000, c: 1000)).decision.fired.map(\.row) == [.unknownOrder])
        #expect(F.plan(F.order(.purchase, .fulfilled, amount: 1000), nil).decision.fired.map(\.row) == [.missingAtProvider])
        for row in DecisionRow.allCases { #expect(row.words.contains("→"), "\(row): its words say what it yields") }
    }
}
