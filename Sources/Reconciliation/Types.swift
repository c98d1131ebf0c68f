// The vocabulary shared by every room: providers, intents, states, orders and snapshots.
// Amounts are always integer minor units (see Money.swift); never Double.

public enum Provider: String, Sendable, Hashable, Codable, CaseIterable {
    case pxp, paypal, paypercut
}

public enum Intent: String, Sendable, Hashable, Codable, CaseIterable {
    case authorisation, estimatedAuthorisation = "estimated_authorisation", purchase, payout
    /// Authorisation-style intents: money is held first and captured later.
    public var isAuthorisation: Bool { self == .authorisation || self == .estimatedAuthorisation }
}

public enum Fulfilment: String, Sendable, Hashable, Codable, CaseIterable {
    case open, fulfilled, cancelled
}

/// The normalized state of a provider transaction (contract §6).
public enum TransactionState: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, actionRequired = "action_required", authorised, captured
    case partiallyRefunded = "partially_refunded", refunded, voided, failed
}

/// The merchant's order as stored in the `orders` table.
public struct Order: Sendable, Hashable, Codable {
    public var provider: Provider
    public var orderID: String
    public var merchant: String?      // nil or "" = not checked (PXP requires it)
    public var site: String?
    public var transactionRef: String
    public var intent: Intent
    public var amount: Money          // order total now
    public var fulfilment: Fulfilment
    public var refundAmount: Int64    // minor units of `amount.currency`, default 0

    public init(provider: Provider, orderID: String, merchant: String?, site: String?, transactionRef: String,
                intent: Intent, amount: Money, fulfilment: Fulfilment, refundAmount: Int64 = 0) {
        self.provider = provider; self.orderID = orderID; self.merchant = merchant; self.site = site
        self.transactionRef = transactionRef; self.intent = intent; self.amount = amount
        self.fulfilment = fulfilment; self.refundAmount = refundAmount
    }
}

/// The provider's answer, normalized (contract §6). A, C, R are minor units in `currency`.
public struct Snapshot: Sendable, Hashable, Codable {
    public var provider: Provider
    public var transactionRef: String
    public var merchant: String?
    public var site: String?
    public var intent: Intent
    public var currency: Currency
    public var value: Int64           // the transaction's own value (PXP transactionValue; PayPal purchase unit amount)
    public var authorised: Int64      // A
    public var captured: Int64        // C
    public var refunded: Int64        // R
    public var state: TransactionState
    public var rawState: String
    /// Unix seconds of the transaction's creation at the provider (PXP merchantTransactionDate, PayPal create_time).
    public var createdAt: Int64?
    /// Provider ids needed to act on it: PXP systemTransactionId; PayPal authorization / capture ids.
    public var actionTargets: ActionTargets

    public init(provider: Provider, transactionRef: String, merchant: String?, site: String?, intent: Intent,
                currency: Currency, value: Int64, authorised: Int64, captured: Int64, refunded: Int64,
                state: TransactionState, rawState: String, createdAt: Int64?, actionTargets: ActionTargets = .init()) {
        self.provider = provider; self.transactionRef = transactionRef; self.merchant = merchant; self.site = site
        self.intent = intent; self.currency = currency; self.value = value; self.authorised = authorised
        self.captured = captured; self.refunded = refunded; self.state = state; self.rawState = rawState
        self.createdAt = createdAt; self.actionTargets = actionTargets
    }
}

/// What the provider lets us act on, as read from its answer. The planner uses it for "where allowed".
public struct ActionTargets: Sendable, Hashable, Codable {
    /// PXP: the first systemTransactionId (modifications always name it).
    public var systemTransactionID: String?
    /// PayPal: the authorization that can still be captured or voided (status CREATED or PARTIALLY_CAPTURED), if any.
    public var authorizationID: String?
    /// PayPal: authorization status of that authorization (CREATED allows void).
    public var authorizationStatus: String?
    /// PayPal: captures that still hold unrefunded money, in creation order: (id, captured, refunded).
    public var refundableCaptures: [CaptureRef]

    public init(systemTransactionID: String? = nil, authorizationID: String? = nil, authorizationStatus: String? = nil,
                refundableCaptures: [CaptureRef] = []) {
        self.systemTransactionID = systemTransactionID; self.authorizationID = authorizationID
        self.authorizationStatus = authorizationStatus; self.refundableCaptures = refundableCaptures
    }
}

public struct CaptureRef: Sendable, Hashable, Codable {
    public var id: String
    public var amount: Int64
    public var refunded: Int64
    public init(id: String, amount: Int64, refunded: Int64) { self.id = id; self.amount = amount; self.refunded = refunded }
}
