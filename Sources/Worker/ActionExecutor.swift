import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Executes pending actions at the provider (PAYRECON_ACTIONS=execute, or `payrecon actions execute`).
///
/// Each action is claimed under a lease, sent through its provider with its idempotency key (the provider sends it
/// as it takes it), the transactions the call made are recorded, then its outcome. A crash between the call and the record
/// re-sends the same key, which the provider answers with the first result: no action is executed twice.
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

    public init(pool: PostgresPool, gateway: ProviderGateway, checker: OrderChecker, leaseSeconds: Int = 120, logger: Logger = Logger()) {
        self.pool = pool; self.gateway = gateway; self.checker = checker; self.leaseSeconds = leaseSeconds; self.logger = logger
    }

    /// Runs every pending action once (those a provider could not take now stay pending).
    public func executePending(limit: Int = 1000) async -> Totals {
        var totals = Totals()
        var seen = Set<Int64>()
        while seen.count < limit {
            let batch: [StoredAction]
            do {
                batch = try await pool.run { [leaseSeconds] in try ActionStore.claimPending(leaseSeconds: leaseSeconds, limit: 16, on: $0) }
            } catch {
                logger.warning("cannot claim actions", ["error": String(describing: error)]); break
            }
            let fresh = batch.filter { !seen.contains($0.id) }
            if fresh.isEmpty { break }
            for action in fresh {
                seen.insert(action.id)
                switch await execute(action) {
                case .succeeded: totals.succeeded += 1
                case .failed: totals.failed += 1
                case .pending: totals.deferred += 1
                case .superseded: break
                }
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
        let context: (order: Order?, known: OrderChecker.Known?, emitted: [EmittedAction])
        do {
            context = try await pool.run { conn in
                guard let order = try OrderStore.find(provider: action.provider, orderID: action.orderID, on: conn) else { return (nil, nil, []) }
                return (order, try OrderChecker.known(provider: action.provider, orderIDs: [order.orderID], on: conn)[order.orderID],
                        try FindingStore.emitted(provider: action.provider, orderID: order.orderID, on: conn))
            }
        } catch {
            return await finish(action, .pending, ref: nil, error: "database: \(error)", log: log)
        }
        guard let order = context.order, let known = context.known else {
            return await finish(action, .superseded, ref: nil, error: "the order no longer exists", log: log)
        }

        // Re-fetch and re-plan: the key must still be wanted, and its amount is the fresh plan's. Every transaction
        // of the order is fetched; the call acts on the one the key names.
        let transactions: [FetchedTransaction]
        switch await checker.fetch(order, links: known.links) {
        case .success(let t): transactions = t
        case .failure(let failure):
            switch failure.result {
            case .transient(let reason, _): return await finish(action, .pending, ref: nil, error: "will retry: \(reason)", log: log)
            case .failed(let reason), .unreadable(let reason): return await finish(action, .failed, ref: nil, error: reason, log: log)
            case .checked: return await finish(action, .pending, ref: nil, error: "will retry", log: log)
            }
        }
        let others = context.emitted.filter { $0.idempotencyKey != action.idempotencyKey }
        let windows = checker.pendingWindows
        let plan = Planner.plan(order: order, transactions: transactions, emitted: others, now: checker.clock(),
                                pendingMax: { windows.seconds(provider: action.provider, method: $0?.method) })
        let wanted = plan.actions.first(where: { $0.idempotencyKey == action.idempotencyKey })
        let acted = transactions.first { $0.transactionRef == (wanted?.transactionRef ?? order.transactionRef) }?.snapshot
        guard let snapshot = acted, let wanted else {
            let why = plan.findings.first.map { "\($0.kind.rawValue): \($0.detail)" } ?? "the order no longer calls for it"
            let status = await finish(action, .superseded, ref: nil, error: "not sent: the fresh plan no longer wants it (\(why))", log: log)
            log.info("action superseded before its call", ["reason": why])
            _ = await checker.check(order, log: log)   // record what the fresh answer shows
            return status
        }
        let call = ActionCall(actionID: action.id, kind: action.kind, amount: Money(minorUnits: wanted.amount, currency: action.amount.currency),
                              target: action.target, providerTarget: wanted.providerTarget, idempotencyKey: action.idempotencyKey,
                              order: order, snapshot: snapshot,
                              isFinal: action.kind == .capture && action.target == order.amount.minorUnits, links: known.links)
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

        let result = await api.execute(call)
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
            status = await finish(action, .succeeded, ref: ref, error: nil, log: log)
            log.info("action executed", ["provider_ref": ref, "amount": wanted.amount])
            _ = await checker.check(order, log: log)   // see the provider's new state now
        case .notFound:
            status = await finish(action, .failed, ref: nil, error: "the provider does not know the transaction to act on", log: log)
        case .transient(let reason, _):
            status = await finish(action, .pending, ref: nil, error: "will retry: \(reason)", log: log)
        case .permanent(let code, let body):
            status = await finish(action, .failed, ref: nil, error: code == 0 ? body : "provider answered \(code): \(body)", log: log)
            log.warning("action failed", ["status": code])
            // A refused call (Paypercut's 409 idempotency_error among them) is followed by a re-fetch, so the
            // findings show what the provider holds now.
            if code != 0 { _ = await checker.check(order, log: log) }
        }
        return status
    }

    /// Records the outcome under the claim's fence; an executor that lost the action records nothing (`pending`:
    /// whoever holds it now decides).
    private func finish(_ action: StoredAction, _ status: ActionStatus, ref: String?, error: String?, log: Logger) async -> ActionStatus {
        do {
            let kept = try await pool.run {
                try ActionStore.finish(id: action.id, attempt: action.attempts, status: status, providerRef: ref, error: error, on: $0)
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
