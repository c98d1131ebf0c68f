import Crypto
import Foundation
import HTTP
import Observability
import Providers
import Reconciliation
import TextFormats

/// Where deliveries go. The default posts over HTTP; tests substitute a recorder.
public protocol WebhookTransport: Sendable {
    /// POSTs `body` with `headers` to `url`; returns the HTTP status (throws on a transport failure).
    func post(url: String, headers: [(String, String)], body: [UInt8]) async throws -> Int
}

/// One signed delivery, ready to send.
public struct WebhookDelivery: Sendable {
    /// PXP: X-Request-Id; PayPal: the event id (`WH-…`).
    public var id: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// A redelivery of the delivery before it (sent only after that one was answered).
    public var isRepeat = false

    public func header(_ name: String) -> String? { headers.first(where: { $0.0.lowercased() == name.lowercased() })?.1 }
}

/// How each provider signs a delivery.
public enum WebhookSigner {
    /// PXP: base64(HMAC-SHA256(key UTF-8, requestId + timestamp + body)).
    public static func pxpSignature(key: String, requestID: String, timestamp: String, body: [UInt8]) -> String {
        Base64.encode(HMAC.authenticate(.sha256, key: Array(key.utf8), message: Array((requestID + timestamp).utf8) + body))
    }

    /// PayPal: the signed message `transmissionId|transmissionTime|webhookId|crc32(body) decimal`.
    public static func paypalMessage(
        transmissionID: String, transmissionTime: String, webhookID: String,
        body: [UInt8]
    ) -> [UInt8] {
        Array("\(transmissionID)|\(transmissionTime)|\(webhookID)|\(CRC32.checksum(body))".utf8)
    }

    /// Paypercut: `Paypercut-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>` (docs.paypercut.io).
    public static func paypercutSignature(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=" + Hex.encode(HMAC.authenticate(.sha256, key: Array(secret.utf8), message: Array("\(timestamp).".utf8) + body))
    }

    public static func pxpHeaders(key: String, requestID: String, timestamp: String, body: [UInt8]) -> [(String, String)] {
        [
            ("Content-Type", "application/json"), ("X-Request-Id", requestID), ("X-Signature-Timestamp", timestamp),
            ("X-Signature", pxpSignature(key: key, requestID: requestID, timestamp: timestamp, body: body))
        ]
    }

    static func paypalHeaders(
        ca: PayPalTestCA, webhookID: String, transmissionID: String, time: String, certURL: String,
        body: [UInt8]
    ) throws -> [(String, String)] {
        let signature = try ca.sign(
            paypalMessage(
                transmissionID: transmissionID, transmissionTime: time,
                webhookID: webhookID, body: body))
        return [
            ("Content-Type", "application/json"), ("PAYPAL-TRANSMISSION-ID", transmissionID),
            ("PAYPAL-TRANSMISSION-TIME", time), ("PAYPAL-TRANSMISSION-SIG", Base64.encode(signature)),
            ("PAYPAL-CERT-URL", certURL), ("PAYPAL-AUTH-ALGO", "SHA256withRSA"), ("PAYPAL-AUTH-VERSION", "v2")
        ]
    }
}

/// POSTs through the project's `URLSessionHTTPClient` (10 s per delivery).
public struct HTTPClientWebhookTransport: WebhookTransport {
    let client: URLSessionHTTPClient

    public init(client: URLSessionHTTPClient = URLSessionHTTPClient(configuration: .init(timeout: .seconds(10), maxConcurrentRequests: 32)))
    {
        self.client = client
    }

    public func post(url: String, headers: [(String, String)], body: [UInt8]) async throws -> Int {
        try await client.send(HTTPClientRequest(method: "POST", url: url, headers: headers, body: body)).status
    }
}

extension Simulator {
    /// Builds the signed deliveries a `POST /admin/webhooks/send` body asks for (without sending them).
    ///
    /// PXP: `{provider:"pxp", merchant?, site?, merchantTransactionId | systemTransactionId, state?, event_code?,
    /// nested?, array?, count?, forged?, duplicate?, body?}`. PayPal: `{provider:"paypal", event_type,
    /// resource_id | order_id, count?, forged?, duplicate?, webhook_id?, body?}`. `body` (object) is sent as given.
    /// `count` distinct events (new ids); `duplicate` sends each one twice (PXP: the same headers again, as a retry;
    /// PayPal: same event id, new transmission); `forged` signs with the wrong key / webhook id.
    public func webhookDeliveries(_ request: JSONValue) throws -> [WebhookDelivery] {
        do { return try buildDeliveries(request) } catch {
            throw SeedError(message: Self.errorMessage(error))
        }
    }

    func buildDeliveries(_ request: JSONValue) throws(SimError) -> [WebhookDelivery] {
        guard request.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "expected a JSON object") }
        let count = request["count"]?.integerValue ?? 1
        guard count >= 1, count <= 100_000 else { throw SimError.admin(400, "invalid_field", "count must be 1...100000") }
        let forged = request["forged"]?.boolValue ?? false
        let duplicate = request["duplicate"]?.boolValue ?? false
        switch request["provider"]?.stringValue {
        case "pxp": return try pxpDeliveries(request, count: Int(count), forged: forged, duplicate: duplicate)
        case "paypal": return try paypalDeliveries(request, count: Int(count), forged: forged, duplicate: duplicate)
        case "paypercut": return try paypercutDeliveries(request, count: Int(count), forged: forged, duplicate: duplicate)
        default: throw SimError.admin(400, "invalid_field", "provider must be pxp, paypal or paypercut")
        }
    }

    private func pxpDeliveries(_ request: JSONValue, count: Int, forged: Bool, duplicate: Bool) throws(SimError) -> [WebhookDelivery] {
        let now = clock()
        let (event, key, requestIDs): (JSONValue, String, [String]) = try state.withLock { s throws(SimError) in
            let event: JSONValue
            if let body = request["body"], !body.isNull {
                event = body
            } else {
                var found: PXPTransaction?
                if let sid = request["systemTransactionId"]?.stringValue {
                    found = s.pxp.find(systemTransactionID: sid)
                } else if let mtid = request["merchantTransactionId"]?.stringValue {
                    if let merchant = request["merchant"]?.stringValue, let site = request["site"]?.stringValue {
                        found = s.pxp.find(merchant: merchant, site: site, merchantTransactionID: mtid)
                    } else {
                        found = s.pxp.find(merchantTransactionID: mtid)
                    }
                } else {
                    throw SimError.admin(400, "missing_field", "merchantTransactionId or systemTransactionId is required (or body)")
                }
                guard let t = found else { throw SimError.admin(404, "not_found", "no such PXP transaction") }
                var data = t.json
                let state = request["state"]?.stringValue ?? t.state
                data = data.setting("state", .string(state))
                let eventCode = request["event_code"]?.stringValue ?? "transaction-\(state.lowercased())"
                let nested = request["nested"]?.boolValue ?? false
                event = .object([
                    "eventCategory": "Transaction",
                    "eventCode": .string(eventCode),
                    "eventDate": .string(SimTime.rfc3339Millis(now)),
                    "eventOwner": .object([
                        "merchantGroup": .string(s.config.pxpMerchantGroup), "merchant": .string(t.merchant),
                        "site": .string(t.site)
                    ]),
                    "eventData": nested ? .object(["transactionData": data]) : data
                ])
            }
            let ids = (0..<count).map { _ in s.ids.uuid() }
            return (event, s.config.pxpWebhookKey, ids)
        }
        let body = (request["array"]?.boolValue ?? false) ? JSONValue.array([event]).serialized() : event.serialized()
        // PXP documents no timestamp format: seconds, milliseconds or ISO 8601, as set (`PXPBehaviour`).
        let timestamp: String =
            switch state.withLock({ $0.config.pxpBehaviour.webhookTimestamp }) {
            case .seconds: String(Int64(now.timeIntervalSince1970))
            case .milliseconds: String(Int64(now.timeIntervalSince1970 * 1000))
            case .iso8601: SimTime.rfc3339(now)
            }
        let signingKey = forged ? key + "-forged" : key
        var deliveries: [WebhookDelivery] = []
        for id in requestIDs {
            let delivery = WebhookDelivery(
                id: id,
                headers: WebhookSigner.pxpHeaders(
                    key: signingKey, requestID: id,
                    timestamp: timestamp, body: body),
                body: body)
            deliveries.append(delivery)
            if duplicate {
                var again = delivery
                again.isRepeat = true
                deliveries.append(again)
            }
        }
        return deliveries
    }

    /// Paypercut: `{provider:"paypercut", type (payment_intent.authorized, payment_intent.captured,
    /// checkout_session.completed, account.updated…), intent_id?, account?}`; signed `Paypercut-Signature: t=…,v1=…`.
    private func paypercutDeliveries(_ request: JSONValue, count: Int, forged: Bool, duplicate: Bool) throws(SimError) -> [WebhookDelivery]
    {
        let now = clock()
        let type = request["type"]?.stringValue ?? "payment_intent.captured"
        let (secret, ids, object): (String, [String], JSONValue) = try state.withLock { s throws(SimError) in
            let object: JSONValue
            if type.hasPrefix("account.") {
                object = .object(["id": .string(request["account"]?.stringValue ?? "acct_paysim"), "object": "account"])
            } else {
                guard let id = request["intent_id"]?.stringValue else {
                    throw SimError.admin(400, "missing_field", "intent_id is required")
                }
                guard let intent = s.paypercut.intents[id] else {
                    throw SimError.admin(404, "not_found", "no such Paypercut payment intent")
                }
                object =
                    type.hasPrefix("checkout_session.")
                    ? .object([
                        "id": .string("cs_" + id), "object": "checkout_session", "payment_intent": .string(id),
                        "status": "complete", "payment_status": "paid"
                    ])
                    : s.paypercut.intentJSON(intent)
            }
            return (s.config.paypercutWebhookSecret, (0..<count).map { _ in "evt_" + s.ids.uuid() }, object)
        }
        var deliveries: [WebhookDelivery] = []
        for id in ids {
            var envelope: [(String, JSONValue)] = [
                ("id", .string(id)), ("type", .string(type)),
                ("created", .string(SimTime.rfc3339(now))), ("livemode", .bool(false))
            ]
            if let account = request["account"]?.stringValue { envelope.append(("account", .string(account))) }
            envelope.append(("data", .object([("object", object)])))
            let body = JSONValue.object(envelope).serialized()
            let signature = WebhookSigner.paypercutSignature(
                secret: forged ? secret + "-forged" : secret,
                timestamp: Int64(now.timeIntervalSince1970), body: body)
            let delivery = WebhookDelivery(
                id: id,
                headers: [
                    ("Content-Type", "application/json"), ("Paypercut-Signature", signature),
                    ("Paypercut-Event-Id", id)
                ], body: body)
            deliveries.append(delivery)
            if duplicate { var again = delivery; again.isRepeat = true; deliveries.append(again) }
        }
        return deliveries
    }

    private func paypalDeliveries(_ request: JSONValue, count: Int, forged: Bool, duplicate: Bool) throws(SimError) -> [WebhookDelivery] {
        guard let ca else { throw SimError.admin(503, "no_ca", "paysim runs without a PayPal test CA") }
        let now = clock()
        let (events, webhookID, certURL, transmissionIDs): ([JSONValue], String, String, [String]) = try state.withLock {
            s throws(SimError) in
            let base = s.config.publicBaseURL
            var template: JSONValue
            if let body = request["body"], !body.isNull {
                template = body
            } else {
                guard let eventType = request["event_type"]?.stringValue else {
                    throw SimError.admin(400, "missing_field", "event_type is required (or body)")
                }
                let (resourceType, resource, summaryAmount) = try Self.paypalResource(eventType, request, s.paypal, base: base)
                // `create_time` may be set: an event PayPal made earlier (one whose delivery was lost, say).
                var created = SimTime.rfc3339Millis(now)
                if let given = request["create_time"] {
                    guard let text = given.stringValue, SimTime.parse(text) != nil else {
                        throw SimError.admin(400, "invalid_field", "create_time must be an RFC 3339 time")
                    }
                    created = text
                }
                template = .object([
                    "id": "", "event_version": "1.0", "create_time": .string(created),
                    "resource_type": resourceType.isEmpty ? nil : .string(resourceType),
                    "resource_version": resourceType.isEmpty ? nil : "2.0",
                    "event_type": .string(eventType),
                    "summary": .string("paysim \(eventType) for \(summaryAmount)"),
                    "resource": resource
                ])
            }
            let given = request["body"].map { !$0.isNull } ?? false
            var events: [JSONValue] = []
            for _ in 0..<count {
                if given && count == 1 { events.append(template); break }  // sent exactly as given
                let id = "WH-\(s.paypalID())-\(s.paypalID())"
                var event = template.setting("id", .string(id))
                if !given {
                    event = event.setting(
                        "links",
                        .array([
                            PayPalBook.link("\(base)/v1/notifications/webhooks-events/\(id)", "self", "GET"),
                            PayPalBook.link("\(base)/v1/notifications/webhooks-events/\(id)/resend", "resend", "POST")
                        ]))
                }
                events.append(event)
            }
            // PayPal lists what it made, delivered or not; a forged delivery is no event of PayPal's.
            if !forged { for event in events { s.paypal.record(event: event, now: Int64(now.timeIntervalSince1970)) } }
            let transmissions = (0..<(count * (duplicate ? 2 : 1))).map { _ in s.ids.uuid() }
            let webhookID = request["webhook_id"]?.stringValue ?? s.config.paypalWebhookID
            return (events, webhookID, "\(base)/v1/notifications/certs/\(Self.certName)", transmissions)
        }
        let time = SimTime.rfc3339(now)
        let signedID = forged ? webhookID + "FORGED" : webhookID
        var deliveries: [WebhookDelivery] = []
        var transmission = transmissionIDs.makeIterator()
        for event in events {
            let body = event.serialized()
            let id = event["id"]?.stringValue ?? ""
            for copy in 0..<(duplicate ? 2 : 1) {
                let headers: [(String, String)]
                do {
                    headers = try WebhookSigner.paypalHeaders(
                        ca: ca, webhookID: signedID, transmissionID: transmission.next()!,
                        time: time, certURL: certURL, body: body)
                } catch {
                    throw SimError.admin(500, "signing_failed", "\(error)")
                }
                deliveries.append(WebhookDelivery(id: id, headers: headers, body: body, isRepeat: copy > 0))
            }
        }
        return deliveries
    }

    /// The resource an event type carries: (resource_type, resource JSON, "value CUR" for the summary).
    static func paypalResource(
        _ eventType: String, _ request: JSONValue, _ book: PayPalBook,
        base: String
    ) throws(SimError) -> (String, JSONValue, String) {
        let resourceID = request["resource_id"]?.stringValue
        let orderID = request["order_id"]?.stringValue
        func notFound(_ what: String) -> SimError { SimError.admin(404, "not_found", "no such PayPal \(what)") }
        func order(of id: String) -> PayPalOrder? { book.orders[id] }
        func summary(_ minor: Int64, _ o: PayPalOrder) -> String { "\(Money(minorUnits: minor, currency: o.currency))" }
        if eventType == "CHECKOUT.PAYMENT-APPROVAL.REVERSED" {
            // No resource_type: the resource names the order by `order_id` (PayPal's Pay upon Invoice sample).
            guard let id = resourceID ?? orderID, order(of: id) != nil else { throw notFound("order") }
            return ("", .object(["order_id": .string(id)]), id)
        }
        if eventType.hasPrefix("CUSTOMER.DISPUTE.") {
            guard let id = resourceID, let d = book.disputes[id] else { throw notFound("dispute") }
            return ("dispute", book.disputeJSON(d, base: base), "\(Money(minorUnits: d.amount, currency: d.currency))")
        }
        if eventType == "PAYMENT.SALE.REFUNDED" {
            let refund = resourceID.flatMap { book.saleRefunds[$0] ?? book.sales[$0]?.refundIDs.last.flatMap { book.saleRefunds[$0] } }
            guard let refund, let sale = book.sales[refund.saleID] else { throw notFound("sale refund") }
            let summary = "\(Money(minorUnits: refund.amount, currency: sale.currency))"
            guard request["shape"]?.stringValue == "simulator" else { return ("refund", book.saleRefundJSON(refund, base: base), summary) }
            // The shape PayPal's webhook simulator sends (providers' captured deliveries, 2024): resource_type sale,
            // a negative amount.total, and sale_id naming the sale refunded.
            var resource = book.saleRefundJSON(refund, base: base)
            if case .object(var members) = resource, let i = members.firstIndex(where: { $0.0 == "amount" }) {
                members[i].1 = .object([
                    (
                        "total",
                        .string(
                            "-"
                                + Money.format(
                                    minorUnits: refund.amount / PayPalBook.paypalUnit(sale.currency),
                                    exponent: PayPalBook.paypalDecimals(sale.currency)))
                    ),
                    ("currency", .string(sale.currency.code))
                ])
                resource = .object(members)
            }
            return ("sale", resource, summary)
        }
        if eventType.hasPrefix("PAYMENT.SALE.") {
            guard let id = resourceID, let sale = book.sales[id] else { throw notFound("sale") }
            return ("sale", book.saleJSON(sale, base: base), "\(Money(minorUnits: sale.amount, currency: sale.currency))")
        }
        if eventType == "PAYMENT.CAPTURE.REVERSED" {
            // The reversal record of the capture named (or the record itself).
            let record = resourceID.flatMap { id in book.refunds[id] ?? book.refunds.values.first { $0.isReversal && $0.captureID == id } }
            guard let record, let o = order(of: record.orderID) else { throw notFound("reversal") }
            return ("refund", book.refundJSON(record, base: base, standalone: true), summary(record.amount, o))
        }
        if eventType.hasPrefix("CHECKOUT.ORDER.") || eventType.hasPrefix("CHECKOUT.") {
            guard let id = resourceID ?? orderID, let o = order(of: id) else { throw notFound("order") }
            return ("checkout-order", book.orderJSON(o, base: base), summary(o.amount, o))
        }
        if eventType.hasPrefix("PAYMENT.AUTHORIZATION.") {
            let auth =
                resourceID.flatMap { book.authorizations[$0] }
                ?? orderID.flatMap { order(of: $0) }.flatMap { $0.authorizationIDs.last }.flatMap { book.authorizations[$0] }
            guard let auth, let o = order(of: auth.orderID) else { throw notFound("authorization") }
            return ("authorization", book.authorizationJSON(auth, base: base, standalone: true), summary(auth.amount, o))
        }
        if eventType == "PAYMENT.CAPTURE.REFUNDED" {
            let refund =
                resourceID.flatMap { book.refunds[$0] }
                ?? orderID.flatMap { order(of: $0) }.flatMap { $0.refundIDs.last }.flatMap { book.refunds[$0] }
            guard let refund, let o = order(of: refund.orderID) else { throw notFound("refund") }
            return ("refund", book.refundJSON(refund, base: base, standalone: true), summary(refund.amount, o))
        }
        if eventType.hasPrefix("PAYMENT.CAPTURE.") {
            let capture =
                resourceID.flatMap { book.captures[$0] }
                ?? orderID.flatMap { order(of: $0) }.flatMap { $0.captureIDs.last }.flatMap { book.captures[$0] }
            guard let capture, let o = order(of: capture.orderID) else { throw notFound("capture") }
            return ("capture", book.captureJSON(capture, base: base, standalone: true), summary(capture.amount, o))
        }
        throw SimError.admin(400, "invalid_field", "unsupported event_type \(eventType)")
    }

    /// `POST /admin/webhooks/send`: builds, signs and sends; answers with what each delivery got.
    func sendWebhooks(_ request: SimRequest) async throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(request.body)
        if json["lost"]?.boolValue == true {
            // Made and listed by the provider, never delivered: what a lost webhook leaves behind.
            let deliveries = try buildDeliveries(json)
            return .json(
                200,
                .object([
                    "sent": .integer(0), "lost": .integer(Int64(deliveries.count)),
                    "events": .array(deliveries.prefix(1000).map { .string($0.id) })
                ]))
        }
        guard let target = json["target"]?.stringValue, let url = URL(string: target), url.scheme != nil, url.host != nil else {
            throw SimError.admin(400, "invalid_field", "target must be an absolute URL")
        }
        guard let transport else { throw SimError.admin(503, "no_transport", "paysim has no webhook transport") }
        let deliveries = try buildDeliveries(json)
        let results = await Self.send(deliveries, to: target, transport: transport, concurrency: 16)
        var statuses: [String: Int] = [:]
        for r in results { statuses[r.status.map(String.init) ?? "error", default: 0] += 1 }
        let listed = results.prefix(1000).map { r in
            JSONValue.object([
                "id": .string(r.id), "status": r.status.map { .integer($0) } ?? .null,
                "error": r.error.map { .string($0) }
            ])
        }
        Log.info(
            "webhooks sent",
            [
                "provider": json["provider"]?.stringValue ?? "", "count": results.count,
                "target": target
            ])
        return .json(
            200,
            .object([
                "sent": .integer(results.count),
                "statuses": .object(statuses.sorted { $0.key < $1.key }.map { ($0.key, .integer($0.value)) }),
                "deliveries": .array(Array(listed))
            ]))
    }

    struct SendResult: Sendable { var index: Int; var id: String; var status: Int?; var error: String? }

    /// Sends with at most `concurrency` in flight; results in delivery order. A repeat is sent only after the
    /// delivery before it was answered (so a receiver sees original, then duplicate).
    static func send(
        _ deliveries: [WebhookDelivery], to target: String, transport: any WebhookTransport,
        concurrency: Int
    ) async -> [SendResult] {
        var units: [[Int]] = []
        for (i, d) in deliveries.enumerated() {
            if d.isRepeat, !units.isEmpty { units[units.count - 1].append(i) } else { units.append([i]) }
        }
        return await withTaskGroup(of: [SendResult].self) { group in
            var results: [SendResult] = []
            var next = 0
            func start(_ unit: [Int]) {
                let items = unit.map { ($0, deliveries[$0]) }
                group.addTask {
                    var out: [SendResult] = []
                    for (i, d) in items {
                        do {
                            let status = try await transport.post(url: target, headers: d.headers, body: d.body)
                            out.append(SendResult(index: i, id: d.id, status: status, error: nil))
                        } catch {
                            out.append(SendResult(index: i, id: d.id, status: nil, error: "\(error)"))
                        }
                    }
                    return out
                }
            }
            while next < min(concurrency, units.count) { start(units[next]); next += 1 }
            while let r = await group.next() {
                results += r
                if next < units.count { start(units[next]); next += 1 }
            }
            return results.sorted { $0.index < $1.index }
        }
    }
}
