// UTC timestamps for reports, without DateFormatter (locale- and time-zone-free): Reconciliation's `UnixTime`.
import Foundation
import Reconciliation

/// ISO 8601 UTC text for dates in reports.
public enum Timestamp {
    /// `2026-11-29T15:49:46Z` (whole seconds, rounded down).
    public static func iso8601(_ date: Date) -> String { UnixTime.iso8601(seconds(date)) }

    /// `2026-11-29T15:49:46.123Z`: milliseconds, for a timeline whose events may share a second.
    public static func iso8601Millis(_ date: Date) -> String {
        let whole = seconds(date)
        let millis = Int64(((date.timeIntervalSince1970 - Double(whole)) * 1000).rounded(.down))
        let ms = String(max(0, min(999, millis)))
        return String(UnixTime.iso8601(whole).dropLast()) + "." + String(repeating: "0", count: 3 - ms.count) + ms + "Z"
    }

    /// `2026-11-29 15:49` for terminal tables (UTC).
    public static func minutes(_ date: Date) -> String {
        let text = iso8601(date)  // four-digit years: the fields sit at fixed offsets
        return text.prefix(10) + " " + text.dropFirst(11).prefix(5)
    }

    /// `2026-11-29`: the UTC day of `date`.
    public static func day(of date: Date) -> String { day(of: date, offset: 0) }

    /// The UTC day `offset` days after the day of `date` (negative: before).
    public static func day(of date: Date, offset: Int64) -> String {
        UnixTime.date(UnixTime.split(seconds(date)).days + offset)
    }

    /// Whole unix seconds of `date`, rounded down and kept within years 1–9999 (0 for a non-finite date).
    static func seconds(_ date: Date) -> Int64 {
        let t = date.timeIntervalSince1970.rounded(.down)
        return t.isFinite ? Int64(max(min(t, 253_402_300_799), -62_135_596_800)) : 0
    }
}
