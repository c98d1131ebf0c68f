import Crypto
import Synchronization
import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

@Suite struct PXPClientTests {
    static let config = PXPConfiguration(
        baseURL: "https://api-services.test.pxp.io/api/v1/", clientID: "client-1",
        tokenID: "token-1", tokenValue: "secret-token")
    static let requestID = "11111111-2222-3333-4444-555555555555"

    func client(_ transport: ScriptedTransport, retry: RetryPolicy = .none) -> PXPClient {
        PXPClient(
            configuration: Self.config, transport: transport, retry: retry, now: { 1_700_000_000 },
            newRequestID: { Self.requestID })
    }

    static let authorisedAnswer = #"""
        {"systemTransactionId":"1ed768bb-e88a-4636-91ae-67927ccbb02b","state":"Authorised","stateMessage":"Transaction Authorised",
         "transactionMethod":{"intent":"Authorisation","fundingType":"Card","entryType":"Ecom"},"merchant":"MERCHANT-1","site":"SITE-1",
         "merchantTransactionId":"ECOM-001","merchantTransactionDate":"2024-01-27T08:51:02.826Z",
         "amounts":{"transactionValue":50.05,"currencyCode":"EUR"}}
        """#

    // MARK: PXP-UST1

    @Test func signatureMatchesTheDocumentedAssumption() {
        // base64(HMAC-SHA256("secret-token", "1700000000" + requestID + "GET" + path?query + "")), computed independently.
        #expect(
            PXPAuth.signature(
                tokenValue: "secret-token", timestamp: "1700000000", requestID: Self.requestID, method: "GET",
                pathAndQuery: "/api/v1/transactions/MERCHANT-1/SITE-1?merchantTransactionId=ECOM-001", body: [])
                == "a9eR6N+wFN2GrLeDYpNYE8iKv9xfjVzSpwgAU9HIYd0=")
    }

    @Test func signatureDependsOnEveryInput() {
        let base = PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "r", method: "GET", pathAndQuery: "/p", body: [1])
        #expect(base == PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "r", method: "get", pathAndQuery: "/p", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k2", timestamp: "1", requestID: "r", method: "GET", pathAndQuery: "/p", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k", timestamp: "2", requestID: "r", method: "GET", pathAndQuery: "/p", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "s", method: "GET", pathAndQuery: "/p", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "r", method: "POST", pathAndQuery: "/p", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "r", method: "GET", pathAndQuery: "/q", body: [1]))
        #expect(base != PXPAuth.signature(tokenValue: "k", timestamp: "1", requestID: "r", method: "GET", pathAndQuery: "/p", body: [2]))
        #expect(!PXPAuth.signature(tokenValue: "", timestamp: "1", requestID: "r", method: "GET", pathAndQuery: "/p", body: []).isEmpty)
    }

    @Test func configurationNeverPrintsTheToken() {
        #expect(!Self.config.description.contains("secret-token"))
        #expect(!String(describing: Self.config).contains("secret-token"))
    }

    // MARK: Request building

    @Test func getByMerchantTransactionIdBuildsASignedRequest() {
        let r = client(ScriptedTransport([])).transactionRequest(
            merchant: "MERCHANT-1", site: "SITE-1",
            query: ("merchantTransactionId", "ECOM-001"))
        #expect(r.method == "GET")
        #expect(r.url == "https://api-services.test.pxp.io/api/v1/transactions/MERCHANT-1/SITE-1?merchantTransactionId=ECOM-001")
        #expect(r.body.isEmpty)
        #expect(r.header("x-request-id") == Self.requestID)
        #expect(r.header("X-Client-Id") == "client-1")
        #expect(r.header("Authorization") == "PXP-UST1 token-1:1700000000:a9eR6N+wFN2GrLeDYpNYE8iKv9xfjVzSpwgAU9HIYd0=")
        #expect(r.header("Accept") == "application/json")
    }

    @Test func pathSegmentsAndQueryArePercentEncoded() {
        let r = client(ScriptedTransport([])).transactionRequest(merchant: "M/1", site: "S 1", query: ("systemTransactionId", "a&b"))
        #expect(r.url == "https://api-services.test.pxp.io/api/v1/transactions/M%2F1/S%201?systemTransactionId=a%26b")
    }

    @Test func captureModificationBody() {
        let gbp = Currency(code: "GBP")!
        let r = client(ScriptedTransport([])).modificationRequest(
            systemTransactionId: "1ed768bb-e88a-4636-91ae-67927ccbb02b", .capture(amount: 2499), currency: gbp,
            merchant: "MERCHANT-1", site: "SITE-1", merchantTransactionId: "TRANSACTION-2",
            merchantTransactionDate: "2025-01-27T08:51:02.826Z")
        #expect(r.method == "POST")
        #expect(r.url == "https://api-services.test.pxp.io/api/v1/transactions/1ed768bb-e88a-4636-91ae-67927ccbb02b/modifications")
        #expect(
            String(decoding: r.body, as: UTF8.self)
                == #"{"merchant":"MERCHANT-1","site":"SITE-1","merchantTransactionId":"TRANSACTION-2","merchantTransactionDate":"2025-01-27T08:51:02.826Z","amounts":{"transaction":24.99,"currencyCode":"GBP"},"operation":"Capture"}"#
        )
        #expect(r.header("Content-Type") == "application/json")
        #expect(r.header("Authorization") == "PXP-UST1 token-1:1700000000:i51uzZVeSgLTQMLcl6ptt9nn0oLQophNVofkcJqgwqk=")
    }

    @Test(
        arguments: [
            (PXPModificationKind.capture(amount: 2000), "Capture", 2000),
            (.finalCapture(amount: 5), "FinalCapture", 5),
            (.refund(amount: 1000), "Refund", 1000),
            (.incremental(newTotal: 2999), "Incremental", 2999),
            (.void(originalValue: 2499), "Void", 2499)
        ] as [(PXPModificationKind, String, Int64)])
    func operationsAndTheirAmounts(kind: PXPModificationKind, name: String, amount: Int64) throws {
        let usd = Currency(code: "USD")!
        let r = client(ScriptedTransport([])).modificationRequest(
            systemTransactionId: "s", kind, currency: usd, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        let body = try JSONValue.parse(r.body)
        #expect(body["operation"]?.stringValue == name)
        #expect(try body["amounts"]?["transaction"]?.minorUnits(exponent: 2) == amount)
        #expect(PXPOperation(pxpName: name.uppercased()) == kind.operation)
    }

    @Test(
        .enabled(if: Currency(code: "JPY")?.exponent == 0 && Currency(code: "KWD")?.exponent == 3, "needs the real currency table"),
        arguments: [("JPY", 1000, "1000"), ("KWD", 1250, "1.250"), ("USD", 5, "0.05")] as [(String, Int64, String)])
    func amountLiteralHasTheCurrencyDigits(code: String, minor: Int64, literal: String) throws {
        let r = client(ScriptedTransport([])).modificationRequest(
            systemTransactionId: "s", .refund(amount: minor),
            currency: Currency(code: code)!, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        #expect(try JSONValue.parse(r.body)["amounts"]?["transaction"] == .number(literal))
    }

    @Test func merchantTransactionIdIsDerivedFromTheIdempotencyKey() {
        let id = PXPClient.merchantTransactionId(forIdempotencyKey: "pxp:ORD-1:capture:2499")
        #expect(id == "pr-85141c1d6cc52bf2bbc575e2d905b665")  // "pr-" + SHA-256 hex prefix, computed independently
        #expect(id.count <= 50)
        #expect(PXPClient.merchantTransactionId(forIdempotencyKey: "pxp:ORD-1:capture:2500") != id)
        #expect(PXPClient.merchantTransactionId(forIdempotencyKey: String(repeating: "x", count: 500)).count == 35)
        #expect(PXPClient.merchantTransactionId(forIdempotencyKey: "").count == 35)
    }

    // MARK: Outcomes over a scripted transport

    @Test func foundParsesTheAnswer() async {
        let transport = ScriptedTransport([.success(json(200, Self.authorisedAnswer))])
        let outcome = await client(transport).transaction(merchant: "MERCHANT-1", site: "SITE-1", merchantTransactionId: "ECOM-001")
        #expect(outcome.value?["amounts"]?["transactionValue"]?.numberLiteral == "50.05")
        #expect(transport.requests.count == 1)
    }

    @Test func systemTransactionIdQuery() async {
        let transport = ScriptedTransport([.success(json(200, Self.authorisedAnswer))])
        _ = await client(transport).transaction(merchant: "M", site: "S", systemTransactionId: "1ed768bb")
        #expect(transport.requests.first?.url.hasSuffix("/transactions/M/S?systemTransactionId=1ed768bb") == true)
    }

    @Test func notFound() async {
        let transport = ScriptedTransport([.success(json(404, #"{"error":"not found"}"#))])
        #expect(await client(transport).transaction(merchant: "M", site: "S", merchantTransactionId: "X") == .notFound)
    }

    @Test func rateLimitedWithRetryAfter() async {
        let transport = ScriptedTransport([.success(json(429, "{}", headers: [("Retry-After", "30")]))])
        #expect(
            await client(transport).transaction(merchant: "M", site: "S", merchantTransactionId: "X")
                == .transient(reason: "HTTP 429", retryAfter: .seconds(30)))
    }

    @Test func serverErrorsAndTimeoutsAreTransient() async {
        #expect(
            await client(ScriptedTransport([.success(json(502, "bad gateway"))])).transaction(
                merchant: "M", site: "S", merchantTransactionId: "X")
                == .transient(reason: "HTTP 502", retryAfter: nil))
        #expect(
            await client(ScriptedTransport([.failure(.timeout)])).transaction(merchant: "M", site: "S", merchantTransactionId: "X")
                == .transient(reason: "timeout", retryAfter: nil))
        #expect(
            await client(ScriptedTransport([.failure(.connection("refused"))])).transaction(
                merchant: "M", site: "S", merchantTransactionId: "X")
                == .transient(reason: "connection: refused", retryAfter: nil))
    }

    @Test func retriesReSignWithAFreshRequestId() async {
        let counter = Mutex(0)
        let transport = ScriptedTransport([.failure(.timeout), .success(json(503, "")), .success(json(200, Self.authorisedAnswer))])
        let sleeps = RecordedSleeps()
        let c = PXPClient(
            configuration: Self.config, transport: transport, retry: sleeps.policy(maxAttempts: 3), now: { 1_700_000_000 },
            newRequestID: { "req-\(counter.withLock { $0 += 1; return $0 })" })
        let outcome = await c.transaction(merchant: "M", site: "S", merchantTransactionId: "X")
        #expect(outcome.value != nil)
        #expect(transport.requests.map { $0.header("X-Request-Id") } == ["req-1", "req-2", "req-3"])
        #expect(Set(transport.requests.map { $0.header("Authorization") }).count == 3)
        #expect(sleeps.all.count == 2)
    }

    @Test func badRequestKeepsTheProviderBody() async {
        let body = #"{"errorCode":"VALIDATION","message":"amount"}"#
        let outcome = await client(ScriptedTransport([.success(json(400, body))])).modify(
            systemTransactionId: "s", .capture(amount: 1), currency: Currency(code: "EUR")!, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        #expect(outcome == .permanent(.refused(status: 400, body: body)))
    }

    @Test func modificationNotFoundIsPermanent() async {
        let outcome = await client(ScriptedTransport([.success(json(404, "no such transaction"))])).modify(
            systemTransactionId: "s", .void(originalValue: 1), currency: Currency(code: "EUR")!, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        #expect(outcome == .permanent(.refused(status: 404, body: "no such transaction")))
    }

    @Test func modificationResult() async {
        let answer = #"""
            {"state":"Captured","stateData":{},"merchantTransactionDate":"2025-03-27T10:10:28.302Z",
             "merchantTransactionId":"66e9b08f-6609-43f7-be87-6fcff16c6168","systemTransactionId":"196d03e8-9f66-48d7-bde3-764447951afb",
             "fundingData":{"cardScheme":"MasterCard","providerResponse":{"provider":"pxpfinancial","merchantAdvice":{}}}}
            """#
        let outcome = await client(ScriptedTransport([.success(json(200, answer))])).modify(
            systemTransactionId: "1ed768bb", .capture(amount: 2499), currency: Currency(code: "GBP")!, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        guard case .found(let result) = outcome else { Issue.record("\(outcome)"); return }
        #expect(result.systemTransactionId == "196d03e8-9f66-48d7-bde3-764447951afb")
        #expect(result.state == "Captured")
        let m = result.modification(parentSystemTransactionId: "1ed768bb", operation: .capture, amount: 2499)
        #expect(m.isAccepted)
        #expect(
            m
                == PXPModification(
                    systemTransactionId: "196d03e8-9f66-48d7-bde3-764447951afb", parentSystemTransactionId: "1ed768bb",
                    operation: .capture, amount: 2499, state: "Captured"))
    }

    @Test(arguments: [#"{"state":"Captured"}"#, #"{"systemTransactionId":"x"}"#, "[]"])
    func modificationAnswerWithoutIdOrStateIsPermanent(answer: String) async {
        let outcome = await client(ScriptedTransport([.success(json(200, answer))])).modify(
            systemTransactionId: "s", .capture(amount: 1), currency: Currency(code: "EUR")!, merchant: "M", site: "S",
            merchantTransactionId: "m", merchantTransactionDate: "d")
        guard case .permanent(.unreadable(let body)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(body.hasPrefix("modification answer without systemTransactionId/state"))
    }

    @Test func unreadableAnswerIsPermanent() async {
        let outcome = await client(ScriptedTransport([.success(json(200, "{\"state\":"))])).transaction(
            merchant: "M", site: "S", merchantTransactionId: "X")
        guard case .permanent(.unreadable(let body)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(body.contains("unreadable answer"))
    }
}
