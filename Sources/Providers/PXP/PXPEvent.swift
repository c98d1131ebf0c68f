import Crypto
import Foundation
import Reconciliation
import TextFormats

/// One PXP webhook event, reduced to what deduplication and finding the transaction need (the body is a hint:
/// amounts and states are never read from it).
public struct PXPEvent: Sendable, Hashable {
    /// `eventCode`, else `eventType`; PXP does not document which, so neither is required.
    public var eventType: String?
    /// `eventCategory` (`Transaction`, `Authentication`, `Token`, `Reporting`).
    public var eventCategory: String?
    public var eventDate: String?
    /// From `eventOwner`.
    public var merchantGroup: String?
    public var merchant: String?
    public var site: String?
    /// `merchantTransactionId` from `eventData`, or `eventData.transactionData` when nested: the order's transaction_ref.
    public var merchantTransactionID: String?
    /// `systemTransactionId`, same places: PXP's own id.
    public var systemTransactionID: String?

    public init(
        eventType: String? = nil, eventCategory: String? = nil, eventDate: String? = nil,
        merchantGroup: String? = nil, merchant: String? = nil, site: String? = nil,
        merchantTransactionID: String? = nil, systemTransactionID: String? = nil
    ) {
        self.eventType = eventType; self.eventCategory = eventCategory; self.eventDate = eventDate
        self.merchantGroup = merchantGroup; self.merchant = merchant; self.site = site
        self.merchantTransactionID = merchantTransactionID; self.systemTransactionID = systemTransactionID
    }
}

/// A PXP delivery: one event object or a JSON array of them, stored as one delivery.
public struct PXPNotification: Sendable, Hashable {
    /// `X-Request-Id`, else the SHA-256 hex of the raw body.
    public var dedupeKey: String
    /// The events in body order (at least one).
    public var events: [PXPEvent]

    /// The first event type present, for logs and the stored delivery row.
    public var eventType: String? { events.lazy.compactMap(\.eventType).first }

    /// Parses a delivery body. `malformed_body` unless it is a JSON object or a non-empty array of objects.
    public static func parse(body: [UInt8], headers: Headers) throws(WebhookRejection) -> PXPNotification {
        let json = try JSONBody.parse(body)
        let objects: [JSONValue]
        switch json {
        case .object:
            objects = [json]
        case .array(let array):
            guard !array.isEmpty else { throw WebhookRejection(.malformedBody, "the body is an empty JSON array; expected event objects") }
            for (index, element) in array.enumerated() {
                guard case .object = element else {
                    throw WebhookRejection(.malformedBody, "element \(index) of the body array is not a JSON object")
                }
            }
            objects = array
        default:
            throw WebhookRejection(
                .malformedBody, "the body is a JSON \(JSONBody.kind(json)); expected an event object or an array of them")
        }
        let key = headers.nonEmpty(PXPWebhookVerifier.requestIDHeader) ?? SHA256.hex(body)
        return PXPNotification(dedupeKey: key, events: objects.map(event))
    }

    private static func event(_ object: JSONValue) -> PXPEvent {
        let owner = object["eventOwner"]
        let data = object["eventData"]
        let nested = data?["transactionData"]
        func reference(_ name: String) -> String? { JSONBody.identifier(data?[name]) ?? JSONBody.identifier(nested?[name]) }
        return PXPEvent(
            eventType: JSONBody.string(object["eventCode"]) ?? JSONBody.string(object["eventType"]),
            eventCategory: JSONBody.string(object["eventCategory"]),
            eventDate: JSONBody.string(object["eventDate"]),
            merchantGroup: JSONBody.string(owner?["merchantGroup"]),
            merchant: JSONBody.string(owner?["merchant"]),
            site: JSONBody.string(owner?["site"]),
            merchantTransactionID: reference("merchantTransactionId"),
            systemTransactionID: reference("systemTransactionId"))
    }
}
