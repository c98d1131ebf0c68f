import Foundation
import Postgres
import Reconciliation
import TextFormats

/// SQL for the merchant's orders.
public enum OrderStore {
    static let columns =
        "provider, order_id, merchant, site, transaction_ref, intent, amount_minor, currency, fulfilment, refund_amount_minor"
    /// The columns an order is read with, from `orders o`: its own, and every transaction of it
    /// (`order_transactions`, in position order; none means just transaction_ref).
    static let selectColumns =
        columns.split(separator: ",").map { "o." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
        + ", array_to_json(o.transaction_refs)::text AS transaction_refs, o.learned_transactions::text AS learned_transactions"
        + ", extract(epoch FROM o.period_start)::bigint AS period_start_s, extract(epoch FROM o.period_end)::bigint AS period_end_s, o.period_dates"

    /// Upserts every order in one transaction (the import is all-or-nothing), in chunks of 2,000 sent as arrays;
    /// `orders` is read once, a chunk at a time, so a streamed file is imported in constant memory.
    /// Returns (inserted, updated).
    @discardableResult
    /// `source`: where the orders come from (`orders import FILE` names its file), kept with each order it writes and
    /// with each version it replaces (`payrecon explain`); nil: `table`.
    /// `beforeCommit`: last, inside the transaction; what it throws rolls everything back (an import whose file changed
    /// between its two reads).
    public static func upsert<S: Sequence<Order>>(
        _ orders: S, source: String? = nil, on conn: PostgresConnection,
        beforeCommit: () throws -> Void = {}
    ) throws -> (inserted: Int, updated: Int) {
        try conn.transaction { tx in
            // Imports one at a time: the billing periods of one agreement are checked against what is stored, and two
            // imports each adding a period of it must not both pass.
            _ = try tx.query("SELECT pg_advisory_xact_lock(\(unescaped: importLock.0), \(unescaped: importLock.1))")
            if let source {
                // Transaction-scoped (PgBouncer in transaction mode keeps nothing across transactions).
                _ = try tx.query("SELECT set_config('payrecon.order_source', \(.text(source)), true)")
            }
            var total = (inserted: 0, updated: 0)
            var chunk: [Order] = []
            chunk.reserveCapacity(chunkSize)
            func flush() throws {
                let n = try upsertChunk(chunk[...], on: tx)
                total.inserted += n.inserted; total.updated += n.updated
                chunk.removeAll(keepingCapacity: true)
            }
            for order in orders {
                chunk.append(order)
                if chunk.count == chunkSize { try flush() }
            }
            if !chunk.isEmpty { try flush() }
            try beforeCommit()
            return total
        }
    }

    static let chunkSize = 2000
    /// The transaction-scoped advisory lock imports take turns under: the two-key form, apart from the one-key locks
    /// checks are recorded under (hashes of their keys).
    static let importLock: (Int32, Int32) = (0x4F52, 0x4445)  // "OR", "DE"

    /// Orders of one subscription or agreement whose billing periods overlap, or of which one has a period and another
    /// none: a renewal's payment would count on two orders. The import is refused (nothing of it is kept).
    public struct PeriodConflict: Error, CustomStringConvertible {
        public var clashes: [String]
        public var description: String {
            "billing periods of one agreement must not overlap, and every order of an agreement that has one needs one: "
                + clashes.joined(separator: "; ")
        }
    }

    /// Upserts one chunk (call inside a transaction for all-or-nothing). Returns (inserted, updated).
    static func upsertChunk(_ chunk: ArraySlice<Order>, on tx: PostgresConnection) throws -> (inserted: Int, updated: Int) {
        var inserted = 0, updated = 0
        let rows = try tx.query(
            """
            INSERT INTO orders (\(unescaped: columns), period_start, period_end, period_dates)
            SELECT c.p, c.o, c.m, c.s, c.t, c.i, c.a, c.c, c.f, c.r, to_timestamp(c.ps::bigint), to_timestamp(c.pe::bigint), c.pd::bool
            FROM unnest(\(.textArray(chunk.map(\.provider.rawValue)))::text[], \(.textArray(chunk.map(\.orderID)))::text[], \(.textArray(chunk.map { $0.merchant ?? "" }))::text[], \(.textArray(chunk.map { $0.site ?? "" }))::text[], \(.textArray(chunk.map(\.transactionRef)))::text[], \(.textArray(chunk.map(\.intent.rawValue)))::text[], \(.int64Array(chunk.map(\.amount.minorUnits)))::bigint[], \(.textArray(chunk.map(\.amount.currency.code)))::text[], \(.textArray(chunk.map(\.fulfilment.rawValue)))::text[],
                        \(.int64Array(chunk.map(\.refundAmount)))::bigint[], \(.nullableTextArray(chunk.map { $0.period.map { String($0.start) } }))::text[], \(.nullableTextArray(chunk.map { $0.period.map { String($0.end) } }))::text[], \(.textArray(chunk.map { $0.period?.datesOnly == true ? "t" : "f" }))::text[]) AS c(p, o, m, s, t, i, a, c, f, r, ps, pe, pd)
            ON CONFLICT (provider, order_id) DO UPDATE SET
                merchant = EXCLUDED.merchant, site = EXCLUDED.site, transaction_ref = EXCLUDED.transaction_ref,
                intent = EXCLUDED.intent, amount_minor = EXCLUDED.amount_minor, currency = EXCLUDED.currency,
                fulfilment = EXCLUDED.fulfilment, refund_amount_minor = EXCLUDED.refund_amount_minor,
                period_start = EXCLUDED.period_start, period_end = EXCLUDED.period_end, period_dates = EXCLUDED.period_dates
            -- An order re-imported as it is stays untouched (and is not counted as updated).
            WHERE (orders.merchant, orders.site, orders.transaction_ref, orders.intent, orders.amount_minor, orders.currency,
                   orders.fulfilment, orders.refund_amount_minor, orders.period_start, orders.period_end, orders.period_dates)
                  IS DISTINCT FROM (EXCLUDED.merchant, EXCLUDED.site, EXCLUDED.transaction_ref, EXCLUDED.intent,
                   EXCLUDED.amount_minor, EXCLUDED.currency, EXCLUDED.fulfilment, EXCLUDED.refund_amount_minor,
                   EXCLUDED.period_start, EXCLUDED.period_end, EXCLUDED.period_dates)
            RETURNING (xmax = 0) AS inserted
            """)
        for row in rows { if try row.bool("inserted") { inserted += 1 } else { updated += 1 } }
        try checkPeriods(chunk, on: tx)
        try adoptUnheldPayments(chunk, on: tx)
        // The file says every transaction of each order: what it lists replaces what the merchant listed before
        // (what payrecon learned from a provider's answer is kept).
        _ = try tx.execute(
            """
            DELETE FROM order_transactions t USING unnest(\(.textArray(chunk.map(\.provider.rawValue)))::text[], \(.textArray(chunk.map(\.orderID)))::text[]) AS c(provider, order_id)
            WHERE t.provider = c.provider AND t.order_id = c.order_id AND t.source = 'merchant'
            """)
        // Every transaction the merchant listed goes back as rows when the order has several, or when payrecon
        // learned another one for it: without its row, the order's own transaction would drop out of
        // transaction_refs (rows win over transaction_ref), and its authorisation would never be captured.
        var providers: [String] = [], ids: [String] = [], refs: [String] = [], positions: [Int64] = [], several: [String] = []
        for order in chunk {
            for (i, ref) in order.transactionRefs.enumerated() {
                providers.append(order.provider.rawValue); ids.append(order.orderID); refs.append(ref); positions.append(Int64(i))
                several.append(order.hasSeveralTransactions ? "t" : "f")
            }
        }
        _ = try tx.execute(
            """
            INSERT INTO order_transactions (provider, order_id, transaction_ref, position)
            SELECT c.provider, c.order_id, c.ref, c.position FROM unnest(\(.textArray(providers))::text[], \(.textArray(ids))::text[], \(.textArray(refs))::text[], \(.int64Array(positions))::int[], \(.textArray(several))::text[]::bool[])
                AS c(provider, order_id, ref, position, several)
            WHERE c.several OR EXISTS (SELECT 1 FROM order_transactions t WHERE t.provider = c.provider AND t.order_id = c.order_id)
            ON CONFLICT (provider, order_id, transaction_ref) DO UPDATE SET position = EXCLUDED.position, source = 'merchant'
            """)
        return (inserted, updated)
    }

    /// Refuses the chunk when one of its orders and another order of the same agreement (stored, or earlier in the
    /// import) overlap in period, or one has a period and the other none.
    static func checkPeriods(_ chunk: ArraySlice<Order>, on tx: PostgresConnection) throws {
        let clashes = try tx.query(
            """
            SELECT n.order_id AS mine, o.order_id AS other, n.transaction_ref AS ref,
                   extract(epoch FROM n.period_start)::bigint AS ms, extract(epoch FROM n.period_end)::bigint AS me,
                   extract(epoch FROM o.period_start)::bigint AS os, extract(epoch FROM o.period_end)::bigint AS oe
            FROM unnest(\(.textArray(chunk.map(\.provider.rawValue)))::text[], \(.textArray(chunk.map(\.orderID)))::text[]) AS c(provider, order_id)
            JOIN orders n ON n.provider = c.provider AND n.order_id = c.order_id
            JOIN orders o ON o.provider = n.provider AND o.transaction_ref = n.transaction_ref AND o.order_id <> n.order_id
            WHERE (n.period_start IS NOT NULL OR o.period_start IS NOT NULL)
              AND (n.period_start IS NULL OR o.period_start IS NULL OR (n.period_start < o.period_end AND o.period_start < n.period_end))
            ORDER BY n.order_id, o.order_id LIMIT 20
            """)
        guard !clashes.isEmpty else { return }
        func period(_ row: PostgresRow, _ a: String, _ b: String) throws -> String {
            guard let s = try row.optionalInt64(a), let e = try row.optionalInt64(b), let p = BillingPeriod(start: s, end: e) else {
                return "no period"
            }
            return p.description
        }
        throw PeriodConflict(
            clashes: try clashes.map { row in
                "order \(try row.string("mine")) (\(try period(row, "ms", "me"))) and order \(try row.string("other")) (\(try period(row, "os", "oe"))) "
                    + "of \(try row.string("ref"))"
            })
    }

    /// A payment of an agreement that no order's period held when it was learned (kept with no order) goes to the
    /// order whose period holds it, with the refunds learned for it: recording the missing renewal is enough for
    /// its check to find them.
    static func adoptUnheldPayments(_ chunk: ArraySlice<Order>, on tx: PostgresConnection) throws {
        let periodic = chunk.filter { $0.period != nil }
        guard !periodic.isEmpty else { return }
        _ = try tx.execute(
            """
            WITH held AS (
                SELECT l.id, o.order_id FROM unnest(\(.textArray(periodic.map(\.provider.rawValue)))::text[], \(.textArray(periodic.map(\.orderID)))::text[]) AS c(provider, order_id)
                JOIN orders o ON o.provider = c.provider AND o.order_id = c.order_id
                JOIN transaction_links l ON l.provider = o.provider AND l.parent_external_id = o.transaction_ref AND l.order_id IS NULL
                    AND l.kind = 'sale' AND l.occurred_at >= o.period_start AND l.occurred_at < o.period_end
            ), adopted AS (
                SELECT l.*, h.order_id AS new_order FROM held h JOIN transaction_links l ON l.id = h.id
                UNION ALL
                SELECT r.*, h.order_id FROM held h JOIN transaction_links s ON s.id = h.id
                JOIN transaction_links r ON r.provider = s.provider AND r.parent_external_id = s.external_id AND r.order_id IS NULL
            )
            INSERT INTO transaction_links (provider, external_id, parent_external_id, order_id, kind, amount_minor, currency, state,
                                           source, action_id, target_minor, occurred_at)
            SELECT provider, external_id, parent_external_id, new_order, kind, amount_minor, currency, state, source, action_id,
                   target_minor, occurred_at FROM adopted
            ON CONFLICT DO NOTHING
            """)
        // Their next check resolves the unknown_order the payments raised, even if the order's last check found nothing.
        _ = try tx.execute(
            """
            UPDATE snapshots s SET open_findings = true FROM unnest(\(.textArray(periodic.map(\.provider.rawValue)))::text[], \(.textArray(periodic.map(\.orderID)))::text[]) AS c(provider, order_id)
            WHERE s.provider = c.provider AND s.order_id = c.order_id AND NOT s.open_findings
            """)
    }

    public static func find(provider: Provider, orderID: String, on conn: PostgresConnection) throws -> Order? {
        try conn.query(
            "SELECT \(unescaped: selectColumns) FROM orders o WHERE o.provider = \(.text(provider.rawValue)) AND o.order_id = \(.text(orderID))"
        ).first.map(decode)
    }

    /// The orders of `orderIDs` that exist, in one query (in order-id order).
    public static func find(provider: Provider, orderIDs: [String], on conn: PostgresConnection) throws -> [Order] {
        guard !orderIDs.isEmpty else { return [] }
        return try conn.query(
            "SELECT \(unescaped: selectColumns) FROM orders o WHERE o.provider = \(.text(provider.rawValue)) AND o.order_id = ANY(\(.textArray(orderIDs))::text[]) ORDER BY o.order_id"
        ).map(decode)
    }

    /// The merchant and site of the provider's most recently updated order with a merchant (`payrecon doctor` probes
    /// PXP at that merchant's path); nil when there is none.
    public static func latestMerchant(provider: Provider, on conn: PostgresConnection) throws -> (merchant: String, site: String)? {
        try conn.query(
            "SELECT merchant, site FROM orders WHERE provider = \(.text(provider.rawValue)) AND merchant <> '' ORDER BY updated_at DESC LIMIT 1"
        ).first.map { (try $0.string("merchant"), try $0.string("site")) }
    }

    /// Orders holding the transaction `ref`: as their transaction_ref (one indexed lookup, the usual case), else as
    /// another of their transactions (`order_transactions`).
    public static func find(provider: Provider, transactionRef: String, on conn: PostgresConnection) throws -> [Order] {
        let direct = try conn.query(
            "SELECT \(unescaped: selectColumns) FROM orders o WHERE o.provider = \(.text(provider.rawValue)) AND o.transaction_ref = \(.text(transactionRef)) ORDER BY o.order_id"
        ).map(decode)
        guard direct.isEmpty else { return direct }
        return try conn.query(
            """
            SELECT \(unescaped: selectColumns) FROM order_transactions t JOIN orders o ON o.provider = t.provider AND o.order_id = t.order_id
            WHERE t.provider = \(.text(provider.rawValue)) AND t.transaction_ref = \(.text(transactionRef)) ORDER BY o.order_id
            """
        ).map(decode)
    }

    /// Adds a transaction to a known order (one the provider's answer says is the order's): it is checked with
    /// the others from now on. The order's own transaction_ref becomes position 0 when it had no rows yet. Returns
    /// whether the transaction was new to the order.
    /// `learnedFrom`: the provider's field that named the order (kept, and quoted where the transaction's money would
    /// call for an action: a learned transaction is never acted on).
    @discardableResult
    public static func addTransaction(
        provider: Provider, orderID: String, transactionRef: String, learnedFrom: String,
        on conn: PostgresConnection
    ) throws -> Bool {
        let added = try conn.query(
            """
            INSERT INTO order_transactions (provider, order_id, transaction_ref, position, source, learned_from)
            SELECT o.provider, o.order_id, r.ref, r.position, r.source, r.learned_from
            FROM orders o, LATERAL (
                SELECT o.transaction_ref AS ref, 0 AS position, 'merchant' AS source, NULL::text AS learned_from
                WHERE NOT EXISTS (SELECT 1 FROM order_transactions t WHERE t.provider = o.provider AND t.order_id = o.order_id)
                UNION ALL
                SELECT \(.text(transactionRef))::text, coalesce((SELECT max(t.position) + 1 FROM order_transactions t
                                           WHERE t.provider = o.provider AND t.order_id = o.order_id), 1), 'learned', \(.text(learnedFrom))::text
            ) r
            WHERE o.provider = \(.text(provider.rawValue)) AND o.order_id = \(.text(orderID)) AND o.transaction_ref <> \(.text(transactionRef))
            ON CONFLICT DO NOTHING
            RETURNING transaction_ref
            """)
        return try added.contains { try $0.string("transaction_ref") == transactionRef }
    }

    /// The sweep's scope, a page at a time in key order (keyset pagination: constant memory, no long transaction).
    /// `since` nil = all orders; otherwise orders created or updated since then, plus those with open discrepancies
    /// or pending actions.
    public static func page(
        after key: (provider: Provider, orderID: String)?, since: Date?, provider: Provider?, limit: Int,
        on conn: PostgresConnection
    ) throws -> [Order] {
        try conn.query(
            """
            SELECT \(unescaped: selectColumns) FROM orders o
            WHERE (o.provider, o.order_id) > (\(.text(key?.provider.rawValue ?? "")), \(.text(key?.orderID ?? "")))
              AND (\(provider.map { .text($0.rawValue) } ?? .null)::text IS NULL OR o.provider = \(provider.map { .text($0.rawValue) } ?? .null))
              AND (\(since.map { .timestamptz($0) } ?? .null)::timestamptz IS NULL OR o.updated_at >= \(since.map { .timestamptz($0) } ?? .null) OR o.created_at >= \(since.map { .timestamptz($0) } ?? .null)
                   OR EXISTS (SELECT 1 FROM discrepancies d WHERE d.provider = o.provider AND d.order_id = o.order_id AND d.status = 'open')
                   OR EXISTS (SELECT 1 FROM actions a WHERE a.provider = o.provider AND a.order_id = o.order_id AND a.status = 'pending'))
            ORDER BY o.provider, o.order_id
            LIMIT \(.int64(Int64(limit)))
            """
        ).map(decode)
    }

    /// The json array of an order's transactions (empty: only its transaction_ref).
    static func refs(_ json: String) throws -> [String] {
        guard let array = try? JSONValue.parse(Array(json.utf8)).arrayValue else {
            throw PostgresError.decoding("order_transactions of an order do not read as a list: \(json.prefix(80))")
        }
        return array.compactMap(\.stringValue)
    }

    /// The json object of an order's learned transactions (transaction_ref → the field that named the order).
    static func learned(_ json: String) throws -> [String: String] {
        guard let members = try? JSONValue.parse(Array(json.utf8)).objectMembers else {
            throw PostgresError.decoding("orders.learned_transactions does not read as an object: \(json.prefix(80))")
        }
        var out: [String: String] = [:]
        for (ref, field) in members { out[ref] = field.stringValue ?? "a reference field of the provider's answer" }
        return out
    }

    static func decode(_ row: PostgresRow) throws -> Order {
        let code = try row.string("currency")
        guard let currency = Currency(code: code) else { throw PostgresError.decoding("orders.currency '\(code)' is not an ISO 4217 code") }
        let providerText = try row.string("provider"), intentText = try row.string("intent"), fulfilmentText = try row.string("fulfilment")
        guard let provider = Provider(rawValue: providerText), let intent = Intent(rawValue: intentText),
            let fulfilment = Fulfilment(rawValue: fulfilmentText)
        else {
            throw PostgresError.decoding("orders row has an unknown provider, intent or fulfilment")
        }
        let merchant = try row.string("merchant"), site = try row.string("site")
        var order = Order(
            provider: provider, orderID: try row.string("order_id"), merchant: merchant.isEmpty ? nil : merchant,
            site: site.isEmpty ? nil : site, transactionRef: try row.string("transaction_ref"), intent: intent,
            amount: Money(minorUnits: try row.int64("amount_minor"), currency: currency), fulfilment: fulfilment,
            refundAmount: try row.int64("refund_amount_minor"), transactionRefs: try row.optionalString("transaction_refs").map(refs))
        if let learned = try row.optionalString("learned_transactions") { order.learned = try Self.learned(learned) }
        if let start = try row.optionalInt64("period_start_s"), let end = try row.optionalInt64("period_end_s") {
            order.period = BillingPeriod(start: start, end: end, datesOnly: try row.optionalBool("period_dates") ?? false)
        }
        return order
    }
}
