import Crypto
import Foundation
import Testing
@testable import Providers
@testable import Reconciliation

/// What `payrecon explain` keeps of provider answers is collected at `CountedTransport`: the answers a check used,
/// the idempotency key as sent, never a credential, and bounded.
@Suite struct AnswerLogTests {
    /// A PayPal capture's call: the OAuth token's answer (an access token) is never kept; the capture's is, with the
    /// PayPal-Request-Id it carried and what was sent.
    @Test func aTokensAnswerIsNeverKeptAndTheKeyIsAsSent() async {
        let fake = PayPalClientTests.FakePayPal { _ in json(201, #"{"id":"CAP-1","status":"COMPLETED"}"#) }
        let counted = CountedTransport(base: fake.transport, provider: .paypal)
        let client = PayPalClient(configuration: PayPalClientTests.config, transport: counted, retry: .none)
        let key = "paypal:O-1:capture:1000"
        let (_, exchanges) = await AnswerLog.collecting {
            await client.captureAuthorization(
                "AUTH-1", amount: Money(minorUnits: 1000, currency: Currency(code: "USD")!), final: true, requestID: key)
        }
        #expect(exchanges.count == 1, "the token request is not evidence: \(exchanges.map(\.url))")
        let e = exchanges[0]
        #expect(e.url.hasSuffix("/v2/payments/authorizations/AUTH-1/capture") && e.status == 201 && e.idempotencyKey == key)
        #expect(e.sha256 == SHA256.hash(e.body) && String(decoding: e.requestBody, as: UTF8.self).contains("\"10.00\""))
        #expect(!exchanges.contains { String(decoding: $0.body, as: UTF8.self).contains("access_token") })
    }

    /// Paypercut's Idempotency-Key and PXP's merchantTransactionId are what the log names as the key.
    @Test func eachProvidersKeyIsTheOneOnTheWire() {
        let pc = PaypercutClient(
            configuration: PaypercutConfiguration(baseURL: "https://api.paypercut.io", secretKey: "sk"),
            transport: ScriptedTransport([]), retry: .none)
        let r = pc.request("POST", ["v1", "refunds"], body: nil, key: "K-1", account: nil)
        #expect(r.idempotencyKey == "K-1" && r.header("Idempotency-Key") == "K-1")
        let pxp = PXPClient(
            configuration: PXPConfiguration(baseURL: "https://api.pxp", clientID: "c", tokenID: "t", tokenValue: "v"),
            transport: ScriptedTransport([]), retry: .none)
        let m = pxp.modificationRequest(
            systemTransactionId: "SYS-1", .refund(amount: 500), currency: Currency(code: "EUR")!,
            merchant: "M", site: "S", merchantTransactionId: "pr-abc", merchantTransactionDate: "2026-12-02T00:00:00.000Z")
        #expect(m.idempotencyKey == "pr-abc" && String(decoding: m.body, as: UTF8.self).contains("\"merchantTransactionId\":\"pr-abc\""))
    }

    /// Nothing is collected outside a log; a transport failure is kept as "no answer"; past the bounds the hash stays
    /// and the body goes.
    @Test func boundedAndOnlyWhereBound() async throws {
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 600 << 10)
        let counted = CountedTransport(
            base: ScriptedTransport { request, _ in
                if request.url.hasSuffix("/fail") { throw ProviderTransportError.timeout }
                return ProviderResponse(status: 200, body: big)
            }, provider: .pxp)
        _ = try await counted.send(ProviderRequest(method: "GET", url: "https://p/outside"))
        let (_, exchanges) = await AnswerLog.collecting {
            for i in 0..<3 { _ = try? await counted.send(ProviderRequest(method: "GET", url: "https://p/\(i)")) }
            _ = try? await counted.send(ProviderRequest(method: "GET", url: "https://p/fail"))
        }
        #expect(exchanges.map(\.url) == ["https://p/0", "https://p/1", "https://p/2", "https://p/fail"])
        #expect(exchanges[0].body.count == big.count && exchanges[0].bodyKept, "the first fits the 1 MiB a check keeps")
        #expect(
            exchanges[1].body.isEmpty && !exchanges[1].bodyKept && exchanges[1].sha256 == SHA256.hash(big)
                && exchanges[1].length == big.count,
            "past the bound: the hash and length of the whole answer, no body")
        #expect(exchanges[3].status == nil && String(decoding: exchanges[3].body, as: UTF8.self).hasPrefix("no answer"))
    }
}
