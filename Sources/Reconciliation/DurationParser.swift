// Durations for configuration and flags: `90s`, `10m`, `24h`, `7d`.

/// Why a duration was rejected.
public enum DurationError: Error, Hashable, Sendable, CustomStringConvertible {
    case empty
    /// Digits without a unit ("90"): seconds, milliseconds? Rejected rather than guessed.
    case missingUnit(String)
    /// A unit other than s, m, h, d (units are lower case: "10M" could mean months).
    case unknownUnit(String)
    /// Not `<digits><unit>` (signs, spaces, decimals, several units).
    case malformed(String)
    /// "0s" where a positive duration is needed.
    case zero(String)
    case overflow(String)

    public var description: String {
        let expected = "expected a number and a unit s, m, h or d, e.g. 90s, 10m, 24h, 7d"
        return switch self {
        case .empty: "empty duration; \(expected)"
        case let .missingUnit(text): "duration '\(text)' has no unit; \(expected)"
        case let .unknownUnit(text): "duration '\(text)' has an unknown unit; \(expected)"
        case let .malformed(text): "invalid duration '\(text)'; \(expected)"
        case let .zero(text): "duration '\(text)' must be greater than zero"
        case let .overflow(text): "duration '\(text)' is too large"
        }
    }
}

/// Parses `<digits><unit>` with unit `s`, `m`, `h` or `d` into seconds.
public enum DurationParser {
    /// Seconds in `text`. Zero is rejected unless `allowZero` (a pending max or tolerance of 0 makes no sense);
    /// negative durations cannot be written. Bare numbers are rejected: the unit is required.
    public static func parse(_ text: String, allowZero: Bool = false) throws(DurationError) -> Int64 {
        let bytes = Array(text.utf8)
        guard let last = bytes.last else { throw .empty }
        let digits = bytes.dropLast()
        let isDigit = { (byte: UInt8) in byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        if isDigit(last) {
            throw bytes.allSatisfy(isDigit) ? .missingUnit(text) : .malformed(text)
        }
        guard !digits.isEmpty, digits.allSatisfy(isDigit) else {
            // "10 m", "-5m", "1.5h", "1h30m", "m": the part before the unit is not plain digits.
            throw .malformed(text)
        }
        let multiplier: Int64 =
            switch last {
            case UInt8(ascii: "s"): 1
            case UInt8(ascii: "m"): 60
            case UInt8(ascii: "h"): 3_600
            case UInt8(ascii: "d"): 86_400
            default: throw .unknownUnit(text)
            }
        var value: Int64 = 0
        for digit in digits {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.addingReportingOverflow(Int64(digit - 48))
            if overflow1 || overflow2 { throw .overflow(text) }
            value = next
        }
        let (seconds, overflow) = value.multipliedReportingOverflow(by: multiplier)
        if overflow { throw .overflow(text) }
        if seconds == 0, !allowZero { throw .zero(text) }
        return seconds
    }

    /// A duration for people: the largest whole unit, with one more when it matters ("3d 4h", "2h 5m", "45s").
    public static func describe(_ seconds: Int64) -> String {
        let units: [(Int64, String)] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")]
        guard seconds > 0 else { return "0s" }
        for (i, (size, name)) in units.enumerated() where seconds >= size {
            let whole = seconds / size, rest = seconds % size
            if i + 1 < units.count, rest >= units[i + 1].0 {
                return "\(whole)\(name) \(rest / units[i + 1].0)\(units[i + 1].1)"
            }
            return "\(whole)\(name)"
        }
        return "\(seconds)s"
    }
}
