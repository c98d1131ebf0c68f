import Foundation
import Postgres
import Reconciliation

/// `transaction_links`: provider transactions linked to orders (modifications payrecon made, aliases it learned).
public enum TransactionLinkStore {
    static let columns =
        "order_id, external_id, parent_external_id, kind, amount_minor, currency, state, source, action_id, target_minor, "
        + "extract(epoch FROM occurred_at)::bigint AS occurred_s"

    /// Records `links` of `provider`'s transactions; a link already known gets the newer state.
    public static func record(_ links: [TransactionLink], provider: Provider, on conn: PostgresConnection) throws {
        for link in links { _ = try conn.execute(upsert(link, provider: provider)) }
    }

    static func upsert(_ l: TransactionLink, provider: Provider) -> SQL {
        """
        INSERT INTO transaction_links (provider, external_id, parent_external_id, order_id, kind, amount_minor, currency, state, source, action_id,
                                       target_minor, occurred_at)
        VALUES (\(.text(provider.rawValue)), \(.text(l.externalID)), \(l.parentExternalID.map { .text($0) } ?? .null),
                \(l.orderID.map { .text($0) } ?? .null), \(.text(l.kind.rawValue)), \(l.amount.map { .int64($0) } ?? .null),
                \(l.currency.map { .text($0) } ?? .null), \(l.state.map { .text($0) } ?? .null), \(.text(l.source.rawValue)),
                \(l.actionID.map { .int64($0) } ?? .null), \(l.target.map { .int64($0) } ?? .null),
                to_timestamp(\(l.occurredAt.map { .int64($0) } ?? .null)::bigint))
        ON CONFLICT (provider, external_id, (coalesce(order_id, ''))) DO UPDATE
            SET state = coalesce(EXCLUDED.state, transaction_links.state),
                parent_external_id = coalesce(transaction_links.parent_external_id, EXCLUDED.parent_external_id),
                amount_minor = coalesce(EXCLUDED.amount_minor, transaction_links.amount_minor),
                target_minor = coalesce(EXCLUDED.target_minor, transaction_links.target_minor),
                occurred_at = coalesce(EXCLUDED.occurred_at, transaction_links.occurred_at), updated_at = now()
        """
    }

    /// The aliases of an order's transaction, in one statement (recorded with every check that fetched it).
    static func recordAliases(_ aliases: [String], provider: Provider, orderID: String) -> SQL {
        SQL(
            """
            INSERT INTO transaction_links (provider, external_id, order_id, kind, source)
            SELECT \(.text(provider.rawValue)), a, \(.text(orderID)), 'alias', 'learned' FROM unnest(\(.textArray(aliases))::text[]) AS a WHERE a <> ''
            ON CONFLICT DO NOTHING
            """)
    }

    /// The links of many orders of one provider, by order id, oldest first: each order's own; for an order with a
    /// billing period, the subscription's sales kept with no order that its period holds (recorded before the order
    /// was, or while it was imported); and the refunds, reversals and disputes of those sales wherever they were
    /// recorded (a sale counts on the order whose period holds it, and its refunds with it, whichever order or none an
    /// earlier event linked them to). Each link once per order (`kind`, `externalID`), the order's own first; a
    /// link keeps the `orderID` it was recorded with.
    public static func links(provider: Provider, orderIDs: [String], on conn: PostgresConnection) throws -> [String: [TransactionLink]] {
        var out: [String: [TransactionLink]] = [:]
        var seen = Set<[String]>()
        for row in try conn.query(
            """
            WITH own AS (
                SELECT l.order_id AS for_order, 0 AS rank, l.* FROM transaction_links l WHERE l.provider = \(.text(provider.rawValue)) AND l.order_id = ANY(\(.textArray(orderIDs)))
            ), unheld AS (
                SELECT o.order_id AS for_order, 1 AS rank, l.* FROM orders o
                JOIN transaction_links l ON l.provider = o.provider AND l.order_id IS NULL AND l.kind = 'sale'
                    AND l.parent_external_id = o.transaction_ref AND l.occurred_at >= o.period_start AND l.occurred_at < o.period_end
                WHERE o.provider = \(.text(provider.rawValue)) AND o.order_id = ANY(\(.textArray(orderIDs))) AND o.period_start IS NOT NULL
            ), sales AS (
                SELECT for_order, external_id FROM own WHERE kind = 'sale' UNION SELECT for_order, external_id FROM unheld
            ), children AS (
                SELECT s.for_order, 2 AS rank, l.* FROM sales s
                JOIN transaction_links l ON l.provider = \(.text(provider.rawValue)) AND l.parent_external_id = s.external_id AND l.order_id IS DISTINCT FROM s.for_order
            )
            SELECT for_order, \(unescaped: columns) FROM (SELECT * FROM own UNION ALL SELECT * FROM unheld UNION ALL SELECT * FROM children) x
            ORDER BY for_order, rank, created_at, id
            """)
        {
            let order = try row.string("for_order")
            let link = try decode(row)
            guard seen.insert([order, link.kind.rawValue, link.externalID]).inserted else { continue }
            out[order, default: []].append(link)
        }
        return out
    }

    /// Links of `provider`'s calls that succeeded (any order), newest first, with their order's merchant and site:
    /// evidence a provider may look up when it must know whether its lookups can be trusted (`TransactionQuery.evidence`).
    public static func succeededCallLinks(
        provider: Provider, limit: Int, on conn: PostgresConnection
    ) throws
        -> [(link: TransactionLink, merchant: String?, site: String?)]
    {
        try conn.query(
            """
            SELECT l.order_id, l.external_id, l.parent_external_id, l.kind, l.amount_minor, l.currency, l.state, l.source, l.action_id,
                   l.target_minor, extract(epoch FROM l.occurred_at)::bigint AS occurred_s,
                   o.merchant AS order_merchant, o.site AS order_site
            FROM transaction_links l
            JOIN actions a ON a.id = l.action_id AND a.status = 'succeeded'
            JOIN orders o ON o.provider = l.provider AND o.order_id = l.order_id
            WHERE l.provider = \(.text(provider.rawValue)) AND l.source = 'payrecon'
            ORDER BY l.id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map { row in
            (try decode(row), try row.optionalString("order_merchant"), try row.optionalString("order_site"))
        }
    }

    /// The orders a link names by `externalID` (an alias or a modification's own id).
    public static func orders(provider: Provider, externalID: String, on conn: PostgresConnection) throws -> [Order] {
        try conn.query(
            """
            SELECT \(unescaped: OrderStore.selectColumns)
            FROM orders o JOIN transaction_links l ON l.provider = o.provider AND l.order_id = o.order_id
            WHERE l.provider = \(.text(provider.rawValue)) AND l.external_id = \(.text(externalID))
            GROUP BY o.provider, o.order_id ORDER BY o.order_id
            """
        ).map(OrderStore.decode)
    }

    static func kind(_ text: String) throws -> TransactionLink.Kind {
        guard let kind = TransactionLink.Kind(rawValue: text) else {
            throw PostgresError.decoding("transaction_links.kind '\(text)' is none this payrecon knows (a newer version wrote it?)")
        }
        return kind
    }

    static func decode(_ row: PostgresRow) throws -> TransactionLink {
        let sourceText = try row.string("source")
        guard let source = TransactionLink.Source(rawValue: sourceText) else {
            throw PostgresError.decoding("transaction_links.source '\(sourceText)' is neither payrecon nor learned")
        }
        return TransactionLink(
            externalID: try row.string("external_id"), parentExternalID: try row.optionalString("parent_external_id"),
            orderID: try row.optionalString("order_id"), kind: try kind(row.string("kind")),
            amount: try row.optionalInt64("amount_minor"), currency: try row.optionalString("currency"),
            state: try row.optionalString("state"), source: source, actionID: try row.optionalInt64("action_id"),
            target: try row.optionalInt64("target_minor"), occurredAt: try row.optionalInt64("occurred_s"))
    }
}
