import Foundation
import Observability
import PayreconTesting
import Store
import Testing
@testable import Receiver

/// The rejection lane writes a flood in few transactions: each count row is updated about once a second, not once
/// per rejected request (every update leaves a dead row version; per request a flood grew the tables ~300 KiB/min).
@Suite struct RejectionLaneTests {
    @Test func aFloodIsWrittenInAFewTransactionsWithEveryRejectionCounted() async throws {
        let storage = InMemoryReceiverStorage()
        let lane = RejectionLane(storage: storage, flushInterval: .milliseconds(500), logger: Logger())
        let started = Date()
        var sent = 0
        while Date().timeIntervalSince(started) < 1.2 {
            for _ in 0..<100 {
                lane.record(
                    Rejection(
                        provider: .pxp, reason: "invalid_signature", message: "bad", headers: [], body: [1, 2, 3],
                        remoteAddress: "10.0.0.1"))
            }
            sent += 100
            try await Task.sleep(for: .milliseconds(10))
        }
        lane.drain(timeout: .now() + 5)
        #expect(storage.rejectionCount == Int64(sent))
        #expect(storage.rejections.count == 20, "samples are capped per (provider, reason, hour)")
        // ~1.2 s of flood at one write per 0.5 s: 3 or 4 writes (not one per request, nor one per batch that arrived).
        #expect(storage.rejectionWrites <= 4, "\(storage.rejectionWrites) writes for \(sent) rejections")
    }

    @Test func aSingleRejectionIsWrittenWithinTheInterval() async throws {
        let storage = InMemoryReceiverStorage()
        let lane = RejectionLane(storage: storage, flushInterval: .milliseconds(100), logger: Logger())
        lane.record(Rejection(provider: .paypal, reason: "missing_signature", message: "m", headers: [], body: [], remoteAddress: nil))
        #expect(await eventually(5) { storage.rejectionCount == 1 })
        #expect(storage.rejections.count == 1)
    }
}
