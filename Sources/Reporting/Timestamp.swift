// UTC timestamps for reports, without DateFormatter (locale- and time-zone-free).
import Foundation

/// ISO 8601 UTC text for dates in reports.
public enum Timestamp {
    /// `2026-11-29T15:49:46Z` (whole seconds, rounded down).
    public static func iso8601(_ date: Date) -> String {
        let (days, second) = split(date)
        return day(days) + "T" + clock(second, seconds: true) + "Z"
    }

    /// `2026-11-29 15:49` for terminal tables (UTC).
    public static func minutes(_ date: Date) -> String {
        let (days, second) = split(date)
        return day(days) + " " + clock(second, seconds: false)
    }

    /// `2026-11-29`: the UTC day of `date`.
    public static func day(of date: Date) -> String { day(split(date).days) }

    /// The UTC day `offset` days after the day of `date` (negative: before).
    public static func day(of date: Date, offset: Int64) -> String { day(split(date).days + offset) }

    static func split(_ date: Date) -> (days: Int64, second: Int64) {
        let t = date.timeIntervalSince1970.rounded(.down)
        let seconds = t.isFinite ? Int64(max(min(t, 253_402_300_799), -62_135_596_800)) : 0
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        return (days, seconds - days * 86_400)
    }

    static func day(_ days: Int64) -> String {
        // Howard Hinnant's days-to-civil.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2)
    }

    static func clock(_ second: Int64, seconds: Bool) -> String {
        pad(second / 3600, 2) + ":" + pad(second / 60 % 60, 2) + (seconds ? ":" + pad(second % 60, 2) : "")
    }

    static func pad(_ n: Int64, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
