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
    /// (`2024-10-27T08:51:04Z`, any number of fractional digits, `Z` or a `±hh:mm` / `±hhmm` offset).
    public static func parse(_ text: String) -> Date? {
        let s = text.trimmingASCIIWhitespace()
        guard !s.isEmpty else { return nil }
        if s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
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
              let seconds = Int64(text) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Nil when `date` is within `tolerance` of `now` in either direction, else a stale_timestamp rejection.
    static func freshness(_ date: Date, now: Date, tolerance: TimeInterval, header: String) -> WebhookRejection? {
        let skew = date.timeIntervalSince(now)
        guard abs(skew) > tolerance else { return nil }
        let direction = skew < 0 ? "old" : "in the future"
        return WebhookRejection(.staleTimestamp,
            "\(header) is \(Int(abs(skew).rounded()))s \(direction); the allowed distance from now is \(Int(tolerance))s "
            + "(PAYRECON_SIGNATURE_TOLERANCE); check the clocks or replay with --at transmission")
    }
}

/// A strict, dependency-free ISO 8601 date-time parser (the subset webhooks use).
public enum ISO8601 {
    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`; `T` may be a space or lowercase, `Z` lowercase.
    public static func parse(_ text: String) -> Date? {
        let c = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= c.count else { return nil }
            var v = 0
            for k in 0..<n {
                let d = c[i + k]
                guard d >= 48 && d <= 57 else { return nil }
                v = v * 10 + Int(d - 48)
            }
            i += n
            return v
        }
        func expect(_ chars: String) -> Bool {
            guard i < c.count, chars.utf8.contains(c[i]) else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              expect("Tt "), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
              let second = digits(2) else { return nil }
        var fraction = 0.0
        if i < c.count && c[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < c.count, c[i] >= 48 && c[i] <= 57 {
                fraction += Double(c[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset = 0
        guard i < c.count else { return nil }
        if c[i] == UInt8(ascii: "Z") || c[i] == UInt8(ascii: "z") {
            i += 1
        } else if c[i] == UInt8(ascii: "+") || c[i] == UInt8(ascii: "-") {
            let sign = c[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2) else { return nil }
            if i < c.count && c[i] == UInt8(ascii: ":") { i += 1 }
            guard let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == c.count else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 59 else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds) + fraction)
    }

    /// `2015-05-12T18:14:14Z` (whole seconds, UTC).
    public static func format(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let rem = total - days * 86_400
        let (y, m, d) = civilFromDays(days)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = String(y)
        return "\(String(repeating: "0", count: max(0, 4 - year.count)))\(year)-\(two(m))-\(two(d))T"
            + "\(two(rem / 3600)):\(two(rem % 3600 / 60)):\(two(rem % 60))Z"
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
