import Foundation
import HTTP
import PayreconTesting
@_spi(Positional) import Postgres
import Providers
import Receiver
import Store
import Testing

/// PAYRECON_REQUEST_TIMEOUT and PAYRECON_COMMIT_TIMEOUT as `payrecon serve` runs them.
@Suite struct ServeDeadlineTests {
    static let slowRequest =
        "POST /webhooks/pxp HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow\r\nContent-Length: 200\r\n\r\n"
        + String(repeating: "b", count: 200)

    @Test func aTricklingSenderIsCutOffCountedAndGenuineDeliveriesStillStored() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("serve-deadline-\(UUID().uuidString).port").path
        defer { try? FileManager.default.removeItem(atPath: portFile) }
        let serve = try Background(
            ["serve", "--listen", "127.0.0.1:0", "--port-file", portFile],
            environment: [
                "DATABASE_URL": db.url, "PXP_WEBHOOK_KEY": ReceiverHarness.pxpKey, "PAYRECON_REQUEST_TIMEOUT": "1s",
                "PAYRECON_LOG_LEVEL": "warning"
            ])
        defer { serve.stop() }
        let port = try #require(await serve.port(from: portFile), "serve did not start: \(serve.stderr())")

        // 40 bytes a second: never idle for MHD's 15 s, and the whole request would take 7 s.
        let socket = try RawSocket(port: port)
        let cut = try await offload { socket.trickle(Self.slowRequest, interval: 0.025, limit: 10) }
        #expect(cut.closed, "the trickling sender was never cut off")
        #expect(cut.seconds < 4, "cut after \(cut.seconds) s against PAYRECON_REQUEST_TIMEOUT=1s")

        let body = #"{"eventData":{"merchantTransactionId":"GENUINE"}}"#
        let ts = String(Int(Date().timeIntervalSince1970))
        let (status, _) = try await HTTPRequestSender(
            url: "http://127.0.0.1:\(port)/webhooks/pxp",
            headers: [
                ("X-Request-Id", "genuine-1"), ("X-Signature-Timestamp", ts),
                (
                    "X-Signature",
                    PXPWebhookVerifier.signature(key: ReceiverHarness.pxpKey, requestID: "genuine-1", timestamp: ts, body: Array(body.utf8))
                )
            ], body: Array(body.utf8)
        ).send()
        #expect(status == 200)
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'genuine-1'") == 1)
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'slow'") == 0)

        let metrics = try await HTTP.URLSessionHTTPClient().send(.init(url: "http://127.0.0.1:\(port)/metrics")).text
        #expect(MetricsTests.parse(metrics)["payrecon_requests_timed_out_total"]?.type == "counter")
        let sample = metrics.split(separator: "\n").first { $0.hasPrefix("payrecon_requests_timed_out_total ") }
        #expect(sample.flatMap { Int($0.split(separator: " ")[1]) } == 1, "\(sample ?? "no sample")")
    }

    @Test(arguments: ["soon", "30", "-1s", "1.5s"])
    func aBadRequestTimeoutStopsServeSayingWhatToWrite(value: String) async throws {
        let result = try await PayreconProcess.launch(
            ["serve", "--listen", "127.0.0.1:0"], databaseURL: "postgresql://127.0.0.1:1/none",
            environment: ["PAYRECON_REQUEST_TIMEOUT": value, "PXP_WEBHOOK_KEY": "k"])
        #expect(result.exitCode == 2)
        #expect(result.stderr.contains("PAYRECON_REQUEST_TIMEOUT=\(value)"))
        #expect(result.stderr.contains("use e.g. 30s"))
    }

    /// The receiver's commits carry PAYRECON_COMMIT_TIMEOUT as their statement_timeout: a statement still running
    /// past it belongs to a delivery already answered 503.
    @Test func theCommitsStatementTimeoutIsTheCommitTimeout() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        _ = try conn.execute("CREATE TABLE seen_settings (timeout text)")
        _ = try conn.execute(
            """
            CREATE FUNCTION record_settings() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO seen_settings VALUES (current_setting('statement_timeout')); RETURN NEW; END $$
            """)
        _ = try conn.execute("CREATE TRIGGER record_settings BEFORE INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION record_settings()")
        let pool = PostgresPool(conninfo: db.url, size: 1)
        defer { pool.close() }
        let storage = PostgresReceiverStorage(pool: pool, statementTimeoutMilliseconds: 2500)
        _ = try storage.commit([NewDelivery(provider: .pxp, dedupeKey: "timeout-1", eventType: nil, headers: [], body: Array("{}".utf8))])
        #expect(try conn.query("SELECT timeout FROM seen_settings").first?.string("timeout") == "2500ms")
    }
}
