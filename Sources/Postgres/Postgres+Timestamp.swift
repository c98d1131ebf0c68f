import CivilTime
import Foundation

/// Text conversions between `Date` and PostgreSQL timestamps, without DateFormatter (slow, and it drops microseconds).
enum PostgresTimestamp {
    /// `2026-11-29T15:49:46.123456Z`: ISO 8601, UTC, microseconds (rounded to the nearest microsecond).
    static func format(_ date: Date) throws -> String {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        // Years 1...9999 only: what ISO 8601 with four digits and PostgreSQL both take without a BC suffix.
        guard micros.isFinite, micros >= -62_135_596_800_000_000, micros < 253_402_300_800_000_000 else {
            throw PostgresError.decoding("timestamp \(date.timeIntervalSince1970)s since 1970 is outside years 1...9999")
        }
        let total = Int64(micros)
        let seconds = floorDiv(total, 1_000_000)
        let fraction = total - seconds * 1_000_000
        let days = floorDiv(seconds, 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
            + "." + pad(fraction, 6) + "Z"
    }

    /// Parses PostgreSQL's ISO output for `timestamptz` (`2026-11-29 15:49:46.123456+00`, `...+05:30`),
    /// `timestamp` (no offset: taken as UTC) and `date` (midnight UTC). Also accepts `T` and `Z`.
    /// Returns nil for anything else, including `infinity` and BC dates.
    static func parse(_ text: String) -> Date? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.number(minDigits: 4, maxDigits: 6), scanner.take("-"),
            let month = scanner.number(minDigits: 2, maxDigits: 2), scanner.take("-"),
            let day = scanner.number(minDigits: 2, maxDigits: 2),
            (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var secondOfDay: Int64 = 0
        var micros: Int64 = 0
        var offset: Int64 = 0
        if scanner.take(" ") || scanner.take("T") {
            guard let hour = scanner.number(minDigits: 2, maxDigits: 2), scanner.take(":"),
                let minute = scanner.number(minDigits: 2, maxDigits: 2), scanner.take(":"),
                let second = scanner.number(minDigits: 2, maxDigits: 2),
                hour <= 24, minute < 60, second < 61
            else { return nil }
            secondOfDay = hour * 3600 + minute * 60 + second
            if scanner.take(".") {
                var digits = 0
                while let digit = scanner.digit() {
                    if digits < 6 { micros = micros * 10 + digit }
                    digits += 1
                }
                guard digits > 0 else { return nil }
                for _ in digits..<max(digits, 6) { micros *= 10 }
            }
            if scanner.take("Z") {
                offset = 0
            } else if let sign = scanner.sign() {
                guard let hours = scanner.number(minDigits: 2, maxDigits: 2) else { return nil }
                var value = hours * 3600
                if scanner.take(":") {
                    guard let minutes = scanner.number(minDigits: 2, maxDigits: 2) else { return nil }
                    value += minutes * 60
                    if scanner.take(":") {
                        guard let seconds = scanner.number(minDigits: 2, maxDigits: 2) else { return nil }
                        value += seconds
                    }
                }
                offset = sign * value
            }
        }
        guard scanner.atEnd else { return nil }
        let seconds = days(fromYear: year, month: month, day: day) * 86_400 + secondOfDay - offset
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { index == bytes.count }
        mutating func take(_ character: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
            index += 1
            return true
        }
        mutating func digit() -> Int64? {
            guard index < bytes.count, (48...57).contains(bytes[index]) else { return nil }
            defer { index += 1 }
            return Int64(bytes[index] - 48)
        }
        mutating func number(minDigits: Int, maxDigits: Int) -> Int64? {
            var value: Int64 = 0
            var count = 0
            while count < maxDigits, let digit = digit() {
                value = value * 10 + digit
                count += 1
            }
            return count >= minDigits ? value : nil
        }
        mutating func sign() -> Int64? {
            if take("+") { return 1 }
            if take("-") { return -1 }
            return nil
        }
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 { CivilDate.daysIn(month: month, year: year) }
    static func days(fromYear year: Int64, month: Int64, day: Int64) -> Int64 { CivilDate.days(fromYear: year, month: month, day: day) }
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) { CivilDate.civil(fromDays: days) }
}

extension PostgresValue {
    /// A timestamp as `.timestamptz` sends it, for an element of a `text[]` cast to `timestamptz[]` (one statement
    /// for many rows).
    public static func timestampText(_ date: Date) throws -> String { try PostgresTimestamp.format(date) }
}
