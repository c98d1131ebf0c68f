import Postgres
import Reconciliation

/// One provider, currency and UTC day of `movements`: exact sums (PostgreSQL sums bigint as numeric, read back as
/// 128-bit integers, so no number of movements can overflow them).
public struct StoredFeeDay: Sendable, Equatable {
    public var provider: Provider
    public var currency: Currency
    /// `YYYY-MM-DD` of when the provider says the movement happened (else when payrecon first saw it): the day of its
    /// account's settlement files (their time zone, as their rows' offsets state it) once a file of that account is
    /// imported, so a day ties to the file's section footers; UTC otherwise.
    public var day: String
    public var captured: Int128, refunded: Int128, reversed: Int128
    /// Fees taken on captures less fees given back on refunds and reversals.
    public var fees: Int128
    /// Nets of captures less what refunds and reversals took out (their stated net, else their gross).
    public var net: Int128
    public var movements: Int
    /// Captures whose answer stated no fee (their fee and net are not in the sums).
    public var withoutFee: Int
}

public enum FeeStore {
    /// Days within `seconds` before now (nil: all), newest first, then provider and currency.
    public static func days(provider: Provider?, within seconds: Int64?, on conn: PostgresConnection) throws -> [StoredFeeDay] {
        // Each movement's zone: that of its account's file whose period holds it, else of that account's latest file.
        try conn.query(
            """
            WITH zones AS (
                SELECT DISTINCT ON (provider, coalesce(account, ''), period_start) provider, coalesce(account, '') AS account, period_start,
                       period_end, utc_offset
                FROM settlement_files WHERE utc_offset IS NOT NULL AND period_start IS NOT NULL AND period_end IS NOT NULL
                ORDER BY provider, coalesce(account, ''), period_start, id),
            latest AS (
                SELECT DISTINCT ON (provider, coalesce(account, '')) provider, coalesce(account, '') AS account, utc_offset
                FROM settlement_files WHERE utc_offset IS NOT NULL
                ORDER BY provider, coalesce(account, ''), period_start DESC NULLS LAST, id DESC),
            dated AS (
                SELECT m.*, to_char((coalesce(m.occurred_at, m.first_seen) AT TIME ZONE 'UTC')
                                    + make_interval(secs => coalesce(z.utc_offset, l.utc_offset, 0)), 'YYYY-MM-DD') AS day
                FROM movements m
                LEFT JOIN LATERAL (SELECT z.utc_offset FROM zones z
                                   WHERE z.provider = m.provider AND z.account = coalesce(m.account, '')
                                     AND coalesce(m.occurred_at, m.first_seen) >= z.period_start
                                     AND coalesce(m.occurred_at, m.first_seen) < z.period_end + interval '1 second'
                                   LIMIT 1) z ON true
                LEFT JOIN latest l ON l.provider = m.provider AND l.account = coalesce(m.account, '')
                WHERE (\(provider.map { .text($0.rawValue) } ?? .null)::text IS NULL OR m.provider = \(provider.map { .text($0.rawValue) } ?? .null))
                  AND (\(seconds.map { .int64($0) } ?? .null)::bigint IS NULL OR coalesce(m.occurred_at, m.first_seen) >= now() - make_interval(secs => \(seconds.map { .int64($0) } ?? .null)::bigint))),
            -- What reached the balance, in the currency it reached it in: a movement PayPal converted (received in another
            -- currency) counts its gross and fee in its own currency, its net in the currency received.
            contributions AS (
                SELECT provider, currency, day, kind, gross_minor AS gross, fee_minor AS fee, true AS own,
                       CASE WHEN received_currency IS NOT NULL AND received_currency <> currency THEN 0
                            WHEN kind = 'capture' THEN net_minor ELSE coalesce(net_minor, gross_minor) END AS net_value
                FROM dated
                UNION ALL
                SELECT provider, received_currency, day, kind, NULL, NULL, false, received_minor
                FROM dated WHERE received_currency IS NOT NULL AND received_currency <> currency)
            SELECT provider, currency, day,
                   coalesce(sum(gross) FILTER (WHERE kind = 'capture'), 0)::text AS captured,
                   coalesce(sum(gross) FILTER (WHERE kind = 'refund'), 0)::text AS refunded,
                   coalesce(sum(gross) FILTER (WHERE kind = 'reversal'), 0)::text AS reversed,
                   (coalesce(sum(fee) FILTER (WHERE kind = 'capture'), 0)
                    - coalesce(sum(fee) FILTER (WHERE kind <> 'capture'), 0))::text AS fees,
                   (coalesce(sum(net_value) FILTER (WHERE kind = 'capture'), 0)
                    - coalesce(sum(net_value) FILTER (WHERE kind <> 'capture'), 0))::text AS net,
                   count(*) FILTER (WHERE own) AS n, count(*) FILTER (WHERE own AND kind = 'capture' AND fee IS NULL) AS without_fee
            FROM contributions
            GROUP BY 1, 2, 3 ORDER BY 3 DESC, 1, 2
            """
        ).map(feeDay)
    }

    /// One row of `days` as a day's sums; a sum or currency it cannot read is an error.
    private static func feeDay(_ row: PostgresRow) throws -> StoredFeeDay {
        func sum(_ column: String) throws -> Int128 {
            let text = try row.string(column)
            guard let v = Int128(text) else { throw PostgresError.decoding("movements: \(column) sum \(text) is not an integer") }
            return v
        }
        let code = try row.string("currency")
        guard let currency = Currency(code: code) else {
            throw PostgresError.decoding("movements: currency \(code) is not an ISO 4217 code")
        }
        return StoredFeeDay(
            provider: try row.provider("provider"), currency: currency, day: try row.string("day"),
            captured: try sum("captured"), refunded: try sum("refunded"), reversed: try sum("reversed"),
            fees: try sum("fees"), net: try sum("net"), movements: Int(try row.int64("n")),
            withoutFee: Int(try row.int64("without_fee")))
    }
}
