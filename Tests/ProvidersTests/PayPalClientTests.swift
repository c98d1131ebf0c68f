import Foundation
import Synchronization
import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

@Suite struct PayPalClientTests {
    static let config = PayPalConfiguration(baseURL: "https://api-m.sandbox.paypal.com", clientID: "client-id", secret: "s3cret")
    static let tokenAnswer =
        #"{"scope":"https://uri.paypal.com/services/payments/payment","access_token":"A21AAtoken1","token_type":"Bearer","app_id":"APP-80W284485P519543T","expires_in":32400,"nonce":"n"}"#
    static let orderAnswer =
        #"{"id":"5O190127TN364715T","intent":"CAPTURE","status":"APPROVED","purchase_units":[{"amount":{"currency_code":"USD","value":"100.00"}}]}"#

    /// A PayPal stand-in: answers the token endpoint with numbered tokens, everything else with `api`.
    final class FakePayPal: @unchecked Sendable {
        let tokensIssued = Mutex(0)
        let api: @Sendable (ProviderRequest) async throws -> ProviderResponse
        let tokenDelay: Duration
        init(tokenDelay: Duration = .zero, api: @escaping @Sendable (ProviderRequest) async throws -> ProviderResponse) {
            self.api = api; self.tokenDelay = tokenDelay
        }
        var transport: ScriptedTransport {
            ScriptedTransport { request, _ in
                if request.url.hasSuffix("/v1/oauth2/token") {
                    if self.tokenDelay > .zero { try await Task.sleep(for: self.tokenDelay) }
                    let n = self.tokensIssued.withLock {
                        $0 += 1; return $0
                    }
                    return json(200, #"{"access_token":"token-\#(n)","token_type":"Bearer","expires_in":3600}"#)
                }
                return try await self.api(request)
            }
        }
    }

    final class TestClock: Sendable {
        let seconds = Mutex<Int64>(1_700_000_000)
        func advance(_ by: Int64) { seconds.withLock { $0 += by } }
        var now: Int64 { seconds.withLock { $0 } }
    }

    func client(_ transport: ScriptedTransport, clock: TestClock = TestClock(), retry: RetryPolicy = .none) -> PayPalClient {
        PayPalClient(configuration: Self.config, transport: transport, retry: retry, now: { clock.now })
    }

    // MARK: OAuth

    @Test func tokenRequestUsesBasicAuthAndAForm() {
        let r = client(ScriptedTransport([])).tokenRequest()
        #expect(r.method == "POST")
        #expect(r.url == "https://api-m.sandbox.paypal.com/v1/oauth2/token")
        #expect(r.header("Authorization") == "Basic " + Data("client-id:s3cret".utf8).base64EncodedString())
        #expect(r.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(String(decoding: r.body, as: UTF8.self) == "grant_type=client_credentials")
    }

    @Test func configurationNeverPrintsTheSecret() {
        #expect(!Self.config.description.contains("s3cret"))
    }

    @Test func theTokenIsReusedUntilShortlyBeforeItExpires() async {
        let fake = FakePayPal { _ in json(200, Self.orderAnswer) }
        let transport = fake.transport
        let clock = TestClock()
        let c = client(transport, clock: clock)
        _ = await c.order("O1")
        _ = await c.order("O2")
        #expect(fake.tokensIssued.withLock { $0 } == 1)
        clock.advance(3600 - 300 - 1)  // margin: a tenth of 3600 s, at most 300 s
        _ = await c.order("O3")
        #expect(fake.tokensIssued.withLock { $0 } == 1)
        clock.advance(1)
        _ = await c.order("O4")
        #expect(fake.tokensIssued.withLock { $0 } == 2)
        #expect(
            transport.requests.filter { !$0.url.hasSuffix("/token") }.map { $0.header("Authorization") }
                == ["Bearer token-1", "Bearer token-1", "Bearer token-1", "Bearer token-2"])
    }

    @Test func a401RefreshesTheTokenAndRetriesOnce() async {
        let fake = FakePayPal { r in
            r.header("Authorization") == "Bearer token-1" ? json(401, #"{"error":"invalid_token"}"#) : json(200, Self.orderAnswer)
        }
        let c = client(fake.transport)
        let outcome = await c.order("5O190127TN364715T")
        #expect(outcome.value?["id"]?.stringValue == "5O190127TN364715T")
        #expect(fake.tokensIssued.withLock { $0 } == 2)
    }

    @Test func a401WithAFreshTokenIsPermanent() async {
        let fake = FakePayPal { _ in json(401, #"{"error":"invalid_token"}"#) }
        let transport = fake.transport
        let outcome = await client(transport).order("O1")
        #expect(outcome == .permanent(.refused(status: 401, body: #"{"error":"invalid_token"}"#)))
        #expect(fake.tokensIssued.withLock { $0 } == 2)
        #expect(transport.requests.count == 4)  // token, call, token, call: one refresh only
    }

    @Test func concurrentCallersShareOneTokenFetch() async {
        let fake = FakePayPal(tokenDelay: .milliseconds(100)) { _ in json(200, Self.orderAnswer) }
        let c = client(fake.transport)
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<20 { group.addTask { _ = await c.order("O\(i)") } }
        }
        #expect(fake.tokensIssued.withLock { $0 } == 1)
        let fetches = await c.tokenFetchCount()
        #expect(fetches == 1)
    }

    @Test(arguments: [
        (
            json(401, #"{"error":"invalid_client","error_description":"Client Authentication failed"}"#),
            ProviderOutcome<JSONValue>.permanent(
                .notSent(
                    #"oauth2 token: PayPal answered 401: {"error":"invalid_client","error_description":"Client Authentication failed"}"#))
        ),
        (json(503, ""), .transient(reason: "oauth2 token: HTTP 503", retryAfter: nil)),
        (json(200, #"{"token_type":"Bearer"}"#), .permanent(.notSent("oauth2 token answer without access_token/expires_in"))),
        (
            json(200, #"{"access_token":"t","expires_in":"3600"}"#),
            .permanent(.notSent("oauth2 token answer without access_token/expires_in"))
        )
    ])
    /// Without a token the call is never sent, whatever PayPal said of the token: a money call so failed moved nothing.
    func tokenFailures(response: ProviderResponse, expected: ProviderOutcome<JSONValue>) async {
        let transport = ScriptedTransport { r, _ in r.url.hasSuffix("/token") ? response : json(200, "{}") }
        let outcome2 = await client(transport).order("O1")
        #expect(outcome2 == expected)
        #expect(transport.requests.count == 1)
    }

    @Test func tokenTimeoutIsTransient() async {
        let outcome3 = await client(ScriptedTransport([.failure(.timeout)])).order("O1")
        #expect(outcome3 == .transient(reason: "oauth2 token: timeout", retryAfter: nil))
    }

    // MARK: Requests

    @Test func readsAreGETsWithABearerToken() async {
        let fake = FakePayPal { _ in json(200, "{}") }
        let transport = fake.transport
        let c = client(transport)
        _ = await c.order("5O1")
        _ = await c.authorization("A 1")
        _ = await c.capture("C1")
        _ = await c.refund("R/1")
        let calls = transport.requests.filter { !$0.url.hasSuffix("/token") }
        #expect(
            calls.map(\.url) == [
                "https://api-m.sandbox.paypal.com/v2/checkout/orders/5O1",
                "https://api-m.sandbox.paypal.com/v2/payments/authorizations/A%201",
                "https://api-m.sandbox.paypal.com/v2/payments/captures/C1",
                "https://api-m.sandbox.paypal.com/v2/payments/refunds/R%2F1"
            ])
        #expect(calls.allSatisfy { $0.method == "GET" && $0.body.isEmpty && $0.header("PayPal-Request-Id") == nil })
        #expect(calls.allSatisfy { $0.header("Authorization") == "Bearer token-1" && $0.header("Accept") == "application/json" })
    }

    @Test func captureAuthorizationRequest() async throws {
        let fake = FakePayPal { _ in json(201, #"{"id":"C9","status":"COMPLETED"}"#) }
        let transport = fake.transport
        let outcome = await client(transport).captureAuthorization(
            "0VF52814937998046", amount: Money(minorUnits: 2500, currency: Currency(code: "USD")!),
            final: true, requestID: "paypal:ORD-1:capture:2500")
        #expect(outcome.value?["id"]?.stringValue == "C9")
        let r = try #require(transport.requests.last)
        #expect(r.method == "POST")
        #expect(r.url == "https://api-m.sandbox.paypal.com/v2/payments/authorizations/0VF52814937998046/capture")
        #expect(String(decoding: r.body, as: UTF8.self) == #"{"amount":{"currency_code":"USD","value":"25.00"},"final_capture":true}"#)
        #expect(r.header("PayPal-Request-Id") == "paypal:ORD-1:capture:2500")
        #expect(r.header("Prefer") == "return=representation")
        #expect(r.header("Content-Type") == "application/json")
    }

    @Test func voidAndRefundRequests() async throws {
        let fake = FakePayPal { _ in ProviderResponse(status: 204) }
        let transport = fake.transport
        let c = client(transport)
        let outcome4 = await c.voidAuthorization("A1", requestID: "paypal:ORD-1:void:0")
        #expect(outcome4 == .found(.null))
        let void = try #require(transport.requests.last)
        #expect(void.url == "https://api-m.sandbox.paypal.com/v2/payments/authorizations/A1/void")
        #expect(void.body.isEmpty)
        #expect(void.header("PayPal-Request-Id") == "paypal:ORD-1:void:0")
        _ = await c.refundCapture(
            "C1", amount: Money(minorUnits: 1005, currency: Currency(code: "EUR")!), requestID: "paypal:ORD-1:refund:1005")
        let refund = try #require(transport.requests.last)
        #expect(refund.url == "https://api-m.sandbox.paypal.com/v2/payments/captures/C1/refund")
        #expect(String(decoding: refund.body, as: UTF8.self) == #"{"amount":{"currency_code":"EUR","value":"10.05"}}"#)
        #expect(refund.header("PayPal-Request-Id") == "paypal:ORD-1:refund:1005")
    }

    @Test(.enabled(if: Currency(code: "JPY")?.exponent == 0 && Currency(code: "KWD")?.exponent == 3, "needs the real currency table"))
    func amountValuesHaveTheCurrencyDigits() {
        #expect(
            PayPalClient.amountObject(Money(minorUnits: 1000, currency: Currency(code: "JPY")!))
                == .object([("currency_code", .string("JPY")), ("value", .string("1000"))]))
        #expect(
            PayPalClient.amountObject(Money(minorUnits: 1250, currency: Currency(code: "KWD")!))
                == .object([("currency_code", .string("KWD")), ("value", .string("1.250"))]))
    }

    // MARK: Outcomes

    @Test func outcomes() async {
        func run(_ response: ProviderResponse) async -> ProviderOutcome<JSONValue> {
            await client(FakePayPal { _ in response }.transport).order("O1")
        }
        let outcome5 = await run(json(404, #"{"name":"RESOURCE_NOT_FOUND"}"#))
        #expect(outcome5 == .notFound)
        let outcome6 = await run(json(429, "", headers: [("Retry-After", "12")]))
        #expect(outcome6 == .transient(reason: "HTTP 429", retryAfter: .seconds(12)))
        let outcome7 = await run(json(500, ""))
        #expect(outcome7 == .transient(reason: "HTTP 500", retryAfter: nil))
        let outcome8 = await run(json(403, #"{"name":"NOT_AUTHORIZED"}"#))
        #expect(outcome8 == .permanent(.refused(status: 403, body: #"{"name":"NOT_AUTHORIZED"}"#)))
    }

    @Test func actionErrors() async {
        let c422 = #"{"name":"UNPROCESSABLE_ENTITY","details":[{"issue":"AUTHORIZATION_VOIDED"}]}"#
        let usd = Currency(code: "USD")!
        let outcome9 = await client(FakePayPal { _ in json(422, c422) }.transport)
            .captureAuthorization("A1", amount: Money(minorUnits: 1, currency: usd), final: false, requestID: "k")
        #expect(outcome9 == .permanent(.refused(status: 422, body: c422)))
        let outcome10 = await client(FakePayPal { _ in json(404, "{}") }.transport).voidAuthorization("A1", requestID: "k")
        #expect(outcome10 == .permanent(.refused(status: 404, body: "{}")))
        let outcome11 = await client(FakePayPal { _ in json(409, #"{"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS"}]}"#) }.transport)
            .refundCapture("C1", amount: Money(minorUnits: 1, currency: usd), requestID: "k")
        #expect(outcome11 == .transient(reason: "HTTP 409 PREVIOUS_REQUEST_IN_PROGRESS", retryAfter: nil))
    }

    @Test func retriesKeepTheSameRequestId() async {
        let calls = Mutex(0)
        let fake = FakePayPal { _ in
            calls.withLock {
                $0 += 1; return $0
            } < 3 ? json(503, "") : json(201, #"{"id":"C1"}"#)
        }
        let transport = fake.transport
        let sleeps = RecordedSleeps()
        let c = PayPalClient(configuration: Self.config, transport: transport, retry: sleeps.policy(maxAttempts: 3), now: { 1_700_000_000 })
        let outcome = await c.refundCapture(
            "C1", amount: Money(minorUnits: 100, currency: Currency(code: "USD")!), requestID: "paypal:O:refund:100")
        #expect(outcome.value?["id"]?.stringValue == "C1")
        let posts = transport.requests.filter { $0.method == "POST" && !$0.url.hasSuffix("/token") }
        #expect(posts.count == 3)
        #expect(posts.allSatisfy { $0.header("PayPal-Request-Id") == "paypal:O:refund:100" })
        #expect(fake.tokensIssued.withLock { $0 } == 1)
    }

    // MARK: Resolving a webhook resource

    @Test func refundResolvesThroughCaptureAndAuthorizationToTheOrder() async throws {
        let fake = FakePayPal { r in
            if r.url.hasSuffix("/captures/0JF852973C016714D") {
                return json(
                    200,
                    #"{"id":"0JF852973C016714D","status":"REFUNDED","links":[{"href":"https://api.paypal.com/v2/payments/authorizations/A1","rel":"up","method":"GET"}]}"#
                )
            }
            if r.url.hasSuffix("/authorizations/A1") {
                return json(200, #"{"id":"A1","status":"CAPTURED","supplementary_data":{"related_ids":{"order_id":"5O190127TN364715T"}}}"#)
            }
            return json(404, "{}")
        }
        let transport = fake.transport
        let refund = try JSONValue.parse(
            #"{"id":"R1","links":[{"href":"https://api.paypal.com/v2/payments/captures/0JF852973C016714D","rel":"up","method":"GET"}]}"#)
        let outcome12 = await client(transport).orderID(resourceType: "refund", resource: refund)
        #expect(outcome12 == .found("5O190127TN364715T"))
        #expect(transport.requests.filter { !$0.url.hasSuffix("/token") }.count == 2)
    }

    @Test func resolvingStopsOnAMissingResourceOrNoLink() async throws {
        let c = client(FakePayPal { _ in json(404, "{}") }.transport)
        let refund = try JSONValue.parse(
            #"{"id":"R1","links":[{"href":"https://api.paypal.com/v2/payments/captures/GONE","rel":"up","method":"GET"}]}"#)
        let outcome13 = await c.orderID(resourceType: "refund", resource: refund)
        #expect(outcome13 == .notFound)
        let outcome14 = await c.orderID(resourceType: "refund", resource: try JSONValue.parse(#"{"id":"R1"}"#))
        #expect(outcome14 == .notFound)
        let c503 = client(FakePayPal { _ in json(503, "") }.transport)
        let outcome15 = await c503.orderID(resourceType: "refund", resource: refund)
        #expect(outcome15 == .transient(reason: "HTTP 503", retryAfter: nil))
        let outcome16 = await c.orderID(resourceType: "checkout-order", resource: try JSONValue.parse(#"{"id":"O1"}"#))
        #expect(outcome16 == .found("O1"))
    }

    @Test func resolvingALinkLoopEnds() async throws {
        let c = client(
            FakePayPal { r in
                json(200, #"{"id":"C1","links":[{"href":"https://api.paypal.com/v2/payments/captures/C1","rel":"up","method":"GET"}]}"#)
            }.transport)
        let capture = try JSONValue.parse(#"{"id":"C1","links":[{"href":"https://api.paypal.com/v2/payments/captures/C1","rel":"up"}]}"#)
        let outcome17 = await c.orderID(resourceType: "capture", resource: capture)
        #expect(outcome17 == .notFound)
    }
}
