import Foundation
import Observability
import Synchronization
import Postgres
import Providers
import Reconciliation
import Store

/// Executes pending actions at the provider (PAYRECON_ACTIONS=execute, or `payrecon actions execute`).
///
/// Each action is claimed under a lease, sent through its provider with its idempotency key (the provider sends it
/// as it takes it), the transactions the call made are recorded, then its outcome. From just before the call until
/// its outcome is recorded the action is in doubt: after a timeout or a crash its next attempt asks the provider
/// what came of it first (`ProviderAPI.inquire`), and sends it again only when the provider does not know it, or when
/// the provider answers a repeated idempotency key with the first result. No action is executed twice.
public final class ActionExecutor: Sendable {
    public struct Totals: Sendable, Equatable {
        public var succeeded = 0, failed = 0, deferred = 0
        public init() {}
    }

    let pool: PostgresPool
    let gateway: ProviderGateway
    let checker: OrderChecker
    let lease: Duration

    let logger: Logger

    /// Attempts of an action in doubt, the provider unable to say what came of it, before it fails as outcome unknown
    /// (each attempt asks the provider again and sends nothing).
    public static let attemptsBeforeOutcomeUnknown = ActionAttempt.attemptsBeforeOutcomeUnknown

    /// How long after a call whose outcome is unknown the provider's "not found" is trusted, and the action may be
    /// superseded (PAYRECON_IN_DOUBT_GRACE): a provider still applying a slow call may not show it yet.
    let inDoubtGrace: Duration

    public init(
        pool: PostgresPool, gateway: ProviderGateway, checker: OrderChecker, lease: Duration = .seconds(120),
        inDoubtGrace: Duration = .seconds(120), logger: Logger
    ) {
        self.pool = pool; self.gateway = gateway; self.checker = checker; self.lease = lease
        self.inDoubtGrace = inDoubtGrace; self.logger = logger
    }

    /// Whether the action's last call was sent less than the grace ago.
    func withinGrace(_ action: StoredAction) -> Bool {
        guard let sent = action.sentAt else { return false }
        return Date().timeIntervalSince(sent) < inDoubtGrace.inSeconds
    }

    /// Runs every pending action once (those a provider could not take now stay pending).
    public func executePending(limit: Int = 1000) async -> Totals {
        var totals = Totals()
        var done = 0
        var after: Int64 = 0
        // One pass walks the outbox forward in id order, leasing one action at a time, just before running it: an
        // action it already tried is never held while others run (checks may supersede it meanwhile).
        while done < limit {
            let claimed: StoredAction?
            do {
                claimed = try await pool.run { [lease, after] in
                    try ActionStore.claimPending(lease: lease, limit: 1, after: after, on: $0).first
                }
            } catch {
                logger.warning("cannot claim actions", ["error": String(describing: error)]); break
            }
            guard let action = claimed else { break }
            after = action.id
            done += 1
            switch await execute(action) {
            case .succeeded: totals.succeeded += 1
            case .failed: totals.failed += 1
            case .pending: totals.deferred += 1
            case .superseded: break
            }
        }
        return totals
    }

    /// Executes one claimed action and records the outcome; returns the status recorded.
    ///
    /// Just before the call the transaction is fetched again and the order planned again: the call is made only
    /// when the fresh plan still wants this key, with the amount it gives (a capture to 1000 after 300 was captured
    /// elsewhere sends 700); otherwise the action is superseded. The lease is renewed while the call is in flight,
    /// and every write is fenced by the claim's attempt number: an executor that lost the action records nothing.
    func execute(_ action: StoredAction) async -> ActionStatus {
        // Every answer this attempt reads is kept: the re-fetch that decided the call as evidence, the call's own
        // exchanges as the action's calls (the checks it runs after collect their own).
        let answers = AnswerLog()
        return await CheckContext.$current.withValue(CheckContext(source: .executor, deliveryID: nil)) {
            await AnswerLog.$current.withValue(answers) { await self.attempt(action, answers: answers) }
        }
    }

    /// What one attempt has learned so far: the order, its links, and what the last re-fetch and plan gave. The
    /// state machine decides; this is what its steps act on.
    struct Attempt {
        let action: StoredAction
        let order: Order
        var links: [TransactionLink]
        let emitted: [EmittedAction]
        let answers: AnswerLog
        let log: Logger
        /// When the answers now to be kept were read.
        var checkedAt = Date()
        var plan: Plan?
        var transactions: [FetchedTransaction] = []
        var wanted: PlannedAction?
        var snapshot: Snapshot?
        var evidenceID: Int64?
    }

    /// Performs the steps `ActionAttempt` returns until it is done: this loop does the I/O, the machine decides.
    private func attempt(_ action: StoredAction, answers: AnswerLog) async -> ActionStatus {
        let log = logger.with([
            "provider": action.provider.rawValue, "order_id": action.orderID, "action": action.kind.rawValue,
            "idempotency_key": action.idempotencyKey
        ])
        let lease = LeaseRenewal(pool: pool, action: action, lease: lease, logger: log)
        defer { lease.stop() }

        let api = gateway[action.provider]
        let stored: Stored?
        do { stored = try await self.stored(action) } catch {
            return await finish(action, .init(.pending, error: "database: \(error)"), logger: log)
        }
        guard let stored else {
            return await finish(action, .init(.superseded, error: "the order no longer exists", inDoubt: false), logger: log)
        }
        var machine = ActionAttempt(
            ActionAttempt.Claim(
                inDoubt: action.inDoubt,
                sent: action.sentAt == nil ? nil : .init(amount: action.amount.minorUnits, providerTarget: action.providerTarget),
                attempts: action.attempts, withinGrace: withinGrace(action), graceSeconds: Int(inDoubtGrace.components.seconds),
                providerDeduplicatesKeys: api.deduplicatesIdempotencyKeys))
        var run = Attempt(
            action: action, order: stored.order, links: stored.known.links, emitted: stored.emitted, answers: answers, log: log)
        var step = machine.claimed()
        while true {
            if lease.isLost, !Self.isDone(step) { step = machine.leaseLost() }
            switch step {
            case .inquire(let askOthers): step = machine.inquired(await inquire(&run, askOthers: askOthers, api: api))
            case .replan(let inquiring): step = machine.replanned(await replan(&run, inquiring: inquiring))
            case .keepEvidence(let decided, let planned):
                run.evidenceID = await keepEvidence(
                    action, order: run.order, answers: answers, checkedAt: run.checkedAt, decided: decided,
                    plan: run.plan, planned: planned, logger: log)
                step = machine.evidenceKept(run.evidenceID != nil)
            case .confirm(let call): step = machine.confirmed(await confirm(&run, call, api: api))
            case .call(let call): step = machine.called(await send(&run, call, api: api))
            case .record(let outcome):
                lease.stop()  // a renewal landing after the record would overwrite its lease (a 429's wait)
                step = machine.recorded(await record(action, outcome, logger: log))
            case .recheck:
                _ = await checker.check(run.order, logger: log)  // the findings show what the provider holds now
                step = machine.rechecked()
            case .done(let status):
                if let fault = machine.fault {
                    log.error("action attempt stopped on an unexpected step; nothing more recorded", ["fault": fault])
                }
                return status
            }
        }
    }

    static func isDone(_ step: ActionAttempt.Step) -> Bool {
        if case .done = step { return true }
        return false
    }

    /// Asks the provider what came of the call in doubt (`askOthers`: with other orders' succeeded calls as evidence).
    func inquire(_ run: inout Attempt, askOthers: Bool, api: any ProviderAPI) async -> ActionAttempt.Inquired {
        run.checkedAt = Date()
        let action = run.action
        let doubt = CallInDoubt(
            actionID: action.id, kind: action.kind, idempotencyKey: action.idempotencyKey,
            amount: action.amount.minorUnits, providerTarget: action.providerTarget,
            orderID: run.order.orderID, transactionRef: action.transactionRef ?? run.order.transactionRef)
        switch await checker.inquire(run.order, links: run.links, evidence: askOthers, callsInDoubt: [doubt]) {
        case .success(let inquired):
            run.links = inquired.links
            switch inquired.outcomes.calls[action.id] {
            case .made(let ref)?:
                run.log.info("action found made at the provider after an unknown outcome", ["provider_ref": ref])
                return .made(providerRef: ref)
            case .refused(let why)?: return .refused(why)
            case .stillPending?: return .stillPending
            case .notMade?:
                run.log.info("the provider does not know the call in doubt; it is planned again")
                return .notMade
            case nil: return .unknown
            }
        case .failure(let failure): return .unreachable("\(failure.result)")
        }
    }

    /// Re-fetches every transaction of the order and plans it again: what the fresh plan wants of the key.
    func replan(_ run: inout Attempt, inquiring: Bool) async -> ActionAttempt.Replanned {
        run.checkedAt = Date()
        switch await checker.fetch(run.order, links: run.links, inquiring: inquiring) {
        case .success(let t): run.transactions = t
        case .failure(let failure):
            switch failure.result {
            case .transient(let t): return .transient(t.reason)
            case .failed(let reason), .unreadable(let reason): return .failed(reason)
            case .checked: return .transient("the re-fetch did not finish")
            }
        }
        let (plan, wanted) = replan(run.action, order: run.order, transactions: run.transactions, emitted: run.emitted)
        run.plan = plan
        run.wanted = wanted
        run.snapshot = run.transactions.first { $0.transactionRef == (wanted?.transactionRef ?? run.order.transactionRef) }?.snapshot
        guard let wanted, run.snapshot != nil else {
            let why = plan.findings.first.map { "\($0.kind.rawValue): \($0.detail)" } ?? "the order no longer calls for it"
            run.log.info("action not wanted by the fresh plan", ["reason": why])
            return .notWanted(why)
        }
        if wanted.amount != run.action.amount.minorUnits {
            run.log.info("action amount re-planned before its call", ["planned": run.action.amount.minorUnits, "wanted": wanted.amount])
        }
        return .wanted(.init(amount: wanted.amount, providerTarget: wanted.providerTarget))
    }

    /// The call as it goes to the provider: the key, with the fresh plan's amount and target.
    func actionCall(_ run: Attempt, _ call: ActionAttempt.Call) -> ActionCall {
        let action = run.action
        return ActionCall(
            actionID: action.id, kind: action.kind, amount: Money(minorUnits: call.amount, currency: action.amount.currency),
            target: action.target, providerTarget: call.providerTarget, idempotencyKey: action.idempotencyKey,
            order: run.order, snapshot: run.snapshot,
            isFinal: action.kind == .capture && Self.completesOrder(run.order, run.transactions, capture: call.amount),
            links: run.links)
    }

    /// Records the links the call will make (a PXP modification's merchantTransactionId), then checks the fence and
    /// extends the lease with what is sent, last before the call: an executor whose claim lapsed sends nothing.
    func confirm(_ run: inout Attempt, _ call: ActionAttempt.Call, api: any ProviderAPI) async -> ActionAttempt.Confirmed {
        let action = run.action
        let prepared = api.prepare(actionCall(run, call))
        do {
            if !prepared.isEmpty { try await pool.run { try TransactionLinkStore.record(prepared, provider: action.provider, on: $0) } }
            let held = try await pool.run { [lease] in
                try ActionStore.confirm(
                    id: action.id, attempt: action.attempts, amount: call.amount, providerTarget: call.providerTarget,
                    lease: lease, on: $0)
            }
            if !held { run.log.warning("action lost before its call, or its key was sent before with another amount or target; not sent") }
            return held ? .held : .lost
        } catch {
            return .failed("database: \(error)")
        }
    }

    /// Makes the call; what was sent and answered is kept, then the links it made, before its outcome is recorded.
    /// When either cannot be written the call counts as in doubt: the next attempt asks the provider what came of it.
    func send(_ run: inout Attempt, _ call: ActionAttempt.Call, api: any ProviderAPI) async -> ActionAttempt.Answer {
        let action = run.action
        let request = actionCall(run, call)
        let (result, exchanges) = await AnswerLog.collecting { await api.execute(request) }
        do {
            try await pool.run { [evidenceID = run.evidenceID] conn in
                try EvidenceStore.recordCalls(
                    actionID: action.id, attempt: action.attempts, evidenceID: evidenceID ?? 0, calls: exchanges.map(\.call),
                    outcome: Self.callOutcome(result.outcome), on: conn)
            }
        } catch {
            run.log.warning(
                "could not keep the evidence of an action's call; the provider is asked what came of it next time",
                ["error": String(describing: error)])
            return .unknown("the call's evidence could not be kept: database: \(error); asked again next time")
        }
        if !result.links.isEmpty {
            do { try await pool.run { try TransactionLinkStore.record(result.links, provider: action.provider, on: $0) } } catch {
                return .unknown("the transactions the call made could not be recorded: database: \(error); asked again next time")
            }
        }
        let answer = Self.answer(result)
        if case .applied(let ref) = answer { run.log.info("action executed", ["provider_ref": ref, "amount": call.amount]) }
        return answer
    }

    /// A provider's answer to a money call, as the attempt reads it.
    static func answer(_ result: ActionCallResult) -> ActionAttempt.Answer {
        switch result.outcome {
        case .found(let ref): .applied(providerRef: ref)
        case .notFound: .targetUnknown
        case .transient(let t) where ProviderOutcomeClassifier.refusedBeforeProcessing(t.reason):
            .notProcessed(reason: t.reason, retryAfter: t.retryAfter)
        case .transient(let t): .unknown(t.reason, retryAfter: t.retryAfter)
        case .permanent(let failure) where result.keyInUse: .keyInUse(failure.text)
        case .permanent(let failure): .permanent(failure)
        }
    }

    /// Keeps the answers this attempt read (a re-fetch, or what the provider said of a call in doubt) as evidence, always
    /// with their bodies; nil when the database could not keep them.
    func keepEvidence(
        _ action: StoredAction, order: Order, answers: AnswerLog, checkedAt: Date, decided: String, plan: Plan?,
        planned: Bool, logger log: Logger
    ) async -> Int64? {
        // Read here: a task-local is not seen on the pool's threads.
        let evidence = CheckContext.current.evidence(answers.exchanges)
        do {
            return try await pool.run { conn in
                try EvidenceStore.record(
                    provider: action.provider, orderID: order.orderID, transactionRef: order.transactionRefs.joined(separator: " "),
                    checkedAt: checkedAt, evidence: evidence, decided: decided, decision: plan?.decision ?? Decision(),
                    findings: plan?.findings ?? [], planned: planned ? [action.idempotencyKey] : [], on: conn)
            }
        } catch {
            log.warning("could not keep the evidence of an action's attempt", ["error": String(describing: error)])
            return nil
        }
    }

    /// What a call's answer came to, as kept with the call.
    static func callOutcome(_ outcome: ProviderOutcome<String>) -> String {
        switch outcome {
        case .found(let ref): "succeeded (\(ref))"
        case .notFound: "failed: the provider does not know the transaction to act on"
        case .transient(let t): "in doubt: \(t.reason)"
        case .permanent(.unreadable(let reason)): "in doubt: the answer could not be read: \(reason)"
        case .permanent(let failure): "failed: " + failure.description
        }
    }

    /// An action's order as stored now: the order, its links and its actions (nil when the order is gone).
    struct Stored: Sendable {
        var order: Order
        var known: OrderChecker.Known
        var emitted: [EmittedAction]
    }

    func stored(_ action: StoredAction) async throws -> Stored? {
        try await pool.run { conn in
            guard let order = try OrderStore.find(provider: action.provider, orderID: action.orderID, on: conn),
                let known = try OrderChecker.known(provider: action.provider, orderIDs: [order.orderID], on: conn)[order.orderID]
            else { return nil }
            return Stored(
                order: order, known: known, emitted: try FindingStore.emitted(provider: action.provider, orderID: order.orderID, on: conn))
        }
    }

    /// The fresh plan for `action`'s order, the action itself left out of what is recorded (and never held back by
    /// another in doubt), and what it wants of the action's key now.
    func replan(
        _ action: StoredAction, order: Order, transactions: [FetchedTransaction], emitted: [EmittedAction]
    )
        -> (plan: Plan, wanted: PlannedAction?)
    {
        let others = emitted.filter { $0.idempotencyKey != action.idempotencyKey }
        let windows = checker.pendingWindows
        let plan = Planner.plan(
            order: order, transactions: transactions, emitted: others, now: checker.clock(),
            pendingMax: { windows.seconds(provider: action.provider, method: $0?.method) },
            executing: action.idempotencyKey)
        return (plan, plan.actions.first { $0.idempotencyKey == action.idempotencyKey })
    }

    /// Whether a capture of `amount` brings the order's captured total to its amount (then it is final, releasing the
    /// rest of the authorisation), over every transaction of the order.
    static func completesOrder(_ order: Order, _ transactions: [FetchedTransaction], capture amount: Int64) -> Bool {
        // Captures still pending count: a capture beside one may not release the rest of the authorisation early.
        let captured = Planner.orderSnapshot(order: order, transactions: transactions)?.capturedOrPending ?? 0
        let (total, overflow) = captured.addingReportingOverflow(amount)
        return !overflow && total == order.amount.minorUnits
    }

    /// Records the outcome under the claim's fence: kept, lost (another executor holds the action now, and decides),
    /// or failed (the database; the lease runs out and another attempt decides).
    func record(_ action: StoredAction, _ outcome: ActionAttempt.Outcome, logger log: Logger) async -> ActionAttempt.Recorded {
        do {
            let kept = try await pool.run {
                try ActionStore.finish(
                    id: action.id, attempt: action.attempts, status: outcome.status, providerRef: outcome.providerRef,
                    error: outcome.error, inDoubt: outcome.inDoubt, notBefore: outcome.notBefore, on: $0)
            }
            guard kept else {
                log.warning(
                    "action lease lost before its outcome was recorded; another executor holds it", ["outcome": outcome.status.rawValue])
                return .lost
            }
            WorkerMetrics.action(action.provider, action.kind, outcome.status)
            switch outcome.status {
            case .failed: log.warning("action failed", ["reason": outcome.error ?? ""])
            case .superseded: log.info("action superseded", ["reason": outcome.error ?? ""])
            case .pending, .succeeded: break
            }
            return .kept
        } catch {
            log.warning("could not record an action's outcome; it will be retried with the same key", ["error": String(describing: error)])
            return .failed
        }
    }

    /// Records an outcome decided outside an attempt (the order gone, the database out before it started).
    private func finish(_ action: StoredAction, _ outcome: ActionAttempt.Outcome, logger log: Logger) async -> ActionStatus {
        await record(action, outcome, logger: log) == .kept ? outcome.status : .pending
    }
}

/// Renews an action's lease while its attempt runs, and says when it was lost (another executor may hold it now).
final class LeaseRenewal: Sendable {
    final class Flag: Sendable {
        /// `lost`: a renewal found the lease gone; `stopped`: the attempt went on to record its outcome, under the fence.
        let value = Mutex((lost: false, stopped: false))
    }
    private let lost = Flag()
    private let task: Task<Void, Never>

    init(pool: PostgresPool, action: StoredAction, lease: Duration, logger log: Logger) {
        let lost = self.lost
        task = Task {
            let every = max(.milliseconds(200), lease / 3)
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                if Task.isCancelled { return }
                let held = try? await pool.run {
                    try ActionStore.renew(id: action.id, attempt: action.attempts, lease: lease, on: $0)
                }
                if held == false {
                    // A renewal that was under way when the outcome was recorded finds the action no longer pending:
                    // that is not a lost lease (the fence decided), so it says nothing once the attempt stopped it.
                    let said = lost.value.withLock { state -> Bool in
                        guard !state.stopped else { return false }
                        state.lost = true
                        return true
                    }
                    if said { log.warning("action lease lost during its attempt; its outcome will not be recorded here") }
                    return
                }
            }
        }
    }

    var isLost: Bool { lost.value.withLock { $0.lost } }
    func stop() {
        lost.value.withLock { $0.stopped = true }
        task.cancel()
    }
}

extension ActionExecutor {
    public typealias RetryResult = ActionRetryResult

    /// Re-plans a failed action from a fresh fetch (after an operator fixed the cause: a permission, a provider-side
    /// state, or a call in doubt checked at the provider) and makes it pending again when the plan still wants it,
    /// with the plan's amount and currency. The order is checked again, so its `action_failed` follows.
    /// `expectedAttempts`: the attempt the operator looked at (the console's form); a retry of an action tried again
    /// since is refused, so a check made at the provider is never taken for a later attempt's.
    public func retry(id: Int64, expectedAttempts: Int? = nil) async -> RetryResult {
        let action: StoredAction?, stored: Stored?
        do {
            action = try await pool.run { try ActionStore.find(id: id, on: $0) }
            if let action { stored = try await self.stored(action) } else { stored = nil }
        } catch { return .notNow("database: \(error)") }
        guard let action else { return .noSuchAction("no action \(id): 'payrecon actions list --status failed' shows the ones to retry") }
        guard action.status == .failed else {
            return .notFailed("action \(id) is \(action.status.rawValue): only a failed action can be retried")
        }
        if let expectedAttempts, expectedAttempts != action.attempts {
            return .notFailed(
                "action \(id) was tried again since (attempt \(action.attempts) now, \(expectedAttempts) when looked at): look at it "
                    + "again before retrying")
        }
        let attempts = action.attempts
        guard let stored else {
            do {
                return try await retire(
                    id, attempts: attempts, reason: "retried: the order no longer exists", why: "the order no longer exists")
            } catch {
                return .notNow("database: \(error)")
            }
        }
        let order = stored.order
        let transactions: [FetchedTransaction]
        switch await checker.fetch(order, links: stored.known.links) {
        case .success(let t): transactions = t
        case .failure(let failure): return .notNow("the provider could not be asked now: \(failure.result)")
        }
        let (plan, wanted) = replan(action, order: order, transactions: transactions, emitted: stored.emitted)
        let result: RetryResult
        do { result = try await applyRetry(action, plan: plan, wanted: wanted) } catch { return .notNow("database: \(error)") }
        _ = await checker.check(order, logger: logger)
        return result
    }

    /// What the fresh plan makes of the failed action (re-planned at `action.attempts`): pending again with the plan's
    /// amount, or superseded when its key cannot be sent again as it was or the plan no longer wants it.
    private func applyRetry(_ action: StoredAction, plan: Plan, wanted: PlannedAction?) async throws -> RetryResult {
        let id = action.id, attempts = action.attempts
        if wanted != nil, action.sentAt != nil, !action.inDoubt, gateway[action.provider].deduplicatesIdempotencyKeys {
            // Refused, not in doubt, at a provider that answers a repeated key with its first answer: the same key
            // would only be refused again. The refused call moved nothing, so the need gets a key of its own.
            let why =
                "its key was sent and refused, and the provider answers a repeated key with its first answer: planned again "
                + "under a key of its own"
            return try await retire(id, attempts: attempts, reason: "retried, but \(why)", why: why)
        } else if let wanted, action.sentAt != nil,
            wanted.amount != action.amount.minorUnits || wanted.providerTarget != action.providerTarget
        {
            // Its key was sent with another amount or target: never sent again so; the need gets a key of its own.
            let why =
                "its key was sent as \(action.amount.minorUnits) on \(action.providerTarget ?? "the transaction"), and the order now "
                + "wants \(wanted.amount) on \(wanted.providerTarget ?? "the transaction"): planned again under a key of its own"
            return try await retire(id, attempts: attempts, reason: "retried, but \(why)", why: why)
        } else if let wanted {
            let changed = try await pool.run {
                try ActionStore.retry(
                    id: id, attempts: attempts, amount: wanted.amount, currency: wanted.currency.code,
                    providerTarget: wanted.providerTarget, on: $0)
            }
            return changed ? .pending(amount: wanted.amount) : .notFailed("action \(id) changed meanwhile; nothing done")
        } else {
            let why = plan.findings.first.map { "\($0.kind.rawValue): \($0.detail)" } ?? "the order no longer calls for it"
            return try await retire(
                id, attempts: attempts, reason: "retried, but the fresh plan no longer wants it (\(why))", why: why)
        }
    }

    /// Supersedes the failed action if it is still the attempt re-planned; else it changed meanwhile and nothing is done.
    private func retire(_ id: Int64, attempts: Int, reason: String, why: String) async throws -> RetryResult {
        let retired = try await pool.run { try ActionStore.retire(id: id, attempts: attempts, reason: reason, on: $0) }
        return retired ? .retired(why) : .notFailed("action \(id) changed meanwhile; nothing done")
    }
}
