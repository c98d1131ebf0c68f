import Foundation
import Reconciliation

/// A PayPal resource a webhook names, to be re-fetched through the API.
public enum PayPalReference: Sendable, Hashable {
    case order(String)
    case authorization(String)
    case capture(String)
    case refund(String)

    public var id: String {
        switch self {
        case .order(let id), .authorization(let id), .capture(let id), .refund(let id): id
        }
    }
}

/// A PayPal webhook event, reduced to what deduplication and finding the order need (the body is a hint: amounts
/// and statuses are re-fetched, never read from here).
public struct PayPalEvent: Sendable, Hashable {
    /// Event `id` (`WH-…`): the dedupe key (stable across PayPal's resends; transmission ids are not).
    public var id: String
    public var eventType: String?
    public var resourceType: String?
    public var resourceID: String?
    /// Every resource the event names, most direct first and without repeats: the resource itself (by its type), then
    /// `supplementary_data.related_ids` (order, authorization, capture), `resource.order_id`, then `links` with
    /// rel `up` (`/v2/checkout/orders/{id}`, `/v2/payments/authorizations/{id}`, `/v2/payments/captures/{id}` — a
    /// refund's `up` is its capture).
    public var references: [PayPalReference]

    public var dedupeKey: String { id }

    /// The order id, when the event names one directly (else the worker finds the order through the capture or
    /// authorization).
    public var orderID: String? {
        for case .order(let id) in references { return id }
        return nil
    }

    public init(id: String, eventType: String? = nil, resourceType: String? = nil, resourceID: String? = nil,
                references: [PayPalReference] = []) {
        self.id = id; self.eventType = eventType; self.resourceType = resourceType
        self.resourceID = resourceID; self.references = references
    }

    /// Parses a delivery body: a JSON object with a string `id`, else `malformed_body`.
    public static func parse(body: [UInt8]) throws(WebhookRejection) -> PayPalEvent {
        let object = try JSONBody.object(body)
        guard let id = JSONBody.string(object["id"]) else {
            throw WebhookRejection(.malformedBody, "the event has no string \"id\"")
        }
        let resource = object["resource"]
        let resourceType = JSONBody.string(object["resource_type"])
        let resourceID = JSONBody.string(resource?["id"])

        var references: [PayPalReference] = []
        func add(_ reference: PayPalReference?) {
            if let reference, !references.contains(reference) { references.append(reference) }
        }
        if let resourceID {
            switch resourceType {
            case "checkout-order": add(.order(resourceID))
            case "authorization": add(.authorization(resourceID))
            case "capture": add(.capture(resourceID))
            case "refund": add(.refund(resourceID))
            default: break
            }
        }
        let related = resource?["supplementary_data"]?["related_ids"]
        add(JSONBody.string(related?["order_id"]).map(PayPalReference.order))
        add(JSONBody.string(related?["authorization_id"]).map(PayPalReference.authorization))
        add(JSONBody.string(related?["capture_id"]).map(PayPalReference.capture))
        add(JSONBody.string(resource?["order_id"]).map(PayPalReference.order))
        for link in resource?["links"]?.arrayValue ?? [] {
            guard JSONBody.string(link["rel"])?.lowercased() == "up",
                  let href = JSONBody.string(link["href"]) else { continue }
            add(reference(href: href))
        }
        return PayPalEvent(id: id, eventType: JSONBody.string(object["event_type"]), resourceType: resourceType,
                           resourceID: resourceID, references: references)
    }

    /// `…/v2/checkout/orders/{id}`, `…/v2/payments/{authorizations|captures|refunds}/{id}` → the reference.
    static func reference(href: String) -> PayPalReference? {
        var path = Substring(href)
        if let scheme = path.range(of: "://") {
            path = path[scheme.upperBound...]
            guard let slash = path.firstIndex(of: "/") else { return nil }
            path = path[slash...]
        }
        if let end = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<end] }
        let parts = path.split(separator: "/").map(String.init)
        guard parts.count >= 4, parts[0] == "v2" else { return nil }
        let id = parts[3]
        guard !id.isEmpty else { return nil }
        switch (parts[1], parts[2]) {
        case ("checkout", "orders"): return .order(id)
        case ("payments", "authorizations"): return .authorization(id)
        case ("payments", "captures"): return .capture(id)
        case ("payments", "refunds"): return .refund(id)
        default: return nil
        }
    }
}
