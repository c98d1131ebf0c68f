import Crypto
import PayreconTesting
import Foundation
import Observability
import HTTP
import PaysimCore
@_spi(Positional) import Postgres
import Providers
import Receiver
import Testing

/// paysim signs and sends webhooks the way PXP and PayPal do (its own test CA for PayPal); `payrecon serve`'s
/// receiver, configured as an operator would (PXP key, PayPal webhook id, trust roots and cert URL prefix), accepts
/// them end to end, refuses the forged ones, and counts the duplicates.
@Suite("paysim webhooks through the receiver", .serialized)
struct PaysimWebhookTests {
    @Test func paysimSignedDeliveriesAreAcceptedForgedOnesRefused() async throws {
        let ca = WorkerHarness.ca
        let config = SimConfig()
        let simulator = Simulator(config: config, ca: ca, transport: HTTPClientWebhookTransport())
        let paysim = PaysimServer(simulator: simulator, host: "127.0.0.1", port: 0, threads: 4)
        let simPort = try paysim.start()
        let simURL = "http://127.0.0.1:\(simPort)"
        simulator.setPublicBaseURL(simURL)

        let database = try await offload { try TestDatabase.create() }
        let pool = PostgresPool(conninfo: database.url, size: 4, acquireTimeout: .seconds(5))
        let roots = try X509Certificate.parsePEMBundle(Array(ca.trustBundlePEM.utf8))
        let receiver = Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, threads: 4),
            webhooks: [
                .pxp: PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: config.pxpWebhookKey)),
                .paypal: PayPalProvider.Webhook(
                    verifier: try PayPalWebhookVerifier(
                        webhookID: config.paypalWebhookID, certificateSource: CachingCertificateSource(upstream: HTTPCertificateSource()),
                        trustRoots: roots, certURLPrefixes: [simURL + "/v1/notifications/certs/"]))
            ], pool: pool, logger: Logger())
        let port = try await offload { try receiver.start() }
        let target = "http://127.0.0.1:\(port)"
        let http = URLSessionHTTPClient(configuration: .init(timeout: .seconds(20)))
        func send(_ body: String) async throws -> [String: Any] {
            let r = try await http.send(
                HTTPClientRequest(
                    method: "POST", url: simURL + "/admin/webhooks/send",
                    headers: [("Content-Type", "application/json")], body: Array(body.utf8)))
            #expect(r.status == 200, "paysim answered \(r.status): \(r.text)")
            return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]) ?? [:]
        }
        func statuses(_ answer: [String: Any]) -> [String: Int] {
            (answer["statuses"] as? [String: Any] ?? [:]).mapValues { ($0 as? NSNumber)?.intValue ?? 0 }
        }

        let seed = #"""
            {"pxp": [{"merchant": "M1", "site": "S1", "merchantTransactionId": "TX-1", "intent": "Purchase", "currency": "EUR", "value": "10.00", "state": "Captured"},
                     {"merchant": "M1", "site": "S1", "merchantTransactionId": "TX-2", "intent": "Purchase", "currency": "EUR", "value": "10.00", "state": "Captured"}],
             "paypal": [{"id": "ORDER-1", "intent": "CAPTURE", "currency": "USD", "amount": "5.00", "captures": [{"id": "CAP-1", "amount": "5.00"}]},
                        {"id": "ORDER-2", "intent": "CAPTURE", "currency": "USD", "amount": "5.00", "captures": [{"id": "CAP-2", "amount": "5.00"}]},
                        {"id": "ORDER-3", "intent": "CAPTURE", "currency": "USD", "amount": "5.00", "captures": [{"id": "CAP-3", "amount": "5.00"}]}]}
            """#
        let seeded = try await http.send(
            HTTPClientRequest(
                method: "POST", url: simURL + "/admin/seed", headers: [("Content-Type", "application/json")],
                body: Array(seed.utf8)))
        #expect(seeded.status == 200, "paysim seed answered \(seeded.status): \(seeded.text)")

        let pxp = try await send(
            #"{"provider":"pxp","target":"\#(target)/webhooks/pxp","merchantTransactionId":"TX-1","merchant":"M1","site":"S1","count":3}"#)
        #expect(statuses(pxp) == ["200": 3])
        let paypal = try await send(
            #"{"provider":"paypal","target":"\#(target)/webhooks/paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","order_id":"ORDER-1","count":2}"#
        )
        #expect(statuses(paypal) == ["200": 2])
        let duplicate = try await send(
            #"{"provider":"paypal","target":"\#(target)/webhooks/paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"ORDER-2","duplicate":true}"#
        )
        #expect(statuses(duplicate) == ["200": 2])
        let forgedPXP = try await send(
            #"{"provider":"pxp","target":"\#(target)/webhooks/pxp","merchantTransactionId":"TX-2","merchant":"M1","site":"S1","forged":true}"#
        )
        #expect(statuses(forgedPXP) == ["401": 1])
        let forgedPayPal = try await send(
            #"{"provider":"paypal","target":"\#(target)/webhooks/paypal","event_type":"CHECKOUT.ORDER.COMPLETED","order_id":"ORDER-3","forged":true}"#
        )
        #expect(statuses(forgedPayPal) == ["401": 1])

        let conn = try database.connect()
        #expect(try conn.query("SELECT count(*) AS n FROM deliveries WHERE provider = 'pxp'").first!.int64("n") == 3)
        #expect(try conn.query("SELECT count(*) AS n FROM deliveries WHERE provider = 'paypal'").first!.int64("n") == 3)
        #expect(try conn.query("SELECT sum(redeliveries)::bigint AS n FROM deliveries").first!.int64("n") == 1)
        conn.close()

        await offload {
            receiver.shutdown(); pool.close(); database.drop()
        }
        await paysim.shutdown(drainTimeout: 1)
    }

    /// PXP documents no X-Signature-Timestamp format: paysim sends each plausible one (unix seconds, milliseconds,
    /// ISO 8601) and the receiver accepts them all.
    @Test(arguments: ["seconds", "ms", "iso8601"]) func everyPlausiblePXPTimestampFormatIsAccepted(_ format: String) async throws {
        let config = SimConfig()
        let simulator = Simulator(config: config, ca: WorkerHarness.ca, transport: HTTPClientWebhookTransport())
        let paysim = PaysimServer(simulator: simulator, host: "127.0.0.1", port: 0, threads: 2)
        let simURL = "http://127.0.0.1:\(try paysim.start())"
        let database = try await offload { try TestDatabase.create() }
        let pool = PostgresPool(conninfo: database.url, size: 2, acquireTimeout: .seconds(5))
        let receiver = Receiver(
            configuration: .init(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, threads: 2),
            webhooks: [.pxp: PXPProvider.Webhook(verifier: try PXPWebhookVerifier(key: config.pxpWebhookKey))], pool: pool, logger: Logger()
        )
        let port = try await offload { try receiver.start() }
        let http = URLSessionHTTPClient(configuration: .init(timeout: .seconds(20)))
        func admin(_ path: String, _ body: String) async throws -> HTTPClientResponse {
            try await http.send(
                HTTPClientRequest(
                    method: "POST", url: simURL + path, headers: [("Content-Type", "application/json")], body: Array(body.utf8)))
        }
        #expect(try await admin("/admin/pxp/behaviour", #"{"timestamp":"\#(format)"}"#).status == 200)
        _ = try await admin(
            "/admin/pxp/transactions",
            #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX-T","intent":"Purchase","currency":"EUR","value":"1.00","state":"Captured"}"#
        )
        let sent = try await admin(
            "/admin/webhooks/send",
            #"{"provider":"pxp","target":"http://127.0.0.1:\#(port)/webhooks/pxp","merchantTransactionId":"TX-T","merchant":"M1","site":"S1"}"#
        )
        let answer = (try JSONSerialization.jsonObject(with: Data(sent.body)) as? [String: Any]) ?? [:]
        #expect((answer["statuses"] as? [String: Any])?["200"] as? Int == 1, "\(sent.text)")
        await offload {
            receiver.shutdown(); pool.close(); database.drop()
        }
        await paysim.shutdown(drainTimeout: 1)
    }
}
