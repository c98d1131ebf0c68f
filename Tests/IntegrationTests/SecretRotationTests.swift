@_spi(Positional) import Postgres
import Foundation
import HTTP
import PayreconTesting
import Providers
import Store
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP makes `serve` re-read the secrets given as files (`NAME_FILE`), without a restart and without dropping a
/// delivery: a key rotated in its file is in force at once, the old one refused, and deliveries of another provider
/// sent all the while are every one accepted.
@Suite("Secret rotation", .serialized)
struct SecretRotationTests {
    @Test func sighupRereadsTheWebhookSecretsWithoutDroppingADelivery() async throws {
        let db = try TestDatabase.create()
        defer { db.drop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-rotate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyFile = dir.appendingPathComponent("pxp.key"), portFile = dir.appendingPathComponent("port").path
        try "old-key\n".write(to: keyFile, atomically: true, encoding: .utf8)
        let serve = try Background(
            ["serve", "--listen", "127.0.0.1:0", "--port-file", portFile],
            environment: [
                "DATABASE_URL": db.url, "PXP_WEBHOOK_KEY_FILE": keyFile.path,
                "PAYPERCUT_WEBHOOK_SECRET": "whsec_steady", "PAYRECON_LOG_LEVEL": "info"
            ])
        defer { serve.stop() }
        let port = try #require(await serve.port(from: portFile), "\(serve.stderr())")
        let base = "http://127.0.0.1:\(port)"
        let client = URLSessionHTTPClient(configuration: .init(timeout: .seconds(10), maxConcurrentRequests: 8))
        func pxp(_ key: String, _ id: String) async throws -> Int {
            let body = Array(#"{"eventData":{"merchantTransactionId":"TX-ROT"}}"#.utf8)
            let ts = String(Int(Date().timeIntervalSince1970))
            return try await client.send(
                HTTPClientRequest(
                    method: "POST", url: base + "/webhooks/pxp",
                    headers: [
                        ("X-Request-Id", id), ("X-Signature-Timestamp", ts),
                        ("X-Signature", PXPWebhookVerifier.signature(key: key, requestID: id, timestamp: ts, body: body))
                    ], body: body)
            ).status
        }
        #expect(try await pxp("old-key", "rot-1") == 200)
        #expect(try await pxp("new-key", "rot-2") == 401)

        // Paypercut deliveries flow throughout the rotation: none may fail.
        let statuses = Mutex<[Int]>([])
        let stop = Atomic<Bool>(false)
        let steady = Task {
            var n = 0
            while !stop.load(ordering: .relaxed) {
                n += 1
                let body = Array(#"{"id":"evt_rot_\#(n)","type":"payment_intent.succeeded","data":{"object":{"id":"pi_rot"}}}"#.utf8)
                let header = PaypercutWebhookVerifier.signatureHeaderValue(
                    secret: "whsec_steady", timestamp: Int64(Date().timeIntervalSince1970), body: body)
                let status =
                    (try? await client.send(
                        HTTPClientRequest(
                            method: "POST", url: base + "/webhooks/paypercut",
                            headers: [("Paypercut-Signature", header)], body: body)
                    ).status) ?? -1
                statuses.withLock { $0.append(status) }
            }
        }
        // Deliveries flow before the rotation and after it, however slow the host: waited for by count, not by time.
        for _ in 0..<200 where statuses.withLock({ $0.count }) < 3 { try await Task.sleep(for: .milliseconds(50)) }
        try "new-key\n".write(to: keyFile, atomically: true, encoding: .utf8)
        kill(serve.process.processIdentifier, SIGHUP)
        var rotated = false
        for i in 0..<100 where !rotated {
            rotated = try await pxp("new-key", "rot-new-\(i)") == 200
            if !rotated { try await Task.sleep(for: .milliseconds(50)) }
        }
        let afterRotation = statuses.withLock { $0.count } + 3
        for _ in 0..<200 where statuses.withLock({ $0.count }) < afterRotation { try await Task.sleep(for: .milliseconds(50)) }
        stop.store(true, ordering: .relaxed)
        await steady.value
        #expect(rotated, "\(serve.stderr())")
        #expect(try await pxp("old-key", "rot-3") == 401)
        let seen = statuses.withLock { $0 }
        #expect(seen.count > 5 && seen.allSatisfy { $0 == 200 }, "\(seen.filter { $0 != 200 })")
        #expect(serve.stderr().contains("webhook secrets re-read"))

        // A secret file that cannot be read keeps the secrets in use.
        try FileManager.default.removeItem(at: keyFile)
        kill(serve.process.processIdentifier, SIGHUP)
        var said = false
        for _ in 0..<100 where !said {
            said = serve.stderr().contains("were not re-read")
            if !said { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(said && serve.stderr().contains("PXP_WEBHOOK_KEY_FILE"), "\(serve.stderr())")
        #expect(try await pxp("new-key", "rot-4") == 200)
        #expect(serve.process.isRunning)
    }
}

/// SIGHUP makes `work` re-read the provider API secrets given as files: a worker whose PXP token was wrong (paysim
/// answers 401) processes the next delivery with the token rotated into its file, without a restart.
@Suite("Secret rotation (worker)", .serialized)
struct WorkerSecretRotationTests {
    @Test func sighupRereadsTheProviderSecrets() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXPOrders(2)
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-rotate-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let tokenFile = dir.appendingPathComponent("pxp.token")
            try "not-the-token\n".write(to: tokenFile, atomically: true, encoding: .utf8)
            var env = h.payreconEnvironment
            env["PXP_TOKEN_VALUE"] = nil
            env["PXP_TOKEN_VALUE_FILE"] = tokenFile.path
            env["PAYRECON_LOG_LEVEL"] = "info"
            let work = try Background(["work"], environment: env)
            defer { work.stop() }

            let first = try h.store(.pxp, json: #"{"eventData":{"merchantTransactionId":"TX-0"}}"#)
            var refused: QueuedDelivery?
            for _ in 0..<200 {
                let d = try h.delivery(first)
                if d.attempts > 0, d.status != "pending" || d.lastError != nil { refused = d; break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let before = try #require(refused, "\(work.stderr())")
            #expect(before.status != "done", "a wrong token must not check the order")
            // A refusal that retrying as it is will not fix is a warning that says what to do, not an info line.
            #expect(
                work.stderr().contains("delivery will be retried, but the provider refused it as it is")
                    && work.stderr().contains("payrecon doctor"),
                "\(work.stderr())")
            // As after several refusals: its next try is an hour away.
            try h.execute("UPDATE deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = \(first)")

            try h.simulator.config.pxpTokenValue.write(to: tokenFile, atomically: true, encoding: .utf8)
            kill(work.process.processIdentifier, SIGHUP)
            for _ in 0..<100 where !work.stderr().contains("provider API secrets re-read") { try await Task.sleep(for: .milliseconds(50)) }
            #expect(work.stderr().contains("provider API secrets re-read"))
            // The reload makes it due at once: it does not wait out its backoff.
            var firstStatus = ""
            for _ in 0..<200 where firstStatus != "done" {
                firstStatus = try h.delivery(first).status
                if firstStatus != "done" { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(firstStatus == "done" && work.stderr().contains("deliveries waiting for a retry are due now"), "\(work.stderr())")

            let second = try h.store(.pxp, json: #"{"eventData":{"merchantTransactionId":"TX-1"}}"#)
            var status = ""
            for _ in 0..<200 where status != "done" {
                status = try h.delivery(second).status
                if status != "done" { try await Task.sleep(for: .milliseconds(50)) }
            }
            let last = try h.delivery(second)
            #expect(status == "done", "\(last.status) \(last.lastError ?? "") \(work.stderr())")
            #expect(work.process.isRunning)
        }
    }
}
