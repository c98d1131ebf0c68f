import Foundation
import Reconciliation
import TextFormats

/// Where and as whom to call Paypercut's API.
public struct PaypercutConfiguration: Sendable, CustomStringConvertible {
    public static let defaultBaseURL = "https://api.paypercut.io"
    public var baseURL: String
    /// `Authorization: Bearer` key. Never printed: `description` masks it.
    public var secretKey: String
    public var timeout: Duration

    public init(baseURL: String = PaypercutConfiguration.defaultBaseURL, secretKey: String, timeout: Duration = .seconds(30)) {
        self.baseURL = baseURL; self.secretKey = secretKey; self.timeout = timeout
    }

    public var description: String { "PaypercutConfiguration(baseURL: \(baseURL), secretKey: <redacted>)" }
}

/// Paypercut's API: payment intents (v1), payments (v2), capture / cancel / refund with `Idempotency-Key`.
/// Errors come as `{type, code, param, message, trace_id}` (docs.paypercut.io error handling): 404 is absence on a
/// read; a 403 about the account context (`account_invalid`, `account_required`) is permanent and named in words,
/// since it is a configuration problem, not a missing payment; the state errors 409 (a conflict with the resource's
/// state, or `idempotency_error`) and 422 (not processable in its current state) are permanent, with Paypercut's
/// answer; 408, 429 (with or without Retry-After) and 5xx are transient (ProviderOutcomeClassifier).
public struct PaypercutClient: Sendable {
    public let configuration: PaypercutConfiguration
    let transport: any ProviderTransport
    let retry: RetryPolicy
    let now: @Sendable () -> Int64

    /// Paypercut takes idempotency keys of at most 255 characters.
    public static let idempotencyKeyLimit = 255

    public init(
        configuration: PaypercutConfiguration, transport: any ProviderTransport, retry: RetryPolicy = .standard,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.configuration = configuration; self.transport = transport; self.retry = retry; self.now = now
    }

    /// GET /v1/payment_intents/{id}, as `account` (`Paypercut-Account`) when given.
    public func paymentIntent(_ id: String, account: String?) async -> ProviderOutcome<JSONValue> {
        await call("GET", ["v1", "payment_intents", id], account: account)
    }

    /// GET /v2/payments/{id}.
    public func payment(_ id: String, account: String?) async -> ProviderOutcome<JSONValue> {
        await call("GET", ["v2", "payments", id], account: account)
    }

    /// POST /v1/payment_intents/{id}/capture `{"amount_to_capture": n, "final_capture": bool}`.
    public func capture(_ id: String, amount: Int64, final: Bool, key: String, account: String?) async -> ProviderOutcome<JSONValue> {
        await call(
            "POST", ["v1", "payment_intents", id, "capture"],
            body: .object([("amount_to_capture", .integer(amount)), ("final_capture", .bool(final))]), key: key, account: account)
    }

    /// POST /v1/payment_intents/{id}/cancel `{"cancellation_reason": "requested_by_customer"}`.
    public func cancel(_ id: String, key: String, account: String?) async -> ProviderOutcome<JSONValue> {
        await call(
            "POST", ["v1", "payment_intents", id, "cancel"],
            body: .object([("cancellation_reason", .string("requested_by_customer"))]), key: key, account: account)
    }

    /// POST /v1/refunds `{"payment_intent": id, "amount": n, "reason": "requested_by_customer"}`.
    public func refund(paymentIntent id: String, amount: Int64, key: String, account: String?) async -> ProviderOutcome<JSONValue> {
        await call(
            "POST", ["v1", "refunds"],
            body: .object([("payment_intent", .string(id)), ("amount", .integer(amount)), ("reason", .string("requested_by_customer"))]),
            key: key, account: account)
    }

    /// GET /v2/payments (`start_date`, `end_date`, `limit`, `last_key`, …): `{items, last_key}`.
    public func payments(query: [(String, String)], account: String?) async -> ProviderOutcome<JSONValue> {
        await call("GET", ["v2", "payments"], query: query, account: account)
    }

    /// GET /v1/refunds (`start_date`, `end_date`, `limit`, `last_key`, …): `{items, last_key}`.
    public func refunds(query: [(String, String)], account: String?) async -> ProviderOutcome<JSONValue> {
        await call("GET", ["v1", "refunds"], query: query, account: account)
    }

    /// The request as sent (pure; tested directly).
    package func request(
        _ method: String, _ segments: [String], query: [(String, String)] = [], body: JSONValue?, key: String?,
        account: String?
    ) -> ProviderRequest {
        var headers = [("Authorization", "Bearer \(configuration.secretKey)"), ("Accept", "application/json")]
        if let account, !account.isEmpty { headers.append(("Paypercut-Account", account)) }
        if method != "GET" { headers.append(("Content-Type", "application/json")) }
        if let key { headers.append(("Idempotency-Key", key)) }
        var request = ProviderRequest(
            method: method, url: ProviderURL.build(base: configuration.baseURL, segments: segments, query: query), headers: headers,
            body: body?.serialized() ?? [], timeout: configuration.timeout)
        request.idempotencyKey = key
        return request
    }

    private func call(
        _ method: String, _ segments: [String], query: [(String, String)] = [], body: JSONValue? = nil, key: String? = nil,
        account: String?
    ) async -> ProviderOutcome<JSONValue> {
        let request = request(method, segments, query: query, body: body, key: key, account: account)
        return await retrying(retry) { () async -> ProviderOutcome<JSONValue> in
            let raw: ProviderOutcome<[UInt8]>
            do {
                raw = ProviderOutcomeClassifier.classify(
                    try await self.transport.send(request), notFoundIsAbsence: method == "GET", now: self.now())
            } catch {
                raw = ProviderOutcomeClassifier.classify(transportError: error)
            }
            return ProviderOutcomeClassifier.parsingJSON(raw).namingAccountRefusal(account: account)
        }
    }
}
