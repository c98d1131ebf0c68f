import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Turns one stored delivery into order checks: its provider says which transactions it names; each is found by
/// the order holding it (its transaction_ref, or an alias or modification id in `transaction_links`) and the order
/// checked, or reported as `unknown_order` when the provider has it and no order names it.
public struct DeliveryProcessor: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker

    public init(pool: PostgresPool, checker: OrderChecker) { self.pool = pool; self.checker = checker }

    /// `log` carries the delivery's context (`delivery_id`, `provider`); each check adds `order_id`.
    public func process(_ delivery: QueuedDelivery, log: Logger = Logger()) async -> DeliveryAttempt.Result {
        let provider = delivery.provider
        let references: [EventReference]
        switch await checker.gateway[provider].references(in: StoredEvent(id: delivery.id, headers: Headers(delivery.headers), body: delivery.body)) {
        case .found(let refs): references = refs
        case .notFound: references = []
        case .transient(let r, let a): return .transient(reason: r, retryAfterSeconds: a)
        case .permanent(let s, let b): return .permanent(reason: s == 0 ? b : "\(provider.rawValue) answered \(s): \(b)")
        }
        var results: [OrderChecker.Result] = []
        for reference in references { results += await check(reference, provider: provider, log: log) }
        return Self.combine(results)
    }

    private func check(_ reference: EventReference, provider: Provider, log: Logger) async -> [OrderChecker.Result] {
        // The orders the reference names and what is known of them, in one trip to the pool.
        let found: (orders: [Order], known: [String: OrderChecker.Known])
        do {
            found = try await pool.run { conn in
                var orders: [Order] = []
                if let ref = reference.transactionRef { orders = try OrderStore.find(provider: provider, transactionRef: ref, on: conn) }
                // A transaction payrecon made or learned of (a modification's own reference, or an alias).
                for id in [reference.transactionRef, reference.alias].compactMap({ $0 }) where orders.isEmpty {
                    orders = try TransactionLinkStore.orders(provider: provider, externalID: id, on: conn)
                }
                let known = orders.isEmpty ? [:] : try OrderChecker.known(provider: provider, orderIDs: orders.map(\.orderID), on: conn)
                return (orders, known)
            }
        } catch { return [.transient(reason: "database: \(error)", retryAfterSeconds: nil)] }
        if !found.orders.isEmpty {
            var results: [OrderChecker.Result] = []
            for order in found.orders { results.append(await checker.check(order, known: found.known[order.orderID], log: log)) }
            return results
        }
        // Known only by an alias no order has: nothing to fetch it by.
        guard let ref = reference.transactionRef else { return [] }
        return [await checker.checkUnknown(provider: provider, transactionRef: ref, merchant: reference.merchant, site: reference.site, log: log)]
    }

    /// Every check must have happened for the delivery to be done; the most retryable failure decides otherwise.
    static func combine(_ results: [OrderChecker.Result]) -> DeliveryAttempt.Result {
        var permanent: String?
        var transient: (String, Int?)?
        for r in results {
            switch r {
            case .checked: continue
            case .transient(let reason, let after):
                transient = (reason, max(after ?? 0, transient?.1 ?? 0) == 0 ? nil : max(after ?? 0, transient?.1 ?? 0))
            case .failed(let reason): permanent = reason
            }
        }
        if let transient { return .transient(reason: transient.0, retryAfterSeconds: transient.1) }
        if let permanent { return .permanent(reason: permanent) }
        return .processed
    }
}
