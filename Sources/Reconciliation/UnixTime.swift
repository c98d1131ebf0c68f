// Unix seconds ↔ UTC calendar dates and ISO 8601 text, without Foundation formatters (locale- and time-zone-free).
// The calendar arithmetic itself is CivilTime's, shared with Postgres.
import CivilTime

/// Civil-date arithmetic on unix time: proleptic Gregorian calendar, UTC (Howard Hinnant's algorithms).
public enum UnixTime {
    /// `2025-01-31T12:00:00Z` for unix seconds.
    public static func iso8601(_ seconds: Int64) -> String {
        let (days, second) = split(seconds)
        return date(days) + "T" + two(second / 3_600) + ":" + two(second / 60 % 60) + ":" + two(second % 60) + "Z"
    }

    /// `2025-01-31`: the date `days` days after 1970-01-01 (negative: before). Years 0–9999 have four digits.
    public static func date(_ days: Int64) -> String {
        let (year, month, day) = civil(fromDays: days)
        let yearText =
            year >= 0 && year < 10_000
            ? String(repeating: "0", count: 4 - String(year).count) + String(year) : String(year)
        return yearText + "-" + two(month) + "-" + two(day)
    }

    /// Whole days since 1970-01-01 (rounded down, so negative before it) and the second within that day (0..<86 400).
    public static func split(_ seconds: Int64) -> (days: Int64, secondOfDay: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        return (days, seconds - days * 86_400)
    }

    /// Unix seconds of a UTC civil time, or nil when a field is out of range (years 1–9999). A leap second
    /// (`second == 60`) counts as second 59.
    public static func seconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = days(fromYear: Int64(year), month: Int64(month), day: Int64(day))
        return days * 86_400 + Int64(hour * 3_600 + minute * 60 + min(second, 59))
    }

    /// Days since 1970-01-01 of a date (days_from_civil); fields are not range-checked.
    public static func days(fromYear year: Int64, month: Int64, day: Int64) -> Int64 {
        CivilDate.days(fromYear: year, month: month, day: day)
    }

    /// The date `days` days after 1970-01-01 (civil_from_days).
    public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) { CivilDate.civil(fromDays: days) }

    /// 28–31: the length of `month` (1–12) in `year`.
    public static func daysIn(month: Int, year: Int) -> Int { Int(CivilDate.daysIn(month: Int64(month), year: Int64(year))) }

    /// An ISO 8601 / RFC 3339 date-time as whole unix seconds and the fraction of a second, or nil. Grammar:
    /// `YYYY-MM-DD(T| )hh:mm[:ss[(.|,)f{1,9}]](Z|±hh:mm|±hhmm|±hh)`; `T` and `Z` may be lowercase; a zone is required
    /// (a local time would be ambiguous). Strict (`lenient` false): the seconds are required and a leap second is
    /// refused; lenient (provider answers): the seconds may be left out and `:60` counts as `:59`.
    public static func scanISO8601(_ text: String, lenient: Bool) -> (seconds: Int64, fraction: Double)? {
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
            expect("Tt "), let hour = digits(2), expect(":"), let minute = digits(2)
        else { return nil }
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
            i < c.count
        else { return nil }
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

    /// A date or an instant as an order file writes one: `2026-01-31` (00:00 UTC that day) or a full date-time with its
    /// zone (`2026-01-31T12:00:00Z`, `2026-01-31T13:00:00+01:00`; a fraction of a second is dropped). Nil otherwise.
    public static func seconds(dateOrTime text: String) -> Int64? {
        let c = Array(text.utf8)
        if c.count == 10, c[4] == UInt8(ascii: "-"), c[7] == UInt8(ascii: "-") {
            func number(_ r: Range<Int>) -> Int? {
                var v = 0
                for k in r { guard c[k] >= 48 && c[k] <= 57 else { return nil }; v = v * 10 + Int(c[k] - 48) }
                return v
            }
            guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10) else { return nil }
            return seconds(year: y, month: m, day: d, hour: 0, minute: 0, second: 0)
        }
        return scanISO8601(text, lenient: false)?.seconds
    }

    /// `2026-01-31` for midnight UTC, else the full `2026-01-31T12:00:00Z`: how an order's period is written back.
    public static func dateOrTime(_ seconds: Int64) -> String {
        let (days, second) = split(seconds)
        return second == 0 ? date(days) : iso8601(seconds)
    }

    private static func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
