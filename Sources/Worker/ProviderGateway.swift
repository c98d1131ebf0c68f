import Foundation
import Providers
import Reconciliation

/// The provider APIs the worker re-fetches from and acts through. A webhook is a hint: only these answers are
/// compared. Providers without credentials are absent; asking for one is a permanent, explained failure.
public struct ProviderGateway: Sendable {
    public var pxp: PXPClient?
    public var paypal: PayPalClient?

    public init(pxp: PXPClient?, paypal: PayPalClient?) { self.pxp = pxp; self.paypal = paypal }

    static func notConfigured(_ p: Provider) -> ProviderOutcome<Snapshot> {
        let variables = switch p {
        case .pxp: "PXP_CLIENT_ID, PXP_TOKEN_ID and PXP_TOKEN_VALUE"
        case .paypal: "PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET"
        case .paypercut: "PAYPERCUT_SECRET_KEY (Paypercut reconciliation is not available yet)"
        }
        return .permanent(status: 0, body: "no \(p.rawValue) API client: set \(variables)")
    }

    /// The provider's snapshot of `transactionRef` (the order's, or an unknown one named by a webhook).
    /// PXP needs merchant and site (its API path); `modifications` are the PXP modification transactions known.
    func snapshot(provider: Provider, transactionRef: String, merchant: String?, site: String?,
                  modifications: [PXPModification]) async -> ProviderOutcome<Snapshot> {
        switch provider {
        case .pxp:
            guard let pxp else { return Self.notConfigured(.pxp) }
            guard let merchant, let site, !merchant.isEmpty, !site.isEmpty else {
                return .permanent(status: 0, body: "PXP order without merchant and site: they are part of PXP's API path")
            }
            return Self.mapped(await pxp.transaction(merchant: merchant, site: site, merchantTransactionId: transactionRef)) {
                try PXPMapping.snapshot(transaction: $0, modifications: modifications, transactionRef: transactionRef)
            }
        case .paypal:
            guard let paypal else { return Self.notConfigured(.paypal) }
            return Self.mapped(await paypal.order(transactionRef)) { try PayPalMapping.snapshot(order: $0) }
        case .paypercut:
            return Self.notConfigured(.paypercut)
        }
    }

    /// A mapping error is the provider saying something we cannot read: permanent, with the field named.
    static func mapped(_ outcome: ProviderOutcome<JSONValue>, _ map: (JSONValue) throws -> Snapshot) -> ProviderOutcome<Snapshot> {
        switch outcome {
        case .found(let json):
            do { return .found(try map(json)) } catch { return .permanent(status: 200, body: "unreadable answer: \(error)") }
        case .notFound: return .notFound
        case .transient(let r, let a): return .transient(reason: r, retryAfterSeconds: a)
        case .permanent(let s, let b): return .permanent(status: s, body: b)
        }
    }
}

extension ActionKind {
    var pxpOperation: PXPOperation {
        switch self {
        case .capture: .capture
        case .void: .void
        case .refund: .refund
        case .increment: .incremental
        }
    }
}
