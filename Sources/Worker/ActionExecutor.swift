import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Executes pending actions at the provider (PAYRECON_ACTIONS=execute, or `payrecon actions execute`).
///
/// Each action is claimed under a lease, sent with its idempotency key (PayPal-Request-Id; for PXP a
/// merchantTransactionId derived from the key), and its outcome recorded. A crash between the call and the record
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

    public init(pool: PostgresPool, gateway: ProviderGateway, checker: OrderChecker?, leaseSeconds: Int = 120) {
        self.pool = pool; self.gateway = gateway; self.checker = checker; self.leaseSeconds = leaseSeconds
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
                Log.warning("cannot claim actions", ["error": String(describing: error)]); break
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
        let outcome: ProviderOutcome<String>
        switch action.provider {
        case .pxp: outcome = await executePXP(action, order: order, snapshot: context.snapshot)
        case .paypal: outcome = await executePayPal(action)
        case .paypercut: outcome = .permanent(status: 0, body: "Paypercut actions are not available yet")
        }
        let status: ActionStatus
        switch outcome {
        case .found(let ref):
            status = await finish(action, .succeeded, ref: ref, error: nil)
            Log.info("action executed", ["provider": action.provider.rawValue, "order_id": action.orderID, "action": action.kind.rawValue,
                                         "idempotency_key": action.idempotencyKey, "provider_ref": ref])
            if let checker { _ = await checker.check(order) }   // see the provider's new state now
        case .notFound:
            status = await finish(action, .failed, ref: nil, error: "the provider does not know the transaction to act on")
        case .transient(let reason, _):
            status = await finish(action, .pending, ref: nil, error: "will retry: \(reason)")
        case .permanent(let code, let body):
            status = await finish(action, .failed, ref: nil, error: code == 0 ? body : "provider answered \(code): \(body)")
            Log.warning("action failed", ["provider": action.provider.rawValue, "order_id": action.orderID, "action": action.kind.rawValue,
                                          "idempotency_key": action.idempotencyKey])
        }
        return status
    }

    private func executePXP(_ action: StoredAction, order: Order, snapshot: Snapshot?) async -> ProviderOutcome<String> {
        guard let pxp = gateway.pxp else { return ProviderGateway.notConfigured(.pxp).failure(as: String.self)! }
        guard let snapshot, let parent = action.providerTarget ?? snapshot.actionTargets.systemTransactionID,
              let merchant = order.merchant, let site = order.site else {
            return .permanent(status: 0, body: "no PXP transaction to modify: the order has not been fetched yet")
        }
        let kind: PXPModificationKind = switch action.kind {
        case .capture: .capture(amount: action.amount.minorUnits)
        case .refund: .refund(amount: action.amount.minorUnits)
        case .increment: .incremental(newTotal: action.target)
        case .void: .void(originalValue: snapshot.value)
        }
        let result = await pxp.modify(systemTransactionId: parent, kind, currency: action.amount.currency, merchant: merchant, site: site,
                                      merchantTransactionId: PXPClient.merchantTransactionId(forIdempotencyKey: action.idempotencyKey),
                                      merchantTransactionDate: PXPClient.formatDate(unixSeconds: snapshot.createdAt ?? Int64(Date().timeIntervalSince1970)))
        guard case .found(let r) = result else { return result.failure(as: String.self)! }
        let modification = r.modification(parentSystemTransactionId: parent, operation: action.kind.pxpOperation, amount: action.amount.minorUnits)
        do {
            try await pool.run { conn in
                try ActionStore.recordPXPModification(systemTransactionID: r.systemTransactionId, parent: parent, orderID: order.orderID,
                                                      operation: action.kind, amount: action.amount.minorUnits,
                                                      currency: action.amount.currency.code, state: r.state, actionID: action.id, on: conn)
            }
        } catch {
            // Not recorded: the lease runs out, the same merchantTransactionId is sent again and PXP answers the same.
            return .transient(reason: "database: \(error)", retryAfterSeconds: nil)
        }
        guard modification.isAccepted else { return .permanent(status: 200, body: "PXP answered state \(r.state)") }
        return .found(r.systemTransactionId)
    }

    private func executePayPal(_ action: StoredAction) async -> ProviderOutcome<String> {
        guard let paypal = gateway.paypal else { return ProviderGateway.notConfigured(.paypal).failure(as: String.self)! }
        guard let target = action.providerTarget else {
            return .permanent(status: 0, body: "no PayPal authorization or capture id recorded for this action")
        }
        let result: ProviderOutcome<JSONValue>
        switch action.kind {
        case .capture: result = await paypal.captureAuthorization(target, amount: action.amount, final: false, requestID: action.idempotencyKey)
        case .void: result = await paypal.voidAuthorization(target, requestID: action.idempotencyKey)
        case .refund: result = await paypal.refundCapture(target, amount: action.amount, requestID: action.idempotencyKey)
        case .increment: return .permanent(status: 0, body: "PayPal has no incremental authorization")
        }
        return result.map { $0["id"]?.stringValue ?? target }
    }

    @discardableResult
    private func finish(_ action: StoredAction, _ status: ActionStatus, ref: String?, error: String?) async -> ActionStatus {
        do {
            try await pool.run { try ActionStore.finish(id: action.id, status: status, providerRef: ref, error: error, on: $0) }
        } catch {
            Log.warning("could not record an action's outcome; it will be retried with the same key",
                        ["idempotency_key": action.idempotencyKey, "error": String(describing: error)])
        }
        return status
    }
}
