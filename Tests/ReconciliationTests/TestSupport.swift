import Foundation
import Providers
@testable import Reconciliation

enum JSONCoding {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }
}

extension Currency {
    static let usd = Currency(code: "USD")!
    static let eur = Currency(code: "EUR")!
    static let jpy = Currency(code: "JPY")!
    static let bhd = Currency(code: "BHD")!
    static let clf = Currency(code: "CLF")!
}

/// Seeded generator for reproducible property tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Orders and snapshots for planner tests: USD, merchant "M1", site "S1", provider targets present and consistent.
enum Fixture {
    static let now: Int64 = 1_750_000_000
    static let pendingMax: Int64 = 86_400

    static func order(
        _ intent: Intent, _ fulfilment: Fulfilment, amount: Int64, refund: Int64 = 0,
        currency: Currency = .usd, merchant: String? = "M1", site: String? = nil
    ) -> Order {
        order(
            .pxp, intent, fulfilment, amount: amount, refund: refund, currency: currency, merchant: merchant,
            site: site)
    }

    static func order(
        _ provider: Provider, _ intent: Intent, _ fulfilment: Fulfilment, amount: Int64,
        refund: Int64 = 0, currency: Currency = .usd, merchant: String? = "M1",
        site: String? = nil, id: String = "ORD-1"
    ) -> Order {
        Order(
            provider: provider, orderID: id, merchant: merchant,
            site: site ?? (provider == .pxp ? "S1" : nil), transactionRef: "REF-1", intent: intent,
            amount: Money(minorUnits: amount, currency: currency), fulfilment: fulfilment, refundAmount: refund)
    }

    static func snapshot(
        _ intent: Intent, _ state: TransactionState, a: Int64, c: Int64 = 0, r: Int64 = 0,
        currency: Currency = .usd, merchant: String? = "M1", site: String? = "S1",
        createdAt: Int64? = now - 60, targets: ActionTargets? = nil,
        rawState: String? = nil
    ) -> Snapshot {
        snapshot(
            .pxp, intent, state, a: a, c: c, r: r, currency: currency, merchant: merchant, site: site,
            createdAt: createdAt, targets: targets, rawState: rawState)
    }

    static func snapshot(
        _ provider: Provider, _ intent: Intent, _ state: TransactionState,
        a: Int64, c: Int64 = 0, r: Int64 = 0, currency: Currency = .usd,
        merchant: String? = "M1", site: String? = "S1", createdAt: Int64? = now - 60,
        targets: ActionTargets? = nil, rawState: String? = nil
    ) -> Snapshot {
        let raw = rawState ?? defaultRawState(provider, state)
        let targets = targets ?? defaultTargets(provider, intent, state, a: a, c: c, r: r)
        return Snapshot(
            provider: provider, transactionRef: "REF-1", merchant: merchant,
            site: provider == .pxp ? site : nil, reportsSite: provider == .pxp, intent: intent, currency: currency,
            value: max(a, c), authorised: a, captured: c, refunded: r, state: state,
            rawState: raw, createdAt: createdAt,
            capabilities: targets.capabilities(provider, transactionRef: "REF-1", rawState: raw))
    }

    static func defaultRawState(_ provider: Provider, _ state: TransactionState) -> String {
        switch (provider, state) {
        case (.paypercut, .authorised): "requires_capture"
        case (.paypercut, .captured), (.paypercut, .partiallyRefunded), (.paypercut, .refunded): "succeeded"
        case (.paypercut, .pending): "processing"
        case (.paypercut, _): "canceled"
        case (.pxp, .authorised): "Authorised"
        case (.pxp, .captured): "Captured"
        case (.pxp, .failed): "Refused"
        case (.pxp, .voided): "Cancelled"
        case (.pxp, _): "Pending"
        case (.paypal, _): state == .actionRequired ? "PAYER_ACTION_REQUIRED" : "COMPLETED"
        }
    }

    static func defaultTargets(
        _ provider: Provider, _ intent: Intent, _ state: TransactionState,
        a: Int64, c: Int64, r: Int64
    ) -> ActionTargets {
        switch provider {
        case .pxp, .paypercut:
            return ActionTargets(systemTransactionID: provider == .pxp ? "SYS-1" : nil)
        case .paypal:
            let open = intent.isAuthorisation && state == .authorised && c < a
            return ActionTargets(
                authorizationID: open ? "AUTH-1" : nil,
                authorizationStatus: open ? (c == 0 ? "CREATED" : "PARTIALLY_CAPTURED") : nil,
                refundableCaptures: c > r ? [CaptureRef(id: "CAP-1", amount: c, refunded: r)] : [])
        }
    }

    static func plan(
        _ order: Order?, _ snapshot: Snapshot?, emitted: [EmittedAction] = [],
        now: Int64 = now
    ) -> Plan {
        Planner.plan(order: order, snapshot: snapshot, emitted: emitted, now: now, pendingMax: pendingMax)
    }
}

extension PlannedAction {
    /// "capture 1000→1000 @AUTH-1": kind, amount, target, provider target.
    var summary: String { "\(kind.rawValue) \(amount)→\(target)" + (providerTarget.map { " @\($0)" } ?? "") }
}

extension Plan {
    var kinds: [DiscrepancyKind] { findings.map(\.kind) }
    var actionSummaries: [String] { actions.map(\.summary) }
}

/// The provider ids a planner test names (PXP's systemTransactionId; PayPal's open authorization and captures).
/// `capabilities` turns them into what each provider's own mapping computes, so planner tests run the real
/// provider rules behind the seam.
struct ActionTargets: Hashable {
    var systemTransactionID: String?
    var authorizationID: String?
    var authorizationStatus: String?
    var refundableCaptures: [CaptureRef]

    init(
        systemTransactionID: String? = nil, authorizationID: String? = nil, authorizationStatus: String? = nil,
        refundableCaptures: [CaptureRef] = []
    ) {
        self.systemTransactionID = systemTransactionID; self.authorizationID = authorizationID
        self.authorizationStatus = authorizationStatus; self.refundableCaptures = refundableCaptures
    }

    func capabilities(_ provider: Provider, transactionRef: String, rawState: String) -> Capabilities {
        switch provider {
        case .pxp: PXPProvider.capabilities(systemTransactionID: systemTransactionID)
        case .paypal:
            PayPalProvider.capabilities(
                authorizationID: authorizationID, authorizationStatus: authorizationStatus,
                refundableCaptures: refundableCaptures)
        case .paypercut: PaypercutProvider.capabilities(paymentIntentID: transactionRef, rawState: rawState)
        }
    }
}

typealias CaptureRef = RefundSource

/// The order file as the CLI reads it: with the registry's provider traits.
extension OrderFile {
    static func parse(_ bytes: [UInt8]) throws(OrderFileRejection) -> [Order] { try parse(bytes, traits: ProviderRegistry.traits) }
    static func parse(text: String) throws(OrderFileRejection) -> [Order] { try parse(text: text, traits: ProviderRegistry.traits) }
}

extension OrderFileReader {
    init(chunks: @escaping () -> [UInt8]?) { self.init(chunks: chunks, traits: ProviderRegistry.traits) }
    init(bytes: [UInt8]) { self.init(bytes: bytes, traits: ProviderRegistry.traits) }
}
