import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Executes pending actions at the provider (PAYRECON_ACTIONS=execute, or `payrecon actions execute`).
///
/// Each action is claimed under a lease, sent through its provider with its idempotency key (the provider sends it
/// as it takes it), the transactions the call made are recorded, then its outcome. From just before the call until
/// its outcome is recorded the action is in doubt: after a timeout or a crash its next attempt asks the provider
/// what came of it first (`ProviderAPI.settle`), and sends it again only when the provider does not know it, or when
/// the provider answers a repeated idempotency key with the first result. No action is executed twice.
public final class ActionExecutor: Sendable {
    public struct Totals: Sendable, Equatable {
        public var succeeded = 0, failed = 0, deferred = 0
        public init() {}
    }

    let pool: PostgresPool
    let gateway: ProviderGateway
    let checker: OrderChecker
    let leaseSeconds: Int

    let logger: Logger

    /// Attempts of an action in doubt, the provider unable to say what came of it, before it fails as outcome unknown
    /// (each attempt asks the provider again and sends nothing).
    public static let attemptsBeforeOutcomeUnknown = 4

    /// How long after a call whose outcome is unknown the provider's "not found" is trusted, and the action may be
    /// superseded (PAYRECON_IN_DOUBT_GRACE): a provider still applying a slow call may not show it yet.
    let inDoubtGraceSeconds: Double

    public init(pool: PostgresPool, gateway: ProviderGateway, checker: OrderChecker, leaseSeconds: Int = 120,
                inDoubtGraceSeconds: Double = 120, logger: Logger = Logger()) {
        self.pool = pool; self.gateway = gateway; self.checker = checker; self.leaseSeconds = leaseSeconds
        self.inDoubtGraceSeconds = inDoubtGraceSeconds; self.logger = logger
    }

    /// Whether the action's last call was sent less than the grace ago.
    func withinGrace(_ action: StoredAction) -> Bool {
        guard let sent = action.sentAt else { return false }
        return Date().timeIntervalSince(sent) < inDoubtGraceSeconds
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
                claimed = try await pool.run { [leaseSeconds, after] in
                    try ActionStore.claimPending(leaseSeconds: leaseSeconds, limit: 1, after: after, on: $0).first
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
        return await CheckContext.$current.withValue(CheckContext(source: "executor", deliveryID: nil)) {
            await AnswerLog.$current.withValue(answers) { await self.attempt(action, answers: answers) }
        }
    }

    private func attempt(_ action: StoredAction, answers: AnswerLog) async -> ActionStatus {
        let log = logger.with(["provider": action.provider.rawValue, "order_id": action.orderID, "action": action.kind.rawValue,
                               "idempotency_key": action.idempotencyKey])
        let renewer = Task { [pool, leaseSeconds] in
            let every = Duration.milliseconds(max(200, leaseSeconds * 1000 / 3))
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                if Task.isCancelled { return }
                let held = try? await pool.run { try ActionStore.renew(id: action.id, attempt: action.attempts, leaseSeconds: leaseSeconds, on: $0) }
                if held == false { log.warning("action lease lost during its call; its outcome will not be recorded here"); return }
            }
        }
        defer { renewer.cancel() }

        let api = gateway[action.provider]
        let stored: Stored?
        do { stored = try await self.stored(action) } catch {
            return await finish(action, .pending, ref: nil, error: "database: \(error)", log: log)
        }
        guard let stored else {
            return await finish(action, .superseded, ref: nil, error: "the order no longer exists", inDoubt: false, log: log)
        }
        let order = stored.order
        var known = stored.known

        // A call in doubt is asked about before anything else: it is never sent again on a guess.
        if action.inDoubt {
            let settlement: Settlement
            let settledAt = Date()
            switch await checker.settle(order, links: known.links, evidence: !api.deduplicatesIdempotencyKeys) {
            case .success(let settled): known.links = settled.links; settlement = settled.settlement
            case .failure(let failure):
                return await finish(action, .pending, ref: nil, error: "outcome of the last call still unknown; will ask again: \(failure.result)", log: log)
            }
            // What the provider said of the call in doubt decides the action's status: those answers are kept.
            let decides: Bool = switch settlement.calls[action.id] {
            case .made?, .refused?: true
            case nil: !api.deduplicatesIdempotencyKeys && action.attempts >= Self.attemptsBeforeOutcomeUnknown
            default: false
            }
            if decides {
                _ = await keepEvidence(action, order: order, answers: answers, checkedAt: settledAt, decided: "settled", plan: nil, log: log)
            }
            switch settlement.calls[action.id] {
            case .made(let ref)?:
                let status = await finish(action, .succeeded, ref: ref, error: nil, inDoubt: false, log: log)
                log.info("action found made at the provider after an unknown outcome", ["provider_ref": ref])
                _ = await checker.check(order, log: log)
                return status
            case .refused(let why)?:
                let status = await finish(action, .failed, ref: nil, error: why, inDoubt: false, log: log)
                _ = await checker.check(order, log: log)
                return status
            case .stillPending?:
                return await finish(action, .pending, ref: nil, error: "the provider reports the call pending; asked again next time", log: log)
            case .notMade? where withinGrace(action):
                return await finish(action, .pending, ref: nil,
                                    error: "the provider does not show the last call yet; trusted only \(Int(inDoubtGraceSeconds)) s after it was sent", log: log)
            case .notMade?:
                log.info("the provider does not know the call in doubt; it is planned again")
            case nil where api.deduplicatesIdempotencyKeys:
                break   // the provider answers a repeated key with the first result
            case nil where action.attempts < Self.attemptsBeforeOutcomeUnknown:
                // Evidence that the provider's "not found" can be trusted may come (another call found by its id):
                // asked again on the next pass, nothing sent meanwhile.
                return await finish(action, .pending, ref: nil, error: "outcome of the last call unknown; the provider will be asked again", log: log)
            case nil:
                let why = "outcome unknown: the call may have been applied, and the provider cannot be asked whether it was "
                    + "(it does not find it, and that it would is not known). Nothing is sent again automatically. Check the "
                    + "transaction with the provider; if the call was not applied, run `payrecon actions retry \(action.id)`"
                log.warning("action outcome unknown; not re-sent", ["reason": why])
                let status = await finish(action, .failed, ref: nil, error: why, inDoubt: true, log: log)
                _ = await checker.check(order, log: log)   // action_failed
                return status
            }
        }

        // Re-fetch and re-plan: the key must still be wanted, and its amount is the fresh plan's. Every transaction
        // of the order is fetched; the call acts on the one the key names.
        let transactions: [FetchedTransaction]
        let fetchedAt = Date()
        // (A call in doubt was asked about just above: the fetch does not ask again.)
        switch await checker.fetch(order, links: known.links, settling: !action.inDoubt) {
        case .success(let t): transactions = t
        case .failure(let failure):
            switch failure.result {
            case .transient(let reason, _): return await finish(action, .pending, ref: nil, error: "will retry: \(reason)", log: log)
            case .failed(let reason), .unreadable(let reason): return await finish(action, .failed, ref: nil, error: reason, log: log)
            case .checked: return await finish(action, .pending, ref: nil, error: "will retry", log: log)
            }
        }
        let (plan, wanted) = replan(action, order: order, transactions: transactions, emitted: stored.emitted)
        let acted = transactions.first { $0.transactionRef == (wanted?.transactionRef ?? order.transactionRef) }?.snapshot
        if wanted == nil, action.inDoubt, withinGrace(action) {
            // The fresh answer may not show the last call yet: it is not given up on sooner than the grace.
            return await finish(action, .pending, ref: nil, error: "the order may no longer call for it; decided once the last call is "
                                + "\(Int(inDoubtGraceSeconds)) s old", log: log)
        }
        // The fresh answers decided whether and for how much the call goes: kept with their bodies.
        guard let evidenceID = await keepEvidence(action, order: order, answers: answers, checkedAt: fetchedAt,
                                                   decided: wanted == nil ? "not sent" : "call", plan: plan, log: log) else {
            return await finish(action, .pending, ref: nil, error: "will retry: the evidence of the re-fetch could not be kept", log: log)   // nothing sent
        }
        guard let snapshot = acted, let wanted else {
            let why = plan.findings.first.map { "\($0.kind.rawValue): \($0.detail)" } ?? "the order no longer calls for it"
            let status = await finish(action, .superseded, ref: nil, error: "not sent: the fresh plan no longer wants it (\(why))", inDoubt: false, log: log)
            log.info("action superseded before its call", ["reason": why])
            _ = await checker.check(order, log: log)   // record what the fresh answer shows
            return status
        }
        let call = ActionCall(actionID: action.id, kind: action.kind, amount: Money(minorUnits: wanted.amount, currency: action.amount.currency),
                              target: action.target, providerTarget: wanted.providerTarget, idempotencyKey: action.idempotencyKey,
                              order: order, snapshot: snapshot,
                              isFinal: action.kind == .capture && Self.completesOrder(order, transactions, capture: wanted.amount),
                              links: known.links)
        let prepared = api.prepare(call)
        if !prepared.isEmpty {
            do {
                try await pool.run { try TransactionLinkStore.record(prepared, provider: action.provider, on: $0) }
            } catch {
                return await finish(action, .pending, ref: nil, error: "will retry: database: \(error)", log: log)   // nothing sent
            }
        }
        // The fence is checked (and the lease extended) last before the call, with the amount the call sends: an
        // executor whose claim lapsed during the re-fetch (or while the links were recorded), and was taken, sends
        // nothing.
        let kept: Bool
        do {
            kept = try await pool.run { [leaseSeconds] in
                try ActionStore.confirm(id: action.id, attempt: action.attempts, amount: wanted.amount, providerTarget: wanted.providerTarget,
                                        leaseSeconds: leaseSeconds, on: $0)
            }
        } catch {
            return await finish(action, .pending, ref: nil, error: "will retry: database: \(error)", log: log)   // nothing sent
        }
        guard kept else { log.warning("action lost before its call; not sent"); return .pending }
        if wanted.amount != action.amount.minorUnits {
            log.info("action amount re-planned before its call", ["planned": action.amount.minorUnits, "sent": wanted.amount])
        }

        let (result, exchanges) = await AnswerLog.collecting { await api.execute(call) }
        // What was sent and answered is kept before anything else is recorded, whatever comes of the lease. When it cannot
        // be, the action stays in doubt: its next attempt asks the provider what came of the call (and keeps that answer),
        // so no action ends succeeded or failed without the evidence of how.
        do {
            try await pool.run { conn in
                try EvidenceStore.recordCalls(actionID: action.id, attempt: action.attempts, evidenceID: evidenceID, calls: exchanges.map(\.call),
                                              outcome: Self.callOutcome(result.outcome), on: conn)
            }
        } catch {
            log.warning("could not keep the evidence of an action's call; the provider is asked what came of it next time",
                        ["error": String(describing: error)])
            return await finish(action, .pending, ref: nil, error: "the call's evidence could not be kept: database: \(error); asked again next time",
                                inDoubt: true, log: log)
        }
        if !result.links.isEmpty {
            do {
                try await pool.run { try TransactionLinkStore.record(result.links, provider: action.provider, on: $0) }
            } catch {
                // Not recorded: the lease runs out and the same key is sent again; the provider answers the same.
                return await finish(action, .pending, ref: nil, error: "will retry: database: \(error)", log: log)
            }
        }
        let status: ActionStatus
        switch result.outcome {
        case .found(let ref):
            status = await finish(action, .succeeded, ref: ref, error: nil, inDoubt: false, log: log)
            log.info("action executed", ["provider_ref": ref, "amount": wanted.amount])
            _ = await checker.check(order, log: log)   // see the provider's new state now
        case .notFound:
            status = await finish(action, .failed, ref: nil, error: "the provider does not know the transaction to act on", inDoubt: false, log: log)
        case .transient(let reason, _):
            // The call may have been applied: the action stays in doubt, and its next attempt asks the provider first.
            status = await finish(action, .pending, ref: nil, error: "outcome unknown, asked before any re-send: \(reason)", inDoubt: true, log: log)
        case .permanent(let code, let body):
            status = await finish(action, .failed, ref: nil, error: code == 0 ? body : "provider answered \(code): \(body)", inDoubt: false, log: log)
            log.warning("action failed", ["status": code])
            // A refused call (Paypercut's 409 idempotency_error among them) is followed by a re-fetch, so the
            // findings show what the provider holds now.
            if code != 0 { _ = await checker.check(order, log: log) }
        }
        return status
    }

    /// Keeps the answers this attempt read (a re-fetch, or what the provider said of a call in doubt) as evidence, always
    /// with their bodies; nil when the database could not keep them.
    func keepEvidence(_ action: StoredAction, order: Order, answers: AnswerLog, checkedAt: Date, decided: String, plan: Plan?,
                      log: Logger) async -> Int64? {
        // Read here: a task-local is not seen on the pool's threads.
        let evidence = CheckContext.current.evidence(answers.exchanges)
        do {
            return try await pool.run { conn in
                try EvidenceStore.record(provider: action.provider, orderID: order.orderID, transactionRef: order.transactionRefs.joined(separator: " "),
                                         checkedAt: checkedAt, evidence: evidence, decided: decided, decision: plan?.decision ?? Decision(),
                                         findings: plan?.findings ?? [], planned: [action.idempotencyKey], on: conn)
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
        case .transient(let reason, _): "in doubt: \(reason)"
        case .permanent(let code, let body): "failed: " + (code == 0 ? body : "provider answered \(code): \(body)")
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
            return Stored(order: order, known: known, emitted: try FindingStore.emitted(provider: action.provider, orderID: order.orderID, on: conn))
        }
    }

    /// The fresh plan for `action`'s order, the action itself left out of what is recorded (and never held back by
    /// another in doubt), and what it wants of the action's key now.
    func replan(_ action: StoredAction, order: Order, transactions: [FetchedTransaction], emitted: [EmittedAction])
        -> (plan: Plan, wanted: PlannedAction?) {
        let others = emitted.filter { $0.idempotencyKey != action.idempotencyKey }
        let windows = checker.pendingWindows
        let plan = Planner.plan(order: order, transactions: transactions, emitted: others, now: checker.clock(),
                                pendingMax: { windows.seconds(provider: action.provider, method: $0?.method) },
                                executing: action.idempotencyKey)
        return (plan, plan.actions.first { $0.idempotencyKey == action.idempotencyKey })
    }

    /// Whether a capture of `amount` brings the order's captured total to its amount (then it is final, releasing the
    /// rest of the authorisation), over every transaction of the order.
    static func completesOrder(_ order: Order, _ transactions: [FetchedTransaction], capture amount: Int64) -> Bool {
        let captured = Planner.orderSnapshot(order: order, transactions: transactions)?.captured ?? 0
        let (total, overflow) = captured.addingReportingOverflow(amount)
        return !overflow && total == order.amount.minorUnits
    }

    /// Records the outcome under the claim's fence; an executor that lost the action records nothing (`pending`:
    /// whoever holds it now decides).
    private func finish(_ action: StoredAction, _ status: ActionStatus, ref: String?, error: String?, inDoubt: Bool? = nil,
                        log: Logger) async -> ActionStatus {
        do {
            let kept = try await pool.run {
                try ActionStore.finish(id: action.id, attempt: action.attempts, status: status, providerRef: ref, error: error,
                                       inDoubt: inDoubt, on: $0)
            }
            guard kept else {
                log.warning("action lease lost before its outcome was recorded; another executor holds it", ["outcome": status.rawValue])
                return .pending
            }
            WorkerMetrics.action(action.provider, action.kind, status)
        } catch {
            log.warning("could not record an action's outcome; it will be retried with the same key", ["error": String(describing: error)])
        }
        return status
    }
}

extension ActionExecutor {
    /// What `payrecon actions retry` did with one failed action.
    public enum RetryResult: Sendable, Equatable {
        /// Pending again, with the fresh plan's amount (minor units).
        case pending(amount: Int64)
        /// The fresh plan no longer wants it: superseded, with why.
        case retired(String)
        /// It could not be re-planned now (the provider or the database); nothing changed.
        case notNow(String)
        /// It is not failed (pending, done, superseded…): nothing to retry.
        case notFailed(String)
        /// No action has this id.
        case noSuchAction(String)
    }

    /// Re-plans a failed action from a fresh fetch (after an operator fixed the cause: a permission, a provider-side
    /// state, or a call in doubt checked at the provider) and makes it pending again when the plan still wants it,
    /// with the plan's amount and currency. The order is checked again, so its `action_failed` follows.
    public func retry(id: Int64) async -> RetryResult {
        let action: StoredAction?, stored: Stored?
        do {
            action = try await pool.run { try ActionStore.find(id: id, on: $0) }
            if let action { stored = try await self.stored(action) } else { stored = nil }
        } catch { return .notNow("database: \(error)") }
        guard let action else { return .noSuchAction("no action \(id): 'payrecon actions list --status failed' shows the ones to retry") }
        guard action.status == .failed else {
            return .notFailed("action \(id) is \(action.status.rawValue): only a failed action can be retried")
        }
        guard let stored else {
            _ = try? await pool.run { try ActionStore.retire(id: id, reason: "retried: the order no longer exists", on: $0) }
            return .retired("the order no longer exists")
        }
        let order = stored.order
        let transactions: [FetchedTransaction]
        switch await checker.fetch(order, links: stored.known.links) {
        case .success(let t): transactions = t
        case .failure(let failure): return .notNow("the provider could not be asked now: \(failure.result)")
        }
        let (plan, wanted) = replan(action, order: order, transactions: transactions, emitted: stored.emitted)
        let result: RetryResult
        do {
            if let wanted {
                let changed = try await pool.run {
                    try ActionStore.retry(id: id, amount: wanted.amount, currency: wanted.currency.code, providerTarget: wanted.providerTarget, on: $0)
                }
                result = changed ? .pending(amount: wanted.amount) : .notFailed("action \(id) changed meanwhile; nothing done")
            } else {
                let why = plan.findings.first.map { "\($0.kind.rawValue): \($0.detail)" } ?? "the order no longer calls for it"
                _ = try await pool.run { try ActionStore.retire(id: id, reason: "retried, but the fresh plan no longer wants it (\(why))", on: $0) }
                result = .retired(why)
            }
        } catch { return .notNow("database: \(error)") }
        _ = await checker.check(order, log: logger)
        return result
    }
}
