import COpenSSL
import CZlib
import Crypto
import Foundation
import Reconciliation
import Testing
@testable import PaysimCore
import TextFormats

// Independent checks: the test computes HMACs, CRCs, chains and RSA verification itself with libcrypto and zlib.

private func independentHMAC(key: String, message: [UInt8]) -> String {
    var out = [UInt8](repeating: 0, count: 64)
    var length: UInt32 = 0
    let keyBytes = Array(key.utf8)
    _ = HMAC(EVP_sha256(), keyBytes, Int32(keyBytes.count), message, message.count, &out, &length)
    return Data(out.prefix(Int(length))).base64EncodedString()
}

private func certificates(_ pem: String) -> [OpaquePointer] {
    let bytes = Array(pem.utf8)
    let bio = BIO_new_mem_buf(bytes, Int32(bytes.count))
    defer { BIO_free(bio) }
    var certs: [OpaquePointer] = []
    while let cert = PEM_read_bio_X509(bio, nil, nil, nil) { certs.append(cert) }
    ERR_clear_error()
    return certs
}

/// Verifies `leafPEM` against the trust bundle file: first certificate trusted, the rest untrusted intermediates.
private func verifyChain(leafPEM: String, bundleFile: URL, at time: Date) throws -> Int32 {
    let bundle = certificates(try String(contentsOf: bundleFile, encoding: .utf8))
    let leaf = try #require(certificates(leafPEM).first)
    let store = X509_STORE_new()
    defer { X509_STORE_free(store) }
    X509_STORE_add_cert(store, bundle[0])
    let untrusted = OPENSSL_sk_new_null()
    for cert in bundle.dropFirst() { OPENSSL_sk_push(untrusted, UnsafeRawPointer(cert)) }
    let ctx = X509_STORE_CTX_new()
    defer { X509_STORE_CTX_free(ctx); OPENSSL_sk_free(untrusted) }
    X509_STORE_CTX_init(ctx, store, leaf, untrusted)
    X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), UInt(X509_V_FLAG_X509_STRICT))
    X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970))
    let ok = X509_verify_cert(ctx)
    let error = X509_STORE_CTX_get_error(ctx)
    for cert in bundle { X509_free(cert) }
    X509_free(leaf)
    return ok == 1 ? X509_V_OK : error
}

private func commonName(_ pem: String) throws -> String {
    let cert = try #require(certificates(pem).first)
    defer { X509_free(cert) }
    var buffer = [CChar](repeating: 0, count: 256)
    let n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, &buffer, Int32(buffer.count))
    return String(decoding: buffer.prefix(Int(max(0, n))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func rsaVerify(certPEM: String, message: [UInt8], signatureBase64: String) throws -> Bool {
    let cert = try #require(certificates(certPEM).first)
    defer { X509_free(cert) }
    let key = X509_get_pubkey(cert)
    defer { EVP_PKEY_free(key) }
    let signature = try #require(Data(base64Encoded: signatureBase64))
    let ctx = EVP_MD_CTX_new()
    defer { EVP_MD_CTX_free(ctx) }
    guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
    let result = Array(signature).withUnsafeBufferPointer { sig in
        EVP_DigestVerify(ctx, sig.baseAddress, sig.count, message, message.count)
    }
    ERR_clear_error()
    return result == 1
}

private func zlibCRC(_ bytes: [UInt8]) -> UInt {
    bytes.withUnsafeBufferPointer { UInt(crc32(0, $0.baseAddress, uInt($0.count))) }
}

@Suite struct WebhookTests {
    // MARK: PXP

    @Test func pxpSignatureChecksOutIndependently() throws {
        let clock = TestClock()
        let sim = makeSimulator(clock: clock) { $0.pxpWebhookKey = "hash-key-1" }
        let sid = sim.seedPXP("ORD-1")
        let deliveries = try sim.webhookDeliveries(try JSONValue.parse(#"{"provider":"pxp","merchantTransactionId":"ORD-1"}"#))
        #expect(deliveries.count == 1)
        let d = deliveries[0]
        let requestID = try #require(d.header("X-Request-Id"))
        let timestamp = try #require(d.header("X-Signature-Timestamp"))
        #expect(timestamp == String(Int(clock().timeIntervalSince1970)))
        #expect(UUID(uuidString: requestID) != nil)
        #expect(d.header("X-Signature") == independentHMAC(key: "hash-key-1", message: Array((requestID + timestamp).utf8) + d.body))
        #expect(d.header("Content-Type") == "application/json")

        let event = try JSONValue.parse(d.body)
        #expect(event["eventCategory"]?.stringValue == "Transaction")
        #expect(event["eventCode"]?.stringValue == "transaction-authorised")
        #expect(event["eventDate"]?.stringValue.flatMap(SimTime.parse) == Int64(clock().timeIntervalSince1970))
        #expect(event["eventOwner"]?["merchantGroup"]?.stringValue == "paysim-group")
        #expect(event["eventOwner"]?["merchant"]?.stringValue == "M1")
        #expect(event["eventOwner"]?["site"]?.stringValue == "S1")
        #expect(event["eventData"]?["state"]?.stringValue == "Authorised")
        #expect(event["eventData"]?["merchantTransactionId"]?.stringValue == "ORD-1")
        #expect(event["eventData"]?["systemTransactionId"]?.stringValue == sid)
    }

    @Test func pxpForgedDoesNotVerify() throws {
        let sim = makeSimulator { $0.pxpWebhookKey = "hash-key-1" }
        sim.seedPXP("ORD-1")
        let d = try #require(
            try sim.webhookDeliveries(try JSONValue.parse(#"{"provider":"pxp","merchantTransactionId":"ORD-1","forged":true}"#)).first)
        let signed = Array((d.header("X-Request-Id")! + d.header("X-Signature-Timestamp")!).utf8) + d.body
        #expect(d.header("X-Signature") != independentHMAC(key: "hash-key-1", message: signed))
    }

    @Test func pxpCountDuplicateArrayNestedAndStateOverride() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        let request =
            #"{"provider":"pxp","systemTransactionId":"\#(sid)","count":3,"duplicate":true,"array":true,"nested":true,"state":"Captured"}"#
        let deliveries = try sim.webhookDeliveries(try JSONValue.parse(request))
        #expect(deliveries.count == 6)
        #expect(Set(deliveries.map(\.id)).count == 3)
        for pair in stride(from: 0, to: 6, by: 2) {
            #expect(deliveries[pair].id == deliveries[pair + 1].id)
            #expect(deliveries[pair].header("X-Signature") == deliveries[pair + 1].header("X-Signature"))
            #expect(!deliveries[pair].isRepeat && deliveries[pair + 1].isRepeat)
        }
        let body = try JSONValue.parse(deliveries[0].body)
        let event = try #require(body.arrayValue?.first)
        #expect(event["eventCode"]?.stringValue == "transaction-captured")
        #expect(event["eventData"]?["transactionData"]?["state"]?.stringValue == "Captured")
        #expect(event["eventData"]?["transactionData"]?["systemTransactionId"]?.stringValue == sid)
    }

    @Test func pxpRawBodyIsSentAsGiven() throws {
        let sim = makeSimulator()
        let d = try #require(try sim.webhookDeliveries(try JSONValue.parse(#"{"provider":"pxp","body":{"eventCategory":"Token"}}"#)).first)
        #expect(String(decoding: d.body, as: UTF8.self) == #"{"eventCategory":"Token"}"#)
    }

    // MARK: PayPal

    @Test func leafChainsToTheWrittenRootAndIsPayPalShaped() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("paysim-root-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(sharedCA.trustBundlePEM.utf8).write(to: file)
        #expect(try verifyChain(leafPEM: sharedCA.leafPEM, bundleFile: file, at: Date()) == X509_V_OK)
        #expect(try commonName(sharedCA.leafPEM) == "messageverificationcerts.sandbox.paypal.com")
        #expect(try commonName(sharedCA.rootPEM) == "paysim Test Root CA")
        // Valid from a day ago to a year ahead.
        #expect(try verifyChain(leafPEM: sharedCA.leafPEM, bundleFile: file, at: Date().addingTimeInterval(-86400 + 600)) == X509_V_OK)
        #expect(try verifyChain(leafPEM: sharedCA.leafPEM, bundleFile: file, at: Date().addingTimeInterval(364 * 86400)) == X509_V_OK)
        #expect(
            try verifyChain(leafPEM: sharedCA.leafPEM, bundleFile: file, at: Date().addingTimeInterval(366 * 86400))
                == X509_V_ERR_CERT_HAS_EXPIRED)
        // A root alone (no intermediate) does not verify the leaf: the bundle needs both.
        let rootOnly = FileManager.default.temporaryDirectory.appendingPathComponent("paysim-rootonly-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: rootOnly) }
        try Data(sharedCA.rootPEM.utf8).write(to: rootOnly)
        #expect(try verifyChain(leafPEM: sharedCA.leafPEM, bundleFile: rootOnly, at: Date()) != X509_V_OK)
    }

    @Test func certURLServesTheLeafWithCRLF() throws {
        let sim = makeSimulator()
        let r = sim.handle(method: "GET", path: "/v1/notifications/certs/\(Simulator.certName)")
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == "application/x-pem-file")
        #expect(r.bodyText.contains("-----BEGIN CERTIFICATE-----\r\n"))
        #expect(!r.bodyText.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
        #expect(try commonName(r.bodyText) == "messageverificationcerts.sandbox.paypal.com")
        #expect(sim.handle(method: "GET", path: "/v1/notifications/certs/CERT-other").status == 404)
        let root = sim.handle(method: "GET", path: "/admin/paypal/root.pem")
        #expect(root.bodyText == sharedCA.trustBundlePEM)
    }

    @Test(arguments: [
        ("PAYMENT.CAPTURE.COMPLETED", "capture"), ("PAYMENT.AUTHORIZATION.CREATED", "authorization"),
        ("PAYMENT.CAPTURE.REFUNDED", "refund"), ("CHECKOUT.ORDER.COMPLETED", "checkout-order")
    ])
    func paypalSignatureVerifiesWithTheServedLeaf(eventType: String, resourceType: String) throws {
        let clock = TestClock()
        let sim = makeSimulator(clock: clock) { $0.paypalWebhookID = "WH-LISTENER-1" }
        sim.seedPayPal(
            """
            {"id":"ORDER-A","intent":"AUTHORIZE","currency":"USD","amount":"10.00","authorizations":[{"id":"AUTH-1","status":"CAPTURED"}],
             "captures":[{"id":"CAP-1","status":"PARTIALLY_REFUNDED"}],"refunds":[{"id":"REF-1","amount":"2.00"}]}
            """)
        let d = try #require(
            try sim.webhookDeliveries(try JSONValue.parse(#"{"provider":"paypal","event_type":"\#(eventType)","order_id":"ORDER-A"}"#))
                .first)
        let transmissionID = try #require(d.header("PAYPAL-TRANSMISSION-ID"))
        let time = try #require(d.header("PAYPAL-TRANSMISSION-TIME"))
        #expect(time == SimTime.rfc3339(clock()))
        #expect(d.header("PAYPAL-AUTH-ALGO") == "SHA256withRSA")
        #expect(d.header("PAYPAL-CERT-URL") == "http://127.0.0.1:9999/v1/notifications/certs/CERT-paysim-1")
        let message = Array("\(transmissionID)|\(time)|WH-LISTENER-1|\(zlibCRC(d.body))".utf8)
        let served = sim.handle(method: "GET", path: "/v1/notifications/certs/\(Simulator.certName)").bodyText
        #expect(try rsaVerify(certPEM: served, message: message, signatureBase64: d.header("PAYPAL-TRANSMISSION-SIG")!))

        let event = try JSONValue.parse(d.body)
        #expect(event["id"]?.stringValue?.hasPrefix("WH-") == true)
        #expect(event["id"]?.stringValue == d.id)
        #expect(event["event_type"]?.stringValue == eventType)
        #expect(event["resource_type"]?.stringValue == resourceType)
        #expect(event["resource_version"]?.stringValue == "2.0")
        #expect(event["create_time"]?.stringValue.flatMap(SimTime.parse) == Int64(clock().timeIntervalSince1970))
        let resource = try #require(event["resource"])
        if resourceType == "checkout-order" {
            #expect(resource["id"]?.stringValue == "ORDER-A")
        } else if resourceType == "refund" {
            // A real refund names only its capture, through its up link (no related_ids).
            #expect(resource["supplementary_data"] == nil)
            #expect(resource["links"]?.arrayValue?.contains { $0["rel"]?.stringValue == "up" } == true)
        } else {
            #expect(resource["supplementary_data"]?["related_ids"]?["order_id"]?.stringValue == "ORDER-A")
            #expect(resource["links"]?.arrayValue?.contains { $0["rel"]?.stringValue == "up" } == true)
        }
        if resourceType == "refund" { #expect(resource["id"]?.stringValue == "REF-1") }
    }

    @Test func paypalForgedFailsAndDuplicateKeepsTheEventId() throws {
        let sim = makeSimulator()
        sim.seedPayPal(#"{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.00","captures":[{"id":"C"}]}"#)
        let forged = try #require(
            try sim.webhookDeliveries(
                try JSONValue.parse(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"C","forged":true}"#)
            ).first)
        let message = Array(
            "\(forged.header("PAYPAL-TRANSMISSION-ID")!)|\(forged.header("PAYPAL-TRANSMISSION-TIME")!)|WEBHOOK_ID|\(zlibCRC(forged.body))"
                .utf8)
        #expect(try !rsaVerify(certPEM: sharedCA.leafPEM, message: message, signatureBase64: forged.header("PAYPAL-TRANSMISSION-SIG")!))

        let pair = try sim.webhookDeliveries(
            try JSONValue.parse(
                #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"C","duplicate":true,"count":2}"#))
        #expect(pair.count == 4)
        #expect(pair[0].id == pair[1].id && pair[2].id == pair[3].id && pair[0].id != pair[2].id)
        #expect(pair[0].body == pair[1].body)
        #expect(pair[0].header("PAYPAL-TRANSMISSION-ID") != pair[1].header("PAYPAL-TRANSMISSION-ID"))
        for d in pair {
            let m = Array(
                "\(d.header("PAYPAL-TRANSMISSION-ID")!)|\(d.header("PAYPAL-TRANSMISSION-TIME")!)|WEBHOOK_ID|\(zlibCRC(d.body))".utf8)
            #expect(try rsaVerify(certPEM: sharedCA.leafPEM, message: m, signatureBase64: d.header("PAYPAL-TRANSMISSION-SIG")!))
        }
    }

    // MARK: sending

    @Test func sendPostsEveryDeliveryRepeatsAfterOriginals() async throws {
        let transport = RecordingTransport(status: 200)
        let sim = makeSimulator(transport: transport)
        sim.seedPXP("ORD-1")
        let body =
            #"{"provider":"pxp","target":"http://127.0.0.1:1/webhooks/pxp","merchantTransactionId":"ORD-1","count":5,"duplicate":true}"#
        let r = await sim.respond(SimRequest(method: "POST", path: "/admin/webhooks/send", body: Array(body.utf8)))
        #expect(r.status == 200)
        #expect(r.json?["sent"]?.numberLiteral == "10")
        #expect(r.json?["statuses"]?["200"]?.numberLiteral == "10")
        let sent = transport.sent.withLock { $0 }
        #expect(sent.count == 10)
        #expect(sent.allSatisfy { $0.url == "http://127.0.0.1:1/webhooks/pxp" })
        var seen: Set<String> = []
        for s in sent {
            let id = s.headers.first { $0.0 == "X-Request-Id" }!.1
            if seen.contains(id) { continue }
            seen.insert(id)
        }
        #expect(seen.count == 5)
        // Each repeat comes after its original.
        let ids = sent.map { s in s.headers.first { $0.0 == "X-Request-Id" }!.1 }
        for id in seen {
            let positions = ids.indices.filter { ids[$0] == id }
            #expect(positions.count == 2)
        }
    }

    @Test(arguments: [
        (#"{"provider":"pxp","merchantTransactionId":"ORD-1"}"#, 400),
        (#"{"provider":"pxp","target":"not a url","merchantTransactionId":"ORD-1"}"#, 400),
        (#"{"provider":"stripe","target":"http://x/y"}"#, 400),
        (#"{"provider":"pxp","target":"http://x/y","merchantTransactionId":"NOPE"}"#, 404),
        (#"{"provider":"pxp","target":"http://x/y"}"#, 400),
        (#"{"provider":"pxp","target":"http://x/y","merchantTransactionId":"ORD-1","count":0}"#, 400),
        (#"{"provider":"paypal","target":"http://x/y","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"NOPE"}"#, 404),
        (#"{"provider":"paypal","target":"http://x/y","event_type":"BILLING.SUBSCRIPTION.CREATED","resource_id":"C"}"#, 400),
        (#"{"provider":"paypal","target":"http://x/y"}"#, 400),
        ("not json", 400)
    ])
    func invalidSendRequests(body: String, status: Int) async {
        let transport = RecordingTransport()
        let sim = makeSimulator(transport: transport)
        sim.seedPXP("ORD-1")
        let r = await sim.respond(SimRequest(method: "POST", path: "/admin/webhooks/send", body: Array(body.utf8)))
        #expect(r.status == status, "\(r.bodyText)")
        #expect(transport.sent.withLock { $0.isEmpty })
    }

    @Test func sendIsAsyncOnlyAndPostOnly() async {
        let sim = makeSimulator(transport: RecordingTransport())
        #expect(sim.handle(method: "POST", path: "/admin/webhooks/send").status == 501)
        #expect(await sim.respond(SimRequest(method: "GET", path: "/admin/webhooks/send")).status == 405)
    }
}
