import Foundation
import PaysimCore
import PayreconTesting
import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// An order paid in several attempts or transactions, reconciled as one, end to end: orders imported
/// with several references, webhooks from paysim for each attempt, the real worker and sweep.
@Suite("Several transactions per order", .serialized) struct SeveralTransactionsTests {
    func importCSV(_ h: WorkerHarness, _ rows: String...) async throws -> PayreconProcess.Result {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).csv")
        try (["provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount"] + rows)
            .joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        return try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: h.database.url)
    }

    @Test func aRetryAfterADeclineReconcilesClean() async throws {
        try await WorkerHarness.with { h in
            // PXP: "use a new merchantTransactionId for each retry attempt"; the first was refused, the second authorised.
            _ = try await h.seedPXP("ATTEMPT-1", value: "20.00", state: "Refused")
            _ = try await h.seedPXP("ATTEMPT-2", value: "20.00", state: "Authorised")
            let imported = try await importCSV(h, "pxp,ORD-R,M1,S1,ATTEMPT-1 ATTEMPT-2,authorisation,20.00,GBP,fulfilled,0")
            #expect(imported.status == 0, "\(imported.stderr)")
            // The webhook for the refused attempt, then for the successful one: both re-check the order.
            let refused = try #require(try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"ATTEMPT-1"}"#).first)
            #expect(await h.runOnce().done == 1)
            let paid = try #require(try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"ATTEMPT-2"}"#).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(refused).outcome == "re-checked pxp order ORD-R")
            #expect(try h.delivery(paid).outcome == "re-checked pxp order ORD-R")
            // No state_mismatch for the refused attempt, no unknown_order for the paid one: only the capture, on it.
            #expect(try h.discrepancies().filter { $0.status == "open" }.isEmpty)
            let actions = try h.actions()
            #expect(actions.map(\.idempotencyKey) == ["pxp:ORD-R:capture:2000:ATTEMPT-2"])
            // Executed once, against the attempt that holds the money.
            _ = await h.executor.executePending()
            let calls = try await h.paysimLog(provider: "pxp")
            #expect(calls.count == 1)
            #expect(try h.actions().first?.status == .succeeded)
            #expect(try h.discrepancies().filter { $0.status == "open" }.isEmpty)
        }
    }

    @Test func everyAttemptFailedIsStillAStateMismatch() async throws {
        try await WorkerHarness.with { h in
            _ = try await h.seedPXP("F-1", value: "20.00", state: "Refused")
            _ = try await h.seedPXP("F-2", value: "20.00", state: "Refused")
            #expect(try await importCSV(h, "pxp,ORD-F,M1,S1,F-1 F-2,authorisation,20.00,GBP,fulfilled,0").status == 0)
            _ = try await h.sweep()
            #expect(try h.openKinds(order: "ORD-F") == ["state_mismatch"])
        }
    }

    @Test func aSplitPayPalPaymentOnTwoOrdersIsCheckedOnceWithEveryTransactionFetched() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                """
                [{"id":"PP-A","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"60.00","captures":[{"id":"CAP-A"}]},
                 {"id":"PP-B","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"40.00","captures":[{"id":"CAP-B"}]}]
                """)
            #expect(try await importCSV(h, "paypal,ORD-S,,,PP-A PP-B,purchase,100.00,USD,fulfilled,70.00").status == 0)
            let before = (try await h.admin("/admin/stats", method: "GET")["requests"] as? [String: Int])?["paypal.get_order"] ?? 0
            let summary = try await h.sweep()
            #expect(summary.totals.checked == 1 && summary.totals.errors == 0)
            // One check, both provider orders fetched.
            let after = (try await h.admin("/admin/stats", method: "GET")["requests"] as? [String: Int])?["paypal.get_order"] ?? 0
            #expect(after - before == 2)
            #expect(try h.openKinds(order: "ORD-S").isEmpty)
            // The refund of 70.00 is spread over the two provider orders' captures, in order.
            let keys = Dictionary(
                uniqueKeysWithValues: try h.actions().map { ($0.idempotencyKey, ($0.amount.minorUnits, $0.providerTarget)) })
            #expect(keys.count == 2)
            #expect(keys["paypal:ORD-S:refund:6000:PP-A"]?.0 == 6000 && keys["paypal:ORD-S:refund:6000:PP-A"]?.1 == "CAP-A")
            // Each key names its own provider order's refunded total (PP-B: 0 + 10.00), never the order's running total.
            #expect(keys["paypal:ORD-S:refund:1000:PP-B"]?.0 == 1000 && keys["paypal:ORD-S:refund:1000:PP-B"]?.1 == "CAP-B")
            _ = await h.executor.executePending()
            let paths = Set(try await h.paysimLog(provider: "paypal").compactMap { $0["path"] as? String })
            #expect(paths == ["/v2/payments/captures/CAP-A/refund", "/v2/payments/captures/CAP-B/refund"])
            _ = try await h.sweep()
            #expect(try h.actions().allSatisfy { $0.status == .succeeded })
            #expect(try h.openKinds(order: "ORD-S").isEmpty)
            // A webhook naming the second provider order re-checks the merchant's order, never unknown_order.
            let id = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"PP-B"}"#).first)
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).outcome == "re-checked paypal order ORD-S")
            #expect(try h.discrepancies().filter { $0.kind == "unknown_order" }.isEmpty)
        }
    }

    @Test func anUnlistedRetryNamingTheOrderIsLinkedToIt() async throws {
        try await WorkerHarness.with { h in
            // The buyer abandoned PP-OLD and paid with PP-NEW; the merchant has recorded only the first. PayPal's answer
            // for PP-NEW names the merchant's order in purchase_units[].reference_id.
            try await h.seedPayPal(
                """
                [{"id":"PP-OLD","intent":"CAPTURE","status":"CREATED","currency":"EUR","amount":"30.00"},
                 {"id":"PP-NEW","intent":"CAPTURE","status":"COMPLETED","currency":"EUR","amount":"30.00","reference_id":"ORD-L","captures":[{"id":"CAP-N"}]},
                 {"id":"PP-STRAY","intent":"CAPTURE","status":"COMPLETED","currency":"EUR","amount":"5.00","reference_id":"NOT-AN-ORDER","captures":[{"id":"CAP-S"}]}]
                """)
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-L", ref: "PP-OLD", intent: .purchase, amount: 3000, currency: "EUR", merchant: nil))
            let linked = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"PP-NEW"}"#).first)
            let stray = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"PP-STRAY"}"#).first)
            #expect(await h.runOnce().done == 2)
            #expect(try h.delivery(linked).outcome == "re-checked paypal order ORD-L")
            #expect(try h.delivery(stray).outcome == "unknown_order PP-STRAY")
            let conn = try h.database.connect(); defer { conn.close() }
            let order = try #require(try OrderStore.find(provider: .paypal, orderID: "ORD-L", on: conn))
            #expect(order.transactionRefs == ["PP-OLD", "PP-NEW"])
            // Paid by the new order; the abandoned one (pending, young) is no discrepancy.
            #expect(try h.openKinds(order: "ORD-L").isEmpty)
        }
    }
    /// A nightly re-import of the merchant's file (which lists only the order's own transaction) keeps what payrecon
    /// linked, and the order's own transaction with it: the original authorisation is still checked and captured.
    @Test func aReImportKeepsTheOrdersOwnTransactionBesideALearnedOne() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                """
                [{"id":"PP-OWN","intent":"AUTHORIZE","status":"COMPLETED","currency":"EUR","amount":"30.00","authorizations":[{"id":"AUTH-OWN","status":"CREATED"}]},
                 {"id":"PP-MORE","intent":"AUTHORIZE","status":"COMPLETED","currency":"EUR","amount":"10.00","reference_id":"ORD-K","authorizations":[{"id":"AUTH-MORE","status":"CREATED"}]}]
                """)
            #expect(try await importCSV(h, "paypal,ORD-K,,,PP-OWN,authorisation,30.00,EUR,open,0").status == 0)
            _ = try #require(
                try h.storeWebhook(#"{"provider":"paypal","event_type":"CHECKOUT.ORDER.APPROVED","order_id":"PP-MORE"}"#).first)
            #expect(await h.runOnce().done == 1)
            let conn = try h.database.connect(); defer { conn.close() }
            #expect(try OrderStore.find(provider: .paypal, orderID: "ORD-K", on: conn)?.transactionRefs == ["PP-OWN", "PP-MORE"])
            // The nightly re-import, twice: the order's own transaction and the learned one are both still there.
            for _ in 0..<2 {
                #expect(try await importCSV(h, "paypal,ORD-K,,,PP-OWN,authorisation,30.00,EUR,open,0").status == 0)
                #expect(try OrderStore.find(provider: .paypal, orderID: "ORD-K", on: conn)?.transactionRefs == ["PP-OWN", "PP-MORE"])
            }
            // A file that now lists another transaction replaces what the merchant listed, and keeps the learned one.
            #expect(try await importCSV(h, "paypal,ORD-K,,,PP-OWN PP-THIRD,authorisation,30.00,EUR,open,0").status == 0)
            #expect(
                Set(try OrderStore.find(provider: .paypal, orderID: "ORD-K", on: conn)?.transactionRefs ?? []) == [
                    "PP-OWN", "PP-THIRD", "PP-MORE"
                ])
            #expect(try await importCSV(h, "paypal,ORD-K,,,PP-OWN,authorisation,30.00,EUR,open,0").status == 0)
            #expect(try OrderStore.find(provider: .paypal, orderID: "ORD-K", on: conn)?.transactionRefs == ["PP-OWN", "PP-MORE"])
        }
    }
}

/// `PXP_MAX_RPS` honoured by the real `payrecon reconcile` against paysim: every order fetched (paysim's count), and
/// no faster than the limit allows (a lower bound only: load can only make it slower).
@Suite("Provider rate limits", .serialized) struct ProviderRateLimitTests {
    @Test func theSweepStaysUnderPXPMaxRPS() async throws {
        try await WorkerHarness.with { h in
            var orders: [Order] = []
            for i in 0..<20 {
                _ = try await h.seedPXP("RPS-\(i)", value: "20.00")
                orders.append(WorkerHarness.order(.pxp, "O-RPS-\(i)", ref: "RPS-\(i)", amount: 2000, fulfilment: .open))
            }
            try h.insert(orders)
            let before = (try await h.admin("/admin/stats", method: "GET")["requests"] as? [String: Int])?["pxp.get_transaction"] ?? 0
            let config = SimConfig()
            let started = Date()
            let run = try await PayreconProcess.launch(
                ["reconcile", "--all", "--concurrency", "16"], databaseURL: h.database.url,
                environment: [
                    "PXP_API_BASE_URL": h.paysimURL + "/api/v1", "PXP_CLIENT_ID": config.pxpClientID, "PXP_TOKEN_ID": config.pxpTokenID,
                    "PXP_TOKEN_VALUE": config.pxpTokenValue, "PXP_MAX_RPS": "20"
                ])
            let elapsed = Date().timeIntervalSince(started)
            #expect(run.status == 0, "\(run.stderr)")
            let after = (try await h.admin("/admin/stats", method: "GET")["requests"] as? [String: Int])?["pxp.get_transaction"] ?? 0
            #expect(after - before == 20)
            // 20 requests at 20/s: the last is sent at least 19 × 50 ms after the first.
            #expect(elapsed >= 0.95, "20 fetches took \(elapsed) s at PXP_MAX_RPS=20")
        }
    }
}
