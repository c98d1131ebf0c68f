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
        let yearText = year >= 0 && year < 10_000
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
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
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
    static func daysIn(month: Int, year: Int) -> Int { Int(CivilDate.daysIn(month: Int64(month), year: Int64(year))) }

    private static func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
