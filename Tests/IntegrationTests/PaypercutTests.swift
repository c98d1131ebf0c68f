import Foundation
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
}
