import Testing
@testable import PaysimCore

@Suite struct FaultTests {
    let mixed = FaultConfig(
        latencyMs: 5, latencyJitterMs: 20, errorRate: 0.2, rate429: 0.2, retryAfter: 3,
        dropRate: 0.1, seed: 42)

    @Test func sameSeedSameSequence() {
        var a = FaultInjector(config: mixed)
        var b = FaultInjector(config: mixed)
        let first = (0..<500).map { _ in a.decide() }
        let second = (0..<500).map { _ in b.decide() }
        #expect(first == second)
    }

    @Test func differentSeedDifferentSequence() {
        var a = FaultInjector(config: mixed)
        var other = mixed
        other.seed = 43
        var b = FaultInjector(config: other)
        #expect((0..<200).map { _ in a.decide() } != (0..<200).map { _ in b.decide() })
    }

    @Test func ratesAreRoughlyHonoured() {
        var injector = FaultInjector(config: mixed)
        var counts: [String: Int] = [:]
        var delays: Set<Int> = []
        for _ in 0..<10_000 {
            let d = injector.decide()
            delays.insert(d.delayMs)
            switch d.outcome {
            case .pass: counts["pass", default: 0] += 1
            case .serverError: counts["500", default: 0] += 1
            case .tooManyRequests(let after): counts["429", default: 0] += 1; #expect(after == 3)
            case .drop: counts["drop", default: 0] += 1
            case .dropAfterApply: counts["dropAfterApply", default: 0] += 1
            case .dropBeforeApply: counts["dropBeforeApply", default: 0] += 1
            }
        }
        #expect((1700...2300).contains(counts["500"] ?? 0))
        #expect((1700...2300).contains(counts["429"] ?? 0))
        #expect((800...1200).contains(counts["drop"] ?? 0))
        #expect(counts["dropAfterApply"] == nil, "mixed sets no drop_after_apply_rate")
        #expect(counts["dropBeforeApply"] == nil, "mixed sets no drop_before_apply_rate")
        #expect(delays.min() == 5 && delays.max() == 25)
    }

    @Test func noFaultsMeansPass() {
        var injector = FaultInjector(config: FaultConfig())
        #expect(!injector.isActive)
        #expect((0..<100).allSatisfy { _ in injector.decide() == FaultDecision(delayMs: 0, outcome: .pass) })
    }

    @Test func providerPathsGetFaultsAdminDoesNot() async {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1")
        sim.setFaults(FaultConfig(errorRate: 1, seed: 1))
        let pxp = await sim.respond(
            SimRequest(
                method: "GET", path: "/api/v1/transactions/M1/S1",
                query: ["merchantTransactionId": "ORD-1"],
                headers: pxpHeaders("GET", "/api/v1/transactions/M1/S1", query: ["merchantTransactionId": "ORD-1"])))
        #expect(pxp.status == 500)
        let token = await sim.respond(SimRequest(method: "POST", path: "/v1/oauth2/token"))
        #expect(token.status == 500)
        let admin = await sim.respond(SimRequest(method: "GET", path: "/admin/stats"))
        #expect(admin.status == 200)
        let cert = await sim.respond(SimRequest(method: "GET", path: "/v1/notifications/certs/\(Simulator.certName)"))
        #expect(cert.status == 200)
    }

    @Test func tooManyRequestsCarriesRetryAfter() async {
        let sim = makeSimulator()
        sim.setFaults(FaultConfig(rate429: 1, retryAfter: 7, seed: 1))
        let r = await sim.respond(SimRequest(method: "GET", path: "/v2/checkout/orders/X"))
        #expect(r.status == 429)
        #expect(r.header("Retry-After") == "7")
        #expect(r.json?["name"]?.stringValue == "RATE_LIMIT_REACHED")
    }

    @Test func dropAsksTheServerToClose() async {
        let sim = makeSimulator()
        sim.setFaults(FaultConfig(dropRate: 1, seed: 1))
        let r = await sim.respond(SimRequest(method: "GET", path: "/v2/checkout/orders/X"))
        #expect(r.drop)
        #expect(r.body.isEmpty)
        #expect(r.header("Connection") == "close")
    }

    @Test func faultedActionsAreLoggedAndNotApplied() async {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        sim.setFaults(FaultConfig(errorRate: 1, seed: 1))
        let body = #"{"merchant":"M1","site":"S1","merchantTransactionId":"CAP-1","operation":"Capture","amounts":{"transaction":20}}"#
        let r = await sim.respond(
            SimRequest(
                method: "POST", path: "/api/v1/transactions/\(sid)/modifications",
                headers: pxpAuth, body: Array(body.utf8)))
        #expect(r.status == 500)
        #expect(sim.log.map(\.result) == ["fault_500"])
        #expect(sim.log.first?.idempotencyKey == "CAP-1")
        sim.setFaults(FaultConfig())
        #expect(sim.pxpModify(sid, "Capture", amount: "20.00", mtid: "CAP-1").status == 200)
    }

    @Test func latencyIsApplied() async {
        let sim = makeSimulator()
        sim.setFaults(FaultConfig(latencyMs: 50, seed: 1))
        let start = ContinuousClock.now
        _ = await sim.respond(SimRequest(method: "GET", path: "/v2/checkout/orders/X"))
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test func adminFaultsSetsAndRestartsTheSequence() async throws {
        let sim = makeSimulator()
        let body = #"{"error_rate":0.5,"rate_429":0.25,"retry_after":2,"seed":99}"#
        let set = sim.post("/admin/faults", body)
        #expect(set.status == 200)
        #expect(set.json?["error_rate"]?.numberLiteral == "0.5")
        func run() async -> [Int] {
            var statuses: [Int] = []
            for _ in 0..<50 { statuses.append(await sim.respond(SimRequest(method: "GET", path: "/v2/checkout/orders/X")).status) }
            return statuses
        }
        let first = await run()
        #expect(sim.post("/admin/faults", body).status == 200)
        let second = await run()
        #expect(first == second)
        #expect(Set(first).isSuperset(of: [500, 429, 401]))
        let got = sim.handle(method: "GET", path: "/admin/faults")
        #expect(got.json?["seed"]?.numberLiteral == "99")
    }

    @Test(arguments: [
        #"{"error_rate":1.5}"#, #"{"rate_429":-0.1}"#, #"{"latency_ms":"slow"}"#, #"{"seed":-1}"#,
        #"{"error_rate":0.6,"rate_429":0.6}"#, #"[]"#, "nope"
    ])
    func invalidFaultBodies(body: String) {
        let sim = makeSimulator()
        let r = sim.post("/admin/faults", body)
        #expect(r.status == 400)
        #expect(r.json?["error"]?["code"]?.stringValue != nil)
    }
}
