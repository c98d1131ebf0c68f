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

/// The normalized state of a provider transaction.
public enum TransactionState: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, actionRequired = "action_required", authorised, captured
    case partiallyRefunded = "partially_refunded", refunded, voided, failed
}

/// The merchant's order as stored in the `orders` table.
public struct Order: Sendable, Hashable, Codable {
    public var provider: Provider
    public var orderID: String
    public var merchant: String?  // nil or "" = not checked (PXP requires it)
    public var site: String?
    /// The order's first transaction (what a single-transaction order holds).
    public var transactionRef: String
    /// Every transaction of the order, in the order given (a retry after a decline, a split payment); the first is
    /// `transactionRef`. One element for most orders.
    public var transactionRefs: [String]
    public var intent: Intent
    public var amount: Money  // order total now
    public var fulfilment: Fulfilment
    public var refundAmount: Int64  // minor units of `amount.currency`, default 0
    /// The transactions payrecon added to the order because a provider's reference field named it (a PayPal
    /// `reference_id`, a Paypercut `metadata.order_id`: free text anyone creating a payment can set), each with the
    /// field it was learned from. Evidence, never authority: they count in the findings, and no action targets them
    /// or is planned only for the money they hold. Listing one in `transaction_ref` makes it the merchant's.
    public var learned: [String: String] = [:]
    /// The billing period this order charges, for an order whose transaction_ref is a subscription or billing
    /// agreement (PayPal `I-…`): of the agreement's payments, only those created within it are this order's. nil: the
    /// order holds every payment of its transactions.
    public var period: BillingPeriod?

    public init(
        provider: Provider, orderID: String, merchant: String?, site: String?, transactionRef: String,
        intent: Intent, amount: Money, fulfilment: Fulfilment, refundAmount: Int64 = 0, transactionRefs: [String]? = nil
    ) {
        self.provider = provider; self.orderID = orderID; self.merchant = merchant; self.site = site
        let refs = (transactionRefs ?? []).isEmpty ? [transactionRef] : transactionRefs!
        self.transactionRef = refs[0]; self.transactionRefs = refs; self.intent = intent; self.amount = amount
        self.fulfilment = fulfilment; self.refundAmount = refundAmount
    }

    /// Paid in several transactions: keys and findings name the transaction they concern.
    public var hasSeveralTransactions: Bool { transactionRefs.count > 1 }

    /// Whether the merchant listed `transactionRef` (or payrecon made it), so an action may act on it.
    public func mayActOn(_ transactionRef: String) -> Bool { learned[transactionRef] == nil }
}

/// A billing period: from `start` (included) to `end` (excluded), unix seconds, `start < end`. One renewal of a
/// subscription is one order, whose period holds the creation time of the payment that renewal took (PayPal's retry of
/// a failed renewal days later included: it is still made within the period).
public struct BillingPeriod: Sendable, Hashable, Codable, CustomStringConvertible {
    public var start: Int64
    public var end: Int64
    /// Given as dates without a time (`2026-01-01`), read as 00:00 UTC: for a merchant east or west of UTC a boundary
    /// may be hours off, so which cycle a payment made near one belongs to is not certain (no refund is taken from it).
    public var datesOnly: Bool
    /// Hours either side of a date-only boundary within which a payment's cycle is not certain (UTC+14 to UTC-12).
    public static let dateOnlyDoubt: Int64 = 14 * 3_600
    /// nil unless `start < end`.
    public init?(start: Int64, end: Int64, datesOnly: Bool = false) {
        guard start < end else { return nil }
        self.start = start; self.end = end; self.datesOnly = datesOnly
    }
    /// Whether a payment created at `t` is near enough a date-only boundary that its cycle is in doubt.
    public func nearADateBoundary(_ t: Int64) -> Bool {
        datesOnly && (abs(t - start) < Self.dateOnlyDoubt || abs(t - end) < Self.dateOnlyDoubt)
    }
    public func contains(_ t: Int64) -> Bool { start <= t && t < end }
    public func overlaps(_ other: BillingPeriod) -> Bool { start < other.end && other.start < end }
    /// `2026-01-01 – 2026-02-01` (dates when at midnight UTC, else full date-times).
    public var description: String { UnixTime.dateOrTime(start) + " – " + UnixTime.dateOrTime(end) }
}

/// The provider's answer, normalized. A, C, R are minor units in `currency`.
public struct Snapshot: Sendable, Hashable, Codable {
    public var provider: Provider
    public var transactionRef: String
    public var merchant: String?
    public var site: String?
    /// The provider's answer carries a site, compared with the order's (PXP: site is part of its API path).
    public var reportsSite: Bool
    /// The provider's answer carries the merchant (a PayPal v1 sale does not: the order's merchant is not compared).
    public var reportsMerchant: Bool
    public var intent: Intent
    public var currency: Currency
    public var value: Int64  // the transaction's own value (PXP transactionValue; PayPal purchase unit amount)
    public var authorised: Int64  // A
    public var captured: Int64  // C
    public var refunded: Int64  // R
    /// V: money the payer's bank or the provider took back without a refund the merchant made (chargebacks,
    /// capture reversals, bank returns). Counted in C, never in R.
    public var reversed: Int64
    /// D: money under open dispute (disputes not yet resolved).
    public var disputed: Int64
    /// Captures the provider accepted and has not finished (PayPal capture PENDING): not in C, yet money the provider
    /// may already be moving, so an authorisation's capturable room excludes it (planning on the bound that makes a
    /// capture smaller). Pending refunds need no figure of their own: they count in R.
    public var pendingCaptured: Int64 = 0
    public var state: TransactionState
    public var rawState: String
    /// Unix seconds of the transaction's creation at the provider (PXP merchantTransactionDate, PayPal create_time).
    public var createdAt: Int64?
    /// What the provider allows now, and against which of its ids (computed by the provider's mapping).
    public var capabilities: Capabilities
    /// Other ids the provider's webhooks may name this transaction by (PXP: its systemTransactionId). The store
    /// links them to the order, so an event naming only one of them finds it.
    public var aliases: [String]
    /// The payment method when the provider says it (`card`, `blik`, `aeropay`…): it picks the pending window.
    public var method: String?
    /// Merchant order ids the provider's answer names for this transaction (PayPal `purchase_units[].reference_id`
    /// and `custom_id`, Paypercut `metadata.order_id`): a transaction no order lists is linked to such an order.
    public var orderReferences: [String] = []
    /// For each of `orderReferences`, the answer's field that named it (`purchase_units[0].reference_id`): what a
    /// learned transaction's finding quotes. Used when the transaction is linked, not stored with the snapshot.
    public var orderReferenceFields: [String: String] = [:]
    /// What the provider would not show, said in the findings it bears on (a dispute PayPal refused to show: which
    /// permission is missing). The planner joins them to the `disputed` finding's detail.
    public var notes: [String] = []
    /// The captures, refunds and reversals the answer states, with their fees and nets where it states them.
    public var movements: [Movement] = []
    /// A refund of this transaction is pending at the provider (its mapping says so, and marks the raw state in its
    /// provider's words). Read from the answer as fetched: not stored with the snapshot.
    public var refundPending = false

    public init(
        provider: Provider, transactionRef: String, merchant: String?, site: String?, reportsSite: Bool = false,
        reportsMerchant: Bool = true, intent: Intent, currency: Currency, value: Int64, authorised: Int64, captured: Int64, refunded: Int64,
        state: TransactionState, rawState: String, createdAt: Int64?, capabilities: Capabilities = .unknown(),
        aliases: [String] = [], method: String? = nil, reversed: Int64 = 0, disputed: Int64 = 0
    ) {
        self.provider = provider; self.transactionRef = transactionRef; self.merchant = merchant; self.site = site
        self.reportsSite = reportsSite; self.reportsMerchant = reportsMerchant
        self.intent = intent; self.currency = currency; self.value = value; self.authorised = authorised
        self.captured = captured; self.refunded = refunded; self.state = state; self.rawState = rawState
        self.createdAt = createdAt; self.capabilities = capabilities; self.aliases = aliases; self.method = method
        self.reversed = reversed; self.disputed = disputed
    }

    enum CodingKeys: String, CodingKey {
        case provider, transactionRef, merchant, site, reportsSite, reportsMerchant, intent, currency, value, authorised, captured, refunded
        case state, rawState, createdAt, capabilities, aliases, method, reversed, disputed, orderReferences, notes, movements
        case pendingCaptured
    }

    /// Snapshots stored before capabilities, aliases, V and D were recorded decode with no capability known (every
    /// action refused until the next fetch, which records them) and V = D = 0.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            provider: try c.decode(Provider.self, forKey: .provider), transactionRef: try c.decode(String.self, forKey: .transactionRef),
            merchant: try c.decodeIfPresent(String.self, forKey: .merchant), site: try c.decodeIfPresent(String.self, forKey: .site),
            reportsSite: try c.decodeIfPresent(Bool.self, forKey: .reportsSite) ?? false,
            reportsMerchant: try c.decodeIfPresent(Bool.self, forKey: .reportsMerchant) ?? true,
            intent: try c.decode(Intent.self, forKey: .intent), currency: try c.decode(Currency.self, forKey: .currency),
            value: try c.decode(Int64.self, forKey: .value), authorised: try c.decode(Int64.self, forKey: .authorised),
            captured: try c.decode(Int64.self, forKey: .captured), refunded: try c.decode(Int64.self, forKey: .refunded),
            state: try c.decode(TransactionState.self, forKey: .state), rawState: try c.decode(String.self, forKey: .rawState),
            createdAt: try c.decodeIfPresent(Int64.self, forKey: .createdAt),
            capabilities: try c.decodeIfPresent(Capabilities.self, forKey: .capabilities) ?? .unknown(),
            aliases: try c.decodeIfPresent([String].self, forKey: .aliases) ?? [],
            method: try c.decodeIfPresent(String.self, forKey: .method),
            reversed: try c.decodeIfPresent(Int64.self, forKey: .reversed) ?? 0,
            disputed: try c.decodeIfPresent(Int64.self, forKey: .disputed) ?? 0)
        orderReferences = try c.decodeIfPresent([String].self, forKey: .orderReferences) ?? []
        notes = try c.decodeIfPresent([String].self, forKey: .notes) ?? []
        movements = try c.decodeIfPresent([Movement].self, forKey: .movements) ?? []
        pendingCaptured = try c.decodeIfPresent(Int64.self, forKey: .pendingCaptured) ?? 0
    }

    /// C and the captures still pending: what an authorisation has given up to captures, the bound a capture is
    /// planned against.
    public var capturedOrPending: Int64 {
        let (sum, overflow) = captured.addingReportingOverflow(pendingCaptured)
        return overflow ? .max : sum
    }
}
