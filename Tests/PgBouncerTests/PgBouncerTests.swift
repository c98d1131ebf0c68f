import Foundation
import HTTP
import PaysimCore
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing

/// payrecon with DATABASE_URL at a real PgBouncer in transaction mode, the way production runs it:
/// `migrate` from two processes at once, the receiver storing a delivery, the worker processing it (polling: LISTEN
/// through the pooler would lose notifications), the sweep and the report, each as the real `payrecon` process.
/// scripts/test starts PgBouncer (Debian `pgbouncer`, pool_mode = transaction) in front of a database of its own and
/// sets PAYRECON_TEST_PGBOUNCER_URL (and PAYRECON_TEST_PGBOUNCER_DIRECT_URL, the same database without the pooler).
@Suite(
    "Through PgBouncer", .serialized,
    .enabled(if: PgBouncer.url != nil, "scripts/test starts PgBouncer and sets PAYRECON_TEST_PGBOUNCER_URL"))
struct PgBouncerTests {
    @Test func migrateFromTwoProcessesAtOnce() async throws {
        let url = try #require(PgBouncer.url)
        async let a = PayreconProcess.run(["migrate"], environment: ["DATABASE_URL": url])
        async let b = PayreconProcess.run(["migrate"], environment: ["DATABASE_URL": url])
        let (first, second) = try await (a, b)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(second.status == 0, "\(second.stderr)")
        let conn = try PostgresConnection(conninfo: try #require(PgBouncer.direct)); defer { conn.close() }
        let versions = try conn.query("SELECT version, count(*) OVER (PARTITION BY version) AS n FROM schema_migrations")
        #expect(!versions.isEmpty)
        #expect(try versions.allSatisfy { try $0.int64("n") == 1 })
        let files = try FileManager.default.contentsOfDirectory(atPath: PayreconProcess.packageRoot.appendingPathComponent("sql").path)
            .filter { $0.hasSuffix(".sql") }
        #expect(versions.count == files.count)
    }

    @Test func thePoolerIsRecognised() throws {
        let pooled = try PostgresConnection(conninfo: try #require(PgBouncer.url)); defer { pooled.close() }
        let direct = try PostgresConnection(conninfo: try #require(PgBouncer.direct)); defer { direct.close() }
        #expect(try pooled.looksPooled() == true)
        #expect(try direct.looksPooled() == false)
    }

    /// A named statement prepared on one server session is unknown on the next, which transaction-mode PgBouncer may
    /// hand over at any statement: a pool's session through the pooler prepares nothing, one to PostgreSQL itself does.
    @Test func onlyASessionReachingPostgreSQLItselfPreparesStatements() throws {
        let pooled = PostgresPool(conninfo: try #require(PgBouncer.url), size: 1)
        defer { pooled.close() }
        try pooled.withConnection { conn throws in
            #expect(!conn.preparesStatements)
            for i in Int32(1)...3 { #expect(try conn.query("SELECT $1::int AS n", [.int32(i)])[0].int32("n") == i) }
        }
        let direct = PostgresPool(conninfo: try #require(PgBouncer.direct), size: 1)
        defer { direct.close() }
        try direct.withConnection { conn in #expect(conn.preparesStatements) }
    }

    /// PAYRECON_LISTEN_DATABASE_URL pointed at the pooler by mistake: the worker says so and polls, since
    /// transaction-mode PgBouncer loses notifications and a LISTEN there would wait in silence.
    @Test func aListenURLAtThePoolerIsNamedAndTheWorkerPolls() async throws {
        let pooled = try #require(PgBouncer.url), direct = try #require(PgBouncer.direct)
        _ = try await PayreconProcess.run(["migrate"], environment: ["DATABASE_URL": direct])
        let work = try Background(["work"], environment: ["DATABASE_URL": direct, "PAYRECON_LISTEN_DATABASE_URL": pooled])
        defer { work.stop() }
        var said = false
        for _ in 0..<100 where !said {
            said = work.stderr().contains("PAYRECON_LISTEN_DATABASE_URL reaches PostgreSQL through a pooler")
            if !said { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(said, "\(work.stderr())")
        // Pointed at PostgreSQL itself, nothing is said.
        let fine = try Background(["work"], environment: ["DATABASE_URL": direct, "PAYRECON_LISTEN_DATABASE_URL": direct])
        defer { fine.stop() }
        try await Task.sleep(for: .milliseconds(700))
        #expect(fine.process.isRunning && !fine.stderr().contains("through a pooler"), "\(fine.stderr())")
    }

    /// Behind a pooler that cannot serve the database (its backend gone, or a database it does not have), commands a
    /// cron job runs exit 2 saying what to check, never 0 having done nothing.
    @Test(arguments: [["work", "--once"], ["reconcile", "--all"], ["report"], ["actions", "execute"], ["events", "list"], ["prune"]])
    func aBrokenPoolerIsFatal(_ command: [String]) async throws {
        let pooled = try #require(PgBouncer.url)
        let broken = String(pooled[..<(pooled.lastIndex(of: "/") ?? pooled.endIndex)]) + "/payrecon_no_such_database"
        let r = try await PayreconProcess.run(command, environment: ["DATABASE_URL": broken])
        #expect(r.status == 2, "\(command): \(r.status) \(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains("DATABASE_URL") || r.stderr.contains("database"), "\(command): \(r.stderr)")
    }

    @Test func receiveWorkSweepAndReport() async throws {
        let url = try #require(PgBouncer.url)
        #expect(try await PayreconProcess.run(["migrate"], environment: ["DATABASE_URL": url]).status == 0)
        // paysim answers PXP's API; the order's transaction was captured for less than the order total.
        let config = SimConfig()
        let ca = try PayPalTestCA()
        let simulator = Simulator(config: config, ca: ca, transport: HTTPClientWebhookTransport())
        let paysim = PaysimServer(simulator: simulator, host: "127.0.0.1", port: 0, threads: 2)
        let simPort = try paysim.start()
        let sim = "http://127.0.0.1:\(simPort)"
        simulator.setPublicBaseURL(sim)
        let ref = "PGB-" + UUID().uuidString.prefix(8)
        let http = URLSessionHTTPClient(configuration: .init(timeout: .seconds(10)))
        let seeded = try await http.send(
            HTTPClientRequest(
                method: "POST", url: sim + "/admin/pxp/transactions", headers: [("Content-Type", "application/json")],
                body: Array(
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"\#(ref)","intent":"Purchase","currency":"GBP","value":"15.00","state":"Captured"}"#
                        .utf8)))
        #expect(seeded.status == 201)
        // And a PayPal capture, so a PayPal delivery (its certificate fetched from paysim and checked) goes through too.
        let paypalOrder = "PP-" + ref
        let seededPayPal = try await http.send(
            HTTPClientRequest(
                method: "POST", url: sim + "/admin/paypal/orders", headers: [("Content-Type", "application/json")],
                body: Array(
                    #"{"id":"\#(paypalOrder)","intent":"CAPTURE","currency":"USD","amount":"10.00","captures":[{"id":"CAP-\#(ref)"}]}"#.utf8
                )))
        #expect(seededPayPal.status == 201, "\(seededPayPal.text)")
        let roots = FileManager.default.temporaryDirectory.appendingPathComponent("pgb-roots-\(ref).pem")
        try ca.trustBundlePEM.write(to: roots, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: roots) }
        let env = [
            "DATABASE_URL": url, "PXP_API_BASE_URL": sim + "/api/v1", "PXP_CLIENT_ID": config.pxpClientID,
            "PXP_TOKEN_ID": config.pxpTokenID, "PXP_TOKEN_VALUE": config.pxpTokenValue, "PXP_WEBHOOK_KEY": config.pxpWebhookKey,
            "PAYPAL_WEBHOOK_ID": config.paypalWebhookID, "PAYPAL_TRUST_ROOTS": roots.path,
            "PAYPAL_CERT_URL_PREFIXES": sim + "/v1/notifications/certs/", "PAYPAL_API_BASE_URL": sim,
            "PAYPAL_CLIENT_ID": config.paypalClientID, "PAYPAL_CLIENT_SECRET": config.paypalSecret
        ]
        let orders = FileManager.default.temporaryDirectory.appendingPathComponent("pgb-\(ref).csv")
        try
            "provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment\npxp,O-\(ref),M1,S1,\(ref),purchase,20.00,GBP,fulfilled\n"
            .write(to: orders, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: orders) }
        let imported = try await PayreconProcess.run(["orders", "import", orders.path], environment: env)
        #expect(imported.status == 0, "\(imported.stderr)")

        // The receiver stores a signed delivery through the pooler.
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("pgb-serve-\(ref).port")
        let serve = try Background(["serve", "--listen", "127.0.0.1:0", "--port-file", portFile.path], environment: env)
        defer { serve.stop() }
        let port =
            await PayreconTesting.eventually(20) { FileManager.default.fileExists(atPath: portFile.path) }
            ? try String(contentsOf: portFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) : ""
        let body = Array(
            #"{"eventCategory":"Transaction","eventCode":"transaction-captured","eventOwner":{"merchant":"M1","site":"S1"},"eventData":{"merchantTransactionId":"\#(ref)"}}"#
                .utf8)
        let requestID = UUID().uuidString
        let headers = WebhookSigner.pxpHeaders(
            key: config.pxpWebhookKey, requestID: requestID,
            timestamp: String(Int64(Date().timeIntervalSince1970)), body: body)
        let answer = try await http.send(
            HTTPClientRequest(method: "POST", url: "http://127.0.0.1:\(port)/webhooks/pxp", headers: headers, body: body))
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        // paysim signs and sends a PayPal delivery to the same receiver.
        let sent = try await http.send(
            HTTPClientRequest(
                method: "POST", url: sim + "/admin/webhooks/send", headers: [("Content-Type", "application/json")],
                body: Array(
                    #"{"provider":"paypal","target":"http://127.0.0.1:\#(port)/webhooks/paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-\#(ref)"}"#
                        .utf8)))
        #expect(sent.status == 200 && sent.text.contains(#""200":1"#), "\(sent.text) \(serve.stderr())")

        // The worker processes it: it polls (said at start), since DATABASE_URL is a pooler.
        let work = try Background(["work"], environment: env)
        let direct = try PostgresConnection(conninfo: try #require(PgBouncer.direct)); defer { direct.close() }
        let done = try await PayreconTesting.eventually(30) {
            try direct.query("SELECT status FROM deliveries WHERE dedupe_key = $1", [.text(requestID)]).first?.string("status") == "done"
        }
        let paypalDone = try await PayreconTesting.eventually(30) {
            try direct.query("SELECT count(*) AS n FROM deliveries WHERE provider = 'paypal' AND status IN ('done', 'ignored')").first?
                .int64("n") == 1
        }
        work.stop()
        #expect(done, "the worker did not process the delivery through PgBouncer: \(work.stderr())")
        #expect(paypalDone, "the PayPal delivery was not stored and processed through PgBouncer: \(serve.stderr()) \(work.stderr())")
        #expect(work.stderr().contains("polling for deliveries"))

        // The sweep and the report, through the pooler.
        let sweep = try await PayreconProcess.run(["reconcile", "--all"], environment: env)
        #expect(sweep.status == 0, "\(sweep.stderr)")
        let report = try await PayreconProcess.run(["report", "--format", "json", "--kind", "amount_mismatch"], environment: env)
        #expect(report.status == 0, "\(report.stderr)")
        #expect(report.stdout.contains("\"order_id\": \"O-\(ref)\"") || report.stdout.contains("\"order_id\":\"O-\(ref)\""))
        await paysim.shutdown(drainTimeout: 1)
    }
}

enum PgBouncer {
    static let url = ProcessInfo.processInfo.environment["PAYRECON_TEST_PGBOUNCER_URL"].flatMap { $0.isEmpty ? nil : $0 }
    static let direct = ProcessInfo.processInfo.environment["PAYRECON_TEST_PGBOUNCER_DIRECT_URL"].flatMap { $0.isEmpty ? nil : $0 }
}
