// Exact decimal ⇄ minor units, never through Double.
//
// Reconciliation's `Currency`/`Money` are still a placeholder on this branch (every exponent 2), so paysim keeps
// its own small ISO 4217 exponent table here. Switch `PaysimCurrency.exponent(of:)` to `Currency(code:)` once the
// real table lands; nothing else in PaysimCore reads exponents directly.

/// ISO 4217 currencies paysim accepts, with their minor-unit exponents.
public enum PaysimCurrency {
    static let zero: Set<String> = ["BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI",
                                    "VND", "VUV", "XAF", "XOF", "XPF"]
    static let three: Set<String> = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"]
    static let two: Set<String> = [
        "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BMD", "BND",
        "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CNY", "COP", "CRC", "CUP", "CVE", "CZK",
        "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GTQ", "GYD",
        "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IRR", "JMD", "KES", "KGS", "KHR", "KPW", "KYD", "KZT", "LAK",
        "LBP", "LKR", "LRD", "LSL", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN",
        "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "QAR", "RON",
        "RSD", "RUB", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP",
        "SZL", "THB", "TJS", "TMT", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "USD", "UYU", "UZS", "VES", "WST", "XCD",
        "YER", "ZAR", "ZMW", "ZWL",
    ]

    /// The minor-unit exponent of an ISO 4217 code (upper case), or nil for an unknown code.
    public static func exponent(of code: String) -> Int? {
        if two.contains(code) { return 2 }
        if zero.contains(code) { return 0 }
        if three.contains(code) { return 3 }
        return nil
    }
}

/// Exact conversions between decimal major-unit text and Int64 minor units.
public enum MinorUnits {
    /// Parses `"24.99"`, `"1000"`, `"1.250"` into minor units. Rejects signs, exponents, empty parts, more fraction
    /// digits than `exponent`, and overflow. Fewer fraction digits are padded (`"1.5"` at exponent 2 → 150).
    public static func parse(_ text: String, exponent: Int) -> Int64? {
        let utf8 = Array(text.utf8)
        var index = 0
        var integerDigits = 0
        var value: Int64 = 0
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        while index < utf8.count, isDigit(utf8[index]) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(utf8[index] - 0x30))
            if o1 || o2 { return nil }
            value = a
            index += 1
            integerDigits += 1
        }
        guard integerDigits > 0 else { return nil }
        var fractionDigits = 0
        if index < utf8.count {
            guard utf8[index] == UInt8(ascii: ".") else { return nil }
            index += 1
            while index < utf8.count, isDigit(utf8[index]) {
                fractionDigits += 1
                guard fractionDigits <= exponent else { return nil }
                let (m, o1) = value.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(utf8[index] - 0x30))
                if o1 || o2 { return nil }
                value = a
                index += 1
            }
            guard fractionDigits > 0, index == utf8.count else { return nil }
        }
        for _ in fractionDigits..<exponent {
            let (m, o) = value.multipliedReportingOverflow(by: 10)
            if o { return nil }
            value = m
        }
        return value
    }

    /// Formats minor units as major units with exactly `exponent` fraction digits (`2500, 2` → `"25.00"`).
    public static func format(_ minor: Int64, exponent: Int) -> String {
        let negative = minor < 0
        let magnitude = minor.magnitude
        var digits = String(magnitude)
        if exponent > 0 {
            if digits.count <= exponent { digits = String(repeating: "0", count: exponent - digits.count + 1) + digits }
            digits.insert(".", at: digits.index(digits.endIndex, offsetBy: -exponent))
        }
        return negative ? "-" + digits : digits
    }
}

/// An amount in a currency, as paysim's state keeps it.
public struct SimAmount: Sendable, Hashable {
    public var currency: String
    public var exponent: Int
    public var minor: Int64

    /// Parses a decimal in `currency`; nil for an unknown currency or an invalid/over-precise amount.
    public init?(decimal: String, currency: String) {
        let code = currency.uppercased()
        guard let exponent = PaysimCurrency.exponent(of: code), let minor = MinorUnits.parse(decimal, exponent: exponent)
        else { return nil }
        self.currency = code; self.exponent = exponent; self.minor = minor
    }

    public init(currency: String, exponent: Int, minor: Int64) {
        self.currency = currency; self.exponent = exponent; self.minor = minor
    }

    public var decimal: String { MinorUnits.format(minor, exponent: exponent) }
}
