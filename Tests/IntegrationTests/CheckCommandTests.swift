import Foundation
import Observability
import PayreconTesting
import Postgres
import Reconciliation
import Testing
import Worker

/// `payrecon check PROVIDER:ORDER_ID`, as run: a fresh check recorded with its evidence, the verdict and its reasons,
/// and the exit code (0 fulfil, 1 wait or refuse, 2 when no verdict can be given).
@Suite("payrecon check", .serialized) struct CheckCommandTests {
    static func check(_ h: WorkerHarness, _ args: String...) async throws -> PayreconProcess.Result {
        try await PayreconProcess.launch(["check"] + args, databaseURL: h.database.url, environment: h.payreconEnvironment)
    }

    @Test func fulfilWaitAndRefuseWithTheirExitCodes() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-PAID", intent: "Purchase", state: "Captured")
            try await h.seedPXP("TX-PENDING", intent: "Purchase", state: "Pending")
            try await h.seedPXP("TX-SHORT", intent: "Purchase", value: "15.00", state: "Captured")
            try h.insert(
                WorkerHarness.order(.pxp, "PAID", ref: "TX-PAID", intent: .purchase, amount: 2000),
                WorkerHarness.order(.pxp, "PENDING", ref: "TX-PENDING", intent: .purchase, amount: 2000),
                WorkerHarness.order(.pxp, "SHORT", ref: "TX-SHORT", intent: .purchase, amount: 2000))

            let paid = try await Self.check(h, "pxp:PAID", "--format", "json")
            #expect(paid.status == 0, "\(paid.stdout) \(paid.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(paid.stdoutBytes)) as? [String: Any])
            #expect(json["verdict"] as? String == "fulfil" && (json["reasons"] as? [String])?.isEmpty == true)
            let figures = try #require(json["figures"] as? [String: String])
            #expect(figures["C"] == "20.00" && figures["currency"] == "GBP" && figures["state"] == "captured", "\(figures)")

            let pending = try await Self.check(h, "pxp:PENDING")
            #expect(pending.status == 1 && pending.stdout.hasPrefix("pxp:PENDING  wait"), "\(pending.stdout) \(pending.stderr)")
            #expect(pending.stdout.contains("pending at the provider"), "\(pending.stdout)")

            let short = try await Self.check(h, "pxp:SHORT")
            #expect(short.status == 1 && short.stdout.hasPrefix("pxp:SHORT  refuse"), "\(short.stdout) \(short.stderr)")
            #expect(short.stdout.contains("amount_mismatch"), "\(short.stdout)")

            // Each verdict came from a check recorded like any other, with the provider's answer as its evidence.
            #expect(
                try h.database.count("SELECT count(*) FROM evidence WHERE order_id IN ('PAID', 'PENDING', 'SHORT') AND source = 'command'")
                    >= 3)
            #expect(try h.openKinds(order: "SHORT") == ["amount_mismatch"])
        }
    }

    /// Each provider's states as paysim answers them, through the checker as `payrecon check` and the API use it.
    @Test func eachProvidersStatesGiveTheirVerdicts() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-PAID","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-PAID"}]},
                 {"id":"PP-AUTH","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]},
                 {"id":"PP-PENDING","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-PEND","status":"PENDING"}]},
                 {"id":"PP-DISPUTED","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-DISP"}]}]
                """#)
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-V","transaction_id":"CAP-DISP","amount":"20.00"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.CREATED","resource_id":"PP-D-V"}"#)
            let now = Int64(Date().timeIntervalSince1970)
            try await h.admin(
                "/admin/paypercut/intents",
                #"""
                [{"id":"pi_PAID","amount":2000,"currency":"EUR","capture_method":"automatic","status":"succeeded","created":\#(now - 60)},
                 {"id":"pi_AUTH","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture","created":\#(now - 60)},
                 {"id":"pi_PROC","amount":2000,"currency":"EUR","capture_method":"automatic","status":"processing","created":\#(now - 60)}]
                """#)
            let cases: [(Order, Verdict.Outcome)] = [
                (
                    WorkerHarness.order(
                        .paypal, "V-PP-PAID", ref: "PP-PAID", intent: .purchase, amount: 2000, currency: "USD", merchant: nil), .fulfil
                ),
                (
                    WorkerHarness.order(
                        .paypal, "V-PP-AUTH", ref: "PP-AUTH", intent: .authorisation, amount: 2000, currency: "USD", fulfilment: .open,
                        merchant: nil), .fulfil
                ),
                (
                    WorkerHarness.order(
                        .paypal, "V-PP-PENDING", ref: "PP-PENDING", intent: .purchase, amount: 2000, currency: "USD", merchant: nil), .wait
                ),
                (
                    WorkerHarness.order(
                        .paypal, "V-PP-DISPUTED", ref: "PP-DISPUTED", intent: .purchase, amount: 2000, currency: "USD", merchant: nil),
                    .refuse
                ),
                (
                    WorkerHarness.order(
                        .paypercut, "V-PC-PAID", ref: "pi_PAID", intent: .purchase, amount: 2000, currency: "EUR", merchant: nil), .fulfil
                ),
                (
                    WorkerHarness.order(
                        .paypercut, "V-PC-AUTH", ref: "pi_AUTH", intent: .authorisation, amount: 2000, currency: "EUR", fulfilment: .open,
                        merchant: nil), .fulfil
                ),
                (
                    WorkerHarness.order(
                        .paypercut, "V-PC-PROC", ref: "pi_PROC", intent: .purchase, amount: 2000, currency: "EUR", merchant: nil), .wait
                )
            ]
            try h.insert(cases.map(\.0))
            while await h.runOnce().done > 0 {}  // the dispute's event links it to its order
            for (order, expected) in cases {
                let (_, verdict, _) = await h.checker.verify(order, logger: Logger())
                let got = try #require(verdict, "\(order.orderID): no verdict")
                #expect(got.outcome == expected, "\(order.orderID): \(got.outcome) \(got.reasons)")
            }
        }
    }

    @Test func noVerdictIsGuessed() async throws {
        try await WorkerHarness.with { h in
            let unknown = try await Self.check(h, "pxp:NOPE")
            #expect(unknown.status == 2 && unknown.stderr.contains("holds no pxp order NOPE"), "\(unknown.stderr)")
            let usage = try await Self.check(h, "stripe:ORD-1")
            #expect(usage.status == 2 && usage.stderr.contains("unknown provider 'stripe'"), "\(usage.stderr)")
            // The provider out of reach: no verdict, exit 2, saying why.
            try await h.seedPXP("TX-DOWN", intent: "Purchase", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "DOWN", ref: "TX-DOWN", intent: .purchase, amount: 2000))
            var env = h.payreconEnvironment
            env["PXP_API_BASE_URL"] = "http://127.0.0.1:9/api/v1"
            let down = try await PayreconProcess.launch(["check", "pxp:DOWN"], databaseURL: h.database.url, environment: env)
            #expect(down.status == 2 && down.stderr.contains("no verdict for pxp:DOWN"), "\(down.stdout) \(down.stderr)")
        }
    }
}
