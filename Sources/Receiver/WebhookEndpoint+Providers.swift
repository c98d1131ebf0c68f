import Foundation
import HTTP
import Providers
import Reconciliation

/// A provider's endpoint: its webhook side verifies the raw bytes, then reads the dedupe key. The body is parsed only
/// after the signature holds: nothing unauthenticated is interpreted.
public struct VerifyingEndpoint: WebhookEndpoint {
    public let provider: Provider
    let webhook: any ProviderWebhook

    public init(provider: Provider, webhook: any ProviderWebhook) { self.provider = provider; self.webhook = webhook }

    public func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Acceptance {
        do {
            guard let event = try webhook.acceptWithoutWaiting(headers: headers, body: body, now: now) else { return .needsFetch }
            return .accepted(AcceptedDelivery(dedupeKey: event.dedupeKey, eventType: event.eventType, transmissionID: event.transmissionID))
        } catch { return .rejected(DeliveryRejection(error)) }
    }

    public func prepare(headers: HTTPHeaders, sender: String?, then: @escaping @Sendable () -> Void) {
        webhook.prepare(headers: headers, sender: sender, then: then)
    }
    public func keep(in store: any WebhookMaterialStore) { webhook.keep(in: store) }
    public func verified(from sender: String) { webhook.verified(from: sender) }

    /// One endpoint per provider whose webhook side is configured.
    public static func all(_ webhooks: [Provider: any ProviderWebhook]) -> [VerifyingEndpoint] {
        webhooks.sorted { $0.key.rawValue < $1.key.rawValue }.map { VerifyingEndpoint(provider: $0.key, webhook: $0.value) }
    }
}

extension DeliveryRejection {
    init(_ rejection: WebhookRejection) {
        self.init(status: rejection.httpStatus, code: rejection.code.rawValue, message: rejection.message)
    }
}
