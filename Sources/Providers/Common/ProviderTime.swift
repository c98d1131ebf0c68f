// Timestamps as providers write them, to unix seconds, without Foundation's locale-dependent formatters.

/// Calendar arithmetic on the proleptic Gregorian calendar, UTC.
public enum CivilTime {
    /// Unix seconds for a UTC civil time, or nil if a field is out of range.
    public static func unixSeconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        // Days from civil (H. Hinnant's algorithm).
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64((month + 9) % 12)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return days * 86400 + Int64(hour * 3600 + minute * 60 + min(second, 59))
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

/// ISO 8601 / RFC 3339 date-times as the providers send them.
public enum ISO8601Timestamp {
    /// Unix seconds (fraction dropped) for `YYYY-MM-DD[T| ]hh:mm[:ss[.f{1,9}]](Z|±hh:mm|±hhmm|±hh)`, else nil.
    /// Seen: `2024-01-27T08:51:02.826Z`, `2025-01-27 08:51:02.826445+00:00`, `2024-10-27T08:51:04.8264455Z`,
    /// `2018-08-15T12:13:29-07:00`.
    public static func unixSeconds(from text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<i + n {
                guard b[k] >= 0x30 && b[k] <= 0x39 else { return nil }
                v = v * 10 + Int(b[k] - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2) else { return nil }
        guard i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: "t") || b[i] == UInt8(ascii: " ") else { return nil }
        i += 1
        guard let hour = digits(2), expect(":"), let minute = digits(2) else { return nil }
        var second = 0
        if expect(":") {
            guard let s = digits(2) else { return nil }
            second = s
            if expect(".") || expect(",") {
                let start = i
                while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
                guard (1...9).contains(i - start) else { return nil }
            }
        }
        guard var t = CivilTime.unixSeconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second) else {
            return nil
        }
        guard i < b.count else { return nil }  // a zone is required: a local time would be ambiguous
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign: Int64 = b[i] == UInt8(ascii: "+") ? 1 : -1
            i += 1
            guard let oh = digits(2), oh <= 23 else { return nil }
            var om = 0
            if i < b.count {
                _ = expect(":")
                guard let m = digits(2), m <= 59 else { return nil }
                om = m
            }
            t -= sign * Int64(oh * 3600 + om * 60)
        } else {
            return nil
        }
        return i == b.count ? t : nil
    }
}
