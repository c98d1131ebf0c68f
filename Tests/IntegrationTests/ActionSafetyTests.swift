import Foundation
import PayreconTesting
import Providers
import Reconciliation
import Store
import Testing
import Worker

/// Actions move money exactly once, for exactly the right amount (issue 11, contract §6 "Executing moves money"),
/// against PostgreSQL and paysim over real HTTP.
@Suite struct ActionSafetyTests {
    static func pending(_ h: WorkerHarness) throws -> [String: Int64] {
        Dictionary(uniqueKeysWithValues: try h.actions().filter { $0.status == .pending }.map { ($0.idempotencyKey, $0.amount.minorUnits) })
    }

    static func status(_ h: WorkerHarness, _ key: String) throws -> ActionStatus? {
        try h.actions().first { $0.idempotencyKey == key }?.status
    }

    /// Defect 1: a superseded key the plan wants again must be pending again (the order's amount changed and
    /// changed back), not silently left superseded.
    @Test func aSupersededActionThePlanWantsAgainIsPendingAgain() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            var order = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000)
            try h.insert(order)
            _ = await h.checker.check(order)
            #expect(try Self.pending(h) == ["pxp:O:capture:2000": 2000])

            order.amount = Money(minorUnits: 1500, currency: order.amount.currency)
            try h.insert(order)
            _ = await h.checker.check(order)
            #expect(try Self.pending(h) == ["pxp:O:capture:1500": 1500])
            #expect(try Self.status(h, "pxp:O:capture:2000") == .superseded)

            order.amount = Money(minorUnits: 2000, currency: order.amount.currency)
            try h.insert(order)
            guard case .checked(let outcome, _) = await h.checker.check(order) else { Issue.record("check failed"); return }
            #expect(try Self.pending(h) == ["pxp:O:capture:2000": 2000], "the capture the order calls for again is pending")
            #expect(try Self.status(h, "pxp:O:capture:1500") == .superseded)
            #expect(outcome.actionsEmitted == 1 && outcome.superseded == 1)
            #expect(try h.actions().count == 2, "the revived key is the same row")
        }
    }

    /// Defect 5: a check that fetched before the order changed must not plan from the order it was handed, nor leave
    /// a second pending capture beside the one a later check recorded.
    @Test func twoConcurrentChecksOfOneOrderLeaveOnePendingCapture() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            let before = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000)
            try h.insert(before)
            try await h.faults(#"{"latency_ms":1500}"#)
            let slow = Task { await h.checker.check(before) }   // its fetch is in flight for 1.5 s
            try await Task.sleep(for: .milliseconds(300))
            var after = before
            after.amount = Money(minorUnits: 1800, currency: before.amount.currency)
            try h.insert(after)
            try await h.faults(#"{"latency_ms":0}"#)
            guard case .checked = await h.checker.check(after) else { Issue.record("fast check failed"); return }
            guard case .checked = await slow.value else { Issue.record("slow check failed"); return }
            #expect(try Self.pending(h) == ["pxp:O:capture:1800": 1800])
            // The stored snapshot is the newer one.
            let fetched = try h.database.count("SELECT count(*) FROM snapshots WHERE fetched_at > now() - interval '1 minute'")
            #expect(fetched == 1)
        }
    }
}
