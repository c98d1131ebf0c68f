// An order paid in several attempts or transactions, reconciled as one.
//
// Every listed transaction is fetched. Then, in order:
//  - a transaction the provider does not know is missing_at_provider (naming it); merchant, site, currency and
//    intent are compared for every transaction the provider has. Any of these → only those findings, no action
//    (one finding per kind, naming the transactions it concerns).
//  - Transactions holding money (authorised, captured, partially refunded or refunded) are summed: A, C, R, V, D
//    and the value. The order's state is that of the sum: authorised while one of them is an authorisation not
//    fully captured, else refunded / partially_refunded / captured by R against C.
//  - Attempts that failed or were voided while another holds money are not discrepancies. When none holds money,
//    the latest attempt speaks for the order (an order whose every attempt failed is checked as before).
//  - A pending attempt is stale_pending on its own clock (its provider and method's window) whatever the others do.
//  - Then the decision table of Planner.swift on the sum; each action targets a transaction that allows it (a
//    capture or an increment the authorisation that holds it, a void each uncaptured authorisation, a refund the
//    captures in order, over the transactions in order), and its key ends with that transaction's reference.
// An order with one transaction is planned exactly as before (`Planner.plan(order:snapshot:…)`).

/// One transaction of an order as fetched: nil when the provider does not know it.
public struct FetchedTransaction: Sendable, Hashable {
    public var transactionRef: String
    public var snapshot: Snapshot?
    /// The provider forgets attempts that were never approved (a PayPal order left unapproved expires after about 3
    /// hours and then answers 404): one it does not know may be such an attempt, not a missing payment.
    public var absentMayHaveExpired: Bool
    public init(transactionRef: String, snapshot: Snapshot?, absentMayHaveExpired: Bool = false) {
        self.transactionRef = transactionRef; self.snapshot = snapshot; self.absentMayHaveExpired = absentMayHaveExpired
    }
}

extension Planner {
    /// Plans an order over every one of its transactions. `pendingMax` gives each transaction's window.
    public static func plan(
        order: Order, transactions all: [FetchedTransaction], emitted: [EmittedAction], now: Int64,
        pendingMax: (Snapshot?) -> Int64, executing: String? = nil
    ) -> Plan {
        // An attempt the provider forgot (expired unapproved) beside one holding money is no finding; alone, it is
        // missing_at_provider unless the order was cancelled (an abandoned checkout that was cancelled is nothing).
        var transactions = all
        let holds = all.contains { t in t.snapshot.map { $0.state == .authorised || $0.state.holdsCapturedMoney } ?? false }
        if holds {
            transactions = all.filter { $0.snapshot != nil || !$0.absentMayHaveExpired }
        } else if order.fulfilment == .cancelled, !all.isEmpty, all.allSatisfy({ $0.snapshot == nil && $0.absentMayHaveExpired }) {
            return finish(findings: [], wanted: [], emitted: emitted, currency: order.amount.currency, executing: executing)
        }
        // An order of several transactions stays planned as one (its keys name the transaction they act on), even
        // when only one of them is left to plan with.
        guard all.count > 1 else {
            let snapshot = transactions.first?.snapshot
            return plan(
                order: order, snapshot: snapshot, emitted: emitted, now: now, pendingMax: pendingMax(snapshot), executing: executing)
        }
        let (findings, wanted, decision) = decide(order: order, transactions: transactions, now: now, pendingMax: pendingMax)
        return finish(
            findings: findings, wanted: wanted, emitted: emitted, currency: order.amount.currency, executing: executing,
            decision: decision)
    }

    static func decide(
        order: Order, transactions: [FetchedTransaction], now: Int64,
        pendingMax: (Snapshot?) -> Int64
    ) -> ([Finding], [PlannedAction], Decision) {
        let (blockingFindings, blockingFired) = blocking(order: order, transactions: transactions, now: now, pendingMax: pendingMax)
        if !blockingFindings.isEmpty { return (blockingFindings, [], Decision(fired: blockingFired)) }
        var fired = blockingFired
        let fetched = transactions.compactMap(\.snapshot)
        let holding = fetched.filter { $0.state == .authorised || $0.state.holdsCapturedMoney }

        var findings: [Finding] = []
        // A pending attempt is stale on its own clock.
        var stale: [Finding] = []
        for s in fetched where s.state == .pending || s.state == .actionRequired {
            var check = Check(order: order, snapshot: s, now: now, pendingMax: pendingMax(s))
            check.row = .stalePending
            check.checkStale()
            fired += check.fired.map { .init(row: $0.row, yields: "\($0.yields) (\(s.transactionRef))") }
            stale += check.findings.map { f in
                var named = f; named.detail = "transaction \(s.transactionRef): " + f.detail; return named
            }
        }

        guard !holding.isEmpty else {
            // Nobody holds money: the latest attempt speaks for the order (stale ones reported once, below).
            let latest = fetched.last!
            var check = Check(order: order, snapshot: latest, now: now, pendingMax: pendingMax(latest), parts: [latest])
            check.run()
            findings = check.findings.filter { $0.kind != .stalePending }
            if !stale.isEmpty { findings.append(merge(stale)) }
            fired += check.fired.filter { $0.row != .stalePending }
            return (findings, check.actions, Decision(fired: fired, figures: Decision.Figures(order: order, snapshot: latest)))
        }

        var sum = combined(order: order, holding: holding)
        // A capture still pending on an attempt that holds nothing yet (a PayPal order whose only capture is PENDING: an
        // eCheck) may complete: it leaves the order's capturable room too, so nothing captures that money again.
        let holdingRefs = Set(holding.map(\.transactionRef))
        for s in fetched where !holdingRefs.contains(s.transactionRef) {
            let (raised, overflow) = sum.pendingCaptured.addingReportingOverflow(s.pendingCaptured)
            sum.pendingCaptured = overflow ? .max : raised
        }
        var check = Check(order: order, snapshot: sum, now: now, pendingMax: pendingMax(nil), parts: holding)
        check.run()
        findings = check.findings
        if !stale.isEmpty { findings.append(merge(stale)) }
        fired += check.fired
        return (findings, check.actions, Decision(fired: fired, figures: Decision.Figures(order: order, snapshot: sum)))
    }

    /// Blocking findings over every transaction: unknown transactions and mismatches, one finding per kind. An attempt
    /// that failed or was voided while another holds money is not compared (it is not a discrepancy).
    static func blocking(
        order: Order, transactions: [FetchedTransaction], now: Int64,
        pendingMax: (Snapshot?) -> Int64
    ) -> ([Finding], [Decision.Fired]) {
        let anyHolds = transactions.contains { t in t.snapshot.map { $0.state == .authorised || $0.state.holdsCapturedMoney } ?? false }
        var blocking: [DiscrepancyKind: [Finding]] = [:]
        var fired: [Decision.Fired] = []
        for t in transactions {
            guard let s = t.snapshot else {
                fired.append(.init(row: .missingAtProvider, yields: "missing_at_provider (\(t.transactionRef))"))
                var f = missingAtProvider(order)
                f.expected["transaction_ref"] = t.transactionRef
                f.detail = "\(order.provider.rawValue) does not know transaction \(t.transactionRef)"
                blocking[.missingAtProvider, default: []].append(f)
                continue
            }
            if anyHolds, s.state == .failed || s.state == .voided { continue }
            var check = Check(order: order, snapshot: s, now: now, pendingMax: pendingMax(s))
            check.checkBlocking()
            fired += check.fired.map { .init(row: $0.row, yields: "\($0.yields) (\(t.transactionRef))") }
            for f in check.findings {
                var named = f
                named.detail = "transaction \(t.transactionRef): " + f.detail
                blocking[f.kind, default: []].append(named)
            }
        }
        return (DiscrepancyKind.allCases.compactMap { kind in blocking[kind].map(merge) }, fired)
    }

    /// What is stored as the order's snapshot: the sum of the transactions holding money (else the latest one
    /// fetched), with the aliases of every transaction, so a webhook naming any of them finds the order, and the money
    /// every one of them moved (once per id and kind: fees and settlement read it).
    public static func orderSnapshot(order: Order?, transactions: [FetchedTransaction]) -> Snapshot? {
        let fetched = transactions.compactMap(\.snapshot)
        guard var latest = fetched.last else { return nil }
        var seen = Set<String>()
        let movements = fetched.flatMap(\.movements).filter { seen.insert($0.id + "\u{0}" + $0.kind.rawValue).inserted }
        let holding = fetched.filter { $0.state == .authorised || $0.state.holdsCapturedMoney }
        guard let order, !holding.isEmpty else {
            latest.movements = movements
            return latest
        }
        var sum = combined(order: order, holding: holding)
        sum.aliases = fetched.flatMap(\.aliases)
        sum.movements = movements
        return sum
    }

    /// The transactions holding money as one: sums, and the state of the sum.
    static func combined(order: Order, holding: [Snapshot]) -> Snapshot {
        func total(_ value: (Snapshot) -> Int64) -> Int64 {
            holding.reduce(Int64(0)) { sum, s in
                let (r, overflow) = sum.addingReportingOverflow(value(s))
                return overflow ? .max : r
            }
        }
        let a = total(\.authorised), c = total(\.captured), r = total(\.refunded)
        let openAuthorisation = holding.contains {
            $0.intent.isAuthorisation && $0.state == .authorised && $0.capturedOrPending < $0.authorised
        }
        let state: TransactionState =
            openAuthorisation
            ? .authorised
            : c > 0 && r >= c ? .refunded : r > 0 ? .partiallyRefunded : c > 0 ? .captured : .authorised
        var sum = Snapshot(
            provider: order.provider, transactionRef: order.transactionRefs.joined(separator: " "), merchant: order.merchant,
            site: order.site, reportsSite: false, reportsMerchant: false, intent: holding[0].intent,
            currency: holding[0].currency, value: total(\.value), authorised: a, captured: c, refunded: r,
            state: state, rawState: holding.map(\.rawState).joined(separator: ","), createdAt: holding.compactMap(\.createdAt).min(),
            capabilities: .unknown("acted on per transaction"), aliases: holding.flatMap(\.aliases), method: holding[0].method,
            reversed: total(\.reversed), disputed: total(\.disputed))
        sum.pendingCaptured = total(\.pendingCaptured)
        return sum
    }

    /// Two findings of one kind in one plan as one: details joined, the second's values under numbered keys, the
    /// amounts at risk summed (they are different needs: two voids, two refunds).
    static func join(_ first: Finding, _ second: Finding) -> Finding {
        var joined = first
        joined.detail += "; " + second.detail
        let numbered = (Array(first.expected.keys) + Array(first.actual.keys)).compactMap {
            $0.split(separator: "_").last.flatMap { Int($0) }
        }
        let n = (numbered.max() ?? 1) + 1
        for (k, v) in second.expected { joined.expected["\(k)_\(n)"] = v }
        for (k, v) in second.actual { joined.actual["\(k)_\(n)"] = v }
        let (sum, overflow) = first.amountAtRisk.addingReportingOverflow(second.amountAtRisk)
        joined.amountAtRisk = overflow ? .max : sum
        return joined
    }

    /// Findings of one kind about several transactions, as one (the order has one open discrepancy per kind).
    static func merge(_ findings: [Finding]) -> Finding {
        guard findings.count > 1 else { return findings[0] }
        var merged = findings[0]
        merged.detail = findings.map(\.detail).joined(separator: "; ")
        for (i, f) in findings.enumerated().dropFirst() {
            for (k, v) in f.expected { merged.expected["\(k)_\(i + 1)"] = v }
            for (k, v) in f.actual { merged.actual["\(k)_\(i + 1)"] = v }
        }
        // The order's money is at risk once, however many of its transactions show it.
        merged.amountAtRisk = max(findings.map(\.amountAtRisk).max() ?? 0, 0)
        return merged
    }
}
