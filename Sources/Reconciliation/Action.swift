// Actions the planner asks for, and the ones already recorded.

/// A provider operation payrecon can ask for.
public enum ActionKind: String, Sendable, Hashable, Codable, CaseIterable {
    case capture, void, refund, increment
}

/// The recorded outcome of an emitted action.
public enum ActionStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, succeeded, failed, superseded
}

/// An action the order calls for and the provider allows.
public struct PlannedAction: Sendable, Hashable, Codable {
    public var kind: ActionKind
    /// The operation's own amount in minor units, always > 0: capture amt − C, refund its difference,
    /// increment amt − A, void A − C (what the void releases).
    public var amount: Int64
    public var currency: Currency
    /// The cumulative total the action brings the transaction to (captured, refunded or authorised); 0 for a void.
    public var target: Int64
    /// `provider:order_id:action:target`: planning again yields the same key, so nothing is emitted twice.
    public var idempotencyKey: String
    /// The provider object to act on: PXP systemTransactionId; PayPal authorization id (capture, void) or capture
    /// id (refund); Paypercut payment intent id.
    public var providerTarget: String?
    /// With several transactions: the one it acts on (its key ends with it); nil for a single-transaction order.
    public var transactionRef: String?

    public init(
        kind: ActionKind, amount: Int64, currency: Currency, target: Int64, idempotencyKey: String,
        providerTarget: String?, transactionRef: String? = nil
    ) {
        self.kind = kind; self.amount = amount; self.currency = currency; self.target = target
        self.idempotencyKey = idempotencyKey; self.providerTarget = providerTarget; self.transactionRef = transactionRef
    }

    /// `provider:order_id:action:target`, and `:transaction_ref` when the order has several transactions.
    public static func idempotencyKey(
        provider: Provider, orderID: String, kind: ActionKind, target: Int64,
        transactionRef: String? = nil
    ) -> String {
        "\(provider.rawValue):\(orderID):\(kind.rawValue):\(target)" + (transactionRef.map { ":" + $0 } ?? "")
    }
}

/// An action recorded earlier for the same order, as the store knows it.
public struct EmittedAction: Sendable, Hashable, Codable {
    public var idempotencyKey: String
    public var kind: ActionKind
    public var status: ActionStatus
    public var amount: Int64
    /// The call may have reached the provider and its outcome is not known yet (a timeout, a cut connection, a
    /// crash, or the provider answered that it is still pending): no plan may be made as if it had not happened.
    public var inDoubt: Bool
    /// With several transactions, the one the action acts on (nil: the order's only one).
    public var transactionRef: String?
    /// What the provider answered, for a failed action (the detail of `action_failed`).
    public var lastError: String?
    /// Its key was sent to the provider: a need that maps to it once it is superseded takes a key of its own.
    public var sent: Bool

    public init(
        idempotencyKey: String, kind: ActionKind, status: ActionStatus, amount: Int64, inDoubt: Bool = false,
        transactionRef: String? = nil, lastError: String? = nil, sent: Bool = false
    ) {
        self.idempotencyKey = idempotencyKey; self.kind = kind; self.status = status; self.amount = amount
        self.inDoubt = inDoubt; self.transactionRef = transactionRef; self.lastError = lastError; self.sent = sent
    }
}

/// What `payrecon actions retry` did with one failed action.
public enum ActionRetryResult: Sendable, Equatable {
    /// Pending again, with the fresh plan's amount (minor units).
    case pending(amount: Int64)
    /// The fresh plan no longer wants it: superseded, with why.
    case retired(String)
    /// It could not be re-planned now (the provider or the database); nothing changed.
    case notNow(String)
    /// It is not failed (pending, done, superseded…): nothing to retry.
    case notFailed(String)
    /// No action has this id.
    case noSuchAction(String)
}
