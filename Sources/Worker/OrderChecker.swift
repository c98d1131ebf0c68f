import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Synchronization

/// Checks one order end to end: re-fetch from the provider, plan (pure), record. Shared by the queue worker, the
/// nightly sweep and the action executor, so every path reconciles the same way.
public final class OrderChecker: Sendable {
    public enum Result: Sendable, Equatable {
        /// Checked; `matched` when nothing is wrong.
        case checked(CheckOutcome, matched: Bool)
        /// Could not be checked now (provider timeout, 429, 5xx, the database out of reach): try again later.
        case transient(Transient)
        /// Could not be checked and retrying as-is will not help (credentials, a provider 4xx).
        case failed(reason: String)
        /// The provider's answer has a field that cannot be read (named in the reason): this order's check failed,
        /// not the delivery that named it.
        case unreadable(reason: String)

        /// `.transient` of `reason`, with the wait the other side asked for.
        public static func transient(reason: String, retryAfter: Duration?) -> Self {
            .transient(Transient(reason, retryAfter: retryAfter))
        }
    }

    /// What looking up a transaction no order holds came to.
    public enum UnknownResult: Sendable, Equatable {
        /// Recorded as `unknown_order` (or could not be: the result says why).
        case checked(Result)
        /// The provider does not know it either.
        case absent
        /// Not a payment payrecon reconciles (a PXP Verification).
        case ignored(String)
        /// A modification of `parent` (an id stored links know): to be linked to the parent's order.
        case modification(parent: String, link: TransactionLink)
        /// The provider's answer names this known order: the transaction was added to it (a retry the merchant
        /// has not recorded yet), and the order is to be checked.
        case belongs(Order)
    }

    /// A provider's permanent answer as a check result: an answer that cannot be read fails only the order's check.
    static func failure(_ failure: ProviderFailure) -> Result {
        if case .unreadable(let reason) = failure { return .unreadable(reason: reason) }
        return .failed(reason: failure.description)
    }

    let pool: PostgresPool
    let gateway: ProviderGateway
    let pendingWindows: PendingWindows
    /// The default window (the executor's re-plan uses the snapshot's own, like checks).
    var pendingMax: Int64 { pendingWindows.defaultSeconds }
    let clock: @Sendable () -> Int64
    /// Records checks, grouped under load (one transaction for many).
    let recorder: CheckRecorder

    public convenience init(
        pool: PostgresPool, gateway: ProviderGateway, pendingMaxSeconds: Int64,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.init(pool: pool, gateway: gateway, pendingWindows: PendingWindows(defaultSeconds: pendingMaxSeconds), clock: clock)
    }

    /// `pendingWindows`: PAYRECON_PENDING_MAX, per provider and payment method.
    public init(
        pool: PostgresPool, gateway: ProviderGateway, pendingWindows: PendingWindows,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.pool = pool; self.gateway = gateway; self.pendingWindows = pendingWindows; self.clock = clock
        recorder = CheckRecorder(pool: pool)
    }

    /// The pending window for a transaction as fetched.
    func pendingMax(provider: Provider, snapshot: Snapshot?) -> Int64 {
        pendingWindows.seconds(provider: provider, method: snapshot?.method)
    }

    /// What a fetch needs to know of an order beforehand: the transactions linked to it. (Its actions are read
    /// under the order's lock when the check is recorded, so they are never stale.)
    public struct Known: Sendable {
        public var links: [TransactionLink]
        public init(links: [TransactionLink]) { self.links = links }
    }

    /// Loads what is known of many orders (one provider) in one query: the sweep does this per page.
    public static func known(provider: Provider, orderIDs: [String], on conn: PostgresConnection) throws -> [String: Known] {
        let links = try TransactionLinkStore.links(provider: provider, orderIDs: orderIDs, on: conn)
        var out: [String: Known] = [:]
        for id in orderIDs { out[id] = Known(links: links[id] ?? []) }
        return out
    }

    /// Where a check run by `verify` leaves its verdict: decided under the order's lock, from what the check fetched,
    /// the findings it planned and the actions stored then.
    final class VerdictSink: Sendable {
        /// The verdict of the attempt being recorded, with the order as stored then; `committed` once that attempt's
        /// record committed (a verdict from an attempt rolled back or overtaken by a newer check is never handed out).
        let state = Mutex<(verdict: Verdict?, order: Order?, committed: Bool)>((nil, nil, false))
        /// Run once the provider's answers are in: from then on, what the check answers is older than a new request.
        let fetched: @Sendable () -> Void
        init(fetched: @escaping @Sendable () -> Void) { self.fetched = fetched }
    }
    @TaskLocal static var verdictSink: VerdictSink?

    /// A fresh check of `order` (the worker's check, recorded the same way with its evidence) and whether the order
    /// may be fulfilled now (`payrecon check`): nil when the check could not be made (the result says why).
    /// `order` in the answer is the order as stored when the verdict was decided (under its lock).
    /// `fetched` runs once the provider's answers are in (a request after it must not be given this check's answer).
    public func verify(
        _ order: Order, known: Known? = nil, logger log: Logger,
        fetched: @escaping @Sendable () -> Void = {}
    ) async -> (result: Result, verdict: Verdict?, order: Order) {
        let sink = VerdictSink(fetched: fetched)
        let result = await Self.$verdictSink.withValue(sink) { await check(order, known: known, retried: false, logger: log) }
        let (verdict, current, committed) = sink.state.withLock { $0 }
        guard case .checked = result, committed, let verdict else { return (result, nil, order) }
        return (result, verdict, current ?? order)
    }

    /// Checks `order`; `known` may be preloaded (the sweep), else it is read now.
    /// `log` is the caller's context; the checker adds `order_id` (and `provider`).
    public func check(_ order: Order, known preloaded: Known? = nil, logger log: Logger) async -> Result {
        await check(order, known: preloaded, retried: false, logger: log)
    }

    func check(_ order: Order, known preloaded: Known?, retried: Bool, logger log: Logger) async -> Result {
        let log = log.with(["provider": order.provider.rawValue, "order_id": order.orderID])
        let known: Known
        if let preloaded {
            known = preloaded
        } else {
            do {
                known = try await pool.run { conn in
                    try Self.known(provider: order.provider, orderIDs: [order.orderID], on: conn)[order.orderID]!
                }
            } catch { return .transient(reason: "database: \(error)", retryAfter: nil) }
        }

        let fetchedAt = Date()
        let transactions: [FetchedTransaction]
        // Every answer the fetch used is collected (CountedTransport) and kept as the check's evidence.
        let (fetched, exchanges) = await AnswerLog.collecting { await self.fetch(order, links: known.links) }
        Self.verdictSink?.fetched()
        switch fetched {
        case .success(let t): transactions = t
        case .failure(let failure): return failure.result
        }
        // The payments this check counts besides its transactions (a subscription's sales within its period, by the
        // creation time their answers gave): the unknown_order one raised is this order's to resolve.
        let payments = known.links.filter { link in
            link.kind == .sale && (order.period.map { p in link.occurredAt.map(p.contains) ?? false } ?? true)
        }.map(\.externalID)
        // Compared under the order's lock with the links recorded on it (its own: not those of its sales found elsewhere).
        let ownLinks = known.links.filter { $0.orderID == order.orderID }.count
        guard
            let result = await record(
                provider: order.provider, order: order, transactions: transactions, fetchedAt: fetchedAt,
                linksSeen: retried ? nil : ownLinks, exchanges: exchanges, linkedPayments: payments,
                logger: log)
        else {
            // A link was learned while this check fetched (the sweep preloads a page's links; another delivery may
            // have named a sale of the order): checked once more, with the links as they are now.
            log.debug("a link was learned during the check; checking again")
            return await check(order, known: nil, retried: true, logger: log)
        }
        return result
    }

    struct FetchFailure: Error { var result: Result }

    /// Asks the provider about the order's calls in doubt (a PXP modification sent and never answered, or answered
    /// Pending), records what it says, and returns the links as they are now. Nothing in doubt: no call.
    /// `evidence`: also hand the provider other orders' succeeded calls (the executor does, when it must decide
    /// whether a call in doubt may be sent again).
    /// `callsInDoubt`: the executor's own call in doubt (a provider may find it by the mark it carried).
    @inline(never)
    func inquire(
        _ order: Order, links: [TransactionLink], evidence: Bool = false, callsInDoubt: [CallInDoubt] = []
    ) async
        -> Swift.Result<(links: [TransactionLink], outcomes: CallOutcomes), FetchFailure>
    {
        // Only calls payrecon made can be in doubt: an order without any asks the provider nothing.
        guard !callsInDoubt.isEmpty || links.contains(where: { $0.source == .payrecon && $0.actionID != nil }) else {
            return .success((links, CallOutcomes()))
        }
        let api = gateway[order.provider]
        var known: [TransactionQuery.Evidence] = []
        if evidence {
            known =
                (try? await pool.run { try TransactionLinkStore.succeededCallLinks(provider: order.provider, limit: 6, on: $0) })?
                .map { TransactionQuery.Evidence(link: $0.link, merchant: $0.merchant, site: $0.site) } ?? []
        }
        switch await api.inquire(
            TransactionQuery(
                transactionRef: order.transactionRef, merchant: order.merchant, site: order.site, links: links,
                evidence: known, callsInDoubt: callsInDoubt))
        {
        case .found(let outcomes):
            guard !outcomes.links.isEmpty else { return .success((links, outcomes)) }
            do {
                try await pool.run { try TransactionLinkStore.record(outcomes.links, provider: order.provider, on: $0) }
            } catch { return .failure(FetchFailure(result: .transient(reason: "database: \(error)", retryAfter: nil))) }
            var merged = links
            for link in outcomes.links {
                if let i = merged.firstIndex(where: { $0.externalID == link.externalID }) { merged[i] = link } else { merged.append(link) }
            }
            return .success((merged, outcomes))
        case .notFound: return .success((links, CallOutcomes()))
        case .transient(let t): return .failure(FetchFailure(result: .transient(t)))
        case .permanent(let f): return .failure(FetchFailure(result: Self.failure(f)))
        }
    }

    /// Every transaction of the order, fetched (one for most orders), after its calls in doubt were asked about: no
    /// plan is made as if a modification that may have happened had not.
    /// `inquiring` false: the caller asked about the calls in doubt itself just before (the executor).
    func fetch(
        _ order: Order, links known: [TransactionLink], inquiring: Bool = true
    ) async -> Swift.Result<[FetchedTransaction], FetchFailure> {
        // A provider that cannot be asked about calls in doubt now does not stop the check: nothing is planned on
        // the order while one is in doubt anyway (Planner.finish), and the executor asks again before any re-send.
        var links = known
        if inquiring, case .success(let inquired) = await inquire(order, links: known) { links = inquired.links }
        var out: [FetchedTransaction] = []
        for ref in order.transactionRefs {
            switch await fetch(ref, of: order, links: links) {
            case .success(let t): out.append(t)
            case .failure(let f): return .failure(f)
            }
        }
        return .success(out)
    }

    /// One transaction of the order. Its own function (like `inquire`), so `fetch(_:links:inquiring:)`'s frame does not
    /// hold both at once (it was 6.6 KB: see `makeCheck`).
    @inline(never)
    func fetch(_ ref: String, of order: Order, links: [TransactionLink]) async -> Swift.Result<FetchedTransaction, FetchFailure> {
        let api = gateway[order.provider]
        let outcome = await api.snapshot(
            of: TransactionQuery(
                transactionRef: ref, merchant: order.merchant, site: order.site, links: links,
                period: order.period, currency: order.amount.currency))
        return Self.fetched(outcome, ref: ref, several: order.hasSeveralTransactions, absentMayHaveExpired: api.unapprovedAttemptsExpire)
    }

    /// What a transaction's fetch came to (sync, apart from `fetch`, for the same reason).
    @inline(never)
    static func fetched(
        _ outcome: ProviderOutcome<Snapshot>, ref: String, several: Bool, absentMayHaveExpired: Bool
    )
        -> Swift.Result<FetchedTransaction, FetchFailure>
    {
        switch outcome {
        case .found(let s): return .success(FetchedTransaction(transactionRef: ref, snapshot: s))
        case .notFound:
            return .success(FetchedTransaction(transactionRef: ref, snapshot: nil, absentMayHaveExpired: absentMayHaveExpired))
        case .transient(let t): return .failure(FetchFailure(result: .transient(t)))
        case .permanent(let f):
            let failure = Self.failure(f)
            if several, case .unreadable(let reason) = failure {
                return .failure(FetchFailure(result: .unreadable(reason: "transaction \(ref): \(reason)")))
            }
            return .failure(FetchFailure(result: failure))
        }
    }

    /// A transaction a webhook named that no stored order refers to: `unknown_order` if the provider has it (its
    /// provider may say instead that it is a modification of another transaction, or not a payment at all).
    public func checkUnknown(provider: Provider, reference: EventReference, logger log: Logger) async -> UnknownResult {
        guard let transactionRef = reference.transactionRef else { return .absent }
        let log = log.with(["provider": provider.rawValue, "transaction_ref": transactionRef])
        let fetchedAt = Date()
        let (outcome, exchanges) = await AnswerLog.collecting {
            await self.gateway[provider].lookup(
                TransactionQuery(
                    transactionRef: transactionRef, merchant: reference.merchant, site: reference.site, links: reference.learned))
        }
        switch outcome {
        case .found(.transaction(let s)):
            return await checkUnknown(
                s, provider: provider, transactionRef: transactionRef, fetchedAt: fetchedAt, exchanges: exchanges, logger: log)
        case .found(.unreconcilable(let t)):
            return .checked(await recordUnknown(provider: provider, t, exchanges: exchanges, logger: log))
        case .found(.ignored(let reason)): return .ignored(reason)
        case .found(.modification(let parent, let link)): return .modification(parent: parent, link: link)
        case .notFound:
            // Neither ours nor the provider's: nothing to reconcile (the hint named nothing real).
            return .absent
        case .transient(let t): return .checked(.transient(t))
        case .permanent(let f): return .checked(Self.failure(f))
        }
    }

    /// A transaction of its own no stored order holds: linked to the order its provider's answer names, or recorded
    /// (`unknown_order`). Its own function, not inlined into `checkUnknown`, whose frame was 11.7 KB (see `makeCheck`).
    @inline(never)
    func checkUnknown(
        _ s: Snapshot, provider: Provider, transactionRef: String, fetchedAt: Date, exchanges: [ProviderExchange],
        logger log: Logger
    ) async -> UnknownResult {
        if !s.orderReferences.isEmpty {
            // A retry the merchant has not recorded yet: linked to the order the provider's answer names.
            do {
                let order = try await pool.run { conn -> Order? in
                    for id in s.orderReferences {
                        guard try OrderStore.find(provider: provider, orderID: id, on: conn) != nil else { continue }
                        try OrderStore.addTransaction(
                            provider: provider, orderID: id, transactionRef: transactionRef,
                            learnedFrom: s.orderReferenceFields[id] ?? "a reference field of \(provider.rawValue)'s answer",
                            on: conn)
                        return try OrderStore.find(provider: provider, orderID: id, on: conn)
                    }
                    return nil
                }
                if let order {
                    log.info(
                        "transaction linked to the order its provider names (evidence only: no action acts on it until the order lists it)",
                        ["order_id": order.orderID])
                    return .belongs(order)
                }
            } catch { return .checked(.transient(reason: "database: \(error)", retryAfter: nil)) }
        }
        return .checked(
            await record(
                provider: provider, order: nil, transactions: [FetchedTransaction(transactionRef: transactionRef, snapshot: s)],
                fetchedAt: fetchedAt, linksSeen: nil, exchanges: exchanges, logger: log)!)
    }

    /// Records `unknown_order` for a transaction payrecon cannot reconcile as an order (the detail says why).
    /// `exchanges`: the answers that showed it (kept as its evidence).
    public func recordUnknown(
        provider: Provider, _ t: UnknownTransaction, exchanges: [ProviderExchange] = [], logger log: Logger
    ) async -> Result {
        let finding = Planner.unknownOrder(
            provider: provider, transactionRef: t.transactionRef, value: t.value, state: t.state, detail: t.detail)
        do {
            var check = FindingStore.Check(
                provider: provider, order: nil, transactionRef: t.transactionRef, snapshot: nil, fetchedAt: Date(),
                currency: t.value?.currency.code)
            check.evidence = CheckContext.current.evidence(exchanges)
            let recorded = try await recorder.record(
                PlannedCheck(check) { _, _ in
                    Plan(findings: [finding], decision: Decision(fired: [.init(row: .unknownOrder, yields: "unknown_order: \(t.detail)")]))
                })
            guard let (outcome, _) = recorded else { return .checked(CheckOutcome(), matched: true) }
            return .checked(outcome, matched: false)
        } catch {
            return .transient(reason: "database: \(error)", retryAfter: nil)
        }
    }

    /// Plans under the order's lock, from the order and actions as stored then (see `PlannedCheck.record`), in a
    /// group with the checks recorded at the same time (`CheckRecorder`). With
    /// several transactions the stored snapshot is their sum (and every one's aliases are linked).
    /// As `record`, comparing the order's links with the `linksSeen` the fetch used: nil when they differ (nothing
    /// recorded; check again).
    /// `exchanges`: the answers the fetch used, kept as the check's evidence.
    @inline(never)
    func record(
        provider: Provider, order: Order?, transactions: [FetchedTransaction], fetchedAt: Date,
        linksSeen: Int?, exchanges: [ProviderExchange], linkedPayments: [String] = [], logger log: Logger
    ) async -> Result? {
        // The check is built as it is queued, and its outcome read, in functions of their own: this frame holds only
        // what crosses the wait for the group (see `makeCheck`).
        let rechecks = linksSeen != nil && order != nil
        let sink = Self.verdictSink
        sink?.state.withLock { $0 = (nil, nil, false) }
        let recorded: CheckRecorder.Recorded
        do {
            recorded = try await recorder.record {
                makeCheck(
                    provider: provider, order: order, transactions: transactions, fetchedAt: fetchedAt, linksSeen: linksSeen,
                    exchanges: exchanges, linkedPayments: linkedPayments, verdict: sink)
            }
        } catch { return .transient(reason: "database: \(error)", retryAfter: nil) }
        if recorded != nil { sink?.state.withLock { $0.committed = true } }
        return Self.result(of: recorded, rechecks: rechecks, logger: log)
    }

    /// The check to record, built as it is queued (`CheckRecorder.record(building:)`), never in `record`'s frame.
    ///
    /// Why the check's path is split into small functions: a Swift async function's frame holds what lives across
    /// its awaits and, in practice, most temporaries of the code inlined into it (a `switch` over a found snapshot
    /// makes several 360-byte slots). Frames come from the task's allocator, whose memory stays with the task at the
    /// high-water mark of its deepest call chain until the task ends; hundreds of checks are in hand at once. Built
    /// here, the check's values were 7.6 KB of `record`'s frame. `scripts/lib/async-frames.py` prints the sizes.
    @inline(never)
    func makeCheck(
        provider: Provider, order: Order?, transactions: [FetchedTransaction], fetchedAt: Date,
        linksSeen: Int?, exchanges: [ProviderExchange], linkedPayments: [String] = [],
        verdict sink: VerdictSink? = nil
    ) -> PlannedCheck {
        let now = clock()
        let windows = pendingWindows
        let several = transactions.count > 1
        let transactionRef = transactions.map(\.transactionRef).joined(separator: " ")
        let stored = several ? Planner.orderSnapshot(order: order, transactions: transactions) : transactions.first?.snapshot
        // Encoded here, not while holding a pooled connection (a profile of the sweep once showed Foundation's JSON
        // encoder at 11 % of its CPU, all of it inside the connection's hold).
        let storedJSON = stored.map(FindingStore.encode)
        var check = FindingStore.Check(
            provider: provider, order: order, transactionRef: transactionRef, snapshot: stored, fetchedAt: fetchedAt,
            transactionRefs: transactions.map(\.transactionRef), snapshotJSON: storedJSON)
        check.linksSeen = linksSeen
        check.evidence = CheckContext.current.evidence(exchanges)
        check.linkedPayments = linkedPayments.filter { !check.transactionRefs.contains($0) }
        return PlannedCheck(check) { current, emitted in
            guard let current else {
                let s = transactions.first?.snapshot
                return Planner.plan(
                    order: nil, snapshot: s, emitted: emitted, now: now,
                    pendingMax: windows.seconds(provider: provider, method: s?.method))
            }
            let plan = Planner.plan(
                order: current, transactions: transactions, emitted: emitted, now: now,
                pendingMax: { windows.seconds(provider: provider, method: $0?.method) })
            if let sink {
                // What the check fetched is judged against the order as stored now; when its transactions are no
                // longer those fetched (re-imported meanwhile), no verdict: a transaction it no longer lists is not its payment.
                let fetchedRefs = transactions.map(\.transactionRef)
                let verdict =
                    fetchedRefs == current.transactionRefs
                    ? Verdict.decide(order: current, transactions: transactions, findings: plan.findings, actions: emitted) : nil
                sink.state.withLock {
                    $0.verdict = verdict; $0.order = current
                }
            }
            return plan
        }
    }

    /// What a recorded check comes to; nil when it is to be checked again (`rechecks`: a link was learned meanwhile).
    @inline(never)
    static func result(of recorded: CheckRecorder.Recorded, rechecks: Bool, logger log: Logger) -> Result? {
        guard let (outcome, plan) = recorded else {
            if rechecks { return nil }
            log.debug("check superseded by a newer one of the same order")
            return .checked(CheckOutcome(), matched: true)
        }
        if !plan.findings.isEmpty || !plan.actions.isEmpty {
            log.debug("order checked", ["findings": plan.findings.count, "actions": plan.actions.count])
        }
        return .checked(outcome, matched: plan.findings.isEmpty)
    }
}
