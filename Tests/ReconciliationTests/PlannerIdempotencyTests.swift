import Testing
@testable import Reconciliation

private typealias F = Fixture

@Suite struct PlannerIdempotencyTests {
    let captureOrder = F.order(.authorisation, .fulfilled, amount: 1000)
    let authorised = F.snapshot(.authorisation, .authorised, a: 1000)

    @Test func keyIsProviderOrderActionTarget() throws {
        let plan = F.plan(captureOrder, authorised)
        let action = try #require(plan.actions.first)
        #expect(action.idempotencyKey == "pxp:ORD-1:capture:1000")
        #expect(action.currency == .usd)
        #expect(
            PlannedAction.idempotencyKey(provider: .paypal, orderID: "A:B", kind: .void, target: 0)
                == "paypal:A:B:void:0")

        let void = F.plan(
            F.order(.paypal, .authorisation, .cancelled, amount: 700),
            F.snapshot(.paypal, .authorisation, .authorised, a: 700))
        #expect(void.actions.map(\.idempotencyKey) == ["paypal:ORD-1:void:0"])
        #expect(void.actions.map(\.amount) == [700])

        let refund = F.plan(
            F.order(.paypercut, .purchase, .fulfilled, amount: 1000, refund: 300),
            F.snapshot(.paypercut, .purchase, .partiallyRefunded, a: 1000, c: 1000, r: 100))
        #expect(refund.actions.map(\.idempotencyKey) == ["paypercut:ORD-1:refund:300"])

        let increment = F.plan(
            F.order(.estimatedAuthorisation, .open, amount: 1500),
            F.snapshot(.estimatedAuthorisation, .authorised, a: 1000))
        #expect(increment.actions.map(\.idempotencyKey) == ["pxp:ORD-1:increment:1500"])
    }

    @Test func planningTwiceEmitsNothingNew() {
        let order = F.order(.authorisation, .fulfilled, amount: 1000, refund: 200)
        let snapshot = F.snapshot(.authorisation, .authorised, a: 1000, c: 500)
        let first = F.plan(order, snapshot)
        #expect(first.actions.count == 2)
        let recorded = first.actions.map {
            EmittedAction(idempotencyKey: $0.idempotencyKey, kind: $0.kind, status: .pending, amount: $0.amount)
        }
        let second = F.plan(order, snapshot, emitted: recorded)
        #expect(second.actions.isEmpty)
        #expect(second.supersede.isEmpty)
        #expect(second.findings == first.findings)
    }

    @Test(arguments: [ActionStatus.pending, .succeeded, .failed])
    func recordedKeyIsNotEmittedAgain(status: ActionStatus) {
        let emitted = [
            EmittedAction(
                idempotencyKey: "pxp:ORD-1:capture:1000", kind: .capture, status: status,
                amount: 1000)
        ]
        let plan = F.plan(captureOrder, authorised, emitted: emitted)
        #expect(plan.actions.isEmpty)
        #expect(plan.supersede.isEmpty)
    }

    @Test func supersededKeyIsEmittedAgainWhenWantedBack() {
        let emitted = [
            EmittedAction(
                idempotencyKey: "pxp:ORD-1:capture:1000", kind: .capture, status: .superseded,
                amount: 1000)
        ]
        let plan = F.plan(captureOrder, authorised, emitted: emitted)
        #expect(plan.actionSummaries == ["capture 1000→1000 @SYS-1"])
        #expect(plan.supersede.isEmpty)
    }

    @Test func duplicateRecordsPreferTheLiveOne() {
        let key = "pxp:ORD-1:capture:1000"
        let emitted = [
            EmittedAction(idempotencyKey: key, kind: .capture, status: .superseded, amount: 1000),
            EmittedAction(idempotencyKey: key, kind: .capture, status: .pending, amount: 1000)
        ]
        #expect(F.plan(captureOrder, authorised, emitted: emitted).actions.isEmpty)
    }

    @Test func changedOrderSupersedesThePendingAction() {
        let emitted = [
            EmittedAction(
                idempotencyKey: "pxp:ORD-1:capture:1000", kind: .capture, status: .pending,
                amount: 1000)
        ]
        let smaller = F.order(.authorisation, .fulfilled, amount: 900)
        let plan = F.plan(smaller, authorised, emitted: emitted)
        #expect(plan.actions.map(\.idempotencyKey) == ["pxp:ORD-1:capture:900"])
        #expect(plan.supersede == ["pxp:ORD-1:capture:1000"])

        let cancelled = F.plan(F.order(.authorisation, .cancelled, amount: 1000), authorised, emitted: emitted)
        #expect(cancelled.actions.map(\.idempotencyKey) == ["pxp:ORD-1:void:0"])
        #expect(cancelled.supersede == ["pxp:ORD-1:capture:1000"])
    }

    @Test func partialProgressKeepsTheSameKey() {
        // The capture of 1000 was recorded; the provider has since captured 400 of it: the target is unchanged,
        // so nothing new is emitted and nothing is superseded.
        let emitted = [
            EmittedAction(
                idempotencyKey: "paypal:ORD-1:capture:1000", kind: .capture, status: .pending,
                amount: 1000)
        ]
        let plan = F.plan(
            F.order(.paypal, .authorisation, .fulfilled, amount: 1000),
            F.snapshot(.paypal, .authorisation, .authorised, a: 1000, c: 400), emitted: emitted)
        #expect(plan.actions.isEmpty)
        #expect(plan.supersede.isEmpty)
    }

    @Test func onlyPendingActionsAreSuperseded() {
        let emitted = [
            EmittedAction(idempotencyKey: "pxp:ORD-1:capture:800", kind: .capture, status: .succeeded, amount: 800),
            EmittedAction(idempotencyKey: "pxp:ORD-1:capture:900", kind: .capture, status: .failed, amount: 900),
            EmittedAction(idempotencyKey: "pxp:ORD-1:capture:950", kind: .capture, status: .superseded, amount: 950),
            EmittedAction(idempotencyKey: "pxp:ORD-1:capture:990", kind: .capture, status: .pending, amount: 990),
            EmittedAction(idempotencyKey: "pxp:ORD-1:capture:990", kind: .capture, status: .pending, amount: 990)
        ]
        let plan = F.plan(captureOrder, authorised, emitted: emitted)
        #expect(plan.supersede == ["pxp:ORD-1:capture:990"])
    }

    @Test func blockingFindingSupersedesPendingActions() {
        let emitted = [
            EmittedAction(
                idempotencyKey: "pxp:ORD-1:capture:1000", kind: .capture, status: .pending,
                amount: 1000)
        ]
        let plan = F.plan(
            captureOrder, F.snapshot(.authorisation, .authorised, a: 1000, merchant: "M2"),
            emitted: emitted)
        #expect(plan.kinds == [.merchantMismatch])
        #expect(plan.actions.isEmpty)
        #expect(plan.supersede == ["pxp:ORD-1:capture:1000"])

        let missing = F.plan(captureOrder, nil, emitted: emitted)
        #expect(missing.kinds == [.missingAtProvider])
        #expect(missing.supersede == ["pxp:ORD-1:capture:1000"])
    }

    @Test func actionCarriesProviderTargetAndCurrency() throws {
        let bhd = F.order(.paypal, .purchase, .fulfilled, amount: 1250, refund: 250, currency: .bhd)
        let plan = F.plan(bhd, F.snapshot(.paypal, .purchase, .captured, a: 0, c: 1250, currency: .bhd))
        let refund = try #require(plan.actions.first)
        #expect(refund.currency == .bhd)
        #expect(refund.providerTarget == "CAP-1")
        #expect(refund.amount == 250)
        #expect(refund.target == 250)
    }
}

@Suite struct FindingContentTests {
    @Test func amountMismatchPrintsMajorUnits() throws {
        let plan = F.plan(F.order(.purchase, .fulfilled, amount: 2500), F.snapshot(.purchase, .captured, a: 2000, c: 2000))
        let finding = try #require(plan.findings.first)
        #expect(finding.kind == .amountMismatch)
        #expect(finding.expected == ["amount": "25.00"])
        #expect(finding.actual == ["captured": "20.00"])
        #expect(finding.detail == "captured 20.00 USD is below the order total 25.00 USD")
        #expect(finding.amountAtRisk == 500)
    }

    @Test func zeroDecimalCurrencyInFindings() throws {
        let plan = F.plan(
            F.order(.purchase, .fulfilled, amount: 1000, currency: .jpy),
            F.snapshot(.purchase, .captured, a: 1200, c: 1200, currency: .jpy))
        let finding = try #require(plan.findings.first)
        #expect(finding.kind == .overCaptured)
        #expect(finding.expected == ["amount": "1000"])
        #expect(finding.actual == ["captured": "1200"])
    }

    @Test func blockingFindingsNameBothSides() {
        let plan = F.plan(
            F.order(.authorisation, .fulfilled, amount: 1000),
            F.snapshot(.purchase, .captured, a: 1000, c: 1000, currency: .eur, merchant: "M2", site: nil))
        #expect(
            plan.findings.map(\.expected) == [
                ["merchant": "M1"], ["site": "S1"], ["currency": "USD"],
                ["intent": "authorisation"]
            ])
        #expect(
            plan.findings.map(\.actual) == [
                ["merchant": "M2"], ["site": ""], ["currency": "EUR"],
                ["intent": "purchase"]
            ])
    }

    @Test func actionNotAllowedNamesTheNeed() throws {
        let plan = F.plan(
            F.order(.paypal, .authorisation, .fulfilled, amount: 1500),
            F.snapshot(.paypal, .authorisation, .authorised, a: 1000))
        let finding = try #require(plan.findings.first)
        #expect(finding.kind == .actionNotAllowed)
        #expect(finding.expected == ["action": "increment", "amount": "5.00"])
        #expect(finding.detail.contains("paypal does not support incremental authorisation"))
        #expect(finding.amountAtRisk == 500)
    }

    @Test func overRefundedOnCancelledComparesWithCaptured() throws {
        let plan = F.plan(
            F.order(.purchase, .cancelled, amount: 1000),
            F.snapshot(.purchase, .refunded, a: 1000, c: 1000, r: 1100))
        let finding = try #require(plan.findings.first)
        #expect(finding.expected == ["captured": "10.00"])
        #expect(finding.actual == ["refunded": "11.00"])
    }

    /// The age is in the detail, never in expected/actual: it changes every check, and an acknowledged stale_pending
    /// must stay acknowledged while it is the same finding.
    @Test func stalePendingCarriesTheCreationTimeAndNoAge() throws {
        let order = F.order(.purchase, .open, amount: 1000)
        let snapshot = F.snapshot(.purchase, .pending, a: 0, createdAt: 1_700_000_000)
        let finding = try #require(F.plan(order, snapshot, now: 1_700_000_000 + 86_401).findings.first)
        #expect(finding.kind == .stalePending)
        #expect(finding.actual["age_seconds"] == nil)
        #expect(finding.actual["created_at"] == "2023-11-14T22:13:20Z")
        #expect(finding.expected == ["max_age_seconds": "86400"])
        #expect(finding.detail.contains("1d"))
        let later = try #require(F.plan(order, snapshot, now: 1_700_000_000 + 5 * 86_400).findings.first)
        #expect(later.expected == finding.expected && later.actual == finding.actual)
    }

    /// Two findings of one kind in one plan are one discrepancy: both voids refused, their amounts summed.
    @Test func twoFindingsOfOneKindAreOneWithTheirAmountsSummed() throws {
        var order = F.order(.authorisation, .cancelled, amount: 10000)
        order.transactionRefs = ["T1", "T2"]
        func auth(_ ref: String, _ a: Int64) -> FetchedTransaction {
            var s = F.snapshot(.authorisation, .authorised, a: a)
            s.transactionRef = ref
            s.capabilities = Capabilities(
                capture: .denied("held"), void: .denied("the provider refuses voids now"),
                increment: .denied("held"), refund: .denied("held"))
            return FetchedTransaction(transactionRef: ref, snapshot: s)
        }
        let plan = Planner.plan(
            order: order, transactions: [auth("T1", 6000), auth("T2", 4000)], emitted: [], now: F.now,
            pendingMax: { _ in F.pendingMax })
        #expect(plan.findings.map(\.kind) == [.actionNotAllowed])
        let finding = try #require(plan.findings.first)
        #expect(finding.amountAtRisk == 10000)
        #expect(finding.detail.contains("6000") || finding.detail.contains("60.00"))
        #expect(finding.detail.contains("40.00"))
    }

    @Test func unknownOrderNamesTheReference() throws {
        let plan = F.plan(nil, F.snapshot(.paypal, .purchase, .captured, a: 0, c: 4200))
        let finding = try #require(plan.findings.first)
        #expect(finding.expected.isEmpty)
        #expect(finding.actual["transaction_ref"] == "REF-1")
        #expect(finding.actual["amount"] == "42.00")
        #expect(finding.amountAtRisk == 4200)
    }

    @Test func missingAtProviderNamesWhatWasAskedFor() throws {
        let finding = try #require(F.plan(F.order(.purchase, .open, amount: 1000), nil).findings.first)
        #expect(finding.expected == ["transaction_ref": "REF-1", "merchant": "M1", "site": "S1"])
        #expect(finding.actual.isEmpty)
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00Z"), (951_782_400, "2000-02-29T00:00:00Z"),
        (1_709_251_199, "2024-02-29T23:59:59Z"), (-1, "1969-12-31T23:59:59Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z")
    ])
    func iso8601(seconds: Int64, text: String) {
        #expect(UnixTime.iso8601(seconds) == text)
    }
}
