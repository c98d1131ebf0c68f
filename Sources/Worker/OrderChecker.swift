import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Checks one order end to end: re-fetch from the provider, plan (pure), record. Shared by the queue worker, the
/// nightly sweep and the action executor, so every path reconciles the same way.
public final class OrderChecker: Sendable {
    public enum Result: Sendable, Equatable {
        /// Checked; `matched` when nothing is wrong.
        case checked(CheckOutcome, matched: Bool)
        /// Could not be checked now (provider timeout, 429, 5xx): try again later.
        case transient(reason: String, retryAfterSeconds: Int?)
        /// Could not be checked and retrying as-is will not help (credentials, a provider 4xx).
        case failed(reason: String)
        /// The provider's answer has a field that cannot be read (named in the reason): this order's check failed,
        /// not the delivery that named it.
        case unreadable(reason: String)
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
    }

    /// A provider's permanent answer as a check result: an unreadable answer (mapped with status 200) fails only
    /// the order's check.
    static func failure(status: Int, body: String) -> Result {
        if status == 200 { return .unreadable(reason: body) }
        return .failed(reason: status == 0 ? body : "provider answered \(status): \(body)")
    }

    let pool: PostgresPool
    let gateway: ProviderGateway
    let pendingWindows: PendingWindows
    /// The default window (the executor's re-plan uses the snapshot's own, like checks).
    var pendingMax: Int64 { pendingWindows.defaultSeconds }
    let clock: @Sendable () -> Int64

    public convenience init(pool: PostgresPool, gateway: ProviderGateway, pendingMaxSeconds: Int64,
                            clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.init(pool: pool, gateway: gateway, pendingWindows: PendingWindows(defaultSeconds: pendingMaxSeconds), clock: clock)
    }

    /// `pendingWindows`: PAYRECON_PENDING_MAX, per provider and payment method.
    public init(pool: PostgresPool, gateway: ProviderGateway, pendingWindows: PendingWindows,
                clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.pool = pool; self.gateway = gateway; self.pendingWindows = pendingWindows; self.clock = clock
    }

    /// The pending window for a transaction as fetched.
    func pendingMax(provider: Provider, snapshot: Snapshot?) -> Int64 {
        pendingWindows.seconds(provider: provider, method: snapshot?.method)
    }

    /// What a fetch needs to know of an order beforehand: the transactions linked to it. (Its actions are read
    /// under the order's lock when the check is recorded, so they are never stale.)
    public struct Known: Sendable {
        public var links: [TransactionLink]
    }

    /// Loads what is known of many orders (one provider) in one query: the sweep does this per page.
    public static func known(provider: Provider, orderIDs: [String], on conn: PostgresConnection) throws -> [String: Known] {
        let links = try TransactionLinkStore.links(provider: provider, orderIDs: orderIDs, on: conn)
        var out: [String: Known] = [:]
        for id in orderIDs { out[id] = Known(links: links[id] ?? []) }
        return out
    }

    /// Checks `order`; `known` may be preloaded (the sweep), else it is read now.
    /// `log` is the caller's context; the checker adds `order_id` (and `provider`).
    public func check(_ order: Order, known preloaded: Known? = nil, log: Logger = Logger()) async -> Result {
        let log = log.with(["provider": order.provider.rawValue, "order_id": order.orderID])
        let known: Known
        if let preloaded { known = preloaded } else {
            do {
                known = try await pool.run { conn in
                    try Self.known(provider: order.provider, orderIDs: [order.orderID], on: conn)[order.orderID]!
                }
            } catch { return .transient(reason: "database: \(error)", retryAfterSeconds: nil) }
        }

        let fetchedAt = Date()
        let outcome = await gateway[order.provider].snapshot(of: TransactionQuery(
            transactionRef: order.transactionRef, merchant: order.merchant, site: order.site, links: known.links))
        let snapshot: Snapshot?
        switch outcome {
        case .found(let s): snapshot = s
        case .notFound: snapshot = nil
        case .transient(let r, let a): return .transient(reason: r, retryAfterSeconds: a)
        case .permanent(let s, let b): return Self.failure(status: s, body: b)
        }
        return await record(provider: order.provider, order: order, transactionRef: order.transactionRef, snapshot: snapshot,
                            fetchedAt: fetchedAt, log: log)
    }

    /// A transaction a webhook named that no stored order refers to: `unknown_order` if the provider has it (its
    /// provider may say instead that it is a modification of another transaction, or not a payment at all).
    public func checkUnknown(provider: Provider, reference: EventReference, log: Logger = Logger()) async -> UnknownResult {
        guard let transactionRef = reference.transactionRef else { return .absent }
        let log = log.with(["provider": provider.rawValue, "transaction_ref": transactionRef])
        let fetchedAt = Date()
        let outcome = await gateway[provider].lookup(TransactionQuery(
            transactionRef: transactionRef, merchant: reference.merchant, site: reference.site, links: reference.learned))
        switch outcome {
        case .found(.transaction(let s)):
            return .checked(await record(provider: provider, order: nil, transactionRef: transactionRef, snapshot: s, fetchedAt: fetchedAt, log: log))
        case .found(.unreconcilable(let t)):
            return .checked(await recordUnknown(provider: provider, t, log: log))
        case .found(.ignored(let reason)): return .ignored(reason)
        case .found(.modification(let parent, let link)): return .modification(parent: parent, link: link)
        case .notFound:
            // Neither ours nor the provider's: nothing to reconcile (the hint named nothing real).
            return .absent
        case .transient(let r, let a): return .checked(.transient(reason: r, retryAfterSeconds: a))
        case .permanent(let s, let b): return .checked(Self.failure(status: s, body: b))
        }
    }

    /// Records `unknown_order` for a transaction payrecon cannot reconcile as an order (the detail says why).
    public func recordUnknown(provider: Provider, _ t: UnknownTransaction, log: Logger = Logger()) async -> Result {
        let finding = Planner.unknownOrder(provider: provider, transactionRef: t.transactionRef, value: t.value, state: t.state, detail: t.detail)
        do {
            let recorded = try await pool.run { conn in
                try FindingStore.record(provider: provider, order: nil, transactionRef: t.transactionRef, snapshot: nil, fetchedAt: Date(),
                                        currency: t.value?.currency.code, plan: { _, _ in Plan(findings: [finding]) }, on: conn)
            }
            guard let (outcome, _) = recorded else { return .checked(CheckOutcome(), matched: true) }
            return .checked(outcome, matched: false)
        } catch {
            return .transient(reason: "database: \(error)", retryAfterSeconds: nil)
        }
    }

    /// Plans under the order's lock, from the order and actions as stored then (see `FindingStore.record`).
    private func record(provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
                        log: Logger) async -> Result {
        let now = clock(), pendingMax = pendingMax(provider: provider, snapshot: snapshot)
        do {
            let recorded = try await pool.run { conn in
                try FindingStore.record(provider: provider, order: order, transactionRef: transactionRef, snapshot: snapshot,
                                        fetchedAt: fetchedAt, plan: { current, emitted in
                                            Planner.plan(order: current, snapshot: snapshot, emitted: emitted, now: now, pendingMax: pendingMax)
                                        }, on: conn)
            }
            guard let (outcome, plan) = recorded else {
                log.debug("check superseded by a newer one of the same order")
                return .checked(CheckOutcome(), matched: true)
            }
            if !plan.findings.isEmpty || !plan.actions.isEmpty {
                log.debug("order checked", ["findings": plan.findings.count, "actions": plan.actions.count])
            }
            return .checked(outcome, matched: plan.findings.isEmpty)
        } catch {
            return .transient(reason: "database: \(error)", retryAfterSeconds: nil)
        }
    }
}
