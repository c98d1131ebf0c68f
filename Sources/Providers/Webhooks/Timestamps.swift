import Foundation

/// When a verifier's time checks are evaluated.
public enum VerificationTime: Sendable, Hashable {
    /// At this instant (normally the wall clock): the signed timestamp must be within the tolerance of it, and a
    /// certificate must be valid at it.
    case at(Date)
    /// At the delivery's own signed timestamp (replaying stored or recorded deliveries, `payrecon verify --at
    /// transmission`): no freshness check; certificates are checked at that timestamp.
    case signedTime
}

/// Defaults shared by the verifiers.
public enum WebhookDefaults {
    /// `PAYRECON_SIGNATURE_TOLERANCE` default: 10 minutes.
    public static let signatureTolerance: TimeInterval = 600
}

/// Parsing of the timestamps webhook schemes sign.
public enum SignedTimestamp {
    /// Unix seconds (1–11 digits), unix milliseconds (exactly 13 digits) or ISO 8601 / RFC 3339
    /// (`2024-10-27T08:51:04Z`, up to 9 fractional digits, `Z` or a `±hh:mm` / `±hhmm` / `±hh` offset: `ISO8601.parse`).
    /// Canonical only: no sign and no leading zero. PXP signs `X-Request-Id` + timestamp + body with nothing between
    /// them, so a leading zero would let `…0` + `1732870000` be re-cut as `…` + `01732870000`: the same signature
    /// under a new request id (a new dedupe key).
    public static func parse(_ text: String) -> Date? {
        let s = text.trimmingASCIIWhitespace()
        guard !s.isEmpty else { return nil }
        if s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard s.utf8.first != 48 || s.utf8.count == 1 else { return nil }
            switch s.utf8.count {
            case 1...11: return Int64(s).map { Date(timeIntervalSince1970: TimeInterval($0)) }
            case 13: return Int64(s).map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) }
            default: return nil
            }
        }
        return ISO8601.parse(s)
    }

    /// Unix seconds only (Paypercut's `t=`).
    public static func parseUnixSeconds(_ text: String) -> Date? {
        guard (1...11).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            text.utf8.first != 48 || text.utf8.count == 1,
            let seconds = Int64(text)
        else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Nil when `date` is within `tolerance` of `now` in either direction, else a stale_timestamp rejection.
    static func freshness(_ date: Date, now: Date, tolerance: TimeInterval, header: String) -> WebhookRejection? {
        let skew = date.timeIntervalSince(now)
        guard abs(skew) > tolerance else { return nil }
        let direction = skew < 0 ? "old" : "in the future"
        return WebhookRejection(
            .staleTimestamp,
            "\(header) is \(Int(abs(skew).rounded()))s \(direction); the allowed distance from now is \(Int(tolerance))s "
                + "(PAYRECON_SIGNATURE_TOLERANCE); check the clocks or replay with --at transmission")
    }
}
