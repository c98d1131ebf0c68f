import Foundation
import HTTP
import Synchronization
import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// The clients over real HTTP: URLSessionHTTPClient → an in-test HTTPServer on an ephemeral port.
@Suite(.serialized) struct ProviderClientServerTests {
    /// Starts a server answering with `handler`, runs `body` with its base URL, shuts it down.
    func withServer(
        _ handler: @escaping @Sendable (HTTPRequest) async -> HTTPResponse,
        _ body: (String) async throws -> Void
    ) async throws {
        let server = HTTPServer(
            configuration: HTTPServer.Configuration(port: 0, threads: 2, connectionTimeoutSeconds: 5),
            asyncHandler: handler)
        try server.start()
        do { try await body("http://127.0.0.1:\(server.port)") } catch {
            await server.shutdown(drainTimeout: 1)
            throw error
        }
        await server.shutdown(drainTimeout: 1)
    }

    // Answers that come at once get a generous timeout: on a loaded 2-core machine a test server's async handler can
    // wait seconds for a cooperative thread (the "slow" case sets its own short one). The client is the one payrecon
    // runs (libcurl).
    let transport = HTTPClientTransport(client: CurlHTTPClient(configuration: .init(timeout: .seconds(30))))

    // MARK: PXP

    static let pxpToken = "pxp-token-value"

    /// Checks PXP-UST1 the way a server (paysim) would: recompute with `PXPAuth.signature` over what arrived.
    static func pxpAuthorised(_ r: HTTPRequest) -> Bool {
        guard let auth = r.headers["Authorization"], auth.hasPrefix("PXP-UST1 "), let requestID = r.headers["X-Request-Id"],
            r.headers["X-Client-Id"] == "client-1"
        else { return false }
        let parts = auth.dropFirst("PXP-UST1 ".count).split(separator: ":", maxSplits: 2).map(String.init)
        guard parts.count == 3, parts[0] == "token-1" else { return false }
        let expected = PXPAuth.signature(
            tokenValue: pxpToken, timestamp: parts[1], requestID: requestID, method: r.method,
            pathAndQuery: PXPAuth.requestTarget(decodedPath: r.path, query: r.query), body: r.body)
        return expected == parts[2]
    }

    func pxpClient(_ base: String, timeout: Duration = .seconds(20)) -> PXPClient {
        PXPClient(
            configuration: PXPConfiguration(
                baseURL: base + "/api/v1", clientID: "client-1", tokenID: "token-1",
                tokenValue: Self.pxpToken, timeout: timeout),
            transport: transport, retry: .none)
    }

    @Test func pxpFoundWithAVerifiedSignature() async throws {
        try await withServer({ r in
            guard Self.pxpAuthorised(r) else { return .json(status: 401, bytes: Array(#"{"error":"bad signature"}"#.utf8)) }
            guard r.path == "/api/v1/transactions/MERCHANT 1/SITE-1", r.query["merchantTransactionId"] == "ECOM-001&x" else {
                return .json(status: 404, bytes: Array("{}".utf8))
            }
            return .json(bytes: Array(PXPClientTests.authorisedAnswer.utf8))
        }) { base in
            let outcome = await pxpClient(base).transaction(merchant: "MERCHANT 1", site: "SITE-1", merchantTransactionId: "ECOM-001&x")
            let answer = try #require(outcome.value)
            let snapshot = try PXPMapping.snapshot(transaction: answer, transactionRef: "ECOM-001&x")
            #expect((snapshot.state, snapshot.authorised) == (.authorised, 5005))
        }
    }

    @Test func pxpModificationBodyIsSignedToo() async throws {
        let received = Mutex<[UInt8]>([])
        try await withServer({ r in
            guard Self.pxpAuthorised(r), r.method == "POST", r.path == "/api/v1/transactions/sys-1/modifications" else {
                return .json(status: 401, bytes: Array("{}".utf8))
            }
            received.withLock { $0 = r.body }
            return .json(bytes: Array(#"{"systemTransactionId":"sys-2","state":"Captured"}"#.utf8))
        }) { base in
            let outcome = await pxpClient(base).modify(
                systemTransactionId: "sys-1", .capture(amount: 2499), currency: Currency(code: "GBP")!,
                merchant: "M", site: "S", merchantTransactionId: "pr-1",
                merchantTransactionDate: "2025-01-27T08:51:02.826Z")
            let expectedAnswer = try JSONValue.parse(#"{"systemTransactionId":"sys-2","state":"Captured"}"#)
            #expect(outcome == .found(PXPModificationResult(systemTransactionId: "sys-2", state: "Captured", answer: expectedAnswer)))
            let sent = try JSONValue.parse(received.withLock { $0 })
            #expect(sent["amounts"]?["transaction"] == .number("24.99"))
        }
    }

    @Test func pxpStatusClassification() async throws {
        try await withServer({ r in
            switch r.query["merchantTransactionId"] {
            case "missing": return .json(status: 404, bytes: Array("{}".utf8))
            case "busy": return HTTPResponse(status: 429, headers: [("Retry-After", "17")])
            case "broken": return HTTPResponse(status: 502)
            case "slow":
                try? await Task.sleep(for: .seconds(30))
                return .json(bytes: Array("{}".utf8))
            default: return .json(status: 400, bytes: Array(#"{"errorCode":"BAD"}"#.utf8))
            }
        }) { base in
            // Generous timeout for the answers that come at once (the machine may be loaded); a short one for "slow".
            let c = pxpClient(base, timeout: .seconds(10))
            let missing = await c.transaction(merchant: "M", site: "S", merchantTransactionId: "missing")
            #expect(missing == .notFound)
            let busy = await c.transaction(merchant: "M", site: "S", merchantTransactionId: "busy")
            #expect(busy == .transient(reason: "HTTP 429", retryAfter: .seconds(17)))
            let broken = await c.transaction(merchant: "M", site: "S", merchantTransactionId: "broken")
            #expect(broken == .transient(reason: "HTTP 502", retryAfter: nil))
            let slow = await pxpClient(base, timeout: .milliseconds(500)).transaction(
                merchant: "M", site: "S", merchantTransactionId: "slow")
            #expect(slow == .transient(reason: "timeout", retryAfter: nil))
            let bad = await c.transaction(merchant: "M", site: "S", merchantTransactionId: "bad")
            #expect(bad == .permanent(.refused(status: 400, body: #"{"errorCode":"BAD"}"#)))
        }
    }

    @Test func connectionRefusedIsTransient() async throws {
        var base = ""
        try await withServer({ _ in HTTPResponse(status: 200) }) { base = $0 }  // the port is free again afterwards
        let outcome = await pxpClient(base).transaction(merchant: "M", site: "S", merchantTransactionId: "X")
        guard case .transient(let t) = outcome, t.retryAfter == nil else { Issue.record("\(outcome)"); return }
        #expect(t.reason.hasPrefix("connection"))
    }

    // MARK: PayPal

    @Test func paypalTokenReuseRefreshOn401AndRequestId() async throws {
        let tokens = Mutex(0)
        let seen = Mutex<[(String, String?, String?)]>([])  // path, Authorization, PayPal-Request-Id
        try await withServer({ r in
            if r.path == "/v1/oauth2/token" {
                guard r.method == "POST", r.headers["Authorization"] == "Basic " + Data("cid:sec".utf8).base64EncodedString(),
                    String(decoding: r.body, as: UTF8.self) == "grant_type=client_credentials"
                else {
                    return .json(status: 401, bytes: Array(#"{"error":"invalid_client"}"#.utf8))
                }
                let n = tokens.withLock {
                    $0 += 1; return $0
                }
                return .json(bytes: Array(#"{"access_token":"tok-\#(n)","token_type":"Bearer","expires_in":32400}"#.utf8))
            }
            seen.withLock { $0.append((r.path, r.headers["Authorization"], r.headers["PayPal-Request-Id"])) }
            if r.path == "/v2/checkout/orders/EXPIRE" && r.headers["Authorization"] == "Bearer tok-1" {
                return .json(status: 401, bytes: Array(#"{"error":"invalid_token"}"#.utf8))
            }
            if r.path == "/v2/payments/captures/C1/refund" {
                return .json(status: 201, bytes: Array(#"{"id":"R1","status":"COMPLETED"}"#.utf8))
            }
            return .json(bytes: Array(PayPalClientTests.orderAnswer.utf8))
        }) { base in
            let c = PayPalClient(
                configuration: PayPalConfiguration(baseURL: base, clientID: "cid", secret: "sec"), transport: transport, retry: .none)
            #expect(await c.order("O1").value?["status"]?.stringValue == "APPROVED")
            #expect(await c.order("O2").value != nil)
            #expect(tokens.withLock { $0 } == 1)
            #expect(await c.order("EXPIRE").value != nil)
            #expect(tokens.withLock { $0 } == 2)
            let refund = await c.refundCapture(
                "C1", amount: Money(minorUnits: 500, currency: Currency(code: "USD")!), requestID: "paypal:ORD-9:refund:500")
            #expect(refund.value?["id"]?.stringValue == "R1")
            let log = seen.withLock { $0 }
            #expect(
                log.map(\.0) == [
                    "/v2/checkout/orders/O1", "/v2/checkout/orders/O2", "/v2/checkout/orders/EXPIRE",
                    "/v2/checkout/orders/EXPIRE", "/v2/payments/captures/C1/refund"
                ])
            #expect(log.map { $0.1 ?? "" } == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-1", "Bearer tok-2", "Bearer tok-2"])
            #expect(log.last?.2 == "paypal:ORD-9:refund:500")
        }
    }
}
