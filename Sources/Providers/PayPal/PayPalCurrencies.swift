import Reconciliation

/// PayPal's own decimals for currencies where they differ from ISO 4217: HUF and TWD take no decimals at PayPal
/// (ISO gives them two; PayPal's currency codes reference: "This currency does not support decimals"), as JPY.
/// payrecon keeps ISO minor units everywhere else and converts only at PayPal's API.
public enum PayPalCurrencies {
    static let noDecimals: Set<String> = ["HUF", "JPY", "TWD"]

    /// The number of decimals PayPal takes for `currency`.
    public static func exponent(_ currency: Currency) -> Int {
        noDecimals.contains(currency.code) ? 0 : currency.exponent
    }

    /// ISO minor units in one PayPal unit of the last digit (HUF: 100; most currencies: 1).
    public static func unit(_ currency: Currency) -> Int64 {
        var unit: Int64 = 1
        for _ in 0..<max(0, currency.exponent - exponent(currency)) { unit *= 10 }
        return unit
    }

    /// A PayPal amount (in PayPal's decimals, already parsed to its units) as ISO minor units; nil on overflow.
    public static func isoMinorUnits(_ paypalUnits: Int64, _ currency: Currency) -> Int64? {
        let (v, overflow) = paypalUnits.multipliedReportingOverflow(by: unit(currency))
        return overflow ? nil : v
    }

    /// Why an amount cannot go to PayPal, or nil when it can.
    public static func refusal(_ minorUnits: Int64, _ currency: Currency) -> String? {
        let unit = unit(currency)
        guard unit > 1, minorUnits % unit != 0 else { return nil }
        return
            "PayPal takes \(currency.code) without decimals: \(Money.format(minorUnits: minorUnits, exponent: currency.exponent)) \(currency.code) cannot be sent"
    }
}
