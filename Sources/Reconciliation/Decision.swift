// Which rows of the decision table fired for one plan, and the figures they saw: what `payrecon explain` shows as
// the reason for a finding or an action. Kept beside the plan (the planner names the row as it yields), never
// reconstructed afterwards from the findings.

/// A row of the decision table (Planner.swift), with its words.
public enum DecisionRow: String, Sendable, Hashable, Codable, CaseIterable {
    case unknownOrder = "0-unknown"
    case missingAtProvider = "0-missing"
    case blocking = "0-blocking"
    case payout = "P"
    case incrementOpen = "1"
    case capture = "2"
    case incrementFulfilled = "3"
    case purchaseShort = "4"
    case fulfilledNotPaid = "5"
    case cancelledVoid = "6"
    case cancelledRefund = "7"
    case refundAmount = "8"
    case overCaptured = "9"
    case overRefunded = "10"
    case stalePending = "11"
    case disputed = "12"
    case reversed = "13"
    case actionFailed = "14"

    /// The row as the decision table says it (A authorised, C captured, R refunded, V reversed, D disputed, amt the
    /// order amount).
    public var words: String {
        switch self {
        case .unknownOrder: "the provider has a transaction no stored order holds → unknown_order"
        case .missingAtProvider: "the order names a transaction the provider does not know → missing_at_provider"
        case .blocking: "merchant, site, currency or intent differ from the order → that mismatch, and no action"
        case .payout:
            "payout intent: C ≠ amt → amount_mismatch; fulfilled and failed or voided → state_mismatch; pending too long → stale_pending"
        case .incrementOpen: "open order, authorisation intent, authorised, amt > A → increment amt − A where allowed, else amount_mismatch"
        case .capture:
            "fulfilled order, authorisation intent, authorised, C < amt ≤ A → capture amt − C where allowed, else action_not_allowed"
        case .incrementFulfilled:
            "fulfilled order, authorisation intent, authorised, amt > A → increment amt − A where allowed, else action_not_allowed"
        case .purchaseShort: "purchase intent, captured or refunded, C < amt → amount_mismatch"
        case .fulfilledNotPaid: "fulfilled order, transaction failed or voided → state_mismatch"
        case .cancelledVoid: "cancelled order, authorised, C = 0 → void where allowed, else action_not_allowed"
        case .cancelledRefund: "cancelled order, C − R − V > 0 → refund C − R − V where allowed, else action_not_allowed"
        case .refundAmount:
            "order not cancelled, refund_amount > R → refund refund_amount − R if refund_amount ≤ C and allowed, else action_not_allowed"
        case .overCaptured: "C > amt → over_captured"
        case .overRefunded: "R > (cancelled ? C : refund_amount) → over_refunded"
        case .stalePending: "pending or action_required longer than PAYRECON_PENDING_MAX → stale_pending"
        case .disputed: "D > 0 → disputed (refunds held while it is open)"
        case .reversed: "V > 0 → reversed"
        case .actionFailed: "an action of the order failed or its outcome is unknown, and the order still calls for it → action_failed"
        }
    }
}

/// What one plan decided and why.
public struct Decision: Sendable, Hashable, Codable {
    /// One row that fired, and what it yielded ("capture 7.00 USD", "amount_mismatch").
    public struct Fired: Sendable, Hashable, Codable {
        public var row: DecisionRow
        public var yields: String
        public init(row: DecisionRow, yields: String) { self.row = row; self.yields = yields }
    }

    /// The figures the rows compared (minor units of `currency`); nil without an order or an answer.
    public struct Figures: Sendable, Hashable, Codable {
        public var currency: Currency
        public var amount: Int64
        public var refundAmount: Int64
        public var fulfilment: Fulfilment
        public var intent: Intent
        public var state: TransactionState
        public var rawState: String
        public var authorised: Int64
        public var captured: Int64
        public var refunded: Int64
        public var reversed: Int64
        public var disputed: Int64

        public init(order: Order, snapshot: Snapshot) {
            currency = order.amount.currency; amount = order.amount.minorUnits; refundAmount = order.refundAmount
            fulfilment = order.fulfilment; intent = order.intent; state = snapshot.state; rawState = snapshot.rawState
            authorised = snapshot.authorised; captured = snapshot.captured; refunded = snapshot.refunded
            reversed = snapshot.reversed; disputed = snapshot.disputed
        }

        /// `A 10.00, C 3.00, R 0.00, V 0.00, D 0.00 USD`.
        public var described: String {
            func m(_ v: Int64) -> String { Money.format(minorUnits: v, exponent: currency.exponent) }
            return "amt \(m(amount)) (refund_amount \(m(refundAmount))), order \(fulfilment.rawValue) \(intent.rawValue); "
                + "provider \(state.rawValue) (\(rawState)): A \(m(authorised)), C \(m(captured)), R \(m(refunded)), "
                + "V \(m(reversed)), D \(m(disputed)) \(currency.code)"
        }
    }

    public var fired: [Fired]
    public var figures: Figures?

    public init(fired: [Fired] = [], figures: Figures? = nil) { self.fired = fired; self.figures = figures }
}
