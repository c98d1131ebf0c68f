import PayreconTesting
import Foundation
import Observability
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// `payrecon reconcile`: the nightly sweep against real PostgreSQL and paysim.
@Suite("Sweep")
struct SweepTests {
    static let window: TimeInterval = 72 * 3600

    /// A: recent, matched. B: old, matched. C: old, open amount_mismatch. D: old, pending capture. E: recent PayPal.
    func seedScope(_ h: WorkerHarness) async throws {
        try await h.admin(
            "/admin/pxp/transactions",
            """
            [{"merchant":"M1","site":"S1","merchantTransactionId":"TX-A","intent":"Authorisation","currency":"GBP","value":"20.00"},
             {"merchant":"M1","site":"S1","merchantTransactionId":"TX-B","intent":"Authorisation","currency":"GBP","value":"20.00"},
             {"merchant":"M1","site":"S1","merchantTransactionId":"TX-C","intent":"Purchase","currency":"GBP","value":"15.00","state":"Captured"},
             {"merchant":"M1","site":"S1","merchantTransactionId":"TX-D","intent":"Authorisation","currency":"GBP","value":"20.00"}]
            """)
        try await h.seedPayPal(#"{"id":"PP-E","intent":"CAPTURE","currency":"USD","amount":"5.00","captures":[{"id":"CAP-E"}]}"#)
        let c = WorkerHarness.order(.pxp, "C", ref: "TX-C", intent: .purchase, amount: 2000)
        let d = WorkerHarness.order(.pxp, "D", ref: "TX-D", amount: 2000, fulfilment: .fulfilled)
        try h.insert(
            WorkerHarness.order(.pxp, "A", ref: "TX-A", amount: 2000, fulfilment: .open),
            WorkerHarness.order(.pxp, "B", ref: "TX-B", amount: 2000, fulfilment: .open), c, d,
            WorkerHarness.order(.paypal, "E", ref: "PP-E", intent: .purchase, amount: 500, currency: "USD", merchant: nil))
        _ = await h.checker.check(c, logger: Logger())
        _ = await h.checker.check(d, logger: Logger())
        try h.execute("DELETE FROM snapshots")  // so a snapshot after the sweep means "the sweep checked it"
        try h.execute(
            "UPDATE orders SET updated_at = now() - interval '10 days', created_at = now() - interval '10 days' WHERE order_id IN ('B', 'C', 'D')"
        )
        #expect(try h.openKinds(order: "C") == ["amount_mismatch"])
        #expect(try h.actions().map(\.idempotencyKey) == ["pxp:D:capture:2000"])
    }

    func checkedOrders(_ h: WorkerHarness) throws -> Set<String> {
        let conn = try h.database.connect(); defer { conn.close() }
        return Set(try conn.query("SELECT order_id FROM snapshots").map { try $0.string("order_id") })
    }

    @Test func windowCoversRecentOrdersPlusOpenDiscrepanciesAndPendingActions() async throws {
        try await WorkerHarness.with { h in
            try await seedScope(h)
            let summary = try await h.sweep(since: Date().addingTimeInterval(-Self.window), provider: .pxp)
            #expect(summary.totals.checked == 3 && summary.totals.errors == 0)
            #expect(try checkedOrders(h) == ["A", "C", "D"])  // B is old and has nothing open
            #expect(summary.totals.matched == 2)  // A, and D (an action is not a discrepancy)
            #expect(summary.totals.opened == 0 && summary.totals.actionsEmitted == 0)
            #expect(summary.exitCode == 0)
        }
    }

    @Test func providerFilterAndAllOrders() async throws {
        try await WorkerHarness.with { h in
            try await seedScope(h)
            let paypal = try await h.sweep(since: Date().addingTimeInterval(-Self.window), provider: .paypal)
            #expect(paypal.totals.checked == 1 && paypal.totals.matched == 1)
            #expect(try checkedOrders(h) == ["E"])
            let windowed = try await h.sweep(since: Date().addingTimeInterval(-Self.window))
            #expect(windowed.totals.checked == 4)
            let all = try await h.sweep(since: nil)
            #expect(all.totals.checked == 5 && all.totals.errors == 0)
            #expect(try checkedOrders(h) == ["A", "B", "C", "D", "E"])
        }
    }

    /// C: amount_mismatch; D: capture; F: missing_at_provider. The second sweep emits nothing and counts occurrences;
    /// fixing the order (C) and the provider (F) resolves them on the third.
    @Test func secondSweepEmitsNothingNewAndFixedDiscrepanciesResolve() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/pxp/transactions",
                """
                [{"merchant":"M1","site":"S1","merchantTransactionId":"TX-C","intent":"Purchase","currency":"GBP","value":"15.00","state":"Captured"},
                 {"merchant":"M1","site":"S1","merchantTransactionId":"TX-D","intent":"Authorisation","currency":"GBP","value":"20.00"}]
                """)
            let c = WorkerHarness.order(.pxp, "C", ref: "TX-C", intent: .purchase, amount: 2000)
            try h.insert(
                c, WorkerHarness.order(.pxp, "D", ref: "TX-D", amount: 2000),
                WorkerHarness.order(.pxp, "F", ref: "TX-F", amount: 1000))

            let first = try await h.sweep(since: nil)
            #expect(first.totals.checked == 3 && first.totals.opened == 2 && first.totals.actionsEmitted == 1 && first.totals.matched == 1)
            #expect(try h.openKinds(order: "C") == ["amount_mismatch"] && h.openKinds(order: "F") == ["missing_at_provider"])

            let second = try await h.sweep(since: nil)
            #expect(second.totals.checked == 3 && second.totals.opened == 0 && second.totals.resolved == 0)
            #expect(second.totals.actionsEmitted == 0)
            #expect(try h.actions().count == 1)
            #expect(try h.discrepancies().map(\.occurrences) == [2, 2])

            var fixed = c
            fixed.amount = Money(minorUnits: 1500, currency: c.amount.currency)
            try h.insert(fixed)
            try await h.seedPXP("TX-F", value: "10.00")
            let third = try await h.sweep(since: nil)
            #expect(third.totals.resolved == 2 && third.totals.opened == 0 && third.totals.matched == 3)
            let found = try h.discrepancies()
            #expect(found.count == 2 && found.allSatisfy { $0.status == "resolved" && $0.resolvedAt != nil })
            // Resolved stays resolved; nothing reopens.
            let fourth = try await h.sweep(since: nil)
            #expect(fourth.totals.opened == 0 && fourth.totals.resolved == 0 && fourth.totals.matched == 3)
        }
    }

    @Test func eachRunIsRecordedWithItsCountsAndExitCode() async throws {
        try await WorkerHarness.with { h in
            try await seedScope(h)
            let summary = try await h.sweep(since: nil, provider: .pxp)
            let conn = try h.database.connect(); defer { conn.close() }
            let row = try #require(
                try conn.query(
                    """
                    SELECT checked, matched, opened, resolved, actions_emitted, errors, exit_code::bigint AS exit_code,
                           finished_at IS NOT NULL AS finished, options::text AS options, jsonb_array_length(error_list)::bigint AS listed
                    FROM runs WHERE id = $1
                    """, [.int64(summary.runID)]
                ).first)
            #expect(try row.int64("checked") == 4 && row.int64("matched") == 3 && row.int64("opened") == 0)
            #expect(try row.int64("resolved") == 0 && row.int64("actions_emitted") == 0 && row.int64("errors") == 0)
            #expect(try row.int64("exit_code") == 0 && row.bool("finished") && row.int64("listed") == 0)
            let options = try row.string("options")
            #expect(options.contains(#""all": true"#) && options.contains(#""provider": "pxp""#), "\(options)")
        }
    }

    @Test func providerErrorsForSomeOrdersAreListedAndExitOne() async throws {
        try await WorkerHarness.with { h in
            let n = 8
            try await h.seedPXPOrders(n, fulfilment: .open)
            // Seeded faults: the same requests fail on every run (one GET per order, no client retries).
            try await h.faults(#"{"error_rate":0.5,"seed":7}"#)
            let summary = try await h.sweep(since: nil, concurrency: 1)
            let t = summary.totals
            #expect(t.errors > 0 && t.errors < n, "\(t)")
            #expect(t.checked + t.errors == n && t.matched == t.checked)
            #expect(summary.errors.count == t.errors)
            #expect(summary.errors.allSatisfy { $0.hasPrefix("pxp O-") && $0.contains("500") }, "\(summary.errors)")
            #expect(summary.exitCode == 1)
            // The orders listed are exactly the ones left unchecked.
            let failed = Set(summary.errors.map { String($0.split(separator: " ")[1].dropLast()) })
            let checked = try checkedOrders(h)
            #expect(failed.isDisjoint(with: checked) && failed.count + checked.count == n)
            #expect(try h.database.count("SELECT exit_code::bigint FROM runs WHERE id = $1", [.int64(summary.runID)]) == 1)
            #expect(
                try h.database.count("SELECT jsonb_array_length(error_list)::bigint FROM runs WHERE id = $1", [.int64(summary.runID)])
                    == Int64(t.errors))
            // Once the provider is back, every order is checked: exit 0.
            try await h.clearFaults()
            #expect(try await h.sweep(since: nil).exitCode == 0)
        }
    }

    /// `--concurrency N` caps the provider calls in flight at N, as the provider counts them, while the sweep keeps
    /// more checks in hand (recording) than calls in flight.
    @Test func reconcileKeepsAtMostConcurrencyProviderCallsInFlight() async throws {
        try await WorkerHarness.with { h in
            let n = 24
            try await h.seedPXPOrders(n, fulfilment: .open)
            try await h.faults(#"{"latency_ms":150}"#)
            let env = h.payreconEnvironment
            let run = try await PayreconProcess.run(["reconcile", "--all", "--concurrency", "3"], environment: env)
            #expect(run.exitCode == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(run.stdout.contains("checked \(n),"), "\(run.stdout)")
            let stats = try await h.admin("/admin/stats", method: "GET")
            let most = try #require(stats["provider_requests_in_flight_max"] as? Int)
            #expect(most <= 3, "\(most) provider calls in flight at once with --concurrency 3")
            #expect(most >= 2, "the sweep never ran calls side by side")
        }
    }

    @Test func reconcileCommandAsASubprocess() async throws {
        try await WorkerHarness.with { h in
            try await seedScope(h)
            let config = h.simulator.config
            let env = h.payreconEnvironment
            let ok = try await PayreconProcess.run(["reconcile", "--since", "72h", "--concurrency", "2"], environment: env)
            #expect(ok.exitCode == 0, "\(ok.stdout)\n\(ok.stderr)")
            let line = try #require(ok.stdout.split(separator: "\n").first { $0.hasPrefix("reconcile run ") })
            #expect(line.contains("checked 4, matched 3, discrepancies opened 0, resolved 0, actions emitted 0, errors 0"), "\(line)")
            #expect(!ok.stderr.contains(config.pxpTokenValue) && !ok.stderr.contains(config.paypalSecret))  // no secret in logs

            try await h.faults(#"{"error_rate":1.0}"#)
            let failing = try await PayreconProcess.run(["reconcile", "--all", "--provider", "pxp"], environment: env)
            #expect(failing.exitCode == 1, "\(failing.stdout)\n\(failing.stderr)")
            #expect(
                failing.stdout.contains("errors 4") && failing.stdout.contains("not checked:") && failing.stdout.contains("pxp A:"),
                "\(failing.stdout)")
            // A run that checked nothing logs at error (it logged at info, beside a healthy run's line).
            #expect(failing.stderr.contains(#""level":"error","msg":"reconcile finished without checking any order""#), "\(failing.stderr)")
            #expect(ok.stderr.contains(#""level":"info","msg":"reconcile finished""#), "\(ok.stderr)")

            let usage = try await PayreconProcess.run(["reconcile", "--since", "soon"], environment: env)
            #expect(usage.exitCode == 2)
        }
    }
}
