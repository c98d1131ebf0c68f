import Foundation
import HTTP
import Providers
import Reconciliation

/// What the receiver needs of each provider: authenticate the raw delivery and name its dedupe key.
/// Implementations wrap the provider's verifier and event parser (Sources/Providers).
public protocol WebhookEndpoint: Sendable {
    var provider: Provider { get }
    /// Decides without waiting on anything: called on the HTTP thread serving the request.
    func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Acceptance
    /// Fetches what `accept` answered `.needsFetch` for, without blocking; `then` runs on any thread once `accept`
    /// can decide. `sender`: the address the delivery came from, whose share of fetches it spends.
    func prepare(headers: HTTPHeaders, sender: String?, then: @escaping @Sendable () -> Void)
    /// Restores, and from now on saves, what verification keeps across restarts.
    func keep(in store: any WebhookMaterialStore)
    /// A delivery from `sender` (its address) was accepted: a sender of genuine deliveries.
    func verified(from sender: String)
}

extension WebhookEndpoint {
    public func prepare(headers: HTTPHeaders, sender: String?, then: @escaping @Sendable () -> Void) { then() }
    public func keep(in store: any WebhookMaterialStore) {}
    public func verified(from sender: String) {}
}

/// What an endpoint decided about a delivery.
public enum Acceptance: Sendable {
    case accepted(AcceptedDelivery)
    case rejected(DeliveryRejection)
    /// Something must be fetched first (PayPal's signing certificate): `prepare`, then `accept` again.
    case needsFetch
}

public struct AcceptedDelivery: Sendable {
    public var dedupeKey: String
    public var eventType: String?
    public var transmissionID: String?
    public init(dedupeKey: String, eventType: String?, transmissionID: String? = nil) {
        self.dedupeKey = AcceptedDelivery.storable(dedupeKey)
        self.eventType = eventType.map { String(AcceptedDelivery.storable($0).prefix(200)) }
        self.transmissionID = transmissionID.map(AcceptedDelivery.storable)
    }

    /// Keys go into a text column: NUL bytes can't, and very long ones shouldn't; such keys are hashed instead.
    static func storable(_ s: String) -> String {
        if !s.utf8.contains(0) && s.utf8.count <= 256 { return s }
        return "sha256:" + SHA256.hex(Array(s.utf8))
    }
}

public struct DeliveryRejection: Error, Sendable {
    public var status: Int      // 400 or 401
    public var code: String     // the contract's error code
    public var message: String
    public init(status: Int, code: String, message: String) { self.status = status; self.code = code; self.message = message }
}
