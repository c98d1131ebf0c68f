import Crypto
import PaysimCore
import PayreconTesting
import Foundation
import HTTP
import Observability
import Postgres
@testable import Providers
import Receiver
import Reconciliation

/// Starts a receiver in-process on an ephemeral port against a throwaway schema, with all three providers
/// configured, and hands back a client that signs deliveries like each provider: a receiver test is three lines.
final class ReceiverHarness: @unchecked Sendable {
    static let pxpKey = "pxp-test-key"
    static let paypercutSecret = "whsec_test"
    static let paypalWebhookID = "WH-TEST-ID"

    let database: TestDatabase
    private(set) var receiver: Receiver
    let pool: PostgresPool
    private(set) var port: UInt16
    let maxBodyBytes: Int
    let client = URLSessionHTTPClient(configuration: .init(timeout: .seconds(20), maxConcurrentRequests: 64))
    let paypal: PayPalSigner
    let certServer: HTTPServer
    /// What the receiver logged.
    let log = CapturedLog()

    init(maxBodyBytes: Int = 64 * 1024, databaseURL: String? = nil) throws {
        let database = try TestDatabase.create(baseURL: databaseURL ?? TestDatabase.baseURL)
        self.database = database
        self.maxBodyBytes = maxBodyBytes
        paypal = try PayPalSigner()
        let pem = paypal.leafPEM
        certServer = HTTPServer(configuration: .init(port: 0)) { request, responder in
            // A certificate URL whose name starts with CERT-slow answers 404 after 3 s (a sender's choice of URL).
            if request.path.contains("/CERT-slow") {
                return DispatchQueue.global().asyncAfter(deadline: .now() + 3) { responder.respond(HTTPResponse(status: 404)) }
            }
            responder.respond(HTTPResponse(status: 200, headers: [("Content-Type", "application/x-pem-file")], body: pem))
        }
        try certServer.start()
        paypal.certURL = "http://127.0.0.1:\(certServer.port)/v1/notifications/certs/CERT-test"
        pool = PostgresPool(conninfo: database.url, size: 4, acquireTimeout: .seconds(2))
        receiver = try Self.receiver(
            pool: pool, paypal: paypal, certServerPort: certServer.port, maxBodyBytes: maxBodyBytes,
            upstream: HTTPCertificateSource(), logger: log.logger)
        port = try receiver.start()
    }

    /// A receiver with the three providers built as `serve` builds them (PayPal's certificates cached, validated, kept
    /// in the database), its PayPal certificates fetched from `upstream`.
    static func receiver(
        pool: PostgresPool, paypal: PayPalSigner, certServerPort: UInt16, maxBodyBytes: Int,
        upstream: any CertificateSource, logger: Logger
    ) throws -> Receiver {
        let webhooks: [Provider: any ProviderWebhook] = [
            .pxp: PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: Self.pxpKey)),
            .paypercut: PaypercutProvider.Webhook(verifier: try PaypercutWebhookVerifier(secret: Self.paypercutSecret)),
            .paypal: try PayPalProvider.webhook(
                webhookID: Self.paypalWebhookID, trustRoots: [paypal.ca.certificate],
                certURLPrefixes: ["http://127.0.0.1:\(certServerPort)/v1/notifications/certs/"], upstream: upstream)
        ]
        return Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, maxBodyBytes: maxBodyBytes, threads: 4),
            webhooks: webhooks, pool: pool, logger: logger)
    }

    /// Stops the receiver and starts a new process's worth of it on the same database (an empty certificate cache),
    /// its PayPal certificates fetched from `upstream`.
    func restart(upstream: any CertificateSource) throws {
        receiver.shutdown()
        receiver = try Self.receiver(
            pool: pool, paypal: paypal, certServerPort: certServer.port, maxBodyBytes: maxBodyBytes,
            upstream: upstream, logger: log.logger)
        port = try receiver.start()
    }

    /// Runs `body` with a fresh harness and always tears it down, off the cooperative pool.
    static func with(maxBodyBytes: Int = 64 * 1024, _ body: (ReceiverHarness) async throws -> Void) async throws {
        let h = try await offload { try ReceiverHarness(maxBodyBytes: maxBodyBytes) }
        do { try await body(h) } catch { await offload { h.stop() }; throw error }
        await offload { h.stop() }
    }

    func stop() {
        receiver.shutdown()
        certServer.shutdown(drainTimeout: 1)
        pool.close()
        database.drop()
    }

    struct Answer: Sendable {
        var status: Int
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        var body: [UInt8]
        var headers: HTTPHeaders
        var eventID: Int64? { (json["event_id"] as? NSNumber)?.int64Value }
        var outcome: String? { json["status"] as? String }
        var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    }

    func post(_ path: String, headers: [(String, String)], body: [UInt8]) async throws -> Answer {
        let r = try await client.send(
            HTTPClientRequest(method: "POST", url: "http://127.0.0.1:\(port)\(path)", headers: headers, body: body))
        return Answer(status: r.status, body: r.body, headers: r.headers)
    }

    func get(_ path: String, method: String = "GET") async throws -> Answer {
        let r = try await client.send(HTTPClientRequest(method: method, url: "http://127.0.0.1:\(port)\(path)"))
        return Answer(status: r.status, body: r.body, headers: r.headers)
    }

    /// A PXP delivery signed with the test key (or `key`), at `timestamp` (default now).
    func pxp(
        _ body: String, requestID: String? = UUID().uuidString, timestamp: String? = nil, key: String = ReceiverHarness.pxpKey
    ) async throws -> Answer {
        let ts = timestamp ?? String(Int(Date().timeIntervalSince1970))
        var headers = [("Content-Type", "application/json"), ("X-Signature-Timestamp", ts)]
        if let requestID { headers.append(("X-Request-Id", requestID)) }
        headers.append(
            ("X-Signature", PXPWebhookVerifier.signature(key: key, requestID: requestID ?? "", timestamp: ts, body: Array(body.utf8))))
        return try await post("/webhooks/pxp", headers: headers, body: Array(body.utf8))
    }

    func paypercut(_ body: String, secret: String = ReceiverHarness.paypercutSecret) async throws -> Answer {
        let value = PaypercutWebhookVerifier.signatureHeaderValue(
            secret: secret, timestamp: Int64(Date().timeIntervalSince1970), body: Array(body.utf8))
        return try await post("/webhooks/paypercut", headers: [("Paypercut-Signature", value)], body: Array(body.utf8))
    }

    func paypalDelivery(_ body: String, certURL: String? = nil, time: Date = Date()) async throws -> Answer {
        try await post(
            "/webhooks/paypal",
            headers: try paypal.headers(
                body: Array(body.utf8), webhookID: Self.paypalWebhookID,
                certURL: certURL, time: time), body: Array(body.utf8))
    }
}

/// Signs PayPal deliveries with a test CA's leaf named like PayPal's signing certificate.
final class PayPalSigner: @unchecked Sendable {
    let ca: CertificateAuthority
    let leaf: (certificate: X509Certificate, key: RSAPrivateKey)
    var certURL = ""
    var leafPEM: [UInt8] { Array(leaf.certificate.pem.utf8) }

    init() throws {
        ca = try CertificateAuthority(commonName: "paysim test root")
        leaf = try ca.issueLeaf(commonName: "messageverificationcerts.sandbox.paypal.com")
    }

    func headers(body: [UInt8], webhookID: String, certURL: String? = nil, time: Date = Date()) throws -> [(String, String)] {
        let id = UUID().uuidString.lowercased()
        let t = ISO8601.format(time)
        let message = PayPalWebhookVerifier.signedMessage(transmissionID: id, transmissionTime: t, webhookID: webhookID, body: body)
        let sig = Base64.encode(try leaf.key.signSHA256(Array(message.utf8)))
        return [
            ("PAYPAL-TRANSMISSION-ID", id), ("PAYPAL-TRANSMISSION-TIME", t), ("PAYPAL-TRANSMISSION-SIG", sig),
            ("PAYPAL-CERT-URL", certURL ?? self.certURL), ("PAYPAL-AUTH-ALGO", "SHA256withRSA"), ("Content-Type", "application/json")
        ]
    }
}
