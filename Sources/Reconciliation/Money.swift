// Money: Int64 minor units in an ISO 4217 currency. Never Double.

/// An amount in minor units of a currency: `Money(minorUnits: 2500, currency: usd)` is 25.00 USD.
public struct Money: Sendable, Hashable, Codable, CustomStringConvertible {
    public var minorUnits: Int64
    public var currency: Currency

    public init(minorUnits: Int64, currency: Currency) {
        self.minorUnits = minorUnits
        self.currency = currency
    }

    /// Major units with exactly the currency's exponent digits: "25.00", "1000" (JPY), "1.250" (BHD), "-0.01".
    public var formatted: String { Money.format(minorUnits: minorUnits, exponent: currency.exponent) }

    /// "25.00 USD".
    public var description: String { "\(formatted) \(currency.code)" }

    /// Formats minor units as major units with exactly `exponent` decimals (no decimal point when it is 0).
    public static func format(minorUnits: Int64, exponent: Int) -> String {
        precondition(exponent >= 0, "negative exponent")
        let magnitude = String(minorUnits.magnitude)  // UInt64: Int64.min formats too
        let sign = minorUnits < 0 ? "-" : ""
        guard exponent > 0 else { return sign + magnitude }
        let padded =
            magnitude.count <= exponent
            ? String(repeating: "0", count: exponent - magnitude.count + 1) + magnitude
            : magnitude
        let split = padded.index(padded.endIndex, offsetBy: -exponent)
        return "\(sign)\(padded[..<split]).\(padded[split...])"
    }
}
