import Foundation
import Postgres
import Reconciliation

/// `webhook_material`: what verifying webhooks taught a receiver and keeps across restarts (PayPal's signing
/// certificates, by URL), each until its own `keep_until`. `payrecon prune` removes what is past it.
public enum WebhookMaterial {
    /// At most this many items per provider are read at start (the newest).
    public static let loadLimit = 512

    public static func load(_ provider: Provider, on conn: PostgresConnection) throws -> [(key: String, value: [UInt8])] {
        try conn.query(
            """
            SELECT key, value FROM webhook_material WHERE provider = \(.text(provider.rawValue)) AND keep_until > now()
            ORDER BY saved_at DESC LIMIT \(.int64(Int64(loadLimit)))
            """
        ).map { (key: try $0.string("key"), value: try $0.bytes("value")) }
    }

    /// `saved_at` is set by the table's trigger (sql/0023), never by the writer.
    public static func save(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date, on conn: PostgresConnection) throws {
        try conn.execute(
            """
            INSERT INTO webhook_material (provider, key, value, keep_until) VALUES (\(.text(provider.rawValue)), \(.text(key)), \(.bytea(value)), \(.timestamptz(keepUntil)))
            ON CONFLICT (provider, key) DO UPDATE SET value = excluded.value, keep_until = excluded.keep_until
            """)
    }
}
