import Foundation
import HTTP
import Observability
import PayreconTesting
import Postgres
import Reconciliation
import Testing
import Wiring

/// The verdict API `payrecon work` serves on PAYRECON_API_LISTEN: the token, the verdict of a fresh check, one check
/// for many concurrent verdicts of one order, and never a guess (404, 503).
@Suite("Verdict API", .serialized) struct VerdictAPITests {
    static let token = "test-token-0123456789abcdef"

    /// A verdict server over the harness's database and checker; its base URL.
    static func serve(_ h: WorkerHarness, pool: PostgresPool? = nil, _ body: (String) async throws -> Void) async throws {
        let server = VerdictServer(
            host: "127.0.0.1", port: 0, token: Array(token.utf8),
            service: VerdictService(pool: pool ?? h.pool, checker: h.checker, logger: Logger()))
        let port = try server.start()
        defer { server.stop() }
        try await body("http://127.0.0.1:\(port)")
    }

    static func get(_ h: WorkerHarness, _ url: String, token: String? = VerdictAPITests.token) async throws -> HTTPClientResponse {
        try await h.http.send(HTTPClientRequest(method: "GET", url: url, headers: token.map { [("Authorization", "Bearer " + $0)] } ?? []))
    }

    @Test func theTokenMissingWrongAndRight() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-PAID", intent: "Purchase", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "PAID", ref: "TX-PAID", intent: .purchase, amount: 2000))
            try await Self.serve(h) { base in
                let url = base + "/v1/orders/pxp/PAID/verdict"
                #expect(try await Self.get(h, url, token: nil).status == 401)
                #expect(try await Self.get(h, url, token: "wrong").status == 401)
                #expect(try await Self.get(h, url, token: Self.token + "x").status == 401)
                let right = try await Self.get(h, url)
                #expect(right.status == 200, "\(right.text)")
                let json = try #require(try JSONSerialization.jsonObject(with: Data(right.body)) as? [String: Any])
                #expect(json["verdict"] as? String == "fulfil" && json["order_id"] as? String == "PAID", "\(json)")
                #expect((json["figures"] as? [String: String])?["C"] == "20.00")
                // Counted by provider and outcome, with its latency.
                let metrics = Metrics.shared.render()
                #expect(
                    metrics.split(separator: "\n").contains {
                        $0.hasPrefix("payrecon_verdicts_total{") && $0.contains(#"outcome="fulfil""#)
                            && $0.contains(#"provider="pxp""#)
                    }, "\(metrics.prefix(400))")
                #expect(metrics.contains("payrecon_verdict_seconds_count{provider=\"pxp\"}"))
                // An unknown order, and a path that is not the API's.
                #expect(try await Self.get(h, base + "/v1/orders/pxp/NOPE/verdict").status == 404)
                #expect(try await Self.get(h, base + "/v1/orders/stripe/PAID/verdict").status == 404)
            }
        }
    }

    /// Stored data this build cannot read (a link kind a newer payrecon wrote) gives no verdict, and the answer says
    /// so rather than blaming the database's reachability.
    @Test func aStoredLinkOfAnUnknownKindIsNamedNotCalledAnOutage() async throws {
        try await WorkerHarness.with { h in
            try h.insert(WorkerHarness.order(.pxp, "NEWER", ref: "TX-NEWER", intent: .purchase, amount: 2000))
            try h.execute("ALTER TABLE transaction_links DROP CONSTRAINT transaction_links_kind_check")
            try h.execute(
                "INSERT INTO transaction_links (provider, external_id, order_id, kind, source) VALUES ('pxp', 'CB-1', 'NEWER', 'chargeback', 'learned')"
            )
            try await Self.serve(h) { base in
                let answer = try await Self.get(h, base + "/v1/orders/pxp/NEWER/verdict")
                #expect(answer.status == 503, "\(answer.text)")
                #expect(answer.text.contains("chargeback") && answer.text.contains("newer payrecon"), "\(answer.text)")
                #expect(!answer.text.contains("out of reach"), "\(answer.text)")
            }
        }
    }

    /// Fifty verdicts of one order asked at once share one check: the provider is asked once, as for one verdict.
    @Test func fiftyConcurrentVerdictsOfOneOrderShareOneFetch() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-ONE", intent: "Purchase", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "ONE", ref: "TX-ONE", intent: .purchase, amount: 2000))
            func pxpRequests() async throws -> Int {
                let stats = try await h.admin("/admin/stats", method: "GET")
                return (stats["requests"] as? [String: Int] ?? [:]).filter { $0.key.hasPrefix("pxp.") && !$0.key.contains("token") }.values
                    .reduce(0, +)
            }
            try await Self.serve(h) { base in
                let url = base + "/v1/orders/pxp/ONE/verdict"
                let before = try await pxpRequests()
                #expect(try await Self.get(h, url).status == 200)
                let one = try await pxpRequests() - before
                #expect(one >= 1)
                try await h.faults(#"{"latency_ms":300}"#)
                let start = try await pxpRequests()
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<50 { group.addTask { try await Self.get(h, url).status } }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                try await h.clearFaults()
                #expect(statuses.count == 50 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                #expect(try await pxpRequests() - start == one, "50 concurrent verdicts asked the provider as often as one")
            }
        }
    }

    /// A verdict asked while a check of the order is under way is not that check's (it fetched before the request):
    /// it gets the next check. The buyer's refund lands during the first check's fetch; the second answer sees it.
    @Test func aVerdictAskedDuringACheckGetsTheNextOne() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-MID","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-MID"}]}"#)
            try h.insert(
                WorkerHarness.order(.paypal, "MID", ref: "PP-MID", intent: .purchase, amount: 2000, currency: "USD", merchant: nil))
            try await Self.serve(h) { base in
                let url = base + "/v1/orders/paypal/MID/verdict"
                #expect(try await Self.get(h, url).status == 200)  // warm: the OAuth token is fetched
                try await h.faults(#"{"latency_ms":600}"#)
                async let first = Self.get(h, url)
                try await Task.sleep(for: .milliseconds(900))  // the first check's fetch has been answered
                try await h.seedPayPal(
                    #"""
                    {"id":"PP-MID","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-MID","status":"REFUNDED"}],
                     "refunds":[{"id":"REF-MID","capture_id":"CAP-MID","amount":"20.00"}]}
                    """#)
                let second = try await Self.get(h, url)
                let one = try await first
                try await h.clearFaults()
                func verdict(_ r: HTTPClientResponse) -> String? {
                    ((try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any])?["verdict"] as? String
                }
                #expect(verdict(second) == "refuse", "\(second.text)")
                #expect(verdict(one) == "fulfil" || verdict(one) == "refuse", "\(one.text)")
            }
        }
    }

    /// A verdict slower than its deadline is answered 503 with Retry-After, not left hanging; the scheme is
    /// case-insensitive; an order id may hold a '/' (sent as %2F).
    @Test func aDeadlineALowercaseSchemeAndASlashInTheOrderID() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-SLASH", intent: "Purchase", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "A/B", ref: "TX-SLASH", intent: .purchase, amount: 2000))
            let server = VerdictServer(
                host: "127.0.0.1", port: 0, token: Array(Self.token.utf8),
                service: VerdictService(pool: h.pool, checker: h.checker, logger: Logger()), deadline: .milliseconds(500))
            let base = "http://127.0.0.1:\(try server.start())"
            defer { server.stop() }
            let ok = try await h.http.send(
                HTTPClientRequest(
                    method: "GET", url: base + "/v1/orders/pxp/A%2FB/verdict",
                    headers: [("Authorization", "bearer " + Self.token)]))
            #expect(ok.status == 200 && ok.text.contains(#""order_id":"A/B""#), "\(ok.status) \(ok.text)")
            try await h.faults(#"{"latency_ms":2000}"#)
            let started = Date()
            let slow = try await Self.get(h, base + "/v1/orders/pxp/A%2FB/verdict")
            try await h.clearFaults()
            #expect(slow.status == 503 && slow.headers["retry-after"] != nil, "\(slow.status) \(slow.text)")
            #expect(Date().timeIntervalSince(started) < 1.8, "answered at the deadline, not after the check")
        }
    }

    /// The database or the provider out of reach: 503 with Retry-After, never a verdict.
    @Test func noVerdictWithoutTheDatabaseOrTheProvider() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-X", intent: "Purchase", state: "Captured")
            try h.insert(WorkerHarness.order(.pxp, "X", ref: "TX-X", intent: .purchase, amount: 2000))
            let unreachable = PostgresPool(
                conninfo: "postgresql://postgres@127.0.0.1:9/none?connect_timeout=1", size: 1, acquireTimeout: .seconds(1))
            defer { unreachable.close() }
            try await Self.serve(h, pool: unreachable) { base in
                let answer = try await Self.get(h, base + "/v1/orders/pxp/X/verdict")
                #expect(answer.status == 503 && answer.headers["retry-after"] != nil, "\(answer.status) \(answer.text)")
            }
            try await h.faults(#"{"error_rate":1.0}"#)
            try await Self.serve(h) { base in
                let answer = try await Self.get(h, base + "/v1/orders/pxp/X/verdict")
                #expect(answer.status == 503 && answer.text.contains("no verdict now"), "\(answer.status) \(answer.text)")
            }
            try await h.clearFaults()
        }
    }
}
