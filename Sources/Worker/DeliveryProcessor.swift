import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store

/// Turns one stored delivery into order checks: its provider says which transactions it names (or why it names
/// none); each is found by the order holding it (its transaction_ref or an alternative, or an alias, modification,
/// sale or dispute in `transaction_links`) and the order checked, or the transaction looked up at the provider:
/// `unknown_order`, a modification linked to its parent's order, or a reason to ignore it.
///
/// The delivery ends `done` with the orders it re-checked, or `ignored` with why nothing was.
public struct DeliveryProcessor: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker

    public init(pool: PostgresPool, checker: OrderChecker) { self.pool = pool; self.checker = checker }

    /// What one reference came to.
    enum Step: Sendable, Equatable {
        case checked(orderID: String, OrderChecker.Result)
        case unknown(transactionRef: String, OrderChecker.Result)
        /// The orders holding the reference could not be read (the database), so none was checked.
        case unfound(OrderChecker.Result)
        case ignored(String)
    }

    /// What a delivery came to, and the orders it named (each one checked, whatever its check's result): `payrecon
    /// explain` finds the delivery by them.
    public struct Processed: Sendable {
        public var result: DeliveryAttempt.Result
        public var orderIDs: [String] = []
    }

    /// `log` carries the delivery's context (`delivery_id`, `provider`); each check adds `order_id`.
    public func process(_ delivery: QueuedDelivery, logger log: Logger) async -> Processed {
        let steps: [Step]
        switch await references(of: delivery, logger: log) {
        case .failure(let ended): return Processed(result: ended.result)
        case .success(let s): steps = s
        }
        return Processed(result: Self.combine(steps, provider: delivery.provider), orderIDs: Self.namedOrders(steps))
    }

    /// The orders a delivery named: each order a step checked (whatever its check came to), once, in order.
    static func namedOrders(_ steps: [Step]) -> [String] {
        var seen = Set<String>()
        return steps.compactMap { step -> String? in
            guard case .checked(let id, _) = step, seen.insert(id).inserted else { return nil }
            return id
        }
    }

    /// Each of the delivery's references checked, or how it ended without any.
    private func references(of delivery: QueuedDelivery, logger log: Logger) async -> Swift.Result<[Step], Ended> {
        let provider = delivery.provider
        let references: [EventReference]
        // The answers the event's resolution read (a subscription sale's own answer) are the evidence of an
        // unknown_order decided from them.
        let (content, answers) = await AnswerLog.collecting {
            await checker.gateway[provider].references(
                in: StoredEvent(id: delivery.id, headers: Headers(delivery.headers), body: delivery.body))
        }
        switch content {
        case .found(.references(let refs)): references = refs
        case .found(.ignored(let reason)): return .failure(Ended(.processed(.ignored(reason))))
        case .notFound:
            return .failure(Ended(.processed(.ignored("\(delivery.eventType ?? "the event") names nothing \(provider.rawValue) knows"))))
        case .transient(let t): return .failure(Ended(.transient(t)))
        case .permanent(let failure): return .failure(Ended(.permanent(reason: failure.words(for: provider.rawValue))))
        }
        guard !references.isEmpty else {
            return .failure(Ended(.processed(.ignored("\(delivery.eventType ?? "the event") names no transaction"))))
        }
        var steps: [Step] = []
        for reference in references {
            steps += await check(reference, provider: provider, deliveryID: delivery.id, answers: answers, logger: log)
        }
        return .success(steps)
    }

    /// A delivery that ended before any reference was checked.
    struct Ended: Error {
        var result: DeliveryAttempt.Result
        init(_ result: DeliveryAttempt.Result) { self.result = result }
    }

    func check(
        _ reference: EventReference, provider: Provider, deliveryID: Int64, answers: [ProviderExchange] = [], logger log: Logger
    ) async -> [Step] {
        let found: Found
        do { found = try await findOrders(reference, provider: provider) } catch {
            return [.unfound(.transient(reason: "database: \(error)", retryAfter: nil))]
        }
        if let unheld = found.unheld {
            // A subscription's payment that no renewal's period holds: reported once, counted on no order.
            return [
                .unknown(
                    transactionRef: unheld.transactionRef,
                    await checker.recordUnknown(provider: provider, unheld, exchanges: answers, logger: log))
            ]
        }
        if !found.orders.isEmpty {
            var steps: [Step] = []
            for order in found.orders {
                steps.append(.checked(orderID: order.orderID, await checker.check(order, known: found.known[order.orderID], logger: log)))
            }
            return steps
        }
        return await checkUnheld(reference, provider: provider, logger: log)
    }

    /// A reference no stored order holds: looked up at its provider. Its own function, not inlined into `check`, so
    /// this rare path's values are not in the frame of every check (`check`'s was 6.7 KB: see `OrderChecker.makeCheck`).
    @inline(never)
    func checkUnheld(_ reference: EventReference, provider: Provider, logger log: Logger) async -> [Step] {
        // Known only by an alias no order has: nothing to fetch it by.
        guard let ref = reference.transactionRef else {
            return [.ignored("\(provider.rawValue) transaction \(reference.alias ?? "?") is linked to no stored order")]
        }
        switch await checker.checkUnknown(provider: provider, reference: reference, logger: log) {
        case .checked(let result): return [.unknown(transactionRef: ref, result)]
        case .absent: return [.ignored("\(provider.rawValue) does not know transaction \(ref)")]
        case .ignored(let reason): return [.ignored(reason)]
        case .belongs(let order):
            return [.checked(orderID: order.orderID, await checker.check(order, logger: log))]
        case .modification(let parent, let link):
            // A modification made elsewhere (a PXP portal refund): link it to its parent's order and re-check that.
            var linked = reference
            linked.transactionRef = nil
            linked.alternatives = []
            linked.alias = parent
            linked.learned = [link]
            let parentOrders: Found
            do { parentOrders = try await findOrders(linked, provider: provider) } catch {
                return [.unfound(.transient(reason: "database: \(error)", retryAfter: nil))]
            }
            guard !parentOrders.orders.isEmpty else {
                let detail = "\(provider.rawValue) transaction \(ref) is a \(link.kind) of \(parent), which no stored order holds"
                return [
                    .unknown(
                        transactionRef: ref,
                        await checker.recordUnknown(
                            provider: provider,
                            UnknownTransaction(transactionRef: ref, value: nil, state: link.state ?? "unknown", detail: detail),
                            logger: log))
                ]
            }
            var steps: [Step] = []
            for order in parentOrders.orders {
                steps.append(
                    .checked(orderID: order.orderID, await checker.check(order, known: parentOrders.known[order.orderID], logger: log)))
            }
            return steps
        }
    }

    /// The orders a reference names and what is known of them; or, for a subscription's payment no renewal's period
    /// holds, the `unknown_order` to record.
    struct Found {
        var orders: [Order] = []
        var known: [String: OrderChecker.Known] = [:]
        var unheld: UnknownTransaction?
    }

    /// The orders a reference names and what is known of them, in one trip to the pool; the links the event teaches
    /// are recorded for each order found first, so its check fetches them. Of a subscription's orders with billing
    /// periods, only the one whose period holds the payment (`RenewalMatch`); a payment none holds keeps its links
    /// with no order (the order of its period takes them when it is imported) and is `unknown_order`.
    private func findOrders(_ reference: EventReference, provider: Provider) async throws -> Found {
        try await pool.run { conn in
            var orders: [Order] = []
            var matched: String?
            for ref in ([reference.transactionRef].compactMap { $0 } + reference.alternatives) where orders.isEmpty {
                orders = try OrderStore.find(provider: provider, transactionRef: ref, on: conn)
                matched = ref
            }
            var unheld: UnknownTransaction?
            if let matched, let payment = reference.transactionRef, matched != payment {
                switch RenewalMatch.of(
                    payment: "\(provider.rawValue) payment \(payment)", agreement: matched, createdAt: reference.occurredAt,
                    orders: orders.map { ($0.orderID, $0.period) })
                {
                case .all: break
                case .order(let id): orders = orders.filter { $0.orderID == id }
                case .unheld(let detail):
                    orders = []
                    unheld = UnknownTransaction(
                        transactionRef: payment, value: reference.value, state: "in no recorded billing period",
                        detail: detail)
                }
            }
            // A transaction payrecon made or learned of (a modification's own reference, an alias, a sale).
            for id in [reference.transactionRef, reference.alias].compactMap({ $0 }) where orders.isEmpty && unheld == nil {
                orders = try TransactionLinkStore.orders(provider: provider, externalID: id, on: conn)
            }
            if let unheld {
                // Kept with no order (the agreement as the sale's parent), for the renewal's order to take when recorded.
                try TransactionLinkStore.record(
                    reference.learned.map {
                        var l = $0; l.orderID = nil; return l
                    }, provider: provider, on: conn)
                return Found(unheld: unheld)
            }
            guard !orders.isEmpty else { return Found() }
            if !reference.learned.isEmpty {
                var links: [TransactionLink] = []
                for order in orders {
                    for var link in reference.learned { link.orderID = order.orderID; links.append(link) }
                }
                try TransactionLinkStore.record(links, provider: provider, on: conn)
            }
            return Found(orders: orders, known: try OrderChecker.known(provider: provider, orderIDs: orders.map(\.orderID), on: conn))
        }
    }

    /// Every check must have happened for the delivery to end; the most retryable failure decides otherwise. An
    /// answer that cannot be read fails that order's check (named in the outcome), not the delivery.
    static func combine(_ steps: [Step], provider: Provider) -> DeliveryAttempt.Result {
        var permanent: String?
        var transient: Transient?
        var checked: [String] = [], unknown: [String] = [], unreadable: [String] = [], ignored: [String] = []
        func note(_ result: OrderChecker.Result, _ what: String) -> Bool {
            switch result {
            case .checked: return true
            case .unreadable(let reason): unreadable.append("\(what) could not be checked: \(reason)"); return false
            case .transient(let t):
                // The last transient failure's reason, with the longest wait any of them asked for.
                let longest = max(t.retryAfter ?? .zero, transient?.retryAfter ?? .zero)
                transient = Transient(t.reason, retryAfter: longest == .zero ? nil : longest)
            case .failed(let reason): permanent = reason
            }
            return false
        }
        for step in steps {
            switch step {
            case .checked(let id, let result): if note(result, "order \(id)") { checked.append(id) }
            case .unknown(let ref, let result): if note(result, "transaction \(ref)") { unknown.append(ref) }
            case .unfound(let result): _ = note(result, "its orders")
            case .ignored(let reason): ignored.append(reason)
            }
        }
        if let transient { return .transient(transient) }
        if let permanent { return .permanent(reason: permanent) }
        var parts: [String] = []
        var seen = Set<String>()
        let orders = checked.filter { seen.insert($0).inserted }
        if !orders.isEmpty {
            parts.append("re-checked \(provider.rawValue) order\(orders.count == 1 ? "" : "s") " + orders.joined(separator: ", "))
        }
        if !unknown.isEmpty { parts.append("unknown_order " + unknown.joined(separator: ", ")) }
        parts += unreadable
        guard !parts.isEmpty else { return .processed(.ignored(ignored.joined(separator: "; "))) }
        parts += ignored
        return .processed(.done(parts.joined(separator: "; ")))
    }
}
