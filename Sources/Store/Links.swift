import Foundation
import Postgres
import Reconciliation

/// `transaction_links`: provider transactions linked to orders (modifications payrecon made, aliases it learned).
public enum TransactionLinkStore {
    static let columns = "order_id, external_id, parent_external_id, kind, amount_minor, currency, state, source, action_id, target_minor, "
        + "extract(epoch FROM occurred_at)::bigint AS occurred_s"

    /// Records `links` of `provider`'s transactions; a link already known gets the newer state.
    public static func record(_ links: [TransactionLink], provider: Provider, on conn: PostgresConnection) throws {
        for link in links { _ = try conn.execute(upsert, parameters(link, provider: provider)) }
    }

    static let upsert = """
        INSERT INTO transaction_links (provider, external_id, parent_external_id, order_id, kind, amount_minor, currency, state, source, action_id,
                                       target_minor, occurred_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12::bigint))
        ON CONFLICT (provider, external_id, (coalesce(order_id, ''))) DO UPDATE
            SET state = coalesce(EXCLUDED.state, transaction_links.state),
                amount_minor = coalesce(EXCLUDED.amount_minor, transaction_links.amount_minor),
                target_minor = coalesce(EXCLUDED.target_minor, transaction_links.target_minor),
                occurred_at = coalesce(EXCLUDED.occurred_at, transaction_links.occurred_at), updated_at = now()
        """

    static func parameters(_ l: TransactionLink, provider: Provider) -> [PostgresValue] {
        [.text(provider.rawValue), .text(l.externalID), l.parentExternalID.map { .text($0) } ?? .null, l.orderID.map { .text($0) } ?? .null,
         .text(l.kind), l.amount.map { .int64($0) } ?? .null, l.currency.map { .text($0) } ?? .null, l.state.map { .text($0) } ?? .null,
         .text(l.source.rawValue), l.actionID.map { .int64($0) } ?? .null, l.target.map { .int64($0) } ?? .null,
         l.occurredAt.map { .int64($0) } ?? .null]
    }

    /// The aliases of an order's transaction, in one statement (recorded with every check that fetched it).
    static func recordAliases(_ aliases: [String], provider: Provider, orderID: String) -> PostgresStatement {
        PostgresStatement("""
            INSERT INTO transaction_links (provider, external_id, order_id, kind, source)
            SELECT $1, a, $2, 'alias', 'learned' FROM unnest($3::text[]) AS a WHERE a <> ''
            ON CONFLICT DO NOTHING
            """, [.text(provider.rawValue), .text(orderID), .textArray(aliases)])
    }

    /// The links of many orders of one provider, by order id, oldest first.
    public static func links(provider: Provider, orderIDs: [String], on conn: PostgresConnection) throws -> [String: [TransactionLink]] {
        var out: [String: [TransactionLink]] = [:]
        for row in try conn.query("""
            SELECT \(columns) FROM transaction_links WHERE provider = $1 AND order_id = ANY($2) ORDER BY created_at, id
            """, [.text(provider.rawValue), .textArray(orderIDs)]) {
            let link = try decode(row)
            out[link.orderID ?? "", default: []].append(link)
        }
        return out
    }

    /// Links of `provider`'s calls that succeeded (any order), newest first, with their order's merchant and site:
    /// evidence a provider may look up when it must know whether its lookups can be trusted (`TransactionQuery.evidence`).
    public static func succeededCallLinks(provider: Provider, limit: Int, on conn: PostgresConnection) throws
        -> [(link: TransactionLink, merchant: String?, site: String?)] {
        try conn.query("""
            SELECT l.order_id, l.external_id, l.parent_external_id, l.kind, l.amount_minor, l.currency, l.state, l.source, l.action_id,
                   l.target_minor, extract(epoch FROM l.occurred_at)::bigint AS occurred_s,
                   o.merchant AS order_merchant, o.site AS order_site
            FROM transaction_links l
            JOIN actions a ON a.id = l.action_id AND a.status = 'succeeded'
            JOIN orders o ON o.provider = l.provider AND o.order_id = l.order_id
            WHERE l.provider = $1 AND l.source = 'payrecon'
            ORDER BY l.id DESC LIMIT $2
            """, [.text(provider.rawValue), .int64(Int64(limit))]).map { row in
            (try decode(row), try row.optionalString("order_merchant"), try row.optionalString("order_site"))
        }
    }

    /// The orders a link names by `externalID` (an alias or a modification's own id).
    public static func orders(provider: Provider, externalID: String, on conn: PostgresConnection) throws -> [Order] {
        try conn.query("""
            SELECT \(OrderStore.selectColumns)
            FROM orders o JOIN transaction_links l ON l.provider = o.provider AND l.order_id = o.order_id
            WHERE l.provider = $1 AND l.external_id = $2
            GROUP BY o.provider, o.order_id ORDER BY o.order_id
            """, [.text(provider.rawValue), .text(externalID)]).map(OrderStore.decode)
    }

    static func decode(_ row: PostgresRow) throws -> TransactionLink {
        let sourceText = try row.string("source")
        guard let source = TransactionLink.Source(rawValue: sourceText) else {
            throw PostgresError.decoding("transaction_links.source '\(sourceText)' is neither payrecon nor learned")
        }
        return TransactionLink(externalID: try row.string("external_id"), parentExternalID: try row.optionalString("parent_external_id"),
                               orderID: try row.optionalString("order_id"), kind: try row.string("kind"),
                               amount: try row.optionalInt64("amount_minor"), currency: try row.optionalString("currency"),
                               state: try row.optionalString("state"), source: source, actionID: try row.optionalInt64("action_id"),
                               target: try row.optionalInt64("target_minor"), occurredAt: try row.optionalInt64("occurred_s"))
    }
}
