// Discrepancies the planner reports.

/// A discrepancy kind; the raw values are the contract's names, stored and reported as such.
public enum DiscrepancyKind: String, Sendable, Hashable, Codable, CaseIterable {
    case missingAtProvider = "missing_at_provider"
    case unknownOrder = "unknown_order"
    case merchantMismatch = "merchant_mismatch"
    case siteMismatch = "site_mismatch"
    case currencyMismatch = "currency_mismatch"
    case intentMismatch = "intent_mismatch"
    case amountMismatch = "amount_mismatch"
    case overCaptured = "over_captured"
    case overRefunded = "over_refunded"
    case stateMismatch = "state_mismatch"
    case actionNotAllowed = "action_not_allowed"
    case stalePending = "stale_pending"
    case disputed
    case reversed
    case actionFailed = "action_failed"
    /// Settlement (`payrecon settlement import`): a capture or refund no settlement line shows after the deadline,
    /// a line no transaction of payrecon's matches, a line whose gross, currency or direction differ from the API's,
    /// a fee that differs, a file that does not add up or a day with no file.
    case settlementMissing = "settlement_missing"
    case unknownSettlement = "unknown_settlement"
    case settlementMismatch = "settlement_mismatch"
    case feeMismatch = "fee_mismatch"
    case settlementIncomplete = "settlement_incomplete"

    /// Kinds only settlement raises and resolves: a check of an order never resolves them (what it fetches says
    /// nothing of settlement files).
    public static let settlementKinds: [DiscrepancyKind] = [
        .settlementMissing, .unknownSettlement, .settlementMismatch, .feeMismatch,
        .settlementIncomplete
    ]
    public var isSettlement: Bool { Self.settlementKinds.contains(self) }

    /// Merchant, site, currency, intent mismatches and `missing_at_provider` block all actions for the order.
    public var isBlocking: Bool {
        switch self {
        case .missingAtProvider, .merchantMismatch, .siteMismatch, .currencyMismatch, .intentMismatch: true
        default: false
        }
    }
}

/// One discrepancy found by one check. `expected` / `actual` hold what the report prints (amounts in major units,
/// e.g. `["amount": "25.00"]`); `amountAtRisk` is in minor units of the order's currency (the snapshot's for
/// `unknown_order`) and feeds the report's "amount at risk" (see `Planner` for what each kind counts).
public struct Finding: Sendable, Hashable, Codable {
    public var kind: DiscrepancyKind
    public var expected: [String: String]
    public var actual: [String: String]
    public var detail: String
    public var amountAtRisk: Int64

    public init(
        kind: DiscrepancyKind, expected: [String: String], actual: [String: String], detail: String,
        amountAtRisk: Int64
    ) {
        self.kind = kind; self.expected = expected; self.actual = actual; self.detail = detail
        self.amountAtRisk = amountAtRisk
    }
}
