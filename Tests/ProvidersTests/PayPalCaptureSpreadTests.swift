@_spi(Positional) import Postgres
import Foundation
import Synchronization
import Testing
@testable import Providers
@testable import Reconciliation

/// A capture of an order of several purchase units is spread over their authorizations, one call each. What it moves
/// decides the action's end: nothing is sent when they cannot hold it all, and a spread that stops part way has moved
/// money (never "not sent", which would end the action without its order being checked again).
@Suite struct PayPalCaptureSpreadTests {
    static func call(amount: Int64, sources: [RefundSource]) -> ActionCall {
        let order = Order(
            provider: .paypal, orderID: "O-1", merchant: nil, site: nil, transactionRef: "PP-1", intent: .authorisation,
            amount: Money(minorUnits: amount, currency: Currency(code: "USD")!), fulfilment: .fulfilled)
        var snapshot = Snapshot(
            provider: .paypal, transactionRef: "PP-1", merchant: nil, site: nil, intent: .authorisation,
            currency: Currency(code: "USD")!, value: amount, authorised: sources.reduce(0) { $0 + $1.amount }, captured: 0,
            refunded: 0, state: .authorised, rawState: "APPROVED", createdAt: nil)
        snapshot.capabilities = Capabilities(
            capture: .allowed(target: sources.first?.id), void: .allowed(target: sources.first?.id),
            increment: .unsupported("PayPal has no incremental authorization"), refund: .denied("nothing captured"), captureSources: sources
        )
        return ActionCall(
            actionID: 1, kind: .capture, amount: Money(minorUnits: amount, currency: Currency(code: "USD")!), target: amount,
            providerTarget: sources.first?.id, idempotencyKey: "paypal:O-1:capture:\(amount)", order: order, snapshot: snapshot,
            isFinal: true)
    }

    static func api(_ transport: ScriptedTransport) throws -> any ProviderAPI {
        try PayPalProvider.definition.api(
            Environment(["PAYPAL_CLIENT_ID": "id", "PAYPAL_CLIENT_SECRET": "s", "PAYPAL_API_BASE_URL": "https://paypal.test"]),
            transport)
    }

    @Test func authorizationsThatCannotHoldItAllAreNeverAsked() async throws {
        let transport = ScriptedTransport { request, _ in
            request.url.hasSuffix("/v1/oauth2/token")
                ? json(200, #"{"access_token":"t","expires_in":3600}"#) : json(201, #"{"id":"CAP","status":"COMPLETED"}"#)
        }
        let result = try await Self.api(transport).execute(
            Self.call(
                amount: 1000,
                sources: [
                    RefundSource(id: "AUTH-A", amount: 500, refunded: 0), RefundSource(id: "AUTH-B", amount: 300, refunded: 0)
                ]))
        guard case .permanent(.notSent(let why)) = result.outcome else { Issue.record("\(result.outcome)"); return }
        #expect(why.contains("800 of the 1000"), "\(why)")
        #expect(!transport.requests.contains { $0.url.contains("/capture") }, "no capture was sent")
    }

    @Test func aSpreadThatStopsAfterACaptureHasMovedMoney() async throws {
        // The first capture goes through; the second is answered 401, and the fresh token it needs is refused: it is
        // never sent.
        let tokens = Mutex(0)
        let transport = ScriptedTransport { request, _ in
            if request.url.hasSuffix("/v1/oauth2/token") {
                return tokens.withLock {
                    $0 += 1; return $0
                } == 1 ? json(200, #"{"access_token":"t","expires_in":3600}"#) : json(401, #"{"error":"invalid_client"}"#)
            }
            if request.url.contains("AUTH-A") { return json(201, #"{"id":"CAP-A","status":"COMPLETED"}"#) }
            return json(401, #"{"error":"invalid_token"}"#)
        }
        let result = try await Self.api(transport).execute(
            Self.call(
                amount: 700,
                sources: [
                    RefundSource(id: "AUTH-A", amount: 500, refunded: 0), RefundSource(id: "AUTH-B", amount: 300, refunded: 0)
                ]))
        guard case .permanent(let failure) = result.outcome else { Issue.record("\(result.outcome)"); return }
        #expect(failure.reachedProvider, "\(failure)")
    }

    /// However the spread stops after a capture, the call is never one that moved nothing: only a part whose own
    /// outcome is unknown keeps the call in doubt.
    @Test(arguments: [
        (ProviderOutcome<String>.notFound, "declined"), (.transient(reason: "HTTP 429", retryAfter: .seconds(1)), "declined"),
        (.permanent(.notSent("oauth2 token: refused")), "declined"), (.transient(reason: "timeout", retryAfter: nil), "transient"),
        (.permanent(.refused(status: 422, body: "x")), "refused")
    ])
    func aSpreadStoppedAfterACaptureNeverEndsAsNothingMoved(outcome: ProviderOutcome<String>, expected: String) {
        let ended = PayPalProvider.API.stopped(outcome, after: ["CAP-A"])
        switch ended {
        case .permanent(.declined(let why)): #expect(expected == "declined" && why.hasPrefix("captured from CAP-A"), "\(why)")
        case .transient: #expect(expected == "transient")
        case .permanent(.refused): #expect(expected == "refused")
        default: Issue.record("\(outcome) ended as \(ended)")
        }
        #expect(PayPalProvider.API.stopped(.notFound, after: []) == .notFound, "nothing captured yet: the outcome as it is")
    }
}
