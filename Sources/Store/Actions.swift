import Foundation
import Postgres
import Reconciliation

/// A row of the action outbox.
public struct StoredAction: Sendable {
    public var id: Int64
    public var provider: Provider
    public var orderID: String
    public var kind: ActionKind
    public var amount: Money
    public var target: Int64
    public var providerTarget: String?
    public var idempotencyKey: String
    public var status: ActionStatus
    public var attempts: Int
    public var lastError: String?
    public var providerRef: String?
    public var createdAt: Date
    /// Its last call may have reached the provider, outcome unknown (sql/0014).
    public var inDoubt: Bool = false
    /// With several transactions, the one it acts on.
    public var transactionRef: String? = nil
    /// When its last call was sent (nil: never).
    public var sentAt: Date? = nil
}

/// The outbox: `payrecon actions execute` (or the worker with PAYRECON_ACTIONS=execute) claims pending actions under
/// a lease and records each outcome; the idempotency key goes to the provider, so a retry after a crash is a no-op there.
public enum ActionStore {
    static let columns =
        "id, provider, order_id, action, amount_minor, currency, target_minor, provider_target, idempotency_key, status, attempts, last_error, provider_ref, created_at, in_doubt, transaction_ref, sent_at"

    /// Leases up to `limit` pending actions after `afterID`, in id order: an executor leases only what it is about to
    /// run (a pass walks the outbox forward, so it never holds an action it already tried while it runs others).
    public static func claimPending(
        lease: Duration, limit: Int, after afterID: Int64 = 0, on conn: PostgresConnection
    ) throws -> [StoredAction] {
        try conn.query(
            """
            UPDATE actions SET lease_expires_at = now() + \(.interval(lease)), attempts = attempts + 1, updated_at = now()
            WHERE id IN (SELECT id FROM actions WHERE status = 'pending' AND id > \(.int64(afterID)) AND (lease_expires_at IS NULL OR lease_expires_at < now())
                         ORDER BY id LIMIT \(.int64(Int64(limit))) FOR UPDATE SKIP LOCKED)
            RETURNING \(unescaped: columns)
            """
        ).map(decode)
    }

    /// Records the outcome, if `attempt` still holds the action (its claim's attempt number and a live lease):
    /// an executor that lost its lease records nothing. `status` pending keeps it for another try. False when the
    /// fence refused the write.
    /// `inDoubt`: whether the call may have reached the provider with its outcome unknown (nil keeps what is
    /// recorded: an attempt that sent nothing changes nothing about an earlier call).
    /// `notBefore`: a pending action is not claimed again for that long (a call refused with 429 waits for its
    /// Retry-After).
    @discardableResult
    public static func finish(
        id: Int64, attempt: Int, status: ActionStatus, providerRef: String?, error: String?,
        inDoubt: Bool? = nil, notBefore: Duration? = nil, on conn: PostgresConnection
    ) throws -> Bool {
        try conn.execute(
            """
            UPDATE actions SET status = \(.text(status.rawValue)), provider_ref = coalesce(\(providerRef.map { .text($0) } ?? .null), provider_ref), last_error = \(error.map { .text(DeliveryStore.storable($0)) } ?? .null),
                lease_expires_at = CASE WHEN \(.text(status.rawValue)) = 'pending' AND \(notBefore.map { .interval($0) } ?? .null)::interval IS NOT NULL THEN now() + \(notBefore.map { .interval($0) } ?? .null)::interval END,
                in_doubt = coalesce(\(inDoubt.map { .bool($0) } ?? .null), in_doubt), updated_at = now()
            WHERE id = \(.int64(id)) AND attempts = \(.int64(Int64(attempt))) AND status = 'pending' AND lease_expires_at >= now()
            """) == 1
    }

    /// `payrecon actions retry`: a failed action the fresh plan still wants is pending again, with the plan's amount
    /// and currency, and no longer in doubt (the operator checked the provider). False when it is not failed.
    /// `attempts`: the attempt the retry re-planned; an action tried again meanwhile is left as it is.
    public static func retry(
        id: Int64, attempts: Int, amount: Int64, currency: String, providerTarget: String?, on conn: PostgresConnection
    ) throws -> Bool {
        try conn.execute(
            """
            UPDATE actions SET status = 'pending', amount_minor = \(.int64(amount)), currency = \(.text(currency)), provider_target = \(providerTarget.map { .text($0) } ?? .null), in_doubt = false,
                last_error = 'retried by an operator after: ' || coalesce(last_error, 'no answer recorded'), lease_expires_at = NULL, updated_at = now()
            WHERE id = \(.int64(id)) AND status = 'failed' AND attempts = \(.int64(Int64(attempts)))
            """) == 1
    }

    /// A failed action the fresh plan no longer wants: superseded (its action_failed finding resolves on the next check).
    /// `attempts`: the attempt re-planned, when a retry re-planned it (an action tried again meanwhile is left alone).
    public static func retire(id: Int64, attempts: Int? = nil, reason: String, on conn: PostgresConnection) throws -> Bool {
        try conn.execute(
            """
            UPDATE actions SET status = 'superseded', in_doubt = false, last_error = \(.text(DeliveryStore.storable(reason))), updated_at = now()
            WHERE id = \(.int64(id)) AND status = 'failed' AND (\(attempts.map { .int64(Int64($0)) } ?? .null)::bigint IS NULL OR attempts = \(attempts.map { .int64(Int64($0)) } ?? .null))
            """) == 1
    }

    public static func find(id: Int64, on conn: PostgresConnection) throws -> StoredAction? {
        try conn.query("SELECT \(unescaped: columns) FROM actions WHERE id = \(.int64(id))").first.map(decode)
    }

    /// Extends the lease of an action while its call is in flight; false when `attempt` no longer holds it.
    public static func renew(id: Int64, attempt: Int, lease: Duration, on conn: PostgresConnection) throws -> Bool {
        try conn.execute(
            """
            UPDATE actions SET lease_expires_at = now() + \(.interval(lease))
            WHERE id = \(.int64(id)) AND attempts = \(.int64(Int64(attempt))) AND status = 'pending' AND lease_expires_at >= now()
            """) == 1
    }

    /// Just before the call: records the amount and target the fresh plan gives and extends the lease; false when
    /// `attempt` lost the action, or when its key was sent before with another amount or target (a key once sent is
    /// sent again only as it was first sent): then nothing may be sent.
    /// From here on the call may reach the provider: the action is in doubt until its outcome is recorded.
    public static func confirm(
        id: Int64, attempt: Int, amount: Int64, providerTarget: String?, lease: Duration,
        on conn: PostgresConnection
    ) throws -> Bool {
        try conn.execute(
            """
            UPDATE actions SET amount_minor = \(.int64(amount)), provider_target = \(providerTarget.map { .text($0) } ?? .null), lease_expires_at = now() + \(.interval(lease)),
                in_doubt = true, sent_at = now(), updated_at = now()
            WHERE id = \(.int64(id)) AND attempts = \(.int64(Int64(attempt))) AND status = 'pending' AND lease_expires_at >= now()
              AND (sent_at IS NULL OR (amount_minor = \(.int64(amount)) AND provider_target IS NOT DISTINCT FROM \(providerTarget.map { .text($0) } ?? .null)))
            """) == 1
    }

    public static func list(status: ActionStatus?, limit: Int, on conn: PostgresConnection) throws -> [StoredAction] {
        try conn.query(
            "SELECT \(unescaped: columns) FROM actions WHERE (\(status.map { .text($0.rawValue) } ?? .null)::text IS NULL OR status = \(status.map { .text($0.rawValue) } ?? .null)) ORDER BY id LIMIT \(.int64(Int64(limit)))"
        ).map(decode)
    }

    static func decode(_ row: PostgresRow) throws -> StoredAction {
        let code = try row.string("currency")
        guard let currency = Currency(code: code), let provider = Provider(rawValue: try row.string("provider")),
            let kind = ActionKind(rawValue: try row.string("action")), let status = ActionStatus(rawValue: try row.string("status"))
        else {
            throw PostgresError.decoding("actions row \(try row.int64("id")) has an unknown provider, action, status or currency")
        }
        return StoredAction(
            id: try row.int64("id"), provider: provider, orderID: try row.string("order_id"), kind: kind,
            amount: Money(minorUnits: try row.int64("amount_minor"), currency: currency),
            target: try row.int64("target_minor"), providerTarget: try row.optionalString("provider_target"),
            idempotencyKey: try row.string("idempotency_key"), status: status, attempts: Int(try row.int64("attempts")),
            lastError: try row.optionalString("last_error"), providerRef: try row.optionalString("provider_ref"),
            createdAt: try row.date("created_at"), inDoubt: try row.bool("in_doubt"),
            transactionRef: try row.optionalString("transaction_ref"), sentAt: try row.optionalDate("sent_at"))
    }
}

/// One row per `payrecon reconcile`.
public enum RunStore {
    public struct Totals: Sendable, Equatable {
        public var checked = 0, matched = 0, opened = 0, resolved = 0, actionsEmitted = 0, errors = 0
        public init() {}
    }

    public static func start(options: String, on conn: PostgresConnection) throws -> Int64 {
        try conn.query("INSERT INTO runs (options) VALUES (\(.jsonb(options))::jsonb) RETURNING id").first!.int64("id")
    }

    public static func finish(id: Int64, totals: Totals, errors: [String], exitCode: Int32, on conn: PostgresConnection) throws {
        let list =
            (try? JSONSerialization.data(withJSONObject: errors.prefix(1000).map(DeliveryStore.storable)))
            .map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        _ = try conn.execute(
            """
            UPDATE runs SET finished_at = now(), checked = \(.int64(Int64(totals.checked))), matched = \(.int64(Int64(totals.matched))), opened = \(.int64(Int64(totals.opened))), resolved = \(.int64(Int64(totals.resolved))), actions_emitted = \(.int64(Int64(totals.actionsEmitted))),
                errors = \(.int64(Int64(totals.errors))), error_list = \(.jsonb(list))::jsonb, exit_code = \(.int64(Int64(exitCode))),
                at_risk = (SELECT coalesce(jsonb_object_agg(currency, at_risk::text), '{}'::jsonb)
                           FROM (\(ReportStore.atRiskByCurrency(DiscrepancyFilter()))) t WHERE at_risk <> 0)
            WHERE id = \(.int64(id))
            """)
    }
}
