// Exact decimal parsing into minor units: no Double, no rounding, no locale.

/// Why a decimal string or JSON number is not an amount.
public enum MoneyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text is empty.
    case empty
    /// A character that has no place in the number, at a 0-based UTF-8 offset.
    case invalidCharacter(String, offset: Int)
    /// A sign, point or exponent marker without the digits it needs ("-", "1.", ".5", "1e").
    case missingDigits
    /// JSON forbids leading zeros ("01"). Decimal strings allow them.
    case leadingZero
    /// Exponent notation ("1e2") in a decimal string; only JSON numbers may use it.
    case exponentNotation
    /// More decimals than the currency has ("25.000" for USD, "1.0" for JPY).
    case tooManyDecimals(currency: String?, allowed: Int, found: Int)
    /// The amount does not fit in Int64 minor units.
    case overflow

    public var description: String {
        switch self {
        case .empty: "empty amount"
        case let .invalidCharacter(character, offset): "invalid character '\(character)' at position \(offset + 1)"
        case .missingDigits: "not a number: digits missing"
        case .leadingZero: "leading zero in a JSON number"
        case .exponentNotation: "exponent notation is not allowed"
        case let .tooManyDecimals(currency?, allowed, _): "more decimals than \(currency) allows (\(allowed))"
        case let .tooManyDecimals(nil, allowed, _): "more decimals than the exponent allows (\(allowed))"
        case .overflow: "amount too large"
        }
    }
}

extension Money {
    /// Parses a decimal string in major units exactly: optional leading `-`, digits, optional `.` and at most
    /// `currency.exponent` digits. No `+`, exponent notation, spaces or thousands separators. Leading zeros are
    /// allowed ("007.50"); trailing zeros count as decimals ("25.000" is an error for USD).
    public static func parse(_ decimal: String, currency: Currency) throws(MoneyError) -> Money {
        do {
            return Money(
                minorUnits: try minorUnits(fromDecimal: decimal, exponent: currency.exponent),
                currency: currency)
        } catch {
            throw error.naming(currency)
        }
    }

    /// Same as `parse(_:currency:)`, spelled as in docs/ARCHITECTURE.md.
    public static func parse(decimal: String, currency: Currency) throws(MoneyError) -> Money {
        try parse(decimal, currency: currency)
    }

    /// Parses a JSON number given as its literal text ("50.05", "20", "-1", "1.0E2") exactly. RFC 8259 grammar:
    /// no leading zeros, no `+` before the number. Exponent notation is evaluated exactly; the decimals counted
    /// are those of the number written out positionally ("1.0E2" = 100 has none, "1.5E-1" = 0.15 has two).
    public static func parse(jsonNumberText text: String, currency: Currency) throws(MoneyError) -> Money {
        do {
            return Money(
                minorUnits: try minorUnits(fromJSONNumber: text, exponent: currency.exponent),
                currency: currency)
        } catch {
            throw error.naming(currency)
        }
    }

    /// The decimal-string parser of `parse(_:currency:)` without a currency: "25.5" at exponent 2 → 2550.
    public static func minorUnits(fromDecimal text: String, exponent: Int) throws(MoneyError) -> Int64 {
        let number = try DecimalText(parsing: Array(text.utf8), json: false)
        return try number.minorUnits(exponent: exponent)
    }

    /// The JSON-number parser of `parse(jsonNumberText:currency:)` without a currency.
    public static func minorUnits(fromJSONNumber text: String, exponent: Int) throws(MoneyError) -> Int64 {
        let number = try DecimalText(parsing: Array(text.utf8), json: true)
        return try number.minorUnits(exponent: exponent)
    }
}

extension MoneyError {
    /// The error with the currency's code in a decimals message ("more decimals than USD allows (2)").
    func naming(_ currency: Currency?) -> MoneyError {
        if case let .tooManyDecimals(_, allowed, found) = self {
            return .tooManyDecimals(currency: currency?.code, allowed: allowed, found: found)
        }
        return self
    }
}

/// A syntactically valid number: sign, the digits of integer and fraction parts, and a decimal exponent.
/// Its value is (-1)^negative × digits × 10^(exponent10 − fractionCount).
struct DecimalText {
    var negative = false
    var digits: [UInt8] = []  // integer part followed by fraction part, as values 0...9
    var fractionCount = 0
    var exponent10 = 0  // from `e`/`E` (JSON only); saturated at ±1_000_000

    init(parsing bytes: [UInt8], json: Bool) throws(MoneyError) {
        guard !bytes.isEmpty else { throw .empty }
        var index = 0
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        func invalid(_ at: Int) -> MoneyError {
            let byte = bytes[at]
            if !json, byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { return .exponentNotation }
            // Report the whole UTF-8 scalar when it is not ASCII.
            var end = at + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            return .invalidCharacter(String(decoding: bytes[at..<end], as: UTF8.self), offset: at)
        }

        if bytes[index] == UInt8(ascii: "-") { negative = true; index += 1 }
        let integerStart = index
        while index < bytes.count, isDigit(bytes[index]) { digits.append(bytes[index] - 48); index += 1 }
        let integerCount = index - integerStart
        if integerCount == 0 { throw index < bytes.count ? invalid(index) : .missingDigits }
        if json, integerCount > 1, digits[0] == 0 { throw .leadingZero }

        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let fractionStart = index
            while index < bytes.count, isDigit(bytes[index]) { digits.append(bytes[index] - 48); index += 1 }
            fractionCount = index - fractionStart
            if fractionCount == 0 { throw index < bytes.count ? invalid(index) : .missingDigits }
        }

        if json, index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            var exponentNegative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            let exponentStart = index
            var value = 0
            while index < bytes.count, isDigit(bytes[index]) {
                value = min(value * 10 + Int(bytes[index] - 48), 1_000_000)
                index += 1
            }
            if index == exponentStart { throw index < bytes.count ? invalid(index) : .missingDigits }
            exponent10 = exponentNegative ? -value : value
        }
        if index < bytes.count { throw invalid(index) }
    }

    /// Decimals of the number written positionally, trailing zeros included ("1.50" → 2, "1.5E1" → 0).
    var decimals: Int { max(0, fractionCount - exponent10) }

    func minorUnits(exponent: Int) throws(MoneyError) -> Int64 {
        precondition(exponent >= 0, "negative exponent")
        guard decimals <= exponent else {
            throw .tooManyDecimals(currency: nil, allowed: exponent, found: decimals)
        }
        // value × 10^exponent = digits × 10^(exponent + exponent10 − fractionCount); that power is ≥ 0 here.
        let zeros = exponent + exponent10 - fractionCount
        // Accumulate as a negative number so that Int64.min is reachable.
        var accumulator: Int64 = 0
        func push(_ digit: UInt8) throws(MoneyError) {
            let (shifted, overflow1) = accumulator.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.subtractingReportingOverflow(Int64(digit))
            if overflow1 || overflow2 { throw .overflow }
            accumulator = next
        }
        for digit in digits { try push(digit) }
        if accumulator != 0 {
            guard zeros <= 19 else { throw .overflow }
            for _ in 0..<zeros { try push(0) }
        }
        if negative { return accumulator }
        guard accumulator != .min else { throw .overflow }
        return -accumulator
    }
}
