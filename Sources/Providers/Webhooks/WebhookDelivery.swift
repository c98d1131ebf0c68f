import Foundation
import Reconciliation

/// What the receiver stores about a verified delivery: its dedupe key and (when the body says) its event type.
public struct WebhookDeliverySummary: Sendable, Hashable {
    public var provider: Provider
    /// PayPal / Paypercut event `id`; PXP `X-Request-Id`, else the SHA-256 hex of the body.
    public var dedupeKey: String
    public var eventType: String?

    public init(provider: Provider, dedupeKey: String, eventType: String?) {
        self.provider = provider; self.dedupeKey = dedupeKey; self.eventType = eventType
    }

    /// Parses a (verified) delivery body for `provider`; throws `malformed_body` when it is not that provider's shape.
    public static func parse(provider: Provider, body: [UInt8], headers: Headers) throws(WebhookRejection) -> WebhookDeliverySummary {
        switch provider {
        case .pxp:
            let notification = try PXPNotification.parse(body: body, headers: headers)
            return WebhookDeliverySummary(provider: .pxp, dedupeKey: notification.dedupeKey, eventType: notification.eventType)
        case .paypal:
            let event = try PayPalEvent.parse(body: body)
            return WebhookDeliverySummary(provider: .paypal, dedupeKey: event.dedupeKey, eventType: event.eventType)
        case .paypercut:
            let event = try PaypercutEvent.parse(body: body)
            return WebhookDeliverySummary(provider: .paypercut, dedupeKey: event.dedupeKey, eventType: event.type)
        }
    }
}
