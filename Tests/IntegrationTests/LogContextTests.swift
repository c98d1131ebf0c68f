@_spi(Positional) import Postgres
import Foundation
import PayreconTesting
import Providers
import Reconciliation
import Testing

/// Each room adds its context to the logger it is handed: the receiver `request_id`, the worker `delivery_id` and
/// `provider`, the executor `order_id` and `idempotency_key`.
@Suite struct LogContextTests {
    @Test func receiverLinesCarryARequestIdPerRequest() async throws {
        try await ReceiverHarness.with { h in
            _ = try await h.pxp("{}", key: "wrong")
            _ = try await h.pxp("{}", key: "wrong")
            let lines = h.log.entries("delivery rejected")
            #expect(lines.count == 2)
            #expect(lines.allSatisfy { $0["provider"] as? String == "pxp" && $0["reason"] as? String == "invalid_signature" })
            let ids = Set(lines.compactMap { $0["request_id"] as? String })
            #expect(ids.count == 2, "request ids: \(ids)")
        }
    }

    @Test func workerLinesCarryTheDeliveryAndExecutorLinesTheOrderAndKey() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-LOG", value: "20.00")
            try h.insert(WorkerHarness.order(.pxp, "O-LOG", ref: "TX-LOG", amount: 2000))
            let id = try h.store(.pxp, json: pxpEvent("TX-LOG"))
            try await h.faults(#"{"error_rate":1.0}"#)
            _ = await h.runOnce()
            let retried = try #require(h.log.entries("delivery will be retried").first)
            #expect(retried["delivery_id"] as? Int == Int(id))
            #expect(retried["provider"] as? String == "pxp")
            #expect((retried["owner"] as? String)?.hasPrefix("w-") == true)

            try await h.clearFaults()
            try h.execute("UPDATE deliveries SET next_attempt_at = now() WHERE id = $1", [.int64(id)])
            _ = await h.worker(executeActions: true).run(once: true)
            let executed = try #require(h.log.entries("action executed").first)
            #expect(executed["order_id"] as? String == "O-LOG")
            #expect(executed["idempotency_key"] as? String == "pxp:O-LOG:capture:2000")
            #expect(executed["provider"] as? String == "pxp")
        }
    }
}
