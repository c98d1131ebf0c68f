// "Where allowed", as the provider sees it: what may be done to a transaction in its current state,
// and against which of the provider's ids. Each provider's mapping computes these from its own answer; the planner
// only adds the rules every provider shares (an authorisation, authorised, not fully captured; nothing captured for
// a void; captured money not yet refunded for a refund).

/// What the provider lets payrecon do to one transaction.
public struct Capabilities: Sendable, Hashable, Codable {
    public var capture: Capability
    public var void: Capability
    public var increment: Capability
    public var refund: RefundCapability
    /// Amounts sent must be whole multiples of this many minor units (PayPal takes HUF and TWD without decimals:
    /// 100); `amountUnitNote` says why, in the refusal of an amount that is not.
    public var amountUnit: Int64
    public var amountUnitNote: String?
    /// When one transaction holds several authorizations (a PayPal order of several purchase units): each open one,
    /// with what it authorised (`amount`) and what was captured on it (`refunded` holds the captured part), in order.
    /// A capture spreads over them and a void voids each; empty for a transaction of one authorization.
    public var captureSources: [RefundSource]

    public init(
        capture: Capability, void: Capability, increment: Capability, refund: RefundCapability,
        amountUnit: Int64 = 1, amountUnitNote: String? = nil, captureSources: [RefundSource] = []
    ) {
        self.capture = capture; self.void = void; self.increment = increment; self.refund = refund
        self.amountUnit = max(1, amountUnit); self.amountUnitNote = amountUnitNote; self.captureSources = captureSources
    }

    enum CodingKeys: String, CodingKey { case capture, void, increment, refund, amountUnit, amountUnitNote, captureSources }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            capture: try c.decode(Capability.self, forKey: .capture), void: try c.decode(Capability.self, forKey: .void),
            increment: try c.decode(Capability.self, forKey: .increment), refund: try c.decode(RefundCapability.self, forKey: .refund),
            amountUnit: try c.decodeIfPresent(Int64.self, forKey: .amountUnit) ?? 1,
            amountUnitNote: try c.decodeIfPresent(String.self, forKey: .amountUnitNote),
            captureSources: try c.decodeIfPresent([RefundSource].self, forKey: .captureSources) ?? [])
    }

    /// Why `amount` cannot be sent, or nil when it can.
    public func amountRefusal(_ amount: Int64, currency: Currency) -> String? {
        guard amountUnit > 1, amount % amountUnit != 0 else { return nil }
        let shown = Money.format(minorUnits: amount, exponent: currency.exponent) + " " + currency.code
        return (amountUnitNote ?? "amounts must be whole multiples of \(amountUnit) minor units") + ": \(shown) cannot be sent"
    }

    /// Nothing is known to be allowed (a snapshot stored before capabilities were recorded): every action is
    /// refused with `reason` until the transaction is fetched again.
    public static func unknown(
        _ reason: String = "what the provider allows is not known until the transaction is fetched again"
    ) -> Capabilities {
        Capabilities(capture: .denied(reason), void: .denied(reason), increment: .denied(reason), refund: .denied(reason))
    }
}

/// One operation on one transaction.
public enum Capability: Sendable, Hashable, Codable {
    /// The provider takes it now, against `target` (the id its API acts on; nil when the call needs none).
    case allowed(target: String?)
    /// The provider has the operation but would refuse it in this state; the reason says why.
    case denied(String)
    /// The provider has no such operation (PayPal and Paypercut have no incremental authorisation).
    case unsupported(String)
}

/// How a refund is taken.
public enum RefundCapability: Sendable, Hashable, Codable {
    /// One call against `target` refunds any amount up to what is captured and not yet refunded.
    case against(target: String?)
    /// Refunds act on these sources (PayPal captures), in order; a refund larger than one is spread over several.
    /// `sources` names them in a refusal ("PayPal captures hold only …").
    case spread([RefundSource], sources: String)
    /// No refund can be taken now.
    case denied(String)
}

/// Money a refund can be taken from: a capture of `amount`, of which `refunded` is refunded already.
public struct RefundSource: Sendable, Hashable, Codable {
    public var id: String
    public var amount: Int64
    public var refunded: Int64
    public init(id: String, amount: Int64, refunded: Int64) { self.id = id; self.amount = amount; self.refunded = refunded }
}

/// What each provider is, as far as the pure core and the order file need to know (declared in the provider's folder).
public struct ProviderTraits: Sendable, Hashable {
    /// The order's merchant and site are part of the provider's API path: an order file row needs both.
    public var requiresMerchantAndSite: Bool
    /// How the provider's subscriptions or billing agreements begin (PayPal `I-`): only an order whose transactions
    /// are all such may carry a billing period. Empty: the provider has none payrecon splits by period (each renewal
    /// is its own transaction, and its own order).
    public var agreementPrefixes: [String]

    public init(requiresMerchantAndSite: Bool = false, agreementPrefixes: [String] = []) {
        self.requiresMerchantAndSite = requiresMerchantAndSite
        self.agreementPrefixes = agreementPrefixes
    }

    /// Whether `ref` names a subscription or billing agreement.
    public func isAgreement(_ ref: String) -> Bool { agreementPrefixes.contains { ref.hasPrefix($0) && ref.count > $0.count } }
}
