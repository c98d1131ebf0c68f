import Crypto
import Foundation
import HTTP
@_spi(Positional) import Postgres
import PayreconTesting
@testable import Providers
import Receiver
import Reconciliation
import Store
import Synchronization
import Testing

/// What a stranger with only the webhook URL can no longer do to genuine deliveries (and what the receiver keeps).
@Suite("Strangers", .serialized)
struct StrangerTests {
    static let genuine =
        #"{"id":"WH-GENUINE-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP-G1","status":"COMPLETED"}}"#
    /// Same CRC32 as `genuine` (see ReceiverTests.aTransmissionIdReusedWithAnotherBodyIsRefused).
    static let forged =
        #"{"id":"WH-FORGED-6","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP-EVIL","status":"COMPLETED"},"pad":"aK#L"}"#

    /// Two bodies under one transmission id in one group commit: only the first is stored (a NOT EXISTS against stored
    /// deliveries would not see rows of its own statement, so the transmission is recorded first).
    @Test func twoBodiesUnderOneTransmissionIdInOneBatchStoreOne() throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let conn = try db.connect()
        let batch = [
            NewDelivery(
                provider: .paypal, dedupeKey: "WH-GENUINE-1", eventType: nil, headers: [], body: Array(Self.genuine.utf8),
                transmissionID: "T-1"),
            NewDelivery(
                provider: .paypal, dedupeKey: "WH-FORGED-6", eventType: nil, headers: [], body: Array(Self.forged.utf8),
                transmissionID: "T-1")
        ]
        let stored = try DeliveryStore.commit(batch, on: conn)
        #expect(stored[0].inserted && stored[0].refused == nil)
        #expect(stored[1].refused != nil)
        #expect(try db.count("SELECT count(*) FROM deliveries") == 1)
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'WH-GENUINE-1'") == 1)
    }

    /// Two receivers committing two bodies under one transmission id at once: the second waits on the first's row of
    /// `transmissions` and is refused when it commits. A check before the insert let both through (2 of 30 pairs).
    @Test func twoBodiesUnderOneTransmissionIdOnTwoReceiversStoreOne() async throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let first = try db.connect(), second = try db.connect()
        // The first receiver's transaction, held open after its inserts, as a slow group commit would be.
        _ = try first.execute("BEGIN")
        _ = try first.execute(
            "INSERT INTO transmissions (provider, transmission_id, body_sha256) VALUES ('paypal', 'T-2', sha256($1))",
            [.bytea(Array(Self.genuine.utf8))])
        _ = try first.execute(
            "INSERT INTO deliveries (provider, dedupe_key, headers, body, transmission_id) VALUES ('paypal', 'WH-GENUINE-1', '[]', $1, 'T-2')",
            [.bytea(Array(Self.genuine.utf8))])
        let forged = NewDelivery(
            provider: .paypal, dedupeKey: "WH-FORGED-6", eventType: nil, headers: [], body: Array(Self.forged.utf8),
            transmissionID: "T-2")
        let result = Mutex<[StoredDelivery]?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            result.withLock { $0 = try? DeliveryStore.commit([forged], on: second) }
            done.signal()
        }.start()
        // The second commit cannot finish while the first holds the transmission id.
        #expect(done.wait(timeout: .now() + 0.5) == .timedOut)
        _ = try first.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 10) == .success)
        let stored = try #require(result.withLock { $0 })
        #expect(stored.first?.refused != nil)
        #expect(try db.count("SELECT count(*) FROM deliveries") == 1)
        #expect(try db.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'WH-FORGED-6'") == 0)
    }

    /// A validated certificate is kept in the database the first time it verifies a delivery; a restarted receiver
    /// (an empty cache) whose certificate fetches all fail still verifies genuine deliveries at once: a cold start is
    /// when a stranger's stream of random cert URLs could starve the refetch.
    @Test func aRestartedReceiverVerifiesWithTheCertificateItKept() async throws {
        try await ReceiverHarness.with { h in
            let a = try await h.paypalDelivery(#"{"id":"WH-WARM-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C"}}"#)
            #expect(a.status == 200 && a.outcome == "accepted")
            // Saved off the request path.
            var kept: Int64 = 0
            for _ in 0..<100 where kept == 0 {
                kept = try h.database.count(
                    "SELECT count(*) FROM webhook_material WHERE provider = 'paypal' AND key = $1 AND keep_until > now() + interval '300 days'",
                    [.text(h.paypal.certURL)])
                if kept == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(kept == 1)
            // And the sender group of that verified delivery, for its reserve of fetches.
            #expect(
                try h.database.count("SELECT count(*) FROM webhook_material WHERE provider = 'paypal' AND key = 'sender:127.0.0.0/24'") == 1
            )
            let unreachable = FailingCertificateSource()
            try await offload { try h.restart(upstream: unreachable) }
            let b = try await h.paypalDelivery(#"{"id":"WH-WARM-2","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C"}}"#)
            #expect(b.status == 200 && b.outcome == "accepted", "\(String(decoding: b.body, as: UTF8.self))")
            #expect(unreachable.calls.withLock { $0 } == 0)
            // A forged one naming it is refused on its signature.
            var headers = try h.paypal.headers(body: Array(#"{"id":"WH-X"}"#.utf8), webhookID: ReceiverHarness.paypalWebhookID)
            headers = headers.map { $0.0 == "PAYPAL-TRANSMISSION-SIG" ? ($0.0, Base64.encode(Array(repeating: 7, count: 256))) : $0 }
            let c = try await h.post("/webhooks/paypal", headers: headers, body: Array(#"{"id":"WH-X"}"#.utf8))
            #expect(c.status == 401 && c.errorCode == "invalid_signature")
        }
    }

    /// Dot-segment aliases of the genuine cert URL are refused without a fetch: as cache entries of their own, 32 of
    /// them would evict the genuine one.
    @Test func dotSegmentAliasesAreRefusedWithoutAFetch() async throws {
        try await ReceiverHarness.with { h in
            let id = h.paypal.certURL.split(separator: "/").last.map(String.init) ?? ""
            let prefix = String(h.paypal.certURL.dropLast(id.count))
            for alias in ["./\(id)", "x/../\(id)", ".//\(id)", "\(id)/.", "\(id)/"] {
                let r = try await h.paypalDelivery(#"{"id":"WH-ALIAS"}"#, certURL: prefix + alias)
                #expect(r.status == 401 && r.errorCode == "untrusted_certificate", "\(alias)")
                #expect(String(decoding: r.body, as: UTF8.self).contains("one path segment"), "\(alias)")
            }
        }
    }
}

/// Fails every fetch, counting them.
final class FailingCertificateSource: CertificateSource {
    let calls = Mutex(0)
    struct Down: Error {}
    func pem(for url: String) throws -> [UInt8] { calls.withLock { $0 += 1 }; throw Down() }
}

/// `payrecon rejections list|show --export`: a kept sample goes out as exactly what `payrecon verify` reads, so the
/// RejectionSpike runbook's replay works on stored samples (their header format was not verify's, and no command
/// exported one).
@Suite("Rejection samples", .serialized)
struct RejectionSampleCommandTests {
    @Test func aSampleExportedIsWhatVerifyReads() async throws {
        try await ReceiverHarness.with { h in
            // Genuine but 20 minutes old: refused as stale, and valid at its own time once exported.
            let body = #"{"eventData":{"merchantTransactionId":"TX-EXPORT"}}"#
            let stale = String(Int(Date().timeIntervalSince1970) - 1200)
            let a = try await h.pxp(body, requestID: "r-export-stale", timestamp: stale)
            #expect(a.status == 401 && a.errorCode == "stale_timestamp")
            let forged = try await h.pxp(body, requestID: "r-export-forged", key: "not-the-key")
            #expect(forged.status == 401 && forged.errorCode == "invalid_signature")
            var listed = ""
            for _ in 0..<100 {
                let r = try await PayreconProcess.launch(["rejections", "list", "--provider", "pxp"], databaseURL: h.database.url)
                listed = r.stdout
                if listed.contains("stale_timestamp") && listed.contains("invalid_signature") { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(listed.contains("stale_timestamp") && listed.contains("invalid_signature") && listed.contains("127.0.0.1"), "\(listed)")
            let conn = try h.database.connect(); defer { conn.close() }
            let samples = try RejectionSamples.list(provider: .pxp, reason: nil, limit: 10, on: conn)
            let staleID = try #require(samples.first { $0.reason == "stale_timestamp" }?.id)
            let forgedID = try #require(samples.first { $0.reason == "invalid_signature" }?.id)
            for (id, expected, status) in [(staleID, "valid", Int32(0)), (forgedID, "invalid", Int32(1))] {
                let dir = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-export-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: dir) }
                let shown = try await PayreconProcess.launch(
                    ["rejections", "show", String(id), "--export", dir.path], databaseURL: h.database.url)
                #expect(shown.status == 0 && shown.stdout.contains("payrecon verify pxp --body"), "\(shown.stdout) \(shown.stderr)")
                #expect(try Data(contentsOf: dir.appendingPathComponent("body")) == Data(body.utf8))
                let verified = try await PayreconProcess.launch(
                    [
                        "verify", "pxp", "--body", dir.appendingPathComponent("body").path, "--headers",
                        dir.appendingPathComponent("headers.json").path,
                        "--at", "transmission"
                    ], databaseURL: nil, environment: ["PXP_WEBHOOK_KEY": ReceiverHarness.pxpKey])
                #expect(verified.status == status && verified.stdout.hasPrefix(expected), "\(id): \(verified.stdout) \(verified.stderr)")
            }
            let missing = try await PayreconProcess.launch(["rejections", "show", "999999"], databaseURL: h.database.url)
            #expect(missing.status == 2 && missing.stderr.contains("rejections list"), "\(missing.stderr)")
        }
    }
}
