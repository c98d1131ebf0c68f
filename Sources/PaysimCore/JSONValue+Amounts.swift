import Reconciliation
import TextFormats

// How paysim reads amounts: exact conversions from Reconciliation, with the strictness each source calls for.

extension JSONValue {
    /// A number or a string, as its text (counts, rates and seeds may be given either way).
    var scalarText: String? { numberLiteral ?? stringValue }

    /// An integer given as a number or a string (`3`, `"3"`); nil for anything else.
    var integerValue: Int64? { scalarText.flatMap { Int64($0) } }

    /// An amount in the admin API or a seed file: a number or decimal string converted exactly, trailing zeros
    /// beyond the exponent accepted (`"20.000"` USD is 2000, as a provider rendering it would mean); negative → nil.
    func seedMinorUnits(exponent: Int) -> Int64? {
        guard scalarText?.hasPrefix("-") == false, let minor = try? minorUnits(exponent: exponent) else { return nil }
        return minor
    }
}

enum RequestAmount {
    /// An amount in a provider API request, as strict as PXP and PayPal are: no sign, no exponent, no more decimals
    /// than the currency has (not even zeros: PXP refuses `1.0` JPY, PayPal answers DECIMAL_PRECISION); nil otherwise.
    static func minorUnits(_ text: String, exponent: Int) -> Int64? {
        guard !text.hasPrefix("-"), let minor = try? Money.minorUnits(fromDecimal: text, exponent: exponent)
        else { return nil }
        return minor
    }
}
