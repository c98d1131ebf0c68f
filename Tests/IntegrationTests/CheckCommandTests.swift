import Foundation
import PayreconTesting
import Postgres
import Reconciliation
import Testing

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
            try h.insert(WorkerHarness.order(.pxp, "PAID", ref: "TX-PAID", intent: .purchase, amount: 2000),
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
            #expect(try h.database.count("SELECT count(*) FROM evidence WHERE order_id IN ('PAID', 'PENDING', 'SHORT') AND source = 'command'") >= 3)
            #expect(try h.openKinds(order: "SHORT") == ["amount_mismatch"])
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
