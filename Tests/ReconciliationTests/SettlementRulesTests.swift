import Testing
@testable import Reconciliation

/// Settlement lines against the movements payrecon knows: pure values in, findings out.
@Suite struct SettlementRulesTests {
    static let usd = Currency(code: "USD")!
    static func line(
        _ id: String, _ code: String = "T0006", _ direction: SettlementLine.Direction = .credit, gross: Int64 = 10_000,
        fee: Int64? = 398, feeDirection: SettlementLine.Direction = .debit, currency: Currency = usd, reference: String? = nil
    ) -> SettlementLine {
        SettlementLine(
            transactionID: id, eventCode: code, direction: direction,
            role: code.hasPrefix("T00") ? .payment : code.hasPrefix("T11") ? .moneyBack : .other, referenceID: reference,
            currency: currency, gross: gross, fee: fee, feeDirection: fee == nil ? nil : feeDirection, line: 7)
    }
    static let capture = SettlementRules.Known(
        Movement(id: "CAP", kind: .capture, at: 1_000, currency: usd, gross: 10_000, fee: 398, net: 9_602), orderID: "O1")
    static let refund = SettlementRules.Known(
        Movement(id: "REF", kind: .refund, at: 2_000, currency: usd, gross: 4_000, fee: 140, net: 3_860), orderID: "O1")

    @Test func aLineThatAgreesFindsNothing() {
        #expect(SettlementRules.judge(Self.line("CAP"), matched: Self.capture).isEmpty)
        #expect(
            SettlementRules.judge(Self.line("REF", "T1107", .debit, gross: 4_000, fee: 140, feeDirection: .credit), matched: Self.refund)
                .isEmpty)
    }

    @Test func feesAreComparedAsTheBalanceSawThem() {
        let off = SettlementRules.judge(Self.line("CAP", fee: 399), matched: Self.capture)
        #expect(off.map(\.finding.kind) == [.feeMismatch] && off[0].finding.amountAtRisk == 1 && off[0].orderID == "O1")
        // A refund's fee given back is a credit: debited, it differs by twice its amount.
        let wrongWay = SettlementRules.judge(
            Self.line("REF", "T1107", .debit, gross: 4_000, fee: 140, feeDirection: .debit), matched: Self.refund)
        #expect(wrongWay.map(\.finding.kind) == [.feeMismatch] && wrongWay[0].finding.amountAtRisk == 280)
        // No fee stated by the API: nothing to compare.
        var unstated = Self.capture; unstated.movement.fee = nil
        #expect(SettlementRules.judge(Self.line("CAP", fee: 999), matched: unstated).isEmpty)
        // No fee on the line where the API stated one: the line's fee is 0.
        #expect(SettlementRules.judge(Self.line("CAP", fee: nil), matched: Self.capture).map(\.finding.kind) == [.feeMismatch])
    }

    @Test func grossCurrencyAndDirectionMustAgree() {
        let gross = SettlementRules.judge(Self.line("CAP", gross: 10_001), matched: Self.capture)
        #expect(gross.map(\.finding.kind) == [.settlementMismatch] && gross[0].finding.amountAtRisk == 1)
        let direction = SettlementRules.judge(Self.line("CAP", "T0006", .debit), matched: Self.capture)
        #expect(direction.map(\.finding.kind) == [.settlementMismatch] && direction[0].finding.expected["direction"] == "CR")
        let currency = SettlementRules.judge(Self.line("CAP", currency: Currency(code: "EUR")!), matched: Self.capture)
        #expect(currency.map(\.finding.kind) == [.settlementMismatch] && currency[0].finding.actual["currency"] == "EUR")
    }

    @Test func onlyMoneyInAndMoneyBackOutAreUnknownWhenNothingMatches() {
        let unknown = SettlementRules.judge(Self.line("X"), matched: nil)
        #expect(
            unknown.map(\.finding.kind) == [.unknownSettlement] && unknown[0].orderID == nil && unknown[0].finding.amountAtRisk == 10_000)
        #expect(SettlementRules.judge(Self.line("X", "T0001", .debit), matched: nil).isEmpty)  // a payment the merchant sent
        #expect(SettlementRules.judge(Self.line("X", "T1202", .credit), matched: nil).isEmpty)  // a chargeback reversed for them
        #expect(SettlementRules.judge(Self.line("X", "T0400", .debit), matched: nil).isEmpty)  // a withdrawal
        // A refund payrecon does not know, of a capture it does: the capture's order is named.
        let refund = SettlementRules.judge(
            Self.line("R2", "T1107", .debit, gross: 500, reference: "CAP"), matched: nil, parent: Self.capture)
        #expect(refund.map(\.finding.kind) == [.unknownSettlement] && refund[0].orderID == "O1")
    }

    @Test func aMovementPastTheDeadlineWithNoLineIsMissing() {
        #expect(SettlementRules.missing(Self.capture, now: 1_000 + 3 * 86_400, deadline: 3 * 86_400) == nil)
        let missing = SettlementRules.missing(Self.capture, now: 1_001 + 3 * 86_400, deadline: 3 * 86_400)
        #expect(missing?.finding.kind == .settlementMissing && missing?.finding.amountAtRisk == 10_000 && missing?.transactionRef == "CAP")
        var undated = Self.capture; undated.movement.at = nil
        #expect(SettlementRules.missing(undated, now: .max / 2, deadline: 1) == nil)
    }

    /// Paypercut's capture and its refunds share the payment's id: a payment line is the capture's, a money-back line
    /// the refund's.
    @Test func aLineIsMatchedToTheMovementOfItsKind() {
        let capture = SettlementRules.Known(
            Movement(id: "pay_1", kind: .capture, at: 1, currency: Self.usd, gross: 2_000, fee: 48), orderID: "O")
        let refund = SettlementRules.Known(Movement(id: "pay_1", kind: .refund, at: nil, currency: Self.usd, gross: 500), orderID: "O")
        #expect(SettlementRules.movement(for: Self.line("pay_1"), among: [refund, capture]) == capture)
        #expect(SettlementRules.movement(for: Self.line("pay_1", "T1107", .debit), among: [capture, refund]) == refund)
        #expect(SettlementRules.movement(for: Self.line("pay_1", "T0400", .debit), among: [capture, refund]) == nil)
    }

    /// Hostile amounts never trap: differences are computed in 128 bits and clamped.
    @Test func differencesNeverOverflow() {
        let huge = SettlementRules.Known(
            Movement(id: "CAP", kind: .capture, at: 1, currency: Self.usd, gross: .max, fee: .max), orderID: "O")
        let judged = SettlementRules.judge(Self.line("CAP", gross: 0, fee: nil), matched: huge)
        #expect(judged.map(\.finding.kind) == [.settlementMismatch, .feeMismatch])
        #expect(judged.allSatisfy { $0.finding.amountAtRisk == .max })
    }

    /// An order paid in several transactions keeps the money every one of them moved (review finding: the combined
    /// snapshot dropped them, so fees under-reported and their settlement lines read as unknown).
    @Test func anOrderOfSeveralTransactionsKeepsEveryTransactionsMovements() {
        func snapshot(_ ref: String, _ id: String) -> Snapshot {
            var s = Snapshot(
                provider: .paypal, transactionRef: ref, merchant: nil, site: nil, intent: .purchase, currency: Self.usd, value: 1_000,
                authorised: 0, captured: 1_000, refunded: 0, state: .captured, rawState: "COMPLETED", createdAt: 1)
            s.movements = [Movement(id: id, kind: .capture, at: 1, currency: Self.usd, gross: 1_000, fee: 30, net: 970)]
            return s
        }
        let order = Order(
            provider: .paypal, orderID: "O", merchant: nil, site: nil, transactionRef: "A", intent: .purchase,
            amount: Money(minorUnits: 2_000, currency: Self.usd), fulfilment: .fulfilled, refundAmount: 0)
        let both = Planner.orderSnapshot(
            order: order,
            transactions: [
                FetchedTransaction(transactionRef: "A", snapshot: snapshot("A", "CAP-A")),
                FetchedTransaction(transactionRef: "B", snapshot: snapshot("B", "CAP-B"))
            ])
        #expect(both?.movements.map(\.id) == ["CAP-A", "CAP-B"])
        // Neither holding money (the latest stands for the order): still both.
        var failed = snapshot("A", "CAP-A"); failed.state = .failed
        var failedToo = snapshot("B", "CAP-B"); failedToo.state = .failed
        let latest = Planner.orderSnapshot(
            order: order,
            transactions: [
                FetchedTransaction(transactionRef: "A", snapshot: failed),
                FetchedTransaction(transactionRef: "B", snapshot: failedToo)
            ])
        #expect(latest?.movements.map(\.id) == ["CAP-A", "CAP-B"])
    }
}
