@_spi(Positional) import Postgres
import Foundation
import Observability
import PaysimCore
import PayreconTesting
import Providers
import Reconciliation
import Store
import Testing
import Worker

/// PXP modifications whose outcome is unknown, run against every plausible
/// reading of what PXP leaves undocumented: whether it de-duplicates a repeated merchantTransactionId, and whether
/// GET `?merchantTransactionId=` finds modifications. In none of them does money move wrongly.
@Suite(.serialized) struct PXPUnknownOutcomeTests {
    struct Mode: Sendable, CustomTestStringConvertible {
        var dedupe: Bool
        var lookup: Bool
        var testDescription: String { "dedupe=\(dedupe ? "yes" : "no"),lookup=\(lookup ? "yes" : "no")" }
        var json: String { #"{"dedupe":\#(dedupe),"lookup":\#(lookup)}"# }
    }
    static let modes = [
        Mode(dedupe: true, lookup: true), Mode(dedupe: false, lookup: true),
        Mode(dedupe: true, lookup: false), Mode(dedupe: false, lookup: false)
    ]

    /// Refunds PXP applied, in minor units (from paysim's log of what it applied).
    static func applied(_ h: WorkerHarness, operation: String) async throws -> [Int64] {
        let names = operation == "Capture" ? ["Capture", "FinalCapture"] : [operation]
        return h.simulator.pxpTransactions().filter { names.contains($0.operation ?? "") }.map(\.amount.minorUnits)
    }

    static func capturedPurchase(_ h: WorkerHarness, refund: Int64) async throws -> Order {
        try await h.seedPXP("TX", intent: "Purchase", value: "20.00", state: "Captured")
        let order = WorkerHarness.order(.pxp, "O", ref: "TX", intent: .purchase, amount: 2000, refund: refund)
        try h.insert(order)
        _ = await h.checker.check(order, logger: Logger())
        return order
    }

    /// The client's own retry re-sent a modification within milliseconds of a timeout or a 5xx. With a
    /// retrying client and an answer lost after PXP applied a refund, the refund is applied once (a PXP that does not
    /// de-duplicate would have applied the re-send too).
    @Test(arguments: modes) func aModificationIsNeverResentByTheClientsOwnRetry(_ mode: Mode) async throws {
        try await WorkerHarness.with(retry: RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1))) { h in
            try await h.admin("/admin/pxp/behaviour", mode.json)
            let order = try await Self.capturedPurchase(h, refund: 500)
            try await h.faults(#"{"drop_after_apply_rate":1.0}"#)
            let first = await h.executor.executePending()
            try await h.faults(#"{"drop_after_apply_rate":0}"#)
            #expect(first.deferred + first.failed == 1, "a lost answer leaves the outcome unknown: \(first)")
            #expect(try await Self.applied(h, operation: "Refund") == [500], "sent once by the client")
            // Later attempts never apply it twice either.
            for _ in 0..<3 {
                try h.execute("UPDATE actions SET lease_expires_at = NULL")
                _ = await h.executor.executePending()
                _ = await h.checker.check(order, logger: Logger())
            }
            #expect(try await Self.applied(h, operation: "Refund") == [500])
            let action = try #require(try h.actions().first)
            if mode.lookup {
                #expect(action.status == .succeeded, "found at PXP by its merchantTransactionId: \(action)")
            } else {
                // PXP cannot be asked: the action fails as outcome unknown and says what to do; nothing is re-sent.
                #expect(action.status == .failed && action.lastError?.contains("actions retry") == true, "\(action)")
                #expect(try h.openKinds(order: "O").contains("action_failed"))
            }
        }
    }

    /// A refund of 5.00 timed out but PXP applied it; the merchant then raised refund_amount to 8.00. No plan
    /// is made as if the 5.00 had not happened: 8.00 refunded in all, never 13.00.
    @Test(arguments: modes) func aTimedOutRefundIsAccountedBeforeARaisedRefundIsPlanned(_ mode: Mode) async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", mode.json)
            var order = try await Self.capturedPurchase(h, refund: 500)
            #expect(try ActionSafetyTests.pending(h) == ["pxp:O:refund:500": 500])
            try await h.faults(#"{"drop_after_apply_rate":1.0}"#)
            _ = await h.executor.executePending()
            try await h.faults(#"{"drop_after_apply_rate":0}"#)
            #expect(try await Self.applied(h, operation: "Refund") == [500])

            order.refundAmount = 800
            try h.insert(order)
            for _ in 0..<3 {
                _ = await h.checker.check(order, logger: Logger())
                try h.execute("UPDATE actions SET lease_expires_at = NULL")
                _ = await h.executor.executePending()
            }
            let refunds = try await Self.applied(h, operation: "Refund")
            #expect(refunds.reduce(0, +) <= 800, "never more than the merchant asked for: \(refunds)")
            if mode.lookup {
                #expect(refunds.sorted() == [300, 500], "the 5.00 is found, then 3.00 more: \(refunds)")
                #expect(try h.openKinds(order: "O").isEmpty)
            } else {
                // PXP cannot say whether the 5.00 happened: nothing more is refunded, and an operator is told.
                #expect(refunds == [500])
                #expect(try h.openKinds(order: "O").contains("action_failed"))
            }
        }
    }

    /// A call PXP never received (the connection dropped before it) is sent again once PXP, whose lookups are known
    /// to work, says it does not know it; where lookups do not find modifications it waits for an operator, and
    /// `payrecon actions retry` sends it.
    @Test(arguments: modes) func aCallPXPNeverReceivedIsSentAgainOnlyWhenPXPSaysSo(_ mode: Mode) async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", mode.json)
            // An earlier capture of another order, with a known outcome: evidence of how lookups behave.
            try await h.seedPXP("TX-0", value: "10.00")
            let earlier = WorkerHarness.order(.pxp, "O-0", ref: "TX-0", amount: 1000)
            try h.insert(earlier)
            _ = await h.checker.check(earlier, logger: Logger())
            #expect(await h.executor.executePending().succeeded == 1)
            var order = try await Self.capturedPurchase(h, refund: 0)
            order.refundAmount = 700
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            try await h.faults(#"{"drop_before_apply_rate":1.0}"#)
            _ = await h.executor.executePending()
            try await h.faults(#"{"drop_before_apply_rate":0}"#)
            #expect(try await Self.applied(h, operation: "Refund").isEmpty)
            for _ in 0..<ActionExecutor.attemptsBeforeOutcomeUnknown {
                try h.execute("UPDATE actions SET lease_expires_at = NULL")
                _ = await h.executor.executePending()
            }
            let refund = try #require(try h.actions().first { $0.kind == .refund })
            if mode.lookup {
                #expect(refund.status == .succeeded, "\(refund)")
            } else {
                #expect(refund.status == .failed, "\(refund)")
                let retried = await h.executor.retry(id: refund.id)
                #expect(retried == .pending(amount: 700))
                _ = await h.executor.executePending()
                #expect(try h.actions().first { $0.id == refund.id }?.status == .succeeded)
            }
            #expect(try await Self.applied(h, operation: "Refund") == [700])
        }
    }

    /// A modification PXP answers Pending is not failed: it stays in doubt, every check looks it up, and once PXP
    /// shows it final the action is succeeded and counted — never sent again.
    @Test func aModificationAnsweredPendingIsLookedUpUntilItIsFinal() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", #"{"pending":true}"#)
            let order = try await Self.capturedPurchase(h, refund: 500)
            let first = await h.executor.executePending()
            #expect(first.deferred == 1 && first.failed == 0, "Pending is not a failure: \(first)")
            #expect(try h.actions().first?.status == .pending)
            _ = await h.checker.check(order, logger: Logger())  // looks the modification up: PXP shows it final now
            try h.execute("UPDATE actions SET lease_expires_at = NULL")
            _ = await h.executor.executePending()
            #expect(try h.actions().first?.status == .succeeded)
            #expect(try await Self.applied(h, operation: "Refund") == [500], "sent once")
            #expect(try h.openKinds(order: "O").isEmpty)
        }
    }

    /// A timeout usually means the provider is slow: a modification it is still applying may not be findable a second
    /// later. A "not found" is trusted only PAYRECON_IN_DOUBT_GRACE after the call was sent; before that nothing is
    /// sent again.
    @Test func aNotFoundIsTrustedOnlyAfterTheGrace() async throws {
        try await WorkerHarness.with { h in
            let patient = ActionExecutor(
                pool: h.pool, gateway: h.gateway, checker: h.checker, inDoubtGrace: .seconds(3600), logger: h.log.logger)
            try await h.seedPXP("TX-0", value: "10.00")
            let earlier = WorkerHarness.order(.pxp, "O-0", ref: "TX-0", amount: 1000)
            try h.insert(earlier)
            _ = await h.checker.check(earlier, logger: Logger())
            #expect(await patient.executePending().succeeded == 1)  // evidence that lookups find modifications
            let order = try await Self.capturedPurchase(h, refund: 700)
            _ = order
            try await h.faults(#"{"drop_before_apply_rate":1.0}"#)
            _ = await patient.executePending()
            try await h.faults(#"{"drop_before_apply_rate":0}"#)
            for _ in 0..<3 {
                try h.execute("UPDATE actions SET lease_expires_at = NULL")
                _ = await patient.executePending()
            }
            #expect(try await Self.applied(h, operation: "Refund").isEmpty, "not sent again within the grace")
            let refund = try #require(try h.actions().first { $0.kind == .refund })
            #expect(refund.status == .pending && refund.inDoubt)
            // Once the grace has passed (the call's time moved back), PXP's "not found" is trusted and it is sent.
            try h.execute("UPDATE actions SET sent_at = now() - interval '2 hours', lease_expires_at = NULL")
            _ = await patient.executePending()
            #expect(try await Self.applied(h, operation: "Refund") == [700])
        }
    }

    /// The sweep preloads a page's links, so a check could plan from links read before a
    /// modification was recorded. A final capture of 10.00 on a 20.00 authorisation leaves the parent Captured; read
    /// without the capture's link, C looked like the whole 20.00 (a false over_captured). A check whose order learned a
    /// link meanwhile records nothing and checks again with the links as they are.
    @Test func aCheckWithLinksReadBeforeAModificationChecksAgain() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            let order = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 1000)
            try h.insert(order)
            let before = try await h.pool.run { try OrderChecker.known(provider: .pxp, orderIDs: ["O"], on: $0)["O"]! }
            _ = await h.checker.check(order, logger: Logger())
            #expect(await h.executor.executePending().succeeded == 1)
            _ = await h.checker.check(order, known: before, logger: Logger())  // links as a sweep page read them before the capture
            let kinds = try h.openKinds(order: "O")
            #expect(kinds.isEmpty, "\(kinds)")
        }
    }

    /// PXP documents neither how a parent shows an increment nor a partial capture: an order raised from 20.00 to
    /// 25.00 is incremented once to 25.00 and then captured once for 25.00, whichever way paysim shows it.
    @Test(arguments: [
        #"{}"#, #"{"increment":"value"}"#, #"{"partial_capture":"captured"}"#, #"{"increment":"value","partial_capture":"captured"}"#
    ])
    func anIncrementThenACaptureMoveTheRightMoneyWhicheverWayPXPShowsThem(_ behaviour: String) async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/pxp/behaviour", behaviour)
            try await h.seedPXP("TX", value: "20.00")
            let order = WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2500)
            try h.insert(order)
            for _ in 0..<3 {
                _ = await h.checker.check(order, logger: Logger())
                _ = await h.executor.executePending()
            }
            #expect(try await Self.applied(h, operation: "Capture") == [2500], "\(behaviour)")
            #expect(h.simulator.pxpTransactions().filter { $0.operation == "Incremental" }.count == 1)
            #expect(try h.actions().map(\.status) == [.succeeded, .succeeded])
            let kinds = try h.openKinds(order: "O")
            #expect(kinds.isEmpty, "\(behaviour): \(kinds)")
        }
    }
}
