import Foundation
import Reconciliation
import TextFormats

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

    /// `order`, `authorization`, `capture`, `refund` (for messages).
    public var kind: String {
        switch self {
        case .order: "order"
        case .authorization: "authorization"
        case .capture: "capture"
        case .refund: "refund"
        }
    }
}

/// What a PayPal event is about, read once from its body (the one parser of PayPal events: the receiver's dedupe and
/// the worker's tracing both use it). The body is a hint: what it names is re-fetched, never believed.
public enum PayPalSubject: Sendable, Hashable {
    /// A v2 resource (checkout order, authorization, capture, refund) or anything else that names v2 resources:
    /// `PayPalEvent.references`, most direct first.
    case payments
    /// A v1 sale (`PAYMENT.SALE.*`): the order is the one whose transaction_ref is the sale id, its
    /// `billing_agreement_id` (PayPal Subscriptions) or its `parent_payment` (classic Payments API).
    case sale(id: String, billingAgreement: String?, parentPayment: String?)
    /// A v1 refund of a sale (`PAYMENT.SALE.REFUNDED`): its amount counts into R of a partially refunded sale.
    case saleRefund(id: String, saleID: String, parentPayment: String?, amount: String?, currency: String?)
    /// A dispute (`CUSTOMER.DISPUTE.*`): the transactions it names (`disputed_transactions[].seller_transaction_id`,
    /// captures or sales).
    case dispute(id: String, transactions: [String])
    /// Names no payment (a vault token, a webhook about a product or plan): the reason says what it is.
    case noPayment(String)
}

/// A PayPal webhook event, reduced to what deduplication and finding the order need (the body is a hint: amounts
/// and statuses are re-fetched, never read from here).
public struct PayPalEvent: Sendable, Hashable {
    /// Event `id` (`WH-…`): the dedupe key (stable across PayPal's resends; transmission ids are not).
    public var id: String
    public var eventType: String?
    public var resourceType: String?
    public var resourceID: String?
    /// Every v2 resource the event names, most direct first and without repeats: the resource itself (by its type),
    /// then `supplementary_data.related_ids` (order, authorization, capture), `resource.order_id`
    /// (`CHECKOUT.PAYMENT-APPROVAL.REVERSED`, which has no resource_type), then `links` with rel `up`
    /// (`/v2/checkout/orders/{id}`, `/v2/payments/authorizations/{id}`, `/v2/payments/captures/{id}` — a refund's
    /// `up` is its capture).
    public var references: [PayPalReference]
    public var subject: PayPalSubject

    public var dedupeKey: String { id }

    /// The order id, when the event names one directly (else the worker finds the order through the capture or
    /// authorization).
    public var orderID: String? {
        for case .order(let id) in references { return id }
        return nil
    }

    public init(
        id: String, eventType: String? = nil, resourceType: String? = nil, resourceID: String? = nil,
        references: [PayPalReference] = [], subject: PayPalSubject? = nil
    ) {
        self.id = id; self.eventType = eventType; self.resourceType = resourceType
        self.resourceID = resourceID; self.references = references
        self.subject = subject ?? (references.isEmpty ? .noPayment(Self.namesNothing(eventType, resourceType)) : .payments)
    }

    /// Parses a delivery body: a JSON object with a string `id`, else `malformed_body`.
    public static func parse(body: [UInt8]) throws(WebhookRejection) -> PayPalEvent { try parseWithResource(body: body).event }

    /// As `parse`, with the event's `resource` as read (the worker traces it to its order without parsing again).
    static func parseWithResource(body: [UInt8]) throws(WebhookRejection) -> (event: PayPalEvent, resource: JSONValue?) {
        let object = try JSONBody.object(body)
        guard let id = JSONBody.string(object["id"]) else {
            throw WebhookRejection(.malformedBody, "the event has no string \"id\"")
        }
        let eventType = JSONBody.string(object["event_type"])
        let resourceType = JSONBody.string(object["resource_type"])
        let resource = object["resource"]
        let references = Self.references(resourceType: resourceType, resource: resource)
        let event = PayPalEvent(
            id: id, eventType: eventType, resourceType: resourceType, resourceID: JSONBody.string(resource?["id"]),
            references: references,
            subject: subject(eventType: eventType, resourceType: resourceType, resource: resource, references: references))
        return (event, resource)
    }

    /// The v2 resources a resource names (see `references`). Also used on resources fetched while tracing an event
    /// to its order, so one reader decides what links where.
    public static func references(resourceType: String?, resource: JSONValue?) -> [PayPalReference] {
        var references: [PayPalReference] = []
        func add(_ reference: PayPalReference?) {
            if let reference, !references.contains(reference) { references.append(reference) }
        }
        if let resourceID = JSONBody.string(resource?["id"]) {
            switch resourceType {
            case "checkout-order", "order": add(.order(resourceID))
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
                let href = JSONBody.string(link["href"])
            else { continue }
            add(reference(href: href))
        }
        return references
    }

    static func subject(
        eventType: String?, resourceType: String?, resource: JSONValue?,
        references: [PayPalReference]
    ) -> PayPalSubject {
        let type = eventType ?? ""
        // A v1 sale's refund comes in two shapes: a refund resource (`resource_type` refund, positive total, sandbox
        // 2017) and the one PayPal's webhook simulator sends (`resource_type` sale, `amount.total` negative, both
        // with `sale_id`). Either is a refund of |total| of the sale `sale_id` names.
        if let saleID = JSONBody.string(resource?["sale_id"]), let id = JSONBody.string(resource?["id"]),
            resourceType == "refund" || type == "PAYMENT.SALE.REFUNDED"
        {
            var total = JSONBody.string(resource?["amount"]?["total"])
            if let t = total, t.hasPrefix("-") { total = String(t.dropFirst()) }
            return .saleRefund(
                id: id, saleID: saleID, parentPayment: JSONBody.string(resource?["parent_payment"]),
                amount: total, currency: JSONBody.string(resource?["amount"]?["currency"]))
        }
        // v1 sales (classic Payments API, Subscriptions).
        if resourceType == "sale" || (type.hasPrefix("PAYMENT.SALE.") && resourceType != "refund"),
            let id = JSONBody.string(resource?["id"])
        {
            return .sale(
                id: id, billingAgreement: JSONBody.string(resource?["billing_agreement_id"]),
                parentPayment: JSONBody.string(resource?["parent_payment"]))
        }
        if resourceType == "dispute" || type.hasPrefix("CUSTOMER.DISPUTE."),
            let id = JSONBody.string(resource?["dispute_id"]) ?? JSONBody.string(resource?["id"])
        {
            let transactions = (resource?["disputed_transactions"]?.arrayValue ?? []).compactMap {
                JSONBody.string($0["seller_transaction_id"])
            }
            return .dispute(id: id, transactions: transactions)
        }
        if !references.isEmpty { return .payments }
        return .noPayment(namesNothing(eventType, resourceType))
    }

    /// Why an event is ignored: `VAULT.PAYMENT-TOKEN.CREATED names no payment`.
    static func namesNothing(_ eventType: String?, _ resourceType: String?) -> String {
        let what = eventType ?? "an event without event_type"
        if let resourceType { return "\(what) names no payment (resource_type \(resourceType))" }
        return "\(what) names no payment"
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
