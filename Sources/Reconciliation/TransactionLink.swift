/// A provider transaction linked to a merchant order: a modification payrecon made (a PXP capture has its own
/// systemTransactionId, linked to the parent), or another id a fetched transaction is known by (an alias). Stored
/// in `transaction_links`, provider-neutral; what the fields mean for a provider is its own folder's business.
public struct TransactionLink: Sendable, Hashable, Codable {
    public enum Source: String, Sendable, Hashable, Codable {
        /// payrecon made it (an executed action).
        case payrecon
        /// payrecon learned of it from the provider's answers.
        case learned
    }

    /// The provider's id of this transaction.
    public var externalID: String
    /// The transaction it modifies; nil for the order's own transaction (an alias).
    public var parentExternalID: String?
    public var orderID: String?
    /// `alias` for another id of the order's own transaction; the action kind (`capture`, `void`, `refund`,
    /// `increment`) of a modification; `sale` for a sale the order is paid by (PayPal v1); `dispute` for a dispute
    /// naming one of the order's payments (the parent).
    public var kind: String
    /// The operation's own amount, minor units of `currency`.
    public var amount: Int64?
    public var currency: String?
    /// The provider's state of this transaction.
    public var state: String?
    public var source: Source
    public var actionID: Int64?
    /// The total the modification brings its parent to, when payrecon knows it (an increment it sent: the new
    /// authorised total), so a count never depends on whether the provider shows it on the parent too.
    public var target: Int64?
    /// When the payment was created, as the provider's answer says (unix seconds): which billing period holds it.
    public var occurredAt: Int64?

    public static let aliasKind = "alias"
    public static let saleKind = "sale"
    public static let disputeKind = "dispute"
    /// A record of money the payer's bank or the provider took back (a PayPal reversal record named by
    /// PAYMENT.CAPTURE.REVERSED): counted in V, never in R.
    public static let reversalKind = "reversal"

    public init(externalID: String, parentExternalID: String?, orderID: String?, kind: String, amount: Int64? = nil,
                currency: String? = nil, state: String? = nil, source: Source, actionID: Int64? = nil, target: Int64? = nil,
                occurredAt: Int64? = nil) {
        self.externalID = externalID; self.parentExternalID = parentExternalID; self.orderID = orderID; self.kind = kind
        self.amount = amount; self.currency = currency; self.state = state; self.source = source; self.actionID = actionID
        self.target = target; self.occurredAt = occurredAt
    }

    /// Another id `orderID`'s own transaction is known by.
    public static func alias(_ id: String, orderID: String) -> TransactionLink {
        TransactionLink(externalID: id, parentExternalID: nil, orderID: orderID, kind: aliasKind, source: .learned)
    }
}
