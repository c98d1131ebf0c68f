import Foundation
import Reconciliation

/// A Paypercut webhook event (the Event object: `id`, `type`, `data.object`), reduced to what deduplication and
/// finding the payment need.
public struct PaypercutEvent: Sendable, Hashable {
    /// Event `id`: the dedupe key.
    public var id: String
    /// `type`, e.g. `payment_intent.captured`, `checkout_session.completed`.
    public var type: String
    /// `account` (connected-account deliveries).
    public var account: String?
    /// `data.object.object`, e.g. `payment_intent`, `checkout_session`.
    public var objectType: String?
    /// `data.object.id`.
    public var objectID: String?
    /// The payment intent the event concerns: `data.object.id` for a payment-intent object (or a
    /// `payment_intent.*` event), else `data.object.payment_intent` (a checkout session names its intent there).
    public var paymentIntentID: String?

    public var dedupeKey: String { id }

    public init(
        id: String, type: String, account: String? = nil, objectType: String? = nil, objectID: String? = nil,
        paymentIntentID: String? = nil
    ) {
        self.id = id; self.type = type; self.account = account
        self.objectType = objectType; self.objectID = objectID; self.paymentIntentID = paymentIntentID
    }

    /// Parses a delivery body: a JSON object with string `id` and `type`, else `malformed_body`.
    public static func parse(body: [UInt8]) throws(WebhookRejection) -> PaypercutEvent {
        let object = try JSONBody.object(body)
        guard let id = JSONBody.string(object["id"]) else {
            throw WebhookRejection(.malformedBody, "the event has no string \"id\"")
        }
        guard let type = JSONBody.string(object["type"]) else {
            throw WebhookRejection(.malformedBody, "the event has no string \"type\"")
        }
        let dataObject = object["data"]?["object"]
        let objectType = JSONBody.string(dataObject?["object"])
        let objectID = JSONBody.string(dataObject?["id"])
        let isIntent = objectType == "payment_intent" || (objectType == nil && type.hasPrefix("payment_intent."))
        let intent = isIntent ? objectID : JSONBody.string(dataObject?["payment_intent"])
        return PaypercutEvent(
            id: id, type: type, account: JSONBody.string(object["account"]), objectType: objectType,
            objectID: objectID, paymentIntentID: intent)
    }
}
