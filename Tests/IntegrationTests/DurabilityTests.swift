import PayreconTesting
import Foundation
import HTTP
@_spi(Positional) import Postgres
import Providers
import Testing

/// The receiver's promises when things go wrong: no 2xx for what is not stored, recovery without a
/// restart, and SIGTERM answers what is in flight before exiting 0.
@Suite("Durability", .serialized)
struct DurabilityTests {
    @Test func databaseStoppedGives503ThenTheReceiverRecoversByItself() async throws {
        let cluster = try await offload { try PrivateCluster() }
        defer { cluster.destroy() }
        let h = try await offload { try ReceiverHarness(databaseURL: cluster.url) }
        defer { h.stop() }

        let before = try await h.pxp(#"{"eventData":{"merchantTransactionId":"A"}}"#)
        #expect(before.status == 200)

        try await offload { try cluster.stop(immediate: true) }
        let down = try await h.pxp(#"{"eventData":{"merchantTransactionId":"B"}}"#)
        #expect(down.status == 503)
        #expect(down.errorCode == "storage_unavailable")
        #expect(down.headers["retry-after"] != nil)
        // A commit that failed because the database is unreachable turns /readyz to 503 at once, not at the next probe.
        #expect(try await h.get("/readyz").status == 503, "/readyz still said ready after a delivery could not be stored")
        // /readyz answers from the background probe: 503 within a probe interval, never waiting on the database.
        let notReady = try await PayreconTesting.eventually(10) {
            // Against /healthz (which touches nothing) measured just before: under a loaded machine both are slow
            // together, and only /readyz waiting on the database would make it slower by a second or more.
            let reference = Date()
            _ = try await h.get("/healthz")
            let started = Date()
            let answer = try await h.get("/readyz")
            let readyz = Date().timeIntervalSince(started), healthz = started.timeIntervalSince(reference)
            #expect(readyz < 1.5 || readyz < healthz + 0.9, "/readyz waited on the database: \(readyz) s (/healthz \(healthz) s)")
            return answer.status == 503
        }
        #expect(notReady)

        try await offload { try cluster.start() }
        // The pool re-dials on its own: the same delivery, retried by the provider, is now stored.
        var after: ReceiverHarness.Answer?
        for _ in 0..<100 {
            after = try await h.pxp(#"{"eventData":{"merchantTransactionId":"B"}}"#, requestID: "retry-of-B")
            if after?.status == 200 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(after?.status == 200)
        #expect(after?.outcome == "accepted")
        let conn = try h.database.connect()
        defer { conn.close() }
        // Exactly what was acknowledged is stored: A and the retried B, not the 503'd attempt.
        let keys = try conn.query("SELECT dedupe_key FROM deliveries ORDER BY id").map { try $0.string("dedupe_key") }
        #expect(keys.count == 2)
        #expect(keys.last == "retry-of-B")
    }

    /// On a quiet night, with no delivery to fail, a PostgreSQL outage still shows: the worker's probe sets
    /// payrecon_database_up to 0 (PayreconDatabaseDown reads it), logs the outage once with libpq's reason however many
    /// probes fail, and says when the database is back.
    @Test func theDatabaseProbeSaysWhenTheDatabaseIsGoneAndWhenItIsBack() async throws {
        let cluster = try await offload { try PrivateCluster() }
        defer { cluster.destroy() }
        let migrate = try await PayreconProcess.launch(["migrate"], databaseURL: cluster.url)
        #expect(migrate.status == 0, "\(migrate.stderr)")
        let port = try PrivateCluster.freePort()
        let work = try Background(
            ["work", "--metrics-listen", "127.0.0.1:\(port)"],
            environment: ["DATABASE_URL": cluster.url, "PAYRECON_DB_PROBE_INTERVAL": "1s", "PAYRECON_LOG_LEVEL": "info"])
        defer { work.stop() }
        let http = HTTP.URLSessionHTTPClient()
        func up() async -> String? {
            guard let text = try? await http.send(.init(url: "http://127.0.0.1:\(port)/metrics")).text else { return nil }
            return text.split(separator: "\n").first { $0.hasPrefix("payrecon_database_up ") }.map { String($0.split(separator: " ")[1]) }
        }
        #expect(try await PayreconTesting.eventually(20) { await up() == "1" }, "\(work.stderr())")
        try await offload { try cluster.stop(immediate: true) }
        #expect(try await PayreconTesting.eventually(20) { await up() == "0" }, "\(work.stderr())")
        try await Task.sleep(for: .seconds(3))  // several more probes fail
        try await offload { try cluster.start() }
        #expect(try await PayreconTesting.eventually(30) { await up() == "1" }, "\(work.stderr())")
        let log = work.stderr()
        #expect(log.components(separatedBy: "database out of reach").count == 2, "one warning per outage: \(log)")
        #expect(log.contains("database reachable again"), "\(log)")
    }

    /// serve's start-up warning names libpq's reason: a misspelt database name is not a passing outage.
    @Test func serveNamesWhyTheDatabaseIsNotReachableAtStart() async throws {
        let cluster = try await offload { try PrivateCluster() }
        defer { cluster.destroy() }
        let url = cluster.url.replacingOccurrences(of: "/postgres", with: "/paycron_typo")
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("serve-port-\(UUID().uuidString)").path
        let serve = try Background(
            ["serve", "--listen", "127.0.0.1:0", "--port-file", portFile],
            environment: ["DATABASE_URL": url, "PXP_WEBHOOK_KEY": "k", "PXP_WEBHOOK_KEY_ID": "1"])
        defer { serve.stop() }
        _ = await serve.port(from: portFile)
        let named = await PayreconTesting.eventually(10) { serve.stderr().contains("database not reachable at start") }
        #expect(named && serve.stderr().contains("paycron_typo") && serve.stderr().contains("does not exist"), "\(serve.stderr())")
    }

    @Test func sigtermAnswersTheDeliveryInFlightAfterItsCommitThenExitsZero() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString).port").path
        let process = Process()
        process.executableURL = PayreconProcess.binary
        process.arguments = ["serve", "--port-file", portFile]
        process.environment = [
            "DATABASE_URL": db.url, "PAYRECON_LISTEN": "127.0.0.1:0", "PXP_WEBHOOK_KEY": ReceiverHarness.pxpKey,
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin", "PAYRECON_LOG_LEVEL": "warning"
        ]
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var port = ""
        for _ in 0..<200 where port.isEmpty {
            port = ((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if port.isEmpty { try await Task.sleep(for: .milliseconds(25)) }
        }
        #expect(!port.isEmpty)

        // Hold the deliveries table so the receiver's commit waits: the delivery is in flight when SIGTERM arrives.
        let locker = try db.connect()
        defer { locker.close() }
        _ = try locker.execute("BEGIN")
        _ = try locker.execute("LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")

        let body = #"{"eventData":{"merchantTransactionId":"DRAIN"}}"#
        let ts = String(Int(Date().timeIntervalSince1970))
        let request = HTTPRequestSender(
            url: "http://127.0.0.1:\(port)/webhooks/pxp",
            headers: [
                ("X-Request-Id", "drain-1"), ("X-Signature-Timestamp", ts),
                (
                    "X-Signature",
                    PXPWebhookVerifier.signature(key: ReceiverHarness.pxpKey, requestID: "drain-1", timestamp: ts, body: Array(body.utf8))
                )
            ], body: Array(body.utf8))
        let answer = Task { try await request.send() }
        // Wait until the insert is blocked on our lock, then ask the receiver to stop.
        let watcher = try db.connect()
        defer { watcher.close() }
        for _ in 0..<200 {
            let waiting = try watcher.query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO deliveries%'")
            if try waiting.first!.int64("n") > 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(process.processIdentifier, SIGTERM)
        try await Task.sleep(for: .milliseconds(300))
        #expect(process.isRunning, "the receiver must wait for the delivery in flight")
        _ = try locker.execute("COMMIT")

        let (status, text) = try await answer.value
        #expect(status == 200)
        #expect(text.contains("\"accepted\""))
        await offload { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'drain-1'") == 1)
    }
}

/// One POST with URLSession-free plumbing: the HTTP client of the package.
struct HTTPRequestSender: Sendable {
    var url: String
    var headers: [(String, String)]
    var body: [UInt8]
    func send() async throws -> (Int, String) {
        let client = HTTP.URLSessionHTTPClient(configuration: .init(timeout: .seconds(30)))
        let r = try await client.send(HTTP.HTTPClientRequest(method: "POST", url: url, headers: headers, body: body))
        return (r.status, r.text)
    }
}
