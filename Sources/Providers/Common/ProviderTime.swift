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

    /// Whole unix seconds and the fraction of a second, or nil (`UnixTime.scanISO8601`).
    private static func scan(_ text: String, lenient: Bool) -> (seconds: Int64, fraction: Double)? {
        UnixTime.scanISO8601(text, lenient: lenient)
    }
}
