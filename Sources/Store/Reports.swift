import Foundation
import Postgres
import Reconciliation

/// Which discrepancies a report covers. nil = any.
public struct DiscrepancyFilter: Sendable, Equatable {
    /// `open`, `acknowledged` or `resolved`; nil for all.
    public var status: String?
    public var provider: Provider?
    public var kind: DiscrepancyKind?
    /// Only those last seen within this many seconds before now.
    public var lastSeenWithin: Int64?

    public init(status: String? = "open", provider: Provider? = nil, kind: DiscrepancyKind? = nil, lastSeenWithin: Int64? = nil) {
        self.status = status; self.provider = provider; self.kind = kind; self.lastSeenWithin = lastSeenWithin
    }
}

/// A row of `discrepancies`; `expected` / `actual` are the jsonb text as PostgreSQL prints it.
public struct StoredDiscrepancy: Sendable, Equatable {
    public var id: Int64
    public var provider: Provider
    public var orderID: String?
    public var transactionRef: String
    public var kind: DiscrepancyKind
    public var status: String
    public var expected: String
    public var actual: String
    public var detail: String
    public var amountAtRiskMinor: Int64
    public var currency: Currency?
    public var firstSeen: Date
    public var lastSeen: Date
    public var occurrences: Int
    public var resolvedAt: Date?
    public var acknowledgedAt: Date?
    public var ackNote: String?
    public var acknowledgedBy: String?
    /// The check that opened it or last changed what defines it.
    public var evidenceID: Int64?
}

/// Open discrepancies of one kind in one currency (nil: none recorded), with their amount at risk summed.
public struct OpenTotal: Sendable, Equatable {
    public var kind: DiscrepancyKind
    public var currency: Currency?
    public var count: Int
    /// Exact sum of the amounts at risk (each fits 64 bits; their sum may not).
    public var amountAtRiskMinor: Int128
}

/// The SQL behind `payrecon report`: read-only, parameterized.
public enum ReportStore {
    /// The filter as a clause: `status` (nil: any), the provider, the kind and the last-seen window, each bound.
    static func filterClause(_ f: DiscrepancyFilter, status: String?) -> SQL {
        let status: PostgresValue = status.map { .text($0) } ?? .null
        let provider: PostgresValue = f.provider.map { .text($0.rawValue) } ?? .null
        let kind: PostgresValue = f.kind.map { .text($0.rawValue) } ?? .null
        let within: PostgresValue = f.lastSeenWithin.map { .int64($0) } ?? .null
        return """
            (\(status)::text IS NULL OR status = \(status)) AND (\(provider)::text IS NULL OR provider = \(provider))
            AND (\(kind)::text IS NULL OR kind = \(kind))
            AND (\(within)::bigint IS NULL OR last_seen >= now() - make_interval(secs => \(within)::bigint))
            """
    }

    /// What `decode` reads of a discrepancy.
    static let discrepancyColumns = """
        id, provider, order_id, transaction_ref, kind, status, expected::text AS expected, actual::text AS actual, detail,
        amount_at_risk_minor, currency, first_seen, last_seen, occurrences, resolved_at, acknowledged_at, ack_note, acknowledged_by,
        evidence_id
        """

    /// One discrepancy by id, whatever its status.
    public static func discrepancy(id: Int64, on conn: PostgresConnection) throws -> StoredDiscrepancy? {
        try conn.query(
            """
            SELECT \(unescaped: discrepancyColumns)
            FROM discrepancies WHERE id = \(.int64(id))
            """
        ).first.map(decode)
    }

    /// The discrepancies the filter matches, oldest id first.
    public static func discrepancies(_ filter: DiscrepancyFilter, on conn: PostgresConnection) throws -> [StoredDiscrepancy] {
        try conn.query(
            """
            SELECT \(unescaped: discrepancyColumns)
            FROM discrepancies WHERE \(filterClause(filter, status: filter.status)) ORDER BY id
            """
        ).map(decode)
    }

    /// What a summary of the open discrepancies shows: their number by kind, and the money at risk per currency (each
    /// order once; a currency at zero left out). `payrecon report` and the console's overview read it alike.
    public static func openSummary(
        _ filter: DiscrepancyFilter, on conn: PostgresConnection
    ) throws -> (byKind: [DiscrepancyKind: Int], atRisk: [Currency: Int128]) {
        var byKind: [DiscrepancyKind: Int] = [:]
        for total in try openTotals(filter, on: conn) { byKind[total.kind, default: 0] += total.count }
        var atRisk: [Currency: Int128] = [:]
        for (currency, minor) in try openAtRisk(filter, on: conn) where minor != 0 { atRisk[currency] = minor }
        return (byKind, atRisk)
    }

    /// Open discrepancies matching the filter's provider, kind and window (whatever its status), grouped by kind and
    /// currency. Sums are exact (numeric in SQL) and must fit Int64.
    public static func openTotals(_ filter: DiscrepancyFilter, on conn: PostgresConnection) throws -> [OpenTotal] {
        try conn.query(
            """
            SELECT kind, currency, count(*) AS n, sum(amount_at_risk_minor)::text AS at_risk
            FROM discrepancies WHERE \(filterClause(filter, status: "open")) GROUP BY kind, currency ORDER BY kind, currency
            """
        ).map { row in
            let kindText = try row.string("kind")
            guard let kind = DiscrepancyKind(rawValue: kindText) else {
                throw PostgresError.decoding("unknown discrepancy kind \(kindText)")
            }
            let sum = try row.string("at_risk")
            guard let minor = Int128(sum) else { throw PostgresError.decoding("amount at risk \(sum) is not an integer") }
            return OpenTotal(
                kind: kind, currency: try currency(row.optionalString("currency")), count: Int(try row.int64("n")),
                amountAtRiskMinor: minor)
        }
    }

    /// The money at risk in the open discrepancies matching the filter, per currency, with each order counted once:
    /// an order's findings often name the same money (a disputed payment and the refund it holds), so an order's
    /// share is the largest of its findings' amounts, never their sum. A transaction no order holds counts on its own.
    public static func openAtRisk(_ filter: DiscrepancyFilter, on conn: PostgresConnection) throws -> [(currency: Currency, minor: Int128)]
    {
        try conn.query(
            """
            SELECT currency, at_risk::text AS at_risk FROM (\(atRiskByCurrency(filter))) t ORDER BY currency
            """
        ).compactMap { row in
            guard let currency = try currency(row.optionalString("currency")) else { return nil }
            let sum = try row.string("at_risk")
            guard let minor = Int128(sum) else { throw PostgresError.decoding("amount at risk \(sum) is not an integer") }
            return (currency, minor)
        }
    }

    /// `currency, at_risk` (numeric) of the open discrepancies matching the filter, each order counted once.
    static func atRiskByCurrency(_ filter: DiscrepancyFilter) -> SQL {
        """
        SELECT currency, sum(m) AS at_risk FROM (
            SELECT currency, max(amount_at_risk_minor) AS m FROM discrepancies
            WHERE \(filterClause(filter, status: "open")) AND currency IS NOT NULL
            GROUP BY provider, coalesce(order_id, '?' || transaction_ref), currency) per_order
        GROUP BY currency
        """
    }

    /// Open discrepancies matching the filter (whatever its status) by UTC day first seen (`YYYY-MM-DD`) and kind.
    public static func openByDay(
        _ filter: DiscrepancyFilter, on conn: PostgresConnection
    ) throws -> [(day: String, kind: DiscrepancyKind, count: Int)] {
        try conn.query(
            """
            SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, kind, count(*) AS n
            FROM discrepancies WHERE \(filterClause(filter, status: "open")) GROUP BY 1, 2 ORDER BY 1, 2
            """
        ).compactMap { row in
            guard let kind = DiscrepancyKind(rawValue: try row.string("kind")) else { return nil }
            return (try row.string("day"), kind, Int(try row.int64("n")))
        }
    }

    /// Rejected deliveries of the hours within `seconds`, by reason, optionally for one provider: every one counted
    /// (`rejection_counts`), not just the samples kept.
    public static func rejectedByReason(
        within seconds: Int64, provider: Provider?, on conn: PostgresConnection
    ) throws -> [(reason: String, count: Int)] {
        try conn.query(
            """
            SELECT reason, sum(count)::bigint AS n FROM rejection_counts
            WHERE hour >= date_trunc('hour', now() - make_interval(secs => \(.int64(seconds))::bigint)) AND (\(provider.map { .text($0.rawValue) } ?? .null)::text IS NULL OR provider = \(provider.map { .text($0.rawValue) } ?? .null))
            GROUP BY reason ORDER BY n DESC, reason
            """
        ).map { (try $0.string("reason"), Int(try $0.int64("n"))) }
    }

    static func currency(_ code: String?) throws -> Currency? {
        guard let code else { return nil }
        guard let c = Currency(code: code) else { throw PostgresError.decoding("discrepancy currency \(code) is not an ISO 4217 code") }
        return c
    }

    static func decode(_ row: PostgresRow) throws -> StoredDiscrepancy {
        let kindText = try row.string("kind")
        guard let kind = DiscrepancyKind(rawValue: kindText) else { throw PostgresError.decoding("unknown discrepancy kind \(kindText)") }
        return StoredDiscrepancy(
            id: try row.int64("id"), provider: try row.provider("provider"), orderID: try row.optionalString("order_id"),
            transactionRef: try row.string("transaction_ref"), kind: kind, status: try row.string("status"),
            expected: try row.string("expected"), actual: try row.string("actual"), detail: try row.string("detail"),
            amountAtRiskMinor: try row.int64("amount_at_risk_minor"), currency: try currency(row.optionalString("currency")),
            firstSeen: try row.date("first_seen"), lastSeen: try row.date("last_seen"), occurrences: Int(try row.int64("occurrences")),
            resolvedAt: try row.optionalDate("resolved_at"), acknowledgedAt: try row.optionalDate("acknowledged_at"),
            ackNote: try row.optionalString("ack_note"), acknowledgedBy: try row.optionalString("acknowledged_by"),
            evidenceID: try row.optionalInt64("evidence_id"))
    }
}

/// What `payrecon actions list` asks for.
public struct ActionFilter: Sendable, Equatable {
    public var status: ActionStatus?
    public var provider: Provider?
    public var orderID: String?
    /// The newest `limit` matching actions are returned (in id order).
    public var limit: Int

    public init(status: ActionStatus? = nil, provider: Provider? = nil, orderID: String? = nil, limit: Int = 1000) {
        self.status = status; self.provider = provider; self.orderID = orderID; self.limit = limit
    }
}

extension ActionStore {
    /// The newest `filter.limit` actions matching the filter, oldest first.
    public static func list(_ filter: ActionFilter, on conn: PostgresConnection) throws -> [StoredAction] {
        try conn.query(
            """
            SELECT * FROM (
                SELECT \(unescaped: columns) FROM actions
                WHERE (\(filter.status.map { .text($0.rawValue) } ?? .null)::text IS NULL OR status = \(filter.status.map { .text($0.rawValue) } ?? .null)) AND (\(filter.provider.map { .text($0.rawValue) } ?? .null)::text IS NULL OR provider = \(filter.provider.map { .text($0.rawValue) } ?? .null)) AND (\(filter.orderID.map { .text($0) } ?? .null)::text IS NULL OR order_id = \(filter.orderID.map { .text($0) } ?? .null))
                ORDER BY id DESC LIMIT \(.int64(Int64(filter.limit)))) newest
            ORDER BY id
            """
        ).map(decode)
    }
}
