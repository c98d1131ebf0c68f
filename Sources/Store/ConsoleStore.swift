import Foundation
import Postgres
import Reconciliation

/// A signed-in person's session, as the console reads it on each request.
public struct ConsoleSession: Sendable, Equatable {
    public var userName: String
    public var role: String
    /// The token every form of this session carries back (a write without it is refused).
    public var csrfToken: String
    /// A fingerprint of the password hash the session was opened with: a new password ends the session.
    public var credential: String
    public init(userName: String, role: String, csrfToken: String, credential: String) {
        self.userName = userName; self.role = role; self.csrfToken = csrfToken; self.credential = credential
    }
}

/// One line of the console's audit trail.
public struct ConsoleAuditEntry: Sendable, Equatable {
    public var id: Int64
    public var at: Date
    public var userName: String
    public var address: String?
    public var action: String
    public var target: String?
    public var detail: String?
}

/// The SQL of `payrecon console`: sessions (kept under their token's hash), the audit trail, and what its pages read
/// beyond the report's queries.
public enum ConsoleStore {
    /// Starts a session; sessions unused for a day, or older than two, are deleted on the way.
    public static func createSession(
        tokenSHA256: [UInt8], session: ConsoleSession, address: String?, on conn: PostgresConnection
    ) throws {
        try conn.transaction { tx in
            _ = try tx.execute(
                "DELETE FROM console_sessions WHERE last_seen < now() - interval '1 day' OR created_at < now() - interval '2 days'")
            _ = try tx.execute(
                """
                INSERT INTO console_sessions (token_sha256, user_name, role, csrf_token, credential, address)
                VALUES (\(.bytea(tokenSHA256)), \(.text(session.userName)), \(.text(session.role)), \(.text(session.csrfToken)),
                        \(.text(session.credential)), \(address.map { .text(DeliveryStore.storable($0)) } ?? .null))
                """)
        }
    }

    /// The session of a token, if it exists, was used within `idle` and began within `maxAge`; using it
    /// moves its `last_seen` unless `touch` is false (the overview's refresh: a page left open is not a person using
    /// it, and must not keep the session from ending).
    public static func session(
        tokenSHA256: [UInt8], idle: Duration, maxAge: Duration, touch: Bool = true, on conn: PostgresConnection
    ) throws -> ConsoleSession? {
        let alive: SQL = """
            token_sha256 = \(.bytea(tokenSHA256)) AND last_seen >= now() - \(.interval(idle))
              AND created_at >= now() - \(.interval(maxAge))
            """
        let statement: SQL =
            touch
            ? "UPDATE console_sessions SET last_seen = now() WHERE \(alive) RETURNING user_name, role, csrf_token, credential"
            : "SELECT user_name, role, csrf_token, credential FROM console_sessions WHERE \(alive)"
        return try conn.query(statement).first.map { row in
            ConsoleSession(
                userName: try row.string("user_name"), role: try row.string("role"), csrfToken: try row.string("csrf_token"),
                credential: try row.string("credential"))
        }
    }

    public static func endSession(tokenSHA256: [UInt8], on conn: PostgresConnection) throws {
        _ = try conn.execute("DELETE FROM console_sessions WHERE token_sha256 = \(.bytea(tokenSHA256))")
    }

    /// Records what `user` did; in the caller's transaction when it has one, so the record and the write commit together.
    /// Returns the record's id.
    @discardableResult
    public static func audit(
        user: String, address: String?, action: String, target: String?, detail: String?, on conn: PostgresConnection
    ) throws -> Int64 {
        try conn.query(
            """
            INSERT INTO console_audit (user_name, address, action, target, detail)
            VALUES (\(.text(DeliveryStore.storable(user))), \(address.map { .text(DeliveryStore.storable($0)) } ?? .null),
                    \(.text(action)), \(target.map { .text($0) } ?? .null), \(detail.map { .text(DeliveryStore.storable($0)) } ?? .null))
            RETURNING id
            """
        ).first!.int64("id")
    }

    /// Says what came of a write recorded before it ran (an action's retry, which the executor makes).
    public static func completeAudit(_ id: Int64, detail: String, on conn: PostgresConnection) throws {
        _ = try conn.execute("UPDATE console_audit SET detail = \(.text(DeliveryStore.storable(detail))) WHERE id = \(.int64(id))")
    }

    /// The audit trail of `target` (`discrepancy 12`), oldest first.
    public static func audit(of target: String, on conn: PostgresConnection) throws -> [ConsoleAuditEntry] {
        try conn.query(
            "SELECT id, at, user_name, address, action, target, detail FROM console_audit WHERE target = \(.text(target)) ORDER BY id"
        ).map { row in
            ConsoleAuditEntry(
                id: try row.int64("id"), at: try row.date("at"), userName: try row.string("user_name"),
                address: try row.optionalString("address"),
                action: try row.string("action"), target: try row.optionalString("target"), detail: try row.optionalString("detail"))
        }
    }

    /// Acknowledges an open discrepancy for `user` and records it, in one transaction.
    public static func acknowledge(
        id: Int64, note: String?, user: String, address: String?, on conn: PostgresConnection
    ) throws -> (acknowledged: Bool, status: String?) {
        try conn.transaction { tx in
            let result = try FindingStore.acknowledge(id: id, note: note, by: user, on: tx)
            if result.acknowledged {
                try audit(user: user, address: address, action: "acknowledge", target: "discrepancy \(id)", detail: note, on: tx)
            }
            return result
        }
    }

    /// Actions by state, for the overview: pending (not in doubt), in doubt, failed.
    public static func actionCounts(on conn: PostgresConnection) throws -> (pending: Int, inDoubt: Int, failed: Int) {
        guard
            let row = try conn.query(
                """
                SELECT count(*) FILTER (WHERE status = 'pending' AND NOT in_doubt) AS pending,
                       count(*) FILTER (WHERE in_doubt AND status IN ('pending', 'failed')) AS in_doubt,
                       count(*) FILTER (WHERE status = 'failed') AS failed
                FROM actions WHERE status IN ('pending', 'failed')
                """
            ).first
        else { return (0, 0, 0) }
        return (Int(try row.int64("pending")), Int(try row.int64("in_doubt")), Int(try row.int64("failed")))
    }

    /// A page of discrepancies, newest first, matching the filter and `search` (an order id or a transaction reference,
    /// exactly), before the id `before` (keyset: the next page starts where this one ended).
    public static func discrepancyPage(
        _ filter: DiscrepancyFilter, search: String?, before: Int64?, limit: Int, on conn: PostgresConnection
    ) throws -> [StoredDiscrepancy] {
        let searched: SQL = search.map { "AND (order_id = \(.text($0)) OR transaction_ref = \(.text($0)))" } ?? ""
        let after: SQL = before.map { "AND id < \(.int64($0))" } ?? ""
        return try conn.query(
            """
            SELECT \(unescaped: ReportStore.discrepancyColumns) FROM discrepancies
            WHERE \(ReportStore.filterClause(filter, status: filter.status)) \(searched) \(after)
            ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(ReportStore.decode)
    }
}
