// Unix seconds ↔ UTC calendar dates and ISO 8601 text, without Foundation formatters (locale- and time-zone-free).
// The one implementation of this arithmetic for Reconciliation and the rooms above it (Providers, Reporting);
// Postgres, which does not depend on Reconciliation, keeps its own.

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
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` days after 1970-01-01 (civil_from_days).
    public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// 28–31: the length of `month` (1–12) in `year`.
    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
