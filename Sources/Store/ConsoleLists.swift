import Foundation
import Postgres
import Reconciliation

/// A settlement report file as the console lists it.
public struct SettlementFileRow: Sendable, Equatable {
    public var id: Int64
    public var provider: Provider
    public var name: String
    public var kind: String?
    public var account: String?
    public var day: String?
    public var bodyRows: Int
    public var linesNew: Int
    /// The file's problems, joined with " · " (empty: none).
    public var problems: String
    public var importedAt: Date
}

/// A window of a provider's own records `payrecon backfill` read to the end.
public struct BackfillWindowRow: Sendable, Equatable {
    public var provider: Provider
    public var source: String
    public var start: Date
    public var end: Date
    public var found: Int
    public var requests: Int
    public var finishedAt: Date
}

/// The last `payrecon reconcile` run.
public struct SweepRow: Sendable, Equatable {
    public var id: Int64
    public var startedAt: Date
    public var finishedAt: Date?
    public var checked: Int64
    public var matched: Int64
    public var opened: Int64
    public var resolved: Int64
    public var actionsEmitted: Int64
    public var errors: Int64
}

/// One hour of deliveries by how they ended: stored and done, ignored (a delivery naming nothing payrecon checks),
/// dead (out of attempts), and rejected at the door (counted, never stored).
public struct DeliveryHour: Sendable, Equatable {
    public var hour: Date
    public var done: Int64
    public var ignored: Int64
    public var dead: Int64
    public var pending: Int64
    public var rejected: Int64
}

/// The lists the console's pages read, each a keyset page (newest first, `before` an id) so a page costs the same
/// at the millionth row as at the first.
extension ConsoleStore {
    /// The statuses the actions page filters by: the stored ones, and `in_doubt` (a call whose outcome is unknown).
    public static let actionFilters = ["pending", "in_doubt", "failed", "succeeded", "superseded"]

    public static func actionPage(
        status: String?, provider: Provider?, before: Int64?, limit: Int, on conn: PostgresConnection
    ) throws -> [StoredAction] {
        let byStatus: SQL =
            switch status {
            case "in_doubt"?: "AND in_doubt AND status IN ('pending', 'failed')"
            case let s?: "AND status = \(.text(s))"
            case nil: ""
            }
        let byProvider: SQL = provider.map { "AND provider = \(.text($0.rawValue))" } ?? ""
        let after: SQL = before.map { "AND id < \(.int64($0))" } ?? ""
        return try conn.query(
            """
            SELECT \(unescaped: ActionStore.columns) FROM actions WHERE true \(byStatus) \(byProvider) \(after)
            ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(ActionStore.decode)
    }

    public static func deliveryPage(
        status: String?, provider: Provider?, before: Int64?, limit: Int, on conn: PostgresConnection
    ) throws -> [QueuedDelivery] {
        let byStatus: SQL = status.map { "AND status = \(.text($0))" } ?? ""
        let byProvider: SQL = provider.map { "AND provider = \(.text($0.rawValue))" } ?? ""
        let after: SQL = before.map { "AND id < \(.int64($0))" } ?? ""
        return try conn.query(
            """
            SELECT \(unescaped: DeliveryQueue.columns()) FROM deliveries WHERE true \(byStatus) \(byProvider) \(after)
            ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(DeliveryQueue.decode)
    }

    /// The orders a delivery named (what the worker recorded when it processed it).
    public static func orders(namedBy delivery: Int64, on conn: PostgresConnection) throws -> [(provider: Provider, orderID: String)] {
        try conn.query(
            "SELECT provider, order_id FROM delivery_orders WHERE delivery_id = \(.int64(delivery)) ORDER BY provider, order_id"
        ).map { (try $0.provider("provider"), try $0.string("order_id")) }
    }

    /// A dead delivery is due again with a fresh attempt budget, and the record of who asked commits with it; the
    /// workers are woken. False when it is not dead (done, pending, or no such delivery): nothing changed.
    public static func retryDeadDelivery(id: Int64, user: String, address: String?, on conn: PostgresConnection) throws -> Bool {
        try conn.transaction { tx in
            guard try DeliveryQueue.retry(id: id, onlyDead: true, on: tx) == 1 else { return false }
            try audit(user: user, address: address, action: "retry", target: "delivery \(id)", detail: nil, on: tx)
            _ = try tx.execute("SELECT pg_notify(\(.text(DeliveryStore.channel)), '')")
            return true
        }
    }

    public static func rejectionPage(
        provider: Provider?, reason: String?, before: Int64?, limit: Int, on conn: PostgresConnection
    ) throws -> [RejectionSamples.Sample] {
        let byProvider: SQL = provider.map { "AND provider = \(.text($0.rawValue))" } ?? ""
        let byReason: SQL = reason.map { "AND reason = \(.text($0))" } ?? ""
        let after: SQL = before.map { "AND id < \(.int64($0))" } ?? ""
        return try conn.query(
            """
            SELECT \(unescaped: RejectionSamples.columns)
            FROM rejected_deliveries WHERE true \(byProvider) \(byReason) \(after) ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(RejectionSamples.sample)
    }

    /// Rejections counted in the last `hours` hours, per provider and reason (every one, sampled or not).
    public static func rejectionCounts(
        hours: Int, on conn: PostgresConnection
    ) throws -> [(provider: Provider, reason: String, count: Int64)] {
        try conn.query(
            """
            SELECT provider, reason, sum(count)::bigint AS n FROM rejection_counts
            WHERE hour >= date_trunc('hour', now()) - make_interval(hours => \(.int64(Int64(hours - 1)))::int)
            GROUP BY provider, reason ORDER BY n DESC, provider, reason
            """
        ).map { (try $0.provider("provider"), try $0.string("reason"), try $0.int64("n")) }
    }

    public static func settlementFiles(limit: Int, on conn: PostgresConnection) throws -> [SettlementFileRow] {
        try conn.query(
            """
            SELECT id, provider, name, kind, account, day::text AS day, body_rows, lines_new, array_to_string(problems, ' · ') AS problems, imported_at
            FROM settlement_files ORDER BY id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map { row in
            SettlementFileRow(
                id: try row.int64("id"), provider: try row.provider("provider"), name: try row.string("name"),
                kind: try row.optionalString("kind"), account: try row.optionalString("account"), day: try row.optionalString("day"),
                bodyRows: Int(try row.int64("body_rows")), linesNew: Int(try row.int64("lines_new")),
                problems: try row.string("problems"), importedAt: try row.date("imported_at"))
        }
    }

    public static func backfillWindows(limit: Int, on conn: PostgresConnection) throws -> [BackfillWindowRow] {
        try conn.query(
            """
            SELECT provider, source, window_start, window_end, found, requests, finished_at
            FROM backfill_windows ORDER BY finished_at DESC, window_start DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map { row in
            BackfillWindowRow(
                provider: try row.provider("provider"), source: try row.string("source"), start: try row.date("window_start"),
                end: try row.date("window_end"), found: Int(try row.int64("found")), requests: Int(try row.int64("requests")),
                finishedAt: try row.date("finished_at"))
        }
    }

    public static func lastSweep(on conn: PostgresConnection) throws -> SweepRow? {
        try conn.query(
            """
            SELECT id, started_at, finished_at, checked, matched, opened, resolved, actions_emitted, errors
            FROM runs ORDER BY id DESC LIMIT 1
            """
        ).first.map { row in
            SweepRow(
                id: try row.int64("id"), startedAt: try row.date("started_at"), finishedAt: try row.optionalDate("finished_at"),
                checked: try row.int64("checked"), matched: try row.int64("matched"), opened: try row.int64("opened"),
                resolved: try row.int64("resolved"), actionsEmitted: try row.int64("actions_emitted"), errors: try row.int64("errors"))
        }
    }

    /// The last `hours` hours of deliveries by how they ended, oldest first, one row per hour (empty hours included).
    public static func deliveriesPerHour(hours: Int, on conn: PostgresConnection) throws -> [DeliveryHour] {
        try conn.query(
            """
            WITH hours AS (
                SELECT generate_series(date_trunc('hour', now()) - make_interval(hours => \(.int64(Int64(hours - 1)))::int),
                                       date_trunc('hour', now()), interval '1 hour') AS hour),
            -- Counted by (hour, status), then spread into columns: a third cheaper than four filtered counts per row.
            stored AS (
                SELECT date_trunc('hour', received_at) AS hour, status, count(*) AS n
                FROM deliveries WHERE received_at >= (SELECT min(hour) FROM hours) GROUP BY 1, 2),
            rejected AS (
                SELECT hour, sum(count)::bigint AS rejected FROM rejection_counts WHERE hour >= (SELECT min(hour) FROM hours) GROUP BY 1)
            SELECT h.hour, coalesce(sum(s.n) FILTER (WHERE s.status = 'done'), 0)::bigint AS done,
                   coalesce(sum(s.n) FILTER (WHERE s.status = 'ignored'), 0)::bigint AS ignored,
                   coalesce(sum(s.n) FILTER (WHERE s.status = 'dead'), 0)::bigint AS dead,
                   coalesce(sum(s.n) FILTER (WHERE s.status = 'pending'), 0)::bigint AS pending,
                   coalesce(min(r.rejected), 0)::bigint AS rejected
            FROM hours h LEFT JOIN stored s USING (hour) LEFT JOIN rejected r USING (hour) GROUP BY h.hour ORDER BY h.hour
            """
        ).map { row in
            DeliveryHour(
                hour: try row.date("hour"), done: try row.int64("done"), ignored: try row.int64("ignored"), dead: try row.int64("dead"),
                pending: try row.int64("pending"), rejected: try row.int64("rejected"))
        }
    }
}

/// The money at risk one currency had when a `payrecon reconcile` run finished.
public struct RiskPoint: Sendable, Equatable {
    public var at: Date
    public var currency: Currency
    public var minor: Int128
}

extension ConsoleStore {
    /// The money at risk at the end of each run of the last `days` days, oldest first (runs record it since sql/0032_console_reads).
    public static func riskHistory(days: Int, on conn: PostgresConnection) throws -> [RiskPoint] {
        try conn.query(
            """
            SELECT r.finished_at, e.key AS currency, e.value AS minor FROM runs r, jsonb_each_text(r.at_risk) e
            WHERE r.at_risk IS NOT NULL AND r.finished_at >= now() - make_interval(days => \(.int64(Int64(days)))::int)
            ORDER BY r.id, e.key LIMIT 10000
            """
        ).compactMap { row in
            guard let currency = Currency(code: try row.string("currency")), let minor = Int128(try row.string("minor")) else { return nil }
            return RiskPoint(at: try row.date("finished_at"), currency: currency, minor: minor)
        }
    }

    /// The newest backfill window and the newest settlement file, for the overview.
    public static func lastBackfillAndSettlement(on conn: PostgresConnection) throws -> (BackfillWindowRow?, SettlementFileRow?) {
        (try backfillWindows(limit: 1, on: conn).first, try settlementFiles(limit: 1, on: conn).first)
    }
}
