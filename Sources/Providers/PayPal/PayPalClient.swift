import Foundation
import Reconciliation
import TextFormats

/// Where and as whom to call PayPal's REST API.
public struct PayPalConfiguration: Sendable, CustomStringConvertible {
    /// `https://api-m.sandbox.paypal.com` or `https://api-m.paypal.com`.
    public var baseURL: String
    public var clientID: String
    /// Never printed: `description` masks it.
    public var secret: String
    public var timeout: Duration

    public static let sandboxBaseURL = "https://api-m.sandbox.paypal.com"

    public init(baseURL: String = PayPalConfiguration.sandboxBaseURL, clientID: String, secret: String, timeout: Duration = .seconds(30)) {
        self.baseURL = baseURL; self.clientID = clientID; self.secret = secret; self.timeout = timeout
    }

    public var description: String { "PayPalConfiguration(baseURL: \(baseURL), clientID: \(clientID), secret: <redacted>)" }
}

/// PayPal Orders v2 / Payments v2: read orders and payments, capture, void, refund.
///
/// Auth is OAuth2 client credentials; the token is cached until shortly before `expires_in` and shared by concurrent
/// callers; a 401 drops it and the call is retried once with a fresh one. Actions send the action's idempotency key
/// as `PayPal-Request-Id` (so retries after a timeout are safe) and `Prefer: return=representation`.
public final class PayPalClient: Sendable {
    public let configuration: PayPalConfiguration
    let transport: any ProviderTransport
    let retry: RetryPolicy
    let now: @Sendable () -> Int64
    let tokens = PayPalTokenCache()

    /// - Parameter now: unix seconds (token expiry, Retry-After dates).
    public init(
        configuration: PayPalConfiguration, transport: any ProviderTransport, retry: RetryPolicy = .standard,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.configuration = configuration; self.transport = transport; self.retry = retry; self.now = now
    }

    // MARK: Reads

    /// GET /v2/checkout/orders/{id}.
    public func order(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v2", "checkout", "orders", id])
    }

    /// GET /v2/payments/authorizations/{id}.
    public func authorization(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v2", "payments", "authorizations", id])
    }

    /// GET /v2/payments/captures/{id}.
    public func capture(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v2", "payments", "captures", id])
    }

    /// GET /v2/payments/refunds/{id}.
    public func refund(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v2", "payments", "refunds", id])
    }

    // MARK: Actions

    /// POST /v2/payments/authorizations/{id}/capture with `amount` and `final_capture`.
    public func captureAuthorization(_ id: String, amount: Money, final: Bool, requestID: String) async -> ProviderOutcome<JSONValue> {
        let body: JSONValue = .object([("amount", PayPalClient.amountObject(amount)), ("final_capture", .bool(final))])
        return await call(method: "POST", segments: ["v2", "payments", "authorizations", id, "capture"], body: body, requestID: requestID)
    }

    /// POST /v2/payments/authorizations/{id}/void (no body).
    public func voidAuthorization(_ id: String, requestID: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "POST", segments: ["v2", "payments", "authorizations", id, "void"], body: nil, requestID: requestID)
    }

    /// POST /v2/payments/captures/{id}/refund with `amount`, and `custom_id` (payments_payment_v2.json
    /// `refund_request.custom_id`, at most 127 characters): the mark a later re-fetch finds the refund by.
    public func refundCapture(_ id: String, amount: Money, requestID: String, customID: String? = nil) async -> ProviderOutcome<JSONValue> {
        var members: [(String, JSONValue)] = [("amount", PayPalClient.amountObject(amount))]
        if let customID { members.append(("custom_id", .string(customID))) }
        let body: JSONValue = .object(members)
        return await call(method: "POST", segments: ["v2", "payments", "captures", id, "refund"], body: body, requestID: requestID)
    }

    /// `{"currency_code":"USD","value":"10.00"}`: the value with exactly PayPal's decimals for the currency (HUF
    /// and TWD none). The amount must be one PayPal can take (`PayPalCurrencies.refusal` is nil).
    public static func amountObject(_ amount: Money) -> JSONValue {
        let units = amount.minorUnits / PayPalCurrencies.unit(amount.currency)
        return .object([
            ("currency_code", .string(amount.currency.code)),
            ("value", .string(JSONValue.decimalString(minorUnits: units, exponent: PayPalCurrencies.exponent(amount.currency))))
        ])
    }

    // MARK: Resolving a webhook resource to its order

    /// The order id a webhook resource belongs to, read by `PayPalEvent.references` (the one reader of what a
    /// PayPal resource names): an order's own id or `resource.order_id`; else `supplementary_data.related_ids`; else
    /// the `up` link, fetching the authorization or capture it points to (a refund → its capture → its order) until
    /// an order id turns up. A capture, authorization or refund that names nothing else is fetched itself once (the
    /// API's representation carries the links a webhook's may lack). `.notFound` when the chain ends without one.
    public func orderID(resourceType: String?, resource: JSONValue) async -> ProviderOutcome<String> {
        var current = resource
        var type = resourceType
        var fetchedSelf = Set<PayPalReference>()
        for _ in 0..<5 {
            let references = PayPalEvent.references(resourceType: type, resource: current)
            if let order = references.lazy.compactMap({ if case .order(let id) = $0 { id } else { nil } }).first { return .found(order) }
            // The resource itself comes first when its type is known; what it links to is followed before it.
            let own = references.first.flatMap { current["id"]?.stringValue == $0.id ? $0 : nil }
            guard let next = references.first(where: { $0 != own }) ?? own.flatMap({ fetchedSelf.contains($0) ? nil : $0 }) else {
                return .notFound
            }
            if next == own { fetchedSelf.insert(next) }
            let fetched: ProviderOutcome<JSONValue>
            switch next {
            case .authorization(let id): fetched = await authorization(id); type = "authorization"
            case .capture(let id): fetched = await capture(id); type = "capture"
            case .refund(let id): fetched = await refund(id); type = "refund"
            case .order(let id): return .found(id)
            }
            guard case .found(let body) = fetched else { return fetched.failure(as: String.self)! }
            current = body
        }
        return .notFound
    }

    // MARK: v1 sales and disputes

    /// GET /v1/payments/sale/{id} (PayPal Subscriptions and the classic Payments API).
    public func sale(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v1", "payments", "sale", id])
    }

    /// GET /v1/payments/refund/{id}: a v1 refund (of a sale), its `amount {total, currency}` and `state`.
    public func saleRefund(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v1", "payments", "refund", id])
    }

    /// POST /v1/payments/sale/{id}/refund with `amount {total, currency}`.
    public func refundSale(_ id: String, amount: Money, requestID: String) async -> ProviderOutcome<JSONValue> {
        let units = amount.minorUnits / PayPalCurrencies.unit(amount.currency)
        let body: JSONValue = .object([
            (
                "amount",
                .object([
                    ("total", .string(JSONValue.decimalString(minorUnits: units, exponent: PayPalCurrencies.exponent(amount.currency)))),
                    ("currency", .string(amount.currency.code))
                ])
            )
        ])
        return await call(method: "POST", segments: ["v1", "payments", "sale", id, "refund"], body: body, requestID: requestID)
    }

    /// GET /v1/customer/disputes/{id}.
    public func dispute(_ id: String) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v1", "customer", "disputes", id])
    }

    /// GET /v1/reporting/transactions (Transaction Search): the transactions made in [start, end], one page of 500.
    public func searchTransactions(start: String, end: String, page: Int) async -> ProviderOutcome<JSONValue> {
        await call(
            method: "GET", segments: ["v1", "reporting", "transactions"],
            query: [("start_date", start), ("end_date", end), ("fields", "transaction_info"), ("page_size", "500"), ("page", String(page))])
    }

    /// GET /v1/notifications/webhooks-events with `query`: the first page's filters, or a `next` link's own query.
    public func webhookEvents(query: [(String, String)]) async -> ProviderOutcome<JSONValue> {
        await call(method: "GET", segments: ["v1", "notifications", "webhooks-events"], query: query)
    }

    // MARK: Request building (pure; tested directly)

    package func apiRequest(
        method: String, segments: [String], query: [(String, String)] = [], body: JSONValue?, requestID: String?,
        token: String
    ) -> ProviderRequest {
        var headers = [("Authorization", "Bearer \(token)"), ("Accept", "application/json")]
        var bytes: [UInt8] = []
        if method != "GET" {
            headers.append(("Content-Type", "application/json"))
            headers.append(("Prefer", "return=representation"))
            if let body { bytes = body.serialized() }
        }
        if let requestID { headers.append(("PayPal-Request-Id", requestID)) }
        var request = ProviderRequest(
            method: method, url: ProviderURL.build(base: configuration.baseURL, segments: segments, query: query),
            headers: headers, body: bytes, timeout: configuration.timeout)
        request.idempotencyKey = requestID
        return request
    }

    // MARK: Plumbing

    private func call(
        method: String, segments: [String], query: [(String, String)] = [], body: JSONValue? = nil, requestID: String? = nil
    ) async
        -> ProviderOutcome<JSONValue>
    {
        await retrying(retry) { () async -> ProviderOutcome<JSONValue> in
            await self.authorizedCall(method: method, segments: segments, query: query, body: body, requestID: requestID)
        }
    }

    /// One call with a valid token; on 401, one refresh and one more try.
    private func authorizedCall(
        method: String, segments: [String], query: [(String, String)] = [], body: JSONValue?, requestID: String?
    ) async
        -> ProviderOutcome<JSONValue>
    {
        for attempt in 0..<2 {
            let token: PayPalAccessToken
            switch await tokens.get(now: now(), fetch: { await self.fetchToken() }) {
            case .found(let t): token = t
            case .notFound: return .notFound
            case .transient(let t): return .transient(t)
            case .permanent(let failure): return .permanent(failure)
            }
            let request = apiRequest(method: method, segments: segments, query: query, body: body, requestID: requestID, token: token.value)
            let raw: ProviderOutcome<[UInt8]>
            do {
                let response = try await transport.send(request)
                if response.status == 401 && attempt == 0 {
                    await tokens.invalidate(token.value)
                    continue
                }
                raw = PayPalClient.classify(response, isRead: method == "GET", now: now())
            } catch {
                raw = ProviderOutcomeClassifier.classify(transportError: error)
            }
            if case .found(let bytes) = raw, bytes.isEmpty { return .found(.null) }  // 204 No Content
            return ProviderOutcomeClassifier.parsingJSON(raw)
        }
        return .permanent(.refused(status: 401, body: "unauthorized with a freshly fetched token"))
    }

    /// The shared classification, plus PayPal's 409 PREVIOUS_REQUEST_IN_PROGRESS, which is worth retrying.
    static func classify(_ response: ProviderResponse, isRead: Bool, now: Int64) -> ProviderOutcome<[UInt8]> {
        if response.status == 409, String(decoding: response.body, as: UTF8.self).contains("PREVIOUS_REQUEST_IN_PROGRESS") {
            return .transient(reason: "HTTP 409 PREVIOUS_REQUEST_IN_PROGRESS", retryAfter: nil)
        }
        return ProviderOutcomeClassifier.classify(response, notFoundIsAbsence: isRead, now: now)
    }

    /// Test hook: how many token fetches were started.
    package func tokenFetchCount() async -> Int { await tokens.fetchCount }
}
