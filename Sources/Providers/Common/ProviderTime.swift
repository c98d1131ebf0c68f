// Timestamps as providers write and sign them, without Foundation's locale-dependent formatters. The calendar
// arithmetic is Reconciliation's `UnixTime`.
import Foundation
import Reconciliation

/// A strict, dependency-free ISO 8601 / RFC 3339 date-time parser and formatter (the subset providers use).
///
/// Grammar: `YYYY-MM-DD(T| )hh:mm:ss[(.|,)f{1,9}](Z|±hh:mm|±hhmm|±hh)`; `T` and `Z` may be lowercase; a zone is
/// required (a local time would be ambiguous). Seen: `2024-01-27T08:51:02.826Z`, `2025-01-27 08:51:02.826445+00:00`,
/// `2024-10-27T08:51:04.8264455Z`, `2018-08-15T12:13:29-07:00`.
public enum ISO8601 {
    /// The instant, fraction kept; nil unless the text is a full date-time with seconds 00–59 (what webhook
    /// signatures cover).
    public static func parse(_ text: String) -> Date? {
        guard let t = scan(text, lenient: false) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(t.seconds) + t.fraction)
    }

    /// Unix seconds (fraction dropped), else nil. Lenient for provider answers: the seconds may be left out
    /// (`2024-01-27T08:51Z`) and a leap second (`:60`) counts as `:59`.
    public static func unixSeconds(from text: String) -> Int64? {
        scan(text, lenient: true)?.seconds
    }

    /// `2015-05-12T18:14:14Z` (whole seconds, rounded down, UTC).
    public static func format(_ date: Date) -> String {
        UnixTime.iso8601(Int64(date.timeIntervalSince1970.rounded(.down)))
    }

    /// Whole unix seconds and the fraction of a second, or nil.
    private static func scan(_ text: String, lenient: Bool) -> (seconds: Int64, fraction: Double)? {
        let c = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= c.count else { return nil }
            var v = 0
            for k in i..<i + n {
                guard c[k] >= 48 && c[k] <= 57 else { return nil }
                v = v * 10 + Int(c[k] - 48)
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
              expect("Tt "), let hour = digits(2), expect(":"), let minute = digits(2) else { return nil }
        var second = 0
        var fraction = 0.0
        if expect(":") {
            guard let s = digits(2), lenient || s <= 59 else { return nil }
            second = s
            if expect(".,") {
                var scale = 0.1
                let start = i
                while i < c.count, c[i] >= 48 && c[i] <= 57 {
                    fraction += Double(c[i] - 48) * scale
                    scale /= 10
                    i += 1
                }
                guard (1...9).contains(i - start) else { return nil }
            }
        } else if !lenient {
            return nil
        }
        guard var t = UnixTime.seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second),
              i < c.count else { return nil }
        if c[i] == UInt8(ascii: "+") || c[i] == UInt8(ascii: "-") {
            let sign: Int64 = c[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), oh <= 23 else { return nil }
            var om = 0
            if i < c.count {
                _ = expect(":")
                guard let m = digits(2), m <= 59 else { return nil }
                om = m
            }
            t -= sign * Int64(oh * 3_600 + om * 60)
        } else if !expect("Zz") {
            return nil
        }
        return i == c.count ? (t, fraction) : nil
    }
}
