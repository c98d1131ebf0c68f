import Crypto
import PayreconTesting
import Foundation
import HTTP
@_spi(Positional) import Postgres
import Providers
import Testing

/// `payrecon serve` against a real PostgreSQL.
@Suite("Receiver", .serialized)
struct ReceiverTests {
    @Test func pxpDeliveryIsAcceptedThenDuplicateCountedOnTheStoredRow() async throws {
        try await ReceiverHarness.with { h in
            let body = #"{"eventCategory":"Transaction","eventData":{"merchantTransactionId":"ORD-1","state":"Authorised"}}"#
            let first = try await h.pxp(body, requestID: "req-1")
            #expect(first.status == 200)
            #expect(first.outcome == "accepted")
            let again = try await h.pxp(body, requestID: "req-1")
            #expect(again.status == 200)
            #expect(again.outcome == "duplicate")
            #expect(again.eventID == first.eventID)
            let conn = try h.database.connect(); defer { conn.close() }
            let row = try #require(
                try conn.query("SELECT count(*) AS n, max(redeliveries) AS r, max(length(body)) AS len FROM deliveries").first)
            #expect(try row.int64("n") == 1)
            #expect(try row.int64("r") == 1)
            #expect(try row.int64("len") == Int64(body.utf8.count))
        }
    }

    @Test func storedBodyAndHeadersAreTheRawBytesReceived() async throws {
        try await ReceiverHarness.with { h in
            // Non-ASCII, escaped and spaced JSON: stored byte for byte, never re-serialized.
            let body = "{ \"eventData\" : {\"merchantTransactionId\":\"Ünïcødé-1\"}, \"note\":\"\\u00e9\" }"
            let answer = try await h.pxp(body, requestID: "req-raw")
            #expect(answer.status == 200)
            let conn = try h.database.connect(); defer { conn.close() }
            let row = try #require(
                try conn.query("SELECT body, headers::text AS headers FROM deliveries WHERE id = $1", [.int64(answer.eventID!)]).first)
            #expect(try row.bytes("body") == Array(body.utf8))
            #expect(try row.string("headers").lowercased().contains("x-request-id"))
        }
    }

    @Test func twentyConcurrentIdenticalDeliveriesStoreOneRow() async throws {
        try await ReceiverHarness.with { h in
            let body = #"{"eventData":{"merchantTransactionId":"ORD-C"}}"#
            let answers = try await withThrowingTaskGroup(of: ReceiverHarness.Answer.self) { group in
                for _ in 0..<20 { group.addTask { try await h.pxp(body, requestID: "same-request") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 200 })
            #expect(Set(answers.compactMap(\.eventID)).count == 1)
            #expect(answers.filter { $0.outcome == "accepted" }.count == 1)
            #expect(answers.filter { $0.outcome == "duplicate" }.count == 19)
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 1)
            #expect(try h.database.count("SELECT redeliveries::bigint FROM deliveries") == 19)
        }
    }

    @Test func pxpArrayBodyIsOneDelivery() async throws {
        try await ReceiverHarness.with { h in
            let body = #"[{"eventData":{"merchantTransactionId":"A"}},{"eventData":{"merchantTransactionId":"B"}}]"#
            let answer = try await h.pxp(body)
            #expect(answer.status == 200 && answer.outcome == "accepted")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 1)
        }
    }

    @Test func pxpWithoutRequestIdDedupesOnTheBodyHash() async throws {
        try await ReceiverHarness.with { h in
            let body = #"{"eventData":{"merchantTransactionId":"NO-ID"}}"#
            let first = try await h.pxp(body, requestID: nil)
            #expect(first.status == 200 && first.outcome == "accepted")
            let again = try await h.pxp(body, requestID: nil)
            #expect(again.outcome == "duplicate" && again.eventID == first.eventID)
            let conn = try h.database.connect(); defer { conn.close() }
            let key = try #require(try conn.query("SELECT dedupe_key FROM deliveries").first).string("dedupe_key")
            #expect(key == SHA256.hex(Array(body.utf8)))
        }
    }

    @Test func paypalAndPaypercutDeliveriesAreAcceptedAndDeduplicatedOnEventId() async throws {
        try await ReceiverHarness.with { h in
            let event =
                #"{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP-1","supplementary_data":{"related_ids":{"order_id":"ORDER-1"}}}}"#
            let a = try await h.paypalDelivery(event)
            #expect(a.status == 200 && a.outcome == "accepted")
            let b = try await h.paypalDelivery(event)  // a redelivery: new transmission, same event id
            #expect(b.status == 200 && b.outcome == "duplicate" && b.eventID == a.eventID)
            let pc = #"{"id":"evt_1","type":"payment_intent.requires_capture","data":{"object":{"id":"pi_1","object":"payment_intent"}}}"#
            let c = try await h.paypercut(pc)
            #expect(c.status == 200 && c.outcome == "accepted")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 2)
        }
    }

    /// A flood of bad-signature bodies (60 KiB each) is counted in full but stored as at most 20 samples per
    /// (provider, reason, hour); genuine deliveries during the flood are all stored and none gets 503.
    @Test func aRejectionFloodIsCountedNotStoredAndNeverDelaysGenuineDeliveries() async throws {
        try await ReceiverHarness.with(maxBodyBytes: 128 * 1024) { h in
            let bad = String(repeating: "x", count: 60 * 1024)
            let floods = 300
            async let flood: [Int] = withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<floods {
                    group.addTask {
                        try await h.pxp(#"{"pad":"\#(bad)","n":\#(i)}"#, key: "not-the-key").status
                    }
                }
                var statuses: [Int] = []
                for try await s in group { statuses.append(s) }
                return statuses
            }
            var genuine: [Int] = []
            for i in 0..<20 {
                genuine.append(try await h.pxp(#"{"eventData":{"merchantTransactionId":"TX-F\#(i)"}}"#).status)
            }
            let statuses = try await flood
            #expect(statuses.allSatisfy { $0 == 401 })
            #expect(genuine.allSatisfy { $0 == 200 }, "\(genuine)")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 20)
            // Every rejection counted; at most 20 kept, bounded in bytes.
            #expect(
                try await PayreconTesting.eventually(10) {
                    try h.database.count("SELECT coalesce(sum(count), 0)::bigint FROM rejection_counts WHERE reason = 'invalid_signature'")
                        == Int64(floods)
                })
            #expect(try h.database.count("SELECT count(*) FROM rejected_deliveries WHERE reason = 'invalid_signature'") <= 20)
            #expect(try h.database.count("SELECT coalesce(sum(length(body_prefix)), 0)::bigint FROM rejected_deliveries") <= 20 * 64 * 1024)
        }
    }

    /// The genuine CRC32 fixture delivered as PayPal signs it, accepted: its signed headers (a forgery reuses them).
    static func postCRCGenuine(_ h: ReceiverHarness) async throws -> (headers: [(String, String)], answer: ReceiverHarness.Answer) {
        #expect(CRC32.checksum(Array(crcGenuine.utf8)) == CRC32.checksum(Array(crcForged.utf8)))
        let headers = try h.paypal.headers(body: Array(crcGenuine.utf8), webhookID: ReceiverHarness.paypalWebhookID)
        let answer = try await h.post("/webhooks/paypal", headers: headers, body: Array(crcGenuine.utf8))
        #expect(answer.status == 200 && answer.outcome == "accepted")
        return (headers, answer)
    }

    /// A genuine PayPal body and a forged one with the same CRC32 (four bytes of its "pad" value forced).
    static let crcGenuine =
        #"{"id":"WH-GENUINE-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP-G1","status":"COMPLETED"}}"#
    static let crcForged =
        #"{"id":"WH-FORGED-6","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP-EVIL","status":"COMPLETED"},"pad":"aK#L"}"#

    /// PayPal signs a CRC32 of the body, not the body: `forged` (new event id, another capture) has the same CRC32
    /// as `crcGenuine` (built by forcing four bytes of its "pad" value), so it passes the signature with the genuine
    /// delivery's headers. The transmission id is already stored with another body: refused, nothing stored.
    @Test func aTransmissionIdReusedWithAnotherBodyIsRefused() async throws {
        let forged = Self.crcForged
        try await ReceiverHarness.with { h in
            let (headers, a) = try await Self.postCRCGenuine(h)
            let b = try await h.post("/webhooks/paypal", headers: headers, body: Array(forged.utf8))
            #expect(b.status == 401)
            #expect(String(decoding: b.body, as: UTF8.self).contains("invalid_signature"))
            #expect(String(decoding: b.body, as: UTF8.self).contains("already stored with another body"))
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 1)
            #expect(try h.database.count("SELECT count(*) FROM deliveries WHERE dedupe_key = 'WH-FORGED-6'") == 0)
            // The genuine delivery replayed as it was is a duplicate, not a refusal.
            let c = try await h.post("/webhooks/paypal", headers: headers, body: Array(Self.crcGenuine.utf8))
            #expect(c.status == 200 && c.outcome == "duplicate" && c.eventID == a.eventID)
        }
    }

    /// The genuine delivery's headers with its transmission id padded ("T ",
    /// "T\t": libmicrohttpd keeps trailing spaces and tabs) verified against the same signature and were stored as new
    /// transmissions, each free to carry a body forged to the CRC32 PayPal signed. Now refused, nothing stored.
    @Test(arguments: [" ", "\t"])
    func aForgedBodyUnderAPaddedTransmissionIdIsRefused(pad: String) async throws {
        let forged = Self.crcForged
        try await ReceiverHarness.with { h in
            let (headers, _) = try await Self.postCRCGenuine(h)
            let padded = headers.map { $0.0.lowercased() == "paypal-transmission-id" ? ($0.0, $0.1 + pad) : $0 }
            let b = try await h.post("/webhooks/paypal", headers: padded, body: Array(forged.utf8))
            #expect(b.status == 401, "\(String(decoding: b.body, as: UTF8.self))")
            #expect(String(decoding: b.body, as: UTF8.self).contains("invalid_signature"))
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 1)
            #expect(try h.database.count("SELECT count(*) FROM transmissions") == 1, "no padded transmission id stored")
        }
    }

    struct ErrorCase: Sendable, CustomStringConvertible {
        var name: String
        var status: Int
        var code: String
        var send: @Sendable (ReceiverHarness) async throws -> ReceiverHarness.Answer
        var description: String { name }
    }

    static let errorCases: [ErrorCase] = [
        ErrorCase(name: "signed but not JSON", status: 400, code: "malformed_body") { try await $0.pxp("not json") },
        ErrorCase(name: "signed JSON scalar", status: 400, code: "malformed_body") { try await $0.pxp("42") },
        ErrorCase(name: "PXP unsigned", status: 401, code: "missing_signature") {
            try await $0.post("/webhooks/pxp", headers: [], body: Array("{}".utf8))
        },
        ErrorCase(name: "PXP wrong key", status: 401, code: "invalid_signature") { try await $0.pxp("{}", key: "wrong") },
        ErrorCase(name: "PXP stale", status: 401, code: "stale_timestamp") {
            try await $0.pxp("{}", timestamp: String(Int(Date().timeIntervalSince1970) - 3600))
        },
        ErrorCase(name: "PXP from the future", status: 401, code: "stale_timestamp") {
            try await $0.pxp("{}", timestamp: String(Int(Date().timeIntervalSince1970) + 3600))
        },
        ErrorCase(name: "Paypercut wrong secret", status: 401, code: "invalid_signature") {
            try await $0.paypercut(#"{"id":"e","type":"t"}"#, secret: "nope")
        },
        ErrorCase(name: "PayPal cert URL outside the prefixes", status: 401, code: "untrusted_certificate") {
            try await $0.paypalDelivery(#"{"id":"WH-2"}"#, certURL: "https://evil.example/v1/notifications/certs/CERT-1")
        },
        ErrorCase(name: "PayPal stale transmission", status: 401, code: "stale_timestamp") {
            try await $0.paypalDelivery(#"{"id":"WH-3"}"#, time: Date(timeIntervalSinceNow: -7200))
        },
        ErrorCase(name: "PayPal without id", status: 400, code: "malformed_body") { try await $0.paypalDelivery(#"{"event_type":"X"}"#) },
        ErrorCase(name: "body over PAYRECON_MAX_BODY_BYTES", status: 413, code: "body_too_large") {
            try await $0.pxp("[" + String(repeating: "{},", count: 40_000) + "{}]")
        }
    ]

    @Test(arguments: errorCases)
    func rejectedDeliveriesGetTheirStatusAndAreRecorded(_ c: ErrorCase) async throws {
        try await ReceiverHarness.with { h in
            let answer = try await c.send(h)
            #expect(answer.status == c.status)
            #expect(answer.errorCode == c.code)
            #expect(answer.headers["content-type"] == "application/json")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 0)
            // The audit row is written asynchronously (the 4xx does not wait for it; the lane writes at most once a
            // second): poll.
            var recorded: Int64 = 0
            _ = try await PayreconTesting.eventually(10) {
                recorded = try h.database.count("SELECT count(*) FROM rejected_deliveries WHERE reason = $1", [.text(c.code)])
                return recorded > 0
            }
            #expect(recorded == 1)
            let prefix = try h.database.count("SELECT coalesce(max(length(body_prefix)), 0)::bigint FROM rejected_deliveries")
            #expect(prefix <= 64 * 1024)
        }
    }

    @Test func unknownPathsAndMethods() async throws {
        try await ReceiverHarness.with { h in
            let notFound = try await h.get("/webhooks/stripe")
            #expect(notFound.status == 404 && notFound.errorCode == "not_found")
            let elsewhere = try await h.get("/")
            #expect(elsewhere.status == 404)
            let wrongMethod = try await h.get("/webhooks/pxp")
            #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] == "POST")
            let health = try await h.get("/healthz")
            #expect(health.status == 200)
            let ready = try await h.get("/readyz")
            #expect(ready.status == 200)
        }
    }

    @Test func metricsCountDeliveriesByOutcomeAndPending() async throws {
        try await ReceiverHarness.with { h in
            _ = try await h.pxp(#"{"eventData":{}}"#)
            _ = try await h.pxp("{}", key: "wrong")
            let metrics = String(decoding: try await h.get("/metrics").body, as: UTF8.self)
            #expect(metrics.contains(#"payrecon_deliveries_total{provider="pxp",outcome="accepted"}"#))
            #expect(metrics.contains(#"payrecon_deliveries_total{provider="pxp",outcome="invalid_signature"}"#))
            #expect(metrics.contains("payrecon_ack_seconds_bucket"))
            #expect(metrics.contains("payrecon_deliveries_pending"))
        }
    }

    /// Deliveries naming a slow certificate URL wait without a thread and without delaying anyone: while 40 of them
    /// wait on one 3 s fetch, genuine PayPal deliveries (certificate cached) and PXP deliveries are answered at once.
    @Test func deliveriesWaitingOnASlowCertificateDelayNoGenuineDelivery() async throws {
        try await ReceiverHarness.with { h in
            let warm = try await h.paypalDelivery(#"{"id":"WH-WARM","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C"}}"#)
            #expect(warm.status == 200)
            let slowURL = h.paypal.certURL.replacingOccurrences(of: "CERT-test", with: "CERT-slow-1")
            // Their own client with 40 connections: a client's per-host connection limit must not queue the genuine
            // deliveries behind them on the sender's side.
            let flood = CurlHTTPClient(configuration: .init(timeout: .seconds(20), maxConcurrentRequests: 64))
            let waiting = Task {
                try await withThrowingTaskGroup(of: ReceiverHarness.Answer.self) { group in
                    for i in 0..<40 {
                        group.addTask {
                            let body = Array(#"{"id":"WH-SLOW-\#(i)","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C"}}"#.utf8)
                            let r = try await flood.send(
                                HTTPClientRequest(
                                    method: "POST", url: "http://127.0.0.1:\(h.port)/webhooks/paypal",
                                    headers: try h.paypal.headers(body: body, webhookID: ReceiverHarness.paypalWebhookID, certURL: slowURL),
                                    body: body))
                            return ReceiverHarness.Answer(status: r.status, body: r.body, headers: r.headers)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            try await Task.sleep(for: .milliseconds(300))  // the 40 are waiting on the fetch now
            let started = Date()
            for i in 0..<10 {
                let genuine = try await h.paypalDelivery(
                    #"{"id":"WH-G-\#(i)","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C"}}"#)
                #expect(genuine.status == 200)
                #expect(try await h.pxp(#"{"eventData":{"merchantTransactionId":"G-\#(i)"}}"#).status == 200)
            }
            #expect(Date().timeIntervalSince(started) < 2, "genuine deliveries waited behind the certificate fetch")
            let answers = try await waiting.value
            #expect(answers.count == 40 && answers.allSatisfy { $0.status == 401 && $0.errorCode == "untrusted_certificate" })
            #expect(try h.database.count("SELECT count(*) FROM deliveries WHERE provider = 'paypal'") == 11)
        }
    }
}
