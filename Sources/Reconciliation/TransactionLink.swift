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
    /// What the linked transaction is to the order (stored as its raw value in `transaction_links.kind`).
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Another id of the order's own transaction.
        case alias
        /// A modification of the parent: what an action of that kind made (or the provider shows).
        case capture, void, refund, increment
        /// A sale the order is paid by (PayPal v1, a subscription's cycle).
        case sale
        /// A dispute naming one of the order's payments (the parent).
        case dispute
        /// A record of money the payer's bank or the provider took back (a PayPal reversal record named by
        /// PAYMENT.CAPTURE.REVERSED): counted in V, never in R.
        case reversal

        /// The modification an action of `kind` makes.
        public init(_ kind: ActionKind) {
            switch kind {
            case .capture: self = .capture
            case .void: self = .void
            case .refund: self = .refund
            case .increment: self = .increment
            }
        }

        /// The action kind of a modification; nil for the other kinds.
        public var action: ActionKind? { ActionKind(rawValue: rawValue) }
    }

    public var kind: Kind
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

    public init(
        externalID: String, parentExternalID: String?, orderID: String?, kind: Kind, amount: Int64? = nil,
        currency: String? = nil, state: String? = nil, source: Source, actionID: Int64? = nil, target: Int64? = nil,
        occurredAt: Int64? = nil
    ) {
        self.externalID = externalID; self.parentExternalID = parentExternalID; self.orderID = orderID; self.kind = kind
        self.amount = amount; self.currency = currency; self.state = state; self.source = source; self.actionID = actionID
        self.target = target; self.occurredAt = occurredAt
    }

    /// Another id `orderID`'s own transaction is known by.
    public static func alias(_ id: String, orderID: String) -> TransactionLink {
        TransactionLink(externalID: id, parentExternalID: nil, orderID: orderID, kind: .alias, source: .learned)
    }
}
