import Foundation
import Synchronization
import HTTP
import Observability
import PayreconTesting
import Providers
import Receiver
import Reconciliation
import Testing

/// The receiver in-process over in-memory storage (no PostgreSQL): routing, verification, answers and dedupe as a
/// client sees them over real HTTP. The same promises against PostgreSQL are IntegrationTests' ReceiverTests.
@Suite struct InProcessReceiverTests {
    static let key = "in-process-key"

    static func with(
        _ configuration: Receiver.Configuration = .init(host: "127.0.0.1", port: 0, threads: 2),
        _ body: (String, InMemoryReceiverStorage) async throws -> Void
    ) async throws {
        try await withReceiver(configuration) { base, storage, _ in try await body(base, storage) }
    }

    static func withReceiver(
        _ configuration: Receiver.Configuration = .init(host: "127.0.0.1", port: 0, threads: 2),
        _ body: (String, InMemoryReceiverStorage, Receiver) async throws -> Void
    ) async throws {
        let storage = InMemoryReceiverStorage()
        let webhook = PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: key))
        let receiver = Receiver(configuration: configuration, webhooks: [.pxp: webhook], storage: storage, logger: Logger())
        let port = try receiver.start()
        do { try await body("http://127.0.0.1:\(port)", storage, receiver) } catch { await offload { receiver.shutdown() }; throw error }
        await offload { receiver.shutdown() }
    }

    static func pxp(_ base: String, _ body: String, requestID: String, key: String = key) async throws -> HTTPClientResponse {
        let ts = String(Int(Date().timeIntervalSince1970))
        let headers = [
            ("X-Request-Id", requestID), ("X-Signature-Timestamp", ts),
            ("X-Signature", PXPWebhookVerifier.signature(key: key, requestID: requestID, timestamp: ts, body: Array(body.utf8)))
        ]
        return try await URLSessionHTTPClient().send(
            HTTPClientRequest(method: "POST", url: base + "/webhooks/pxp", headers: headers, body: Array(body.utf8)))
    }

    @Test func acceptedThenDuplicateThenForgedAndUnconfigured() async throws {
        try await Self.with { base, storage in
            let body = #"{"eventData":{"merchantTransactionId":"TX-1"}}"#
            let first = try await Self.pxp(base, body, requestID: "r-1")
            #expect(first.status == 200 && first.text == #"{"status":"accepted","event_id":1}"#)
            let again = try await Self.pxp(base, body, requestID: "r-1")
            #expect(again.status == 200 && again.text == #"{"status":"duplicate","event_id":1}"#)
            #expect(storage.deliveries.count == 1 && storage.deliveries[0].redeliveries == 1)
            #expect(storage.deliveries[0].delivery.body == Array(body.utf8))

            let forged = try await Self.pxp(base, body, requestID: "r-2", key: "wrong")
            #expect(forged.status == 401 && forged.text.contains("invalid_signature"))
            let recorded = await eventually(5) { storage.rejections.count == 1 }
            #expect(recorded && storage.rejections.first?.reason == "invalid_signature")

            let paypal = try await URLSessionHTTPClient().send(
                HTTPClientRequest(method: "POST", url: base + "/webhooks/paypal", body: Array("{}".utf8)))
            #expect(paypal.status == 503 && paypal.text.contains("set PAYPAL_WEBHOOK_ID"))
        }
    }

    /// A sender counts as a sender of genuine deliveries (PayPal's fetch budget trusts its address group) only from a
    /// delivery newly stored: a replay of a genuine delivery, answered duplicate, proves nothing about who sends it.
    @Test func aSenderIsTrustedOnlyFromADeliveryNewlyStored() async throws {
        final class Recording: ProviderWebhook, @unchecked Sendable {
            let inner: any ProviderWebhook
            let trusted = Mutex<[String]>([])
            init(_ inner: any ProviderWebhook) { self.inner = inner }
            func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent {
                try inner.accept(headers: headers, body: body, now: now)
            }
            func acceptWithoutWaiting(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent? {
                try inner.acceptWithoutWaiting(headers: headers, body: body, now: now)
            }
            func prepare(headers: Headers, sender: String?, then: @escaping @Sendable () -> Void) { then() }
            func keep(in store: any WebhookMaterialStore) {}
            func verified(from sender: String) { trusted.withLock { $0.append(sender) } }
        }
        let storage = InMemoryReceiverStorage()
        let endpoint = Recording(PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: Self.key)))
        let receiver = Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, threads: 2), webhooks: [.pxp: endpoint], storage: storage, logger: Logger())
        let base = "http://127.0.0.1:\(try receiver.start())"
        let body = #"{"eventData":{"merchantTransactionId":"TX-T"}}"#
        let first = try await Self.pxp(base, body, requestID: "t-1")
        var replays: [String] = []
        for _ in 0..<3 { replays.append(try await Self.pxp(base, body, requestID: "t-1").text) }
        await offload { receiver.shutdown() }
        #expect(first.text.contains("accepted"))
        #expect(replays.allSatisfy { $0.contains("duplicate") }, "\(replays)")
        #expect(endpoint.trusted.withLock { $0.count } == 1, "a replay answered duplicate trusts no one")
    }

    /// Only the headers verification or dedupe reads, Content-Type, Content-Length, User-Agent and X-Forwarded-For are
    /// stored as sent; every other header is kept by name with `[redacted]` (a proxy's `X-Api-Key`, `X-Auth-Token`… a
    /// three-name denylist let through).
    @Test func onlyTheHeadersVerificationReadsAreStoredAsSent() async throws {
        try await Self.with { base, storage in
            let body = #"{"eventData":{"merchantTransactionId":"TX-H"}}"#
            let ts = String(Int(Date().timeIntervalSince1970))
            let extra = [
                ("X-Api-Key", "proxy-secret-1"), ("X-Auth-Token", "proxy-secret-2"), ("User-Agent", "PXP-Webhooks/1.0"),
                ("X-Forwarded-For", "198.51.100.7"), ("Content-Type", "application/json")
            ]
            for (requestID, key) in [("r-h", Self.key), ("r-h-forged", "wrong")] {
                let headers =
                    [
                        ("X-Request-Id", requestID), ("X-Signature-Timestamp", ts),
                        ("X-Signature", PXPWebhookVerifier.signature(key: key, requestID: requestID, timestamp: ts, body: Array(body.utf8)))
                    ] + extra
                _ = try await URLSessionHTTPClient().send(
                    HTTPClientRequest(method: "POST", url: base + "/webhooks/pxp", headers: headers, body: Array(body.utf8)))
            }
            #expect(await eventually(5) { storage.rejections.count == 1 })
            let stored = try #require(storage.deliveries.first?.delivery.headers)
            let sample = try #require(storage.rejections.first?.headers)
            for headers in [stored, sample] {
                func value(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
                #expect(value("x-api-key") == "[redacted]" && value("x-auth-token") == "[redacted]", "\(headers)")
                #expect(!headers.contains { $0.1.contains("proxy-secret") })
                #expect(value("user-agent") == "PXP-Webhooks/1.0" && value("x-forwarded-for") == "198.51.100.7")
                #expect(
                    value("content-type") == "application/json" && value("content-length") != nil && value("content-length") != "[redacted]"
                )
                #expect(value("x-request-id")?.hasPrefix("r-h") == true && value("x-signature-timestamp") == ts)
                #expect(value("x-signature").map { $0 != "[redacted]" } == true)
                #expect(value("host") == "[redacted]")
            }
        }
    }

    /// Behind a trusted proxy the sender is the last X-Forwarded-For hop (rejection counts and samples name it), and
    /// not the proxy; from any other peer the header is ignored.
    @Test func behindATrustedProxyTheSenderIsTheLastForwardedHop() async throws {
        var configuration = Receiver.Configuration(host: "127.0.0.1", port: 0, threads: 2)
        configuration.trustedProxies = [try AddressRange("127.0.0.0/8")]
        try await Self.with(configuration) { base, storage in
            let headers = [
                ("X-Request-Id", "r-p"), ("X-Signature-Timestamp", "1"), ("X-Signature", "AAAA"),
                ("X-Forwarded-For", "10.9.9.9, 203.0.113.5")
            ]
            _ = try await URLSessionHTTPClient().send(
                HTTPClientRequest(method: "POST", url: base + "/webhooks/pxp", headers: headers, body: Array("{}".utf8)))
            #expect(await eventually(5) { storage.rejections.count == 1 })
            #expect(storage.rejections.first?.remoteAddress == "203.0.113.5")
        }
        try await Self.with { base, storage in
            let headers = [
                ("X-Request-Id", "r-q"), ("X-Signature-Timestamp", "1"), ("X-Signature", "AAAA"), ("X-Forwarded-For", "203.0.113.5")
            ]
            _ = try await URLSessionHTTPClient().send(
                HTTPClientRequest(method: "POST", url: base + "/webhooks/pxp", headers: headers, body: Array("{}".utf8)))
            #expect(await eventually(5) { storage.rejections.count == 1 })
            #expect(storage.rejections.first?.remoteAddress == "127.0.0.1")
        }
    }

    /// With PAYRECON_METRICS_LISTEN, /metrics, /readyz and /healthz answer there and not on the webhook listener (a
    /// proxy in front of the webhooks publishes nothing else); webhooks are not answered on the metrics listener.
    @Test func operationsEndpointsMoveToTheMetricsListener() async throws {
        var configuration = Receiver.Configuration(host: "127.0.0.1", port: 0, threads: 2)
        configuration.metricsHost = "127.0.0.1"
        try await Self.withReceiver(configuration) { base, _, receiver in
            let operations = "http://127.0.0.1:\(receiver.operationsPort)"
            #expect(!base.hasSuffix(":\(receiver.operationsPort)"))
            for path in ["/metrics", "/readyz", "/healthz"] {
                #expect(try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + path)).status == 404, "\(path)")
                let answer = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: operations + path))
                #expect(answer.status == 200, "\(path)")
            }
            #expect(
                try await URLSessionHTTPClient().send(
                    HTTPClientRequest(method: "POST", url: operations + "/webhooks/pxp", body: Array("{}".utf8))
                )
                .status == 404)
            #expect(try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-M"}}"#, requestID: "r-m").status == 200)
        }
    }

    /// Bodies held at once are bounded (PAYRECON_MAX_BODY_BUFFER): senders holding almost-complete large bodies fill
    /// what large bodies may use, the next large one is answered 503 with Retry-After at once, and a small genuine
    /// delivery is still accepted (the first 64 KiB of each body draw on a reserve large ones cannot take).
    @Test func bodiesHeldAtOnceAreBoundedAndASmallDeliveryStillFits() async throws {
        var configuration = Receiver.Configuration(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, threads: 2)
        configuration.maxBodyBuffer = 2 << 20  // 2 MiB: 1.5 MiB for large bodies, 512 KiB reserve
        try await Self.withReceiver(configuration) { base, _, receiver in
            let port = UInt16(base.split(separator: ":").last!)!
            // Two senders each hold 700 KiB of a body one byte longer, never sending its last byte: 1.4 MiB held.
            var holders: [RawSocket?] = []
            for _ in 0..<2 {
                let socket = try RawSocket(port: port)
                socket.send("POST /webhooks/pxp HTTP/1.1\r\nHost: x\r\nContent-Length: \(700 * 1024 + 1)\r\n\r\n")
                socket.send([UInt8](repeating: 0x61, count: 700 * 1024))
                holders.append(socket)
            }
            #expect(await eventually(5) { receiver.bodyBufferBytes >= 1_400 * 1024 })
            let held = receiver.bodyBufferBytes
            // A third large body passes what large bodies may hold: none of it is kept (read and dropped), and it is
            // answered 503 with Retry-After once sent.
            let third = try RawSocket(port: port)
            third.send("POST /webhooks/pxp HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
            third.send([UInt8](repeating: 0x62, count: 1_048_576))
            let answer = String(decoding: third.receive(timeout: 5) ?? [], as: UTF8.self)
            #expect(
                answer.hasPrefix("HTTP/1.1 503") && answer.contains("Retry-After: 5") && answer.contains("body_buffer_full"),
                "\(answer.prefix(300))")
            #expect(receiver.bodyBufferBytes <= held, "the refused body holds nothing")
            // A small genuine delivery still fits.
            let small = try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-SMALL"}}"#, requestID: "r-small")
            #expect(small.status == 200)
            holders.removeAll()  // closed (deinit)
            _ = third
            #expect(await eventually(5) { receiver.bodyBufferBytes < 200 * 1024 })
        }
    }

    /// While the database lacks a migration this payrecon ships, /readyz is 503 naming it (and /metrics counts it), so
    /// a receiver is taken out of rotation instead of answering 503 to every delivery; applied, it is ready again.
    @Test func readyzNamesPendingMigrations() async throws {
        try await Self.withReceiver { base, storage, receiver in
            storage.setPendingMigrations(["0099_future"])
            // The probe reads every 2 s; wait for it.
            var answer = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz"))
            for _ in 0..<60 where answer.status == 200 {
                try await Task.sleep(for: .milliseconds(100))
                answer = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz"))
            }
            #expect(
                answer.status == 503 && answer.text.contains("migrations_pending") && answer.text.contains("0099_future")
                    && answer.text.contains("payrecon migrate"), "\(answer.text)")
            let metrics = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/metrics")).text
            #expect(metrics.contains("payrecon_migrations_pending 1"))
            storage.setPendingMigrations([])
            var ready = 503
            for _ in 0..<60 where ready != 200 {
                try await Task.sleep(for: .milliseconds(100))
                ready = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz")).status
            }
            #expect(ready == 200)
            _ = receiver
        }
    }

    /// Every delivery counter exists at 0 from the start, so `increase()` sees the first 503 or rejection (a series
    /// born at 1 reads as no increase), and the ack histogram reaches 30 s.
    @Test func countersStartAtZeroAndTheAckHistogramReachesThirtySeconds() async throws {
        try await Self.with { base, _ in
            let metrics = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/metrics")).text
            for outcome in ["storage_unavailable", "provider_not_configured", "invalid_signature", "body_buffer_full", "accepted"] {
                #expect(metrics.contains("payrecon_deliveries_total{provider=\"paypercut\",outcome=\"\(outcome)\"}"), "\(outcome)")
            }
            #expect(metrics.contains("payrecon_requests_timed_out_total "))
            _ = try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-AC"}}"#, requestID: "r-ack")
            let after = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/metrics")).text
            #expect(after.contains("payrecon_ack_seconds_bucket{provider=\"pxp\",le=\"30\"}"))
        }
    }

    /// Credentials a sender or a proxy put in Authorization, Proxy-Authorization or Cookie are never stored, with a
    /// delivery or with a rejection sample.
    @Test func credentialHeadersAreStoredRedacted() async throws {
        try await Self.with { base, storage in
            let body = #"{"eventData":{"merchantTransactionId":"TX-R"}}"#
            let ts = String(Int(Date().timeIntervalSince1970))
            let secretish = [
                ("Authorization", "Bearer sk_live_123"), ("Proxy-Authorization", "Basic dXNlcjpwYXNz"), ("Cookie", "session=abc")
            ]
            for (requestID, key) in [("r-red", Self.key), ("r-red-forged", "wrong")] {
                let headers =
                    [
                        ("X-Request-Id", requestID), ("X-Signature-Timestamp", ts),
                        ("X-Signature", PXPWebhookVerifier.signature(key: key, requestID: requestID, timestamp: ts, body: Array(body.utf8)))
                    ] + secretish
                _ = try await URLSessionHTTPClient().send(
                    HTTPClientRequest(method: "POST", url: base + "/webhooks/pxp", headers: headers, body: Array(body.utf8)))
            }
            #expect(await eventually(5) { storage.rejections.count == 1 })
            let stored = try #require(storage.deliveries.first?.delivery.headers)
            let sample = try #require(storage.rejections.first?.headers)
            for headers in [stored, sample] {
                for name in ["authorization", "proxy-authorization", "cookie"] {
                    #expect(headers.first { $0.0.lowercased() == name }?.1 == "[redacted]", "\(name): \(headers)")
                }
                #expect(!headers.contains { $0.1.contains("sk_live") || $0.1.contains("session=") })
                #expect(headers.contains { $0.0.lowercased() == "x-request-id" })  // everything else is kept
            }
        }
    }

    /// A PayPal delivery pointing at a slow certificate URL waits off the HTTP threads: a genuine PXP delivery on the
    /// receiver's only HTTP thread is answered at once.
    @Test func aSlowCertificateFetchDoesNotHoldTheHTTPThread() async throws {
        final class SlowSource: CertificateSource, @unchecked Sendable {
            func pem(for url: String) throws -> [UInt8] { Thread.sleep(forTimeInterval: 3); throw Slow() }
            struct Slow: Error {}
        }
        let storage = InMemoryReceiverStorage()
        let paypal = try PayPalWebhookVerifier(webhookID: "WH-ID", certificateSource: CachingCertificateSource(upstream: SlowSource()))
        let webhooks: [Provider: any ProviderWebhook] = [
            .pxp: PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: Self.key)),
            .paypal: PayPalProvider.Webhook(verifier: paypal)
        ]
        let receiver = Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, threads: 1), webhooks: webhooks, storage: storage, logger: Logger())
        let port = try receiver.start()
        defer { receiver.shutdown() }
        let base = "http://127.0.0.1:\(port)"
        let unsigned = Task {
            try await URLSessionHTTPClient().send(
                HTTPClientRequest(
                    method: "POST", url: base + "/webhooks/paypal",
                    headers: [
                        ("PAYPAL-TRANSMISSION-ID", UUID().uuidString), ("PAYPAL-TRANSMISSION-TIME", ISO8601.format(Date())),
                        ("PAYPAL-TRANSMISSION-SIG", "AAAA"), ("PAYPAL-CERT-URL", "https://api.paypal.com/v1/notifications/certs/CERT-slow")
                    ],
                    body: Array(#"{"id":"WH-X"}"#.utf8)))
        }
        try await Task.sleep(for: .milliseconds(200))  // the PayPal request is waiting on its certificate now
        let started = Date()
        let genuine = try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-S"}}"#, requestID: "r-slow")
        #expect(genuine.status == 200)
        #expect(Date().timeIntervalSince(started) < 1.5, "the genuine delivery waited behind the certificate fetch")
        let refused = try await unsigned.value
        #expect(refused.status == 401 && refused.text.contains("untrusted_certificate"))
    }

    /// PAYRECON_COMMIT_TIMEOUT: a delivery whose commit is slower than the deadline is answered 503 at the deadline
    /// (never 200 before its commit); it may still commit, and the provider's redelivery is then a duplicate.
    @Test func aSlowCommitIs503AtTheDeadlineAndItsRedeliveryADuplicate() async throws {
        let storage = InMemoryReceiverStorage()
        let webhook = PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: Self.key))
        let receiver = Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, threads: 2, commitTimeout: .milliseconds(500)),
            webhooks: [.pxp: webhook], storage: storage, logger: Logger())
        let port = try receiver.start()
        defer { receiver.shutdown() }
        let base = "http://127.0.0.1:\(port)"
        // The commit cannot finish until the test lets it: the 503 must come from the deadline, before the commit.
        storage.holdCommits()
        let slow = try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-D"}}"#, requestID: "r-deadline")
        #expect(slow.status == 503 && slow.text.contains("storage_unavailable"))
        #expect(storage.deliveries.isEmpty, "answered only after the commit")
        storage.releaseCommits()
        #expect(await eventually(5) { storage.deliveries.count == 1 })  // it committed after all
        let again = try await Self.pxp(base, #"{"eventData":{"merchantTransactionId":"TX-D"}}"#, requestID: "r-deadline")
        #expect(again.status == 200 && again.text.contains("duplicate"))
    }

    @Test func unavailableStorageIs503WithRetryAfterAndNotReady() async throws {
        try await Self.with { base, storage in
            storage.setAvailable(false)
            let answer = try await Self.pxp(base, #"{"a":1}"#, requestID: "r-3")
            #expect(answer.status == 503 && answer.text.contains("storage_unavailable"))
            #expect(answer.headers.first { $0.0.lowercased() == "retry-after" } != nil)
            // /readyz answers from the background probe (every 2 s): it turns 503 without waiting on the store.
            let notReady = try await eventually(10) {
                let started = Date()
                let ready = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz"))
                #expect(Date().timeIntervalSince(started) < 1, "/readyz waited on the store")
                return ready.status == 503
            }
            #expect(notReady)
            storage.setAvailable(true)
            #expect(
                try await eventually(10) {
                    try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz")).status == 200
                })
            #expect(try await Self.pxp(base, #"{"a":1}"#, requestID: "r-3").status == 200)
        }
    }

    /// Only an unreachable database turns /readyz to 503 at once: a write the database refuses (one delivery it will
    /// not take, replayed by its sender) answers 503 but leaves the receiver in rotation.
    @Test func aRefusedWriteIs503ButTheReceiverStaysReady() async throws {
        try await Self.with { base, storage in
            storage.setRefusesWrites(true)
            let refused = try await Self.pxp(base, #"{"a":2}"#, requestID: "r-4")
            #expect(refused.status == 503)
            let stillReady = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz"))
            #expect(stillReady.status == 200)
            storage.setRefusesWrites(false)
            storage.setAvailable(false)
            let down = try await Self.pxp(base, #"{"a":2}"#, requestID: "r-4")
            #expect(down.status == 503)
            let notReady = try await URLSessionHTTPClient().send(HTTPClientRequest(method: "GET", url: base + "/readyz"))
            #expect(notReady.status == 503, "an unreachable database turns /readyz at once")
        }
    }
}
