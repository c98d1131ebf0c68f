import Reconciliation

/// paysim's PayPal fees: a model, not a fact payrecon relies on (payrecon only reads the fee an answer states).
/// Shaped after PayPal's published merchant fees for PayPal Checkout (a percentage plus a fixed fee per payment;
/// paypal.com/us/business/paypal-business-fees): 3.49% of the gross, rounded half up to PayPal's smallest unit of
/// the currency, plus 0.49 of a major unit (49 units where PayPal takes no decimals), never more than the gross. A
/// refund gives back the percentage part of its own amount, never the fixed part, so the fee returned differs from
/// the fee charged, as payments_payment_v2.json warns it may. A reversal gives back nothing.
enum PayPalFees {
    static let basisPoints: Int64 = 349

    /// The fee on a capture or sale of `gross` ISO minor units.
    static func capture(_ gross: Int64, _ currency: Currency) -> Int64 {
        let unit = PayPalBook.paypalUnit(currency)
        let decimals = PayPalBook.paypalDecimals(currency)
        var fixed: Int64 = 49
        if decimals > 2 { for _ in 2..<decimals { fixed *= 10 } }
        return min(gross, (percentage(gross / unit) + fixed) * unit)
    }

    /// The fee a refund of `gross` gives back.
    static func refund(_ gross: Int64, _ currency: Currency) -> Int64 {
        let unit = PayPalBook.paypalUnit(currency)
        return min(gross, percentage(gross / unit) * unit)
    }

    /// 3.49% of `units`, half up (exact: integers only).
    static func percentage(_ units: Int64) -> Int64 {
        let (product, overflow) = units.multipliedReportingOverflow(by: basisPoints)
        guard !overflow else { return units / 10_000 * basisPoints }
        return (product + 5_000) / 10_000
    }
}
