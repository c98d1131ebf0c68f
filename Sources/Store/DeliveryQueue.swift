import Foundation
import Postgres
import Reconciliation

/// A stored delivery as the worker and `payrecon events` see it.
public struct QueuedDelivery: Sendable {
    public var id: Int64
    public var provider: Provider
    public var dedupeKey: String
    public var eventType: String?
    public var receivedAt: Date
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var status: String
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    public var redeliveries: Int
    public var processedAt: Date?
    /// What processing came to: the orders re-checked, why it was ignored, or why it died.
    public var outcome: String?
}

/// The worker's queue over `deliveries`: claims with FOR UPDATE SKIP LOCKED under a lease, so several workers on
/// one database never hold the same delivery at once, and a dead worker's deliveries come back when its lease ends.
public enum DeliveryQueue {
    static func columns(_ t: String = "") -> String {
        [
            "id", "provider", "dedupe_key", "event_type", "received_at", "headers::text AS headers", "body", "status", "attempts",
            "next_attempt_at", "last_error", "redeliveries", "processed_at", "outcome"
        ].map { t + $0 }.joined(separator: ", ")
    }

    /// Claims up to `limit` due deliveries for `owner` until `lease` from now.
    public static func claim(owner: String, lease: Duration, limit: Int, on conn: PostgresConnection) throws -> [QueuedDelivery] {
        let rows = try conn.query(
            """
            UPDATE deliveries d SET lease_owner = \(.text(owner)), lease_expires_at = now() + \(.interval(lease)), attempts = d.attempts + 1
            WHERE d.id IN (
                SELECT id FROM deliveries
                WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_expires_at IS NULL OR lease_expires_at < now())
                ORDER BY next_attempt_at, id
                LIMIT \(.int64(Int64(limit)))
                FOR UPDATE SKIP LOCKED)
            RETURNING \(unescaped: columns("d."))
            """)
        return try rows.map(decode)
    }

    /// Extends the lease of deliveries `owner` still holds; returns the ids renewed (held, and not locked by another
    /// transaction at that moment).
    @discardableResult
    public static func renew(ids: [Int64], owner: String, lease: Duration, on conn: PostgresConnection) throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        // SKIP LOCKED: a row another transaction holds is being completed or failed right now, and renewing every
        // held row while a completion flush locks some of them, each in its own order, deadlocked (40P01).
        return try conn.query(
            """
            UPDATE deliveries d SET lease_expires_at = now() + \(.interval(lease))
            FROM (SELECT id FROM deliveries WHERE id = ANY(\(.int64Array(ids))) AND lease_owner = \(.text(owner)) AND status = 'pending'
                  ORDER BY id FOR UPDATE SKIP LOCKED) held
            WHERE d.id = held.id RETURNING d.id
            """
        ).map { try $0.int64("id") }
    }

    /// How a processed delivery ends: `done` (with the orders it re-checked) or `ignored` (with why it names no
    /// payment), and that text.
    public struct Completion: Sendable, Equatable {
        public var id: Int64
        public var status: String
        public var outcome: String
        /// The orders it named (`delivery_orders`, for `payrecon explain`), of `provider` (nil: it named none).
        public var provider: Provider?
        public var orderIDs: [String]
        public init(id: Int64, status: String, outcome: String, provider: Provider? = nil, orderIDs: [String] = []) {
            precondition(status == "done" || status == "ignored", "a processed delivery is done or ignored")
            self.id = id; self.status = status; self.outcome = DeliveryStore.storable(outcome); self.provider = provider;
            self.orderIDs = orderIDs
        }
    }

    /// The pairs (delivery, order) of what a statement completes (its CTE `done`), written by it.
    static func namedOrders(_ completions: [(id: Int64, provider: Provider?, orderIDs: [String])]) -> SQL {
        let rows = completions.flatMap { c in c.provider.map { p in c.orderIDs.map { (c.id, p.rawValue, $0) } } ?? [] }
        return """
            named AS (INSERT INTO delivery_orders (delivery_id, provider, order_id)
                      SELECT p.id, p.provider, p.order_id
                      FROM unnest(\(.int64Array(rows.map(\.0)))::bigint[], \(.textArray(rows.map(\.1)))::text[], \(.textArray(rows.map(\.2)))::text[])
                           AS p(id, provider, order_id)
                      WHERE p.id IN (SELECT id FROM done) ON CONFLICT DO NOTHING)
            """
    }

    /// Marks the delivery done, if `owner` still holds it. False when the lease was lost (another worker has it).
    public static func complete(id: Int64, owner: String, outcome: String = "", on conn: PostgresConnection) throws -> Bool {
        try complete([Completion(id: id, status: "done", outcome: outcome)], owner: owner, on: conn) == [id]
    }

    /// Ends many processed deliveries in one statement (the worker batches its completions); returns the ids
    /// `owner` still held, i.e. the ones it completed.
    public static func complete(_ completions: [Completion], owner: String, on conn: PostgresConnection) throws -> [Int64] {
        guard !completions.isEmpty else { return [] }
        // The orders each delivery named go in with it (only for the deliveries this owner still held).
        return try conn.query(
            """
            WITH done AS (
                UPDATE deliveries d SET status = c.status, outcome = c.outcome, processed_at = now(), lease_owner = NULL,
                    lease_expires_at = NULL, last_error = NULL
                FROM unnest(\(.int64Array(completions.map(\.id)))::bigint[], \(.textArray(completions.map(\.status)))::text[], \(.textArray(completions.map(\.outcome)))::text[]) AS c(id, status, outcome)
                WHERE d.id = c.id AND d.lease_owner = \(.text(owner)) AND d.status = 'pending' RETURNING d.id),
            \(namedOrders(completions.map { ($0.id, $0.provider, $0.orderIDs) }))
            SELECT id FROM done
            """
        )
        .map { try $0.int64("id") }
    }

    /// Schedules another attempt after `delaySeconds`, or marks it dead when `dead`.
    /// `provider`, `orderIDs`: the orders it named (so far), kept with it.
    public static func fail(
        id: Int64, owner: String, error: String, retryAfter: Duration?, provider: Provider? = nil, orderIDs: [String] = [],
        on conn: PostgresConnection
    ) throws -> Bool {
        let error = DeliveryStore.storable(error)
        let named = namedOrders([(id, provider, orderIDs)])
        if let delay = retryAfter {
            return try !conn.query(
                """
                WITH done AS (
                    UPDATE deliveries SET next_attempt_at = now() + \(.interval(delay)), last_error = \(.text(error)),
                        lease_owner = NULL, lease_expires_at = NULL
                    WHERE id = \(.int64(id)) AND lease_owner = \(.text(owner)) AND status = 'pending' RETURNING id),
                \(named)
                SELECT id FROM done
                """
            ).isEmpty
        }
        return try !conn.query(
            """
            WITH done AS (
                UPDATE deliveries SET status = 'dead', last_error = \(.text(error)), outcome = \(.text(error)), processed_at = now(), lease_owner = NULL,
                    lease_expires_at = NULL
                WHERE id = \(.int64(id)) AND lease_owner = \(.text(owner)) AND status = 'pending' RETURNING id),
            \(named)
            SELECT id FROM done
            """
        ).isEmpty
    }

    public static func list(status: String?, limit: Int, on conn: PostgresConnection) throws -> [QueuedDelivery] {
        try conn.query(
            """
            SELECT \(unescaped: columns()) FROM deliveries WHERE (\(status.map { .text($0) } ?? .null)::text IS NULL OR status = \(status.map { .text($0) } ?? .null)) ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(decode)
    }

    /// The provider's most recently stored delivery that the provider sent (`payrecon doctor` checks the certificate
    /// it names): an event `payrecon backfill` read from the provider's own list (its only header `payrecon-source`)
    /// was never delivered, and names no certificate.
    public static func latest(provider: Provider, on conn: PostgresConnection) throws -> QueuedDelivery? {
        try conn.query(
            """
            SELECT \(unescaped: columns()) FROM deliveries WHERE provider = \(.text(provider.rawValue)) AND NOT headers @> \(.text(#"[["payrecon-source"]]"#))::jsonb ORDER BY id DESC LIMIT 1
            """
        ).first.map(decode)
    }

    public static func find(id: Int64, on conn: PostgresConnection) throws -> QueuedDelivery? {
        try conn.query("SELECT \(unescaped: columns()) FROM deliveries WHERE id = \(.int64(id))").first.map(decode)
    }

    /// Makes every pending delivery waiting for a retry due now (no worker holds it), and wakes the workers: after the
    /// cause of its failures is fixed (a provider secret re-read on SIGHUP), it need not wait out its backoff. Its
    /// attempts are kept. Returns how many.
    public static func dueNow(on conn: PostgresConnection) throws -> Int {
        let n = try conn.execute(
            """
            UPDATE deliveries SET next_attempt_at = now()
            WHERE status = 'pending' AND attempts > 0 AND next_attempt_at > now() AND (lease_expires_at IS NULL OR lease_expires_at < now())
            """)
        if n > 0 { _ = try conn.execute("SELECT pg_notify(\(.text(DeliveryStore.channel)), '')") }
        return n
    }

    /// Makes dead (or done) deliveries due again with a fresh attempt budget (a pending one waiting for its backoff
    /// becomes due now). Returns how many. A delivery a worker holds right now is left alone: taking its lease
    /// away would let a second worker process it at the same time.
    /// `onlyDead`: that delivery only if it is dead (the console's retry, which leaves a done one as it is).
    public static func retry(id: Int64?, onlyDead: Bool = false, on conn: PostgresConnection) throws -> Int {
        if let id {
            let which: SQL =
                onlyDead ? "status = 'dead'" : "NOT (status = 'pending' AND lease_expires_at IS NOT NULL AND lease_expires_at >= now())"
            return try conn.execute(
                """
                UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL
                WHERE id = \(.int64(id)) AND \(which)
                """)
        }
        return try conn.execute(
            """
            UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL
            WHERE status = 'dead'
            """)
    }

    /// Seconds until the next delivery is due (nil when none is pending): the worker sleeps that long at most.
    public static func secondsUntilNextDue(on conn: PostgresConnection) throws -> Double? {
        let row = try conn.query(
            """
            SELECT extract(epoch FROM (min(greatest(next_attempt_at, coalesce(lease_expires_at, next_attempt_at))) - now()))::text AS s
            FROM deliveries WHERE status = 'pending'
            """
        ).first
        guard let s = try row?.optionalString("s") else { return nil }
        return max(0, Double(s) ?? 0)
    }

    static func decode(_ row: PostgresRow) throws -> QueuedDelivery {
        let name = try row.string("provider")
        guard let provider = Provider(rawValue: name) else {
            throw PostgresError.decoding("deliveries row \(try row.int64("id")) has provider '\(name)', which this payrecon does not know")
        }
        return QueuedDelivery(
            id: try row.int64("id"), provider: provider, dedupeKey: try row.string("dedupe_key"),
            eventType: try row.optionalString("event_type"), receivedAt: try row.date("received_at"),
            headers: decodeHeaders(try row.string("headers")), body: try row.bytes("body"), status: try row.string("status"),
            attempts: Int(try row.int64("attempts")), nextAttemptAt: try row.date("next_attempt_at"),
            lastError: try row.optionalString("last_error"), redeliveries: Int(try row.int64("redeliveries")),
            processedAt: try row.optionalDate("processed_at"), outcome: try row.optionalString("outcome"))
    }

    static func decodeHeaders(_ json: String) -> [(String, String)] {
        guard let array = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String]] else { return [] }
        return array.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }
}
