import Foundation
import HTTP
import PaysimCore
import PayreconTesting
import Providers
import Reconciliation
import Store
import Testing
import Worker

/// A Paypercut order from webhook to re-fetch to action to execution to a clean re-check, against paysim over HTTP.
@Suite struct PaypercutTests {
    static func event(_ intent: String) -> String {
        #"{"id":"evt_\#(UUID().uuidString)","type":"payment_intent.amount_capturable_updated","created":"2026-12-01T10:00:00Z","livemode":false,"data":{"object":{"id":"\#(intent)","object":"payment_intent"}}}"#
    }

    @Test func aWebhookLeadsToACaptureExecutedOnceAndACleanRecheck() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents",
                              #"{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_1")
            try h.insert(order)
            let id = try h.store(.paypercut, json: Self.event("pi_1"))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).status == "done")
            #expect(try h.actions().map(\.idempotencyKey) == ["paypercut:PC-1:capture:2000"])
            #expect(await h.executor.executePending().succeeded == 1)
            let calls = try await h.paysimLog(provider: "paypercut")
            #expect(calls.count == 1 && calls[0]["result"] as? String == "applied" && calls[0]["idempotency_key"] as? String == "paypercut:PC-1:capture:2000")
            #expect(await h.checker.check(order) == .checked(CheckOutcome(), matched: true))
            // Executing again calls Paypercut no more.
            try h.execute("UPDATE actions SET status = 'pending'")
            _ = await h.executor.executePending()
            #expect(try await h.paysimLog(provider: "paypercut").filter { $0["result"] as? String == "applied" }.count == 1)
        }
    }

    @Test func cancelledOrdersAreVoidedAndRefunded() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", #"""
                [{"id":"pi_v","amount":1500,"currency":"EUR","capture_method":"manual","status":"requires_capture"},
                 {"id":"pi_r","amount":1500,"currency":"EUR","capture_method":"automatic","status":"succeeded"}]
                """#)
            let void = WorkerHarness.order(.paypercut, "PC-V", ref: "pi_v", amount: 1500, currency: "EUR", fulfilment: .cancelled, merchant: nil)
            let refund = WorkerHarness.order(.paypercut, "PC-R", ref: "pi_r", intent: .purchase, amount: 1500, currency: "EUR",
                                             fulfilment: .cancelled, merchant: nil)
            try h.insert(void, refund)
            let summary = try await h.sweep(provider: .paypercut)
            #expect(summary.exitCode == 0)
            #expect(Set(try h.actions().map(\.idempotencyKey)) == ["paypercut:PC-V:void:0", "paypercut:PC-R:refund:1500"])
            #expect(await h.executor.executePending().succeeded == 2)
            #expect(await h.checker.check(void) == .checked(CheckOutcome(), matched: true))
            #expect(await h.checker.check(refund) == .checked(CheckOutcome(), matched: true))
        }
    }

    /// A BLIK payment left in requires_action for 20 minutes is stale under `blik=15m`, not under the 24 h default.
    @Test func theMethodPicksThePendingWindow() async throws {
        try await WorkerHarness.with { h in
            let created = Int(Date().timeIntervalSince1970) - 20 * 60
            try await h.admin("/admin/paypercut/intents", #"""
                {"id":"pi_b","amount":4900,"currency":"PLN","capture_method":"automatic","status":"requires_action","created":\#(created),
                 "payment":{"status":"pending","amount_captured":0,"payment_method":"blik"}}
                """#)
            let order = WorkerHarness.order(.paypercut, "PC-B", ref: "pi_b", intent: .purchase, amount: 4900, currency: "PLN",
                                            fulfilment: .open, merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order)
            #expect(try h.openKinds(order: "PC-B").isEmpty, "20 minutes is not stale under 24h")
            let blik = OrderChecker(pool: h.pool, gateway: h.gateway, pendingWindows: try PendingWindows.parse("24h,blik=15m"))
            _ = await blik.check(order)
            #expect(try h.openKinds(order: "PC-B") == ["stale_pending"])
        }
    }

    @Test func aWrongAccountIsMissingAtProvider() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents",
                              #"{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_other")
            try h.insert(order)
            _ = await h.checker.check(order)
            #expect(try h.openKinds(order: "PC-1") == ["missing_at_provider"])
        }
    }

    /// `account.*` events name no payment: the delivery ends ignored with its type, never done having done nothing.
    @Test func accountEventsAreIgnoredWithTheirType() async throws {
        try await WorkerHarness.with { h in
            let id = try h.store(.paypercut, json: #"{"id":"evt_acct","type":"account.updated","created":"2026-11-30T10:00:00Z","account":"acct_1","data":{"object":{"id":"acct_1","object":"account"}}}"#)
            #expect(await h.runOnce().done == 1)
            let d = try h.delivery(id)
            #expect(d.status == "ignored")
            #expect(d.outcome == "account.updated names no payment (data.object: account)")
        }
    }
}

/// The Paypercut client over real HTTP against paysim: answers, errors and what it sends.
@Suite struct PaypercutClientTests {
    static func client(_ h: WorkerHarness, key: String = SimConfig().paypercutSecretKey) -> PaypercutClient {
        PaypercutClient(configuration: PaypercutConfiguration(baseURL: h.paysimURL, secretKey: key, timeoutSeconds: 10),
                        transport: HTTPClientTransport(client: h.http), retry: .none)
    }

    static let seed = #"{"id":"pi_c","account":"acct_1","amount":3000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#

    @Test func foundNotFoundAndTheWrongAccount() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            let c = Self.client(h)
            #expect(await c.paymentIntent("pi_c", account: "acct_1").value?["status"]?.stringValue == "requires_capture")
            #expect(await c.paymentIntent("pi_nope", account: "acct_1") == .notFound)
            #expect(await c.paymentIntent("pi_c", account: "acct_other") == .notFound)
        }
    }

    @Test func errorsAreClassified() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            guard case .permanent(401, let body) = await Self.client(h, key: "sk_wrong").paymentIntent("pi_c", account: nil) else {
                Issue.record("a wrong key is not a permanent 401"); return
            }
            #expect(body.contains("invalid_api_key"))
            let c = Self.client(h)
            // The same Idempotency-Key on another request: 409 idempotency_error, permanent.
            _ = await c.capture("pi_c", amount: 1000, final: false, key: "k-1", account: "acct_1")
            guard case .permanent(409, let conflict) = await c.cancel("pi_c", key: "k-1", account: "acct_1") else {
                Issue.record("a reused key is not a permanent 409"); return
            }
            #expect(conflict.contains("idempotency_error"))
            try await h.faults(#"{"rate_429":1.0,"retry_after":7}"#)
            guard case .transient(_, let seven) = await c.paymentIntent("pi_c", account: nil) else { Issue.record("429 not transient"); return }
            #expect(seven == 7, "Retry-After is honoured")
            try await h.faults(#"{"rate_429":1.0,"retry_after":0}"#)
            guard case .transient(_, let after) = await c.paymentIntent("pi_c", account: nil) else { Issue.record("429 not transient"); return }
            #expect(after == nil, "a 429 without Retry-After still backs off (transient), with no delay given")
            try await h.faults(#"{"rate_429":0,"error_rate":1.0}"#)
            #expect(await c.paymentIntent("pi_c", account: nil).isTransient)
        }
    }

    @Test func actionsChangeStateAndHonourTheKey() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            let c = Self.client(h)
            let first = await c.capture("pi_c", amount: 1000, final: true, key: "cap-1", account: "acct_1")
            #expect(first.value?["status"]?.stringValue == "succeeded", "a final capture releases the rest")
            #expect(first.value?["amount_received"]?.numberLiteral == "1000" && first.value?["amount_capturable"]?.numberLiteral == "0")
            let again = await c.capture("pi_c", amount: 1000, final: true, key: "cap-1", account: "acct_1")
            #expect(again.value?["amount_received"]?.numberLiteral == "1000", "the same key: the first answer, applied once")
            let refund = await c.refund(paymentIntent: "pi_c", amount: 400, key: "ref-1", account: "acct_1")
            #expect(refund.value?["amount"]?.numberLiteral == "400")
            let log = try await h.paysimLog(provider: "paypercut")
            #expect(log.map { $0["result"] as? String } == ["applied", "replayed", "applied"])
            #expect(log.map { $0["idempotency_key"] as? String } == ["cap-1", "cap-1", "ref-1"])
        }
    }
}
