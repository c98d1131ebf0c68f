/// One movement of money the provider's answer states: a capture (or a sale) paid in, a refund paid back, a
/// reversal taken back. With the fee the provider took (or, on a refund, gave back) and the net that reached (or
/// left) the merchant's balance, where the answer states them. payrecon sums them per day in `report --view fees`
/// and matches them to settlement lines by `id`.
public struct Movement: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Money in: a capture, a sale, a payment.
        case capture
        /// Money the merchant gave back.
        case refund
        /// Money the payer's bank or the provider took back (a chargeback).
        case reversal
    }

    /// The provider's id of the movement (PayPal's capture, refund or sale id; Paypercut's payment id).
    public var id: String
    public var kind: Kind
    /// Unix seconds at which it happened, when the answer says.
    public var at: Int64?
    public var currency: Currency
    /// Minor units, never negative: the direction is the kind's.
    public var gross: Int64
    /// The fee the provider took (a capture) or gave back (a refund), in `currency`; nil where the answer states none
    /// (PayPal gives no breakdown while a capture is pending).
    public var fee: Int64?
    /// What reached the merchant's balance (a capture) or left it (a refund); nil where the answer states neither it
    /// nor the fee.
    public var net: Int64?
    /// What reached (or left) the merchant's balance in another currency, when the provider converted the net (PayPal:
    /// a capture's `receivable_amount`, a refund's `net_amount_in_receivable_currency`): then `net` never reached the
    /// balance in `currency`, and the fees view counts this in `receivedCurrency` instead. nil without a conversion.
    public var received: Int64?
    public var receivedCurrency: Currency?

    public init(
        id: String, kind: Kind, at: Int64?, currency: Currency, gross: Int64, fee: Int64? = nil, net: Int64? = nil,
        received: Int64? = nil, receivedCurrency: Currency? = nil
    ) {
        self.id = id; self.kind = kind; self.at = at; self.currency = currency; self.gross = gross; self.fee = fee; self.net = net
        self.received = received; self.receivedCurrency = receivedCurrency
    }

    /// The net from a stated fee when the answer states no net (gross − fee); nil when it states neither, or the
    /// difference cannot be represented.
    public static func net(gross: Int64, fee: Int64?, stated: Int64?) -> Int64? {
        if let stated { return stated }
        guard let fee else { return nil }
        let (n, overflow) = gross.subtractingReportingOverflow(fee)
        return overflow ? nil : n
    }
}
