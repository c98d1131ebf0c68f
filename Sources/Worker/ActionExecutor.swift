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
    let checker: OrderChecker?
    let leaseSeconds: Int

    let logger: Logger

    public init(pool: PostgresPool, gateway: ProviderGateway, checker: OrderChecker?, leaseSeconds: Int = 120, logger: Logger = Logger()) {
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
    func execute(_ action: StoredAction) async -> ActionStatus {
        let log = logger.with(["provider": action.provider.rawValue, "order_id": action.orderID, "action": action.kind.rawValue,
                               "idempotency_key": action.idempotencyKey])
        let context: (order: Order?, snapshot: Snapshot?)
        do {
            context = try await pool.run { conn in
                (try OrderStore.find(provider: action.provider, orderID: action.orderID, on: conn),
                 try SnapshotStore.latest(provider: action.provider, orderID: action.orderID, on: conn))
            }
        } catch {
            return await finish(action, .pending, ref: nil, error: "database: \(error)")
        }
        guard let order = context.order else {
            return await finish(action, .superseded, ref: nil, error: "the order no longer exists")
        }
        let call = ActionCall(actionID: action.id, kind: action.kind, amount: action.amount, target: action.target,
                              providerTarget: action.providerTarget, idempotencyKey: action.idempotencyKey,
                              order: order, snapshot: context.snapshot)
        let result = await gateway[action.provider].execute(call)
        if !result.links.isEmpty {
            do {
                try await pool.run { try TransactionLinkStore.record(result.links, provider: action.provider, on: $0) }
            } catch {
                // Not recorded: the lease runs out and the same key is sent again; the provider answers the same.
                return await finish(action, .pending, ref: nil, error: "will retry: database: \(error)")
            }
        }
        let outcome = result.outcome
        let status: ActionStatus
        switch outcome {
        case .found(let ref):
            status = await finish(action, .succeeded, ref: ref, error: nil)
            log.info("action executed", ["provider_ref": ref])
            if let checker { _ = await checker.check(order, log: log) }   // see the provider's new state now
        case .notFound:
            status = await finish(action, .failed, ref: nil, error: "the provider does not know the transaction to act on")
        case .transient(let reason, _):
            status = await finish(action, .pending, ref: nil, error: "will retry: \(reason)")
        case .permanent(let code, let body):
            status = await finish(action, .failed, ref: nil, error: code == 0 ? body : "provider answered \(code): \(body)")
            log.warning("action failed", ["status": code])
        }
        return status
    }

    @discardableResult
    private func finish(_ action: StoredAction, _ status: ActionStatus, ref: String?, error: String?) async -> ActionStatus {
        do {
            try await pool.run { try ActionStore.finish(id: action.id, status: status, providerRef: ref, error: error, on: $0) }
        } catch {
            logger.warning("could not record an action's outcome; it will be retried with the same key",
                           ["idempotency_key": action.idempotencyKey, "error": String(describing: error)])
        }
        return status
    }
}
