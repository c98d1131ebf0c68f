import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Turns one stored delivery into order checks: find the transactions it names (PXP: merchantTransactionId or a
/// known systemTransactionId; PayPal: the order behind the resource), check each order, or report the transaction
/// as `unknown_order` when the provider has it and no order names it.
public struct DeliveryProcessor: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker

    public init(pool: PostgresPool, checker: OrderChecker) { self.pool = pool; self.checker = checker }

    public func process(_ delivery: QueuedDelivery) async -> DeliveryAttempt.Result {
        let headers = Headers(delivery.headers)
        switch delivery.provider {
        case .pxp:
            let notification: PXPNotification
            do { notification = try PXPNotification.parse(body: delivery.body, headers: headers) }
            catch { return .permanent(reason: "stored body no longer parses: \(error)") }
            var results: [OrderChecker.Result] = []
            for event in notification.events {
                results += await checkPXP(event)
            }
            return Self.combine(results)
        case .paypal:
            return await processPayPal(delivery.body)
        case .paypercut:
            // Paypercut's API client is not built yet: the delivery is kept (done) for when it is.
            Log.info("paypercut delivery stored; reconciliation for paypercut is not available yet", ["delivery_id": delivery.id])
            return .processed
        }
    }

    private func checkPXP(_ event: PXPEvent) async -> [OrderChecker.Result] {
        // The orders the event names and what is known of them, in one trip to the pool.
        let found: (orders: [Order], known: [String: OrderChecker.Known])
        do {
            found = try await pool.run { conn in
                var orders: [Order] = []
                if let ref = event.merchantTransactionID { orders = try OrderStore.find(provider: .pxp, transactionRef: ref, on: conn) }
                if orders.isEmpty, let system = event.systemTransactionID { orders = try OrderStore.findPXP(systemTransactionID: system, on: conn) }
                let known = orders.isEmpty ? [:] : try OrderChecker.known(provider: .pxp, orderIDs: orders.map(\.orderID), on: conn)
                return (orders, known)
            }
        } catch { return [.transient(reason: "database: \(error)", retryAfterSeconds: nil)] }
        if !found.orders.isEmpty {
            var results: [OrderChecker.Result] = []
            for order in found.orders { results.append(await checker.check(order, known: found.known[order.orderID])) }
            return results
        }
        guard let ref = event.merchantTransactionID else {
            // Authentication, token or report events name no transaction: nothing to reconcile.
            return []
        }
        return [await checker.checkUnknown(provider: .pxp, transactionRef: ref, merchant: event.merchant, site: event.site)]
    }

    private func processPayPal(_ body: [UInt8]) async -> DeliveryAttempt.Result {
        guard let paypal = checker.gateway.paypal else {
            return .permanent(reason: "no PayPal API client: set PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET")
        }
        let event: JSONValue
        do { event = try JSONValue.parse(body) } catch { return .permanent(reason: "stored body no longer parses: \(error)") }
        guard let resource = event["resource"], let type = event["resource_type"]?.stringValue else {
            return .processed   // an event without a resource names nothing to reconcile
        }
        let orderID: String
        switch await paypal.orderID(resourceType: type, resource: resource) {
        case .found(let id): orderID = id
        case .notFound:
            return .processed   // vault tokens and other resources without an order
        case .transient(let r, let a): return .transient(reason: r, retryAfterSeconds: a)
        case .permanent(let s, let b): return .permanent(reason: "PayPal answered \(s): \(b)")
        }
        let orders: [Order]
        do { orders = try await pool.run { try OrderStore.find(provider: .paypal, transactionRef: orderID, on: $0) } }
        catch { return .transient(reason: "database: \(error)", retryAfterSeconds: nil) }
        if orders.isEmpty {
            return Self.combine([await checker.checkUnknown(provider: .paypal, transactionRef: orderID, merchant: nil, site: nil)])
        }
        var results: [OrderChecker.Result] = []
        for order in orders { results.append(await checker.check(order)) }
        return Self.combine(results)
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
