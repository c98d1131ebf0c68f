import Postgres
import Reconciliation

/// One provider, currency and UTC day of `movements`: exact sums (PostgreSQL sums bigint as numeric, read back as
/// 128-bit integers, so no number of movements can overflow them).
public struct StoredFeeDay: Sendable, Equatable {
    public var provider: String
    public var currency: Currency
    /// `YYYY-MM-DD`, UTC: when the provider says the movement happened, else when payrecon first saw it.
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
    public static func days(provider: String?, within seconds: Int64?, on conn: PostgresConnection) throws -> [StoredFeeDay] {
        try conn.query("""
            SELECT provider, currency, to_char(coalesce(occurred_at, first_seen) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                   coalesce(sum(gross_minor) FILTER (WHERE kind = 'capture'), 0)::text AS captured,
                   coalesce(sum(gross_minor) FILTER (WHERE kind = 'refund'), 0)::text AS refunded,
                   coalesce(sum(gross_minor) FILTER (WHERE kind = 'reversal'), 0)::text AS reversed,
                   (coalesce(sum(fee_minor) FILTER (WHERE kind = 'capture'), 0)
                    - coalesce(sum(fee_minor) FILTER (WHERE kind <> 'capture'), 0))::text AS fees,
                   (coalesce(sum(net_minor) FILTER (WHERE kind = 'capture'), 0)
                    - coalesce(sum(coalesce(net_minor, gross_minor)) FILTER (WHERE kind <> 'capture'), 0))::text AS net,
                   count(*) AS n, count(*) FILTER (WHERE kind = 'capture' AND fee_minor IS NULL) AS without_fee
            FROM movements
            WHERE ($1::text IS NULL OR provider = $1)
              AND ($2::bigint IS NULL OR coalesce(occurred_at, first_seen) >= now() - make_interval(secs => $2::bigint))
            GROUP BY 1, 2, 3 ORDER BY 3 DESC, 1, 2
            """, [provider.map { .text($0) } ?? .null, seconds.map { .int64($0) } ?? .null]).map { row in
            func sum(_ column: String) throws -> Int128 {
                let text = try row.string(column)
                guard let v = Int128(text) else { throw PostgresError.decoding("movements: \(column) sum \(text) is not an integer") }
                return v
            }
            let code = try row.string("currency")
            guard let currency = Currency(code: code) else { throw PostgresError.decoding("movements: currency \(code) is not an ISO 4217 code") }
            return StoredFeeDay(provider: try row.string("provider"), currency: currency, day: try row.string("day"),
                                captured: try sum("captured"), refunded: try sum("refunded"), reversed: try sum("reversed"),
                                fees: try sum("fees"), net: try sum("net"), movements: Int(try row.int64("n")),
                                withoutFee: Int(try row.int64("without_fee")))
        }
    }
}
