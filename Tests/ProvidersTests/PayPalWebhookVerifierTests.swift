import Crypto
import PaysimCore
import PayreconTesting
import Foundation
import HTTP
import Synchronization
import Testing
@testable import Providers

@Suite struct PayPalWebhookVerifierTests {
    static let vectorsWithCertForms: [(String, Bool)] = Fixture.paypalVectors.flatMap { [($0, false), ($0, true)] }

    func verifier(
        _ vector: PayPalVector, pem: [UInt8]? = nil, roots: [X509Certificate]? = nil,
        tolerance: TimeInterval = WebhookDefaults.signatureTolerance,
        source: (any CertificateSource)? = nil
    ) throws -> PayPalWebhookVerifier {
        try PayPalWebhookVerifier(
            webhookID: vector.webhookID,
            certificateSource: source ?? FixedCertificateSource(pem: pem ?? vector.certPEM),
            trustRoots: roots ?? (try Fixture.digicertRoots()), tolerance: tolerance)
    }

    @Test(arguments: vectorsWithCertForms)
    func vectorVerifiesAtItsTransmissionTime(name: String, crlf: Bool) throws {
        let vector = try PayPalVector(name)
        let v = try verifier(vector, pem: crlf ? vector.certCRLFPEM : vector.certPEM)
        try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        // Same thing with an explicit clock at the transmission time (tolerance and "valid now" both pass).
        try v.verify(headers: vector.headers, body: vector.body, time: .at(vector.transmissionTime.addingTimeInterval(30)))
    }

    @Test(arguments: Fixture.paypalVectors)
    func crc32AndSignedMessageMatchExpected(name: String) throws {
        let vector = try PayPalVector(name)
        let expected = try vector.expected
        #expect(Int64(CRC32.checksum(vector.body)) == (expected["crc32_decimal"] as? NSNumber)?.int64Value)
        #expect(Crypto.SHA256.hex(vector.body) == expected["body_sha256"] as? String)
        #expect(vector.body.count == (expected["body_length_bytes"] as? NSNumber)?.intValue)
        let message = PayPalWebhookVerifier.signedMessage(
            transmissionID: try #require(vector.headers["paypal-transmission-id"]),
            transmissionTime: try #require(vector.headers["paypal-transmission-time"]),
            webhookID: vector.webhookID, body: vector.body)
        #expect(message == expected["signed_message"] as? String)
        #expect(vector.webhookID == expected["webhook_id"] as? String)
        #expect(vector.headers["Paypal-Cert-Url"] == expected["cert_url"] as? String)
    }

    /// Applies a negative case of expected.json (by name) to a vector.
    static func mutate(_ vector: inout PayPalVector, case name: String) throws {
        switch name {
        case "dotnet_invalid_body":
            let text = String(decoding: vector.body, as: UTF8.self)
            #expect(text.contains("\"WH-2W7266712B616591M-"))
            vector.body = Array(text.replacingOccurrences(of: "\"WH-2W7266712B616591M-", with: "\"XX-XXX266712B616591M-").utf8)
        case "dotnet_invalid_signature":
            let sig = try #require(vector.headers["PAYPAL-TRANSMISSION-SIG"])
            #expect(sig.hasPrefix("vSO"))
            vector.headers.set("PAYPAL-TRANSMISSION-SIG", "XXX" + sig.dropFirst(3))
        case "dotnet_invalid_transmission_id":
            vector.headers.set("PAYPAL-TRANSMISSION-ID", "XXX84410-f8d2-11e4-8bf3-77339302725b")
        case "dotnet_sha1_algo", "python_sha1_algo":
            vector.headers.set("PAYPAL-AUTH-ALGO", "SHA1withRSA")
        case "java_invalid_webhook_id":
            vector.webhookID = "NotToBeFound"
        case "body_plus_byte":
            vector.body.append(UInt8(ascii: " "))
        case "wrong_webhook_id":
            vector.webhookID = "0FV983392A0531201"
        default:
            Issue.record("negative case \(name) has no mutation in this test")
        }
    }

    static let negativeCases: [(String, String)] = Fixture.paypalVectors.flatMap { name -> [(String, String)] in
        let expected = (try? Fixture.json("paypal/\(name)/expected.json")) ?? [:]
        let cases = expected["negative_cases"] as? [[String: Any]] ?? []
        return cases.compactMap { ($0["name"] as? String).map { (name, $0) } }
    }

    /// The transmission id the one-body-per-transmission guard stores is the value the signature covers, byte for byte:
    /// a genuine delivery whose id is padded (libmicrohttpd keeps trailing spaces and tabs) or whose signed headers come
    /// twice is refused. Trimmed for the check and kept raw for the guard, `T`, `T ` and `T\t` were three transmissions
    /// under one signature, each able to carry a body forged to the CRC32 PayPal signed.
    @Test(arguments: [" ", "\t", "  "])
    func aPaddedTransmissionIdIsRefused(pad: String) throws {
        var vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector)
        try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        let id = try #require(vector.headers["PAYPAL-TRANSMISSION-ID"])
        for padded in [id + pad, pad + id] {
            vector.headers.set("PAYPAL-TRANSMISSION-ID", padded)
            let error = #expect(throws: WebhookRejection.self) {
                try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
            }
            #expect(error?.code == .invalidSignature)
            #expect(error?.message.contains("whitespace") == true, "\(error?.message ?? "")")
        }
    }

    @Test(arguments: ["PAYPAL-TRANSMISSION-ID", "PAYPAL-TRANSMISSION-TIME", "PAYPAL-TRANSMISSION-SIG", "PAYPAL-CERT-URL"])
    func aSignedHeaderGivenTwiceIsRefused(name: String) throws {
        var vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector)
        vector.headers.add(name, try #require(vector.headers[name]))
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .invalidSignature)
    }

    @Test func everyVectorHasItsNegativeCases() {
        #expect(Self.negativeCases.count == 8)
    }

    @Test(arguments: negativeCases)
    func negativeCaseFails(vectorName: String, caseName: String) throws {
        var vector = try PayPalVector(vectorName)
        try Self.mutate(&vector, case: caseName)
        let v = try verifier(vector)
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        }
        #expect(error?.code == .invalidSignature)
    }

    @Test(arguments: Fixture.paypalVectors)
    func wallClockIsStale(name: String) throws {
        let vector = try PayPalVector(name)
        let source = CountingCertificateSource(pem: vector.certPEM)
        let v = try verifier(vector, source: source)
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .at(Date())) }
        #expect(error?.code == .staleTimestamp)
        #expect(error?.message.contains("old") == true)
        #expect(source.calls.isEmpty)
    }

    @Test(arguments: Fixture.paypalVectors)
    func wallClockWithHugeToleranceFailsOnTheExpiredLeaf(name: String) throws {
        let vector = try PayPalVector(name)
        let v = try verifier(vector, tolerance: 100 * 365 * 86_400)
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .at(Date())) }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("2017-03-22T12:00:00Z") == true)
    }

    @Test func futureTransmissionTimeIsStale() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector)
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: vector.headers, body: vector.body, time: .at(vector.transmissionTime.addingTimeInterval(-601)))
        }
        #expect(error?.code == .staleTimestamp)
        #expect(error?.message.contains("in the future") == true)
    }

    @Test(arguments: [
        "https://api.paypal.com.evil.example/v1/notifications/certs/CERT-1",
        "http://api.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77",
        "https://evil.example/v1/notifications/certs/CERT-1",
        "https://api.sandbox.paypal.com/v1/notifications/certs/../../../evil",
        "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1?redirect=https://evil.example",
        "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1#x",
        "https://api.sandbox.paypal.com/v1/notifications/certs/",
        "https://api.sandbox.paypal.com/v1/notifications/certs/CERT 1",
        "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1\\@evil.example",
        "https://api-m.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"
    ])
    func certURLOutsideThePrefixesIsNeverFetched(url: String) throws {
        var vector = try PayPalVector(Fixture.paypalVectors[0])
        vector.headers.set("PAYPAL-CERT-URL", url)
        let source = CountingCertificateSource(pem: vector.certPEM)
        let v = try verifier(vector, source: source)
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .untrustedCertificate)
        #expect(source.calls.isEmpty)
    }

    @Test func certURLUnderThePrefixIsFetchedOnce() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let source = CountingCertificateSource(pem: vector.certCRLFPEM)
        let v = try verifier(vector, source: CachingCertificateSource(upstream: source))
        try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        #expect(source.calls == [try #require(vector.headers["paypal-cert-url"])])
    }

    @Test func failedFetchIsUntrusted() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector, source: CountingCertificateSource(pem: nil))
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("connection refused") == true)
    }

    @Test func unreadableCertificateIsUntrusted() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector, pem: Array("<html>not found</html>".utf8))
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .untrustedCertificate)
    }

    @Test func rootsWithoutTheIntermediateAreUntrusted() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let v = try verifier(vector, roots: [try Fixture.digicertRoots()[0]])
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .untrustedCertificate)
    }

    @Test(arguments: ["PAYPAL-TRANSMISSION-ID", "PAYPAL-TRANSMISSION-TIME", "PAYPAL-TRANSMISSION-SIG", "PAYPAL-CERT-URL"])
    func missingHeader(name: String) throws {
        var vector = try PayPalVector(Fixture.paypalVectors[2])
        vector.headers.set(name, nil)
        let v = try verifier(vector)
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: vector.headers, body: vector.body, time: .signedTime) }
        #expect(error?.code == .missingSignature)
        #expect(error?.message.contains(name) == true)
        vector.headers.set(name, "  ")
        #expect(throws: WebhookRejection(.missingSignature, "header \(name) is missing or empty")) {
            try v.verify(headers: vector.headers, body: vector.body, time: .signedTime)
        }
    }

    @Test func headerNamesAreCaseInsensitiveAndAuthAlgoIsOptional() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let lower = Headers(
            vector.headers.pairs.filter { $0.name.lowercased() != "paypal-auth-algo" }
                .map { ($0.name.lowercased(), $0.value) })
        try verifier(vector).verify(headers: lower, body: vector.body, time: .signedTime)
    }

    @Test(arguments: ["not a time", "2015-05-12 18:14:14", "1431454454", "2015-13-12T18:14:14Z"])
    func unreadableTransmissionTimeIsStale(value: String) throws {
        var vector = try PayPalVector(Fixture.paypalVectors[0])
        vector.headers.set("PAYPAL-TRANSMISSION-TIME", value)
        let error = #expect(throws: WebhookRejection.self) {
            try verifier(vector).verify(headers: vector.headers, body: vector.body, time: .signedTime)
        }
        #expect(error?.code == .staleTimestamp)
    }

    @Test func nonBase64SignatureIsInvalid() throws {
        var vector = try PayPalVector(Fixture.paypalVectors[0])
        vector.headers.set("PAYPAL-TRANSMISSION-SIG", "!!!")
        let error = #expect(throws: WebhookRejection.self) {
            try verifier(vector).verify(headers: vector.headers, body: vector.body, time: .signedTime)
        }
        #expect(error?.code == .invalidSignature)
    }

    @Test func configurationErrors() throws {
        #expect(throws: WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_WEBHOOK_ID")) {
            try PayPalWebhookVerifier(webhookID: "", certificateSource: UnavailableCertificateSource())
        }
        #expect(throws: WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_TRUST_ROOTS")) {
            try PayPalWebhookVerifier(webhookID: "X", certificateSource: UnavailableCertificateSource(), trustRoots: [])
        }
        #expect(throws: WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_CERT_URL_PREFIXES")) {
            try PayPalWebhookVerifier(webhookID: "X", certificateSource: UnavailableCertificateSource(), certURLPrefixes: [" "])
        }
        #expect(PayPalTrustRoots.defaultCertificates.count == 3)
    }
}

/// End to end with a certificate authority generated here: the checks the recorded vectors cannot reach
/// (a wrong CN on a chaining certificate, a currently valid certificate, expiry between signing and now).
@Suite struct PayPalGeneratedCertificateTests {
    static let body = Array(
        #"{"id":"WH-TEST-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"CAP1"}}"#.utf8)
    static let url = "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-test"
    static let liveURL = "https://api.paypal.com/v1/notifications/certs/CERT-test"
    static let liveCN = "messageverificationcerts.paypal.com"
    static let sandboxCN = "messageverificationcerts.sandbox.paypal.com"

    static func delivery(key: RSAPrivateKey, time: Date, webhookID: String = "WH-ID", certURL: String = url) throws -> Headers {
        let transmissionTime = ISO8601.format(time)
        let message = PayPalWebhookVerifier.signedMessage(
            transmissionID: "tx-1", transmissionTime: transmissionTime,
            webhookID: webhookID, body: body)
        let signature = try key.signSHA256(Array(message.utf8))
        return [
            "PAYPAL-TRANSMISSION-ID": "tx-1", "PAYPAL-TRANSMISSION-TIME": transmissionTime,
            "PAYPAL-TRANSMISSION-SIG": Base64.encode(signature), "PAYPAL-CERT-URL": certURL, "PAYPAL-AUTH-ALGO": "SHA256withRSA"
        ]
    }

    /// Verifies now a delivery signed by `key` whose cert URL serves `served` (PEM), against `roots`.
    static func verifyNow(
        served: String, key: RSAPrivateKey, roots: [X509Certificate], certURL: String = url,
        prefixes: [String] = PayPalWebhookVerifier.defaultCertURLPrefixes
    ) throws {
        let now = Date()
        let v = try PayPalWebhookVerifier(
            webhookID: "WH-ID", certificateSource: FixedCertificateSource(pem: Array(served.utf8)),
            trustRoots: roots, certURLPrefixes: prefixes)
        try v.verify(headers: try delivery(key: key, time: now, certURL: certURL), body: body, time: .at(now))
    }

    @Test(arguments: [(liveCN, liveURL), (sandboxCN, url)])
    func acceptedCommonNamesVerifyNow(cn: String, certURL: String) throws {
        let ca = try CertificateAuthority()
        let (leaf, key) = try ca.issueLeaf(commonName: cn)
        try Self.verifyNow(served: leaf.pem, key: key, roots: [ca.certificate], certURL: certURL)
    }

    /// PayPal serves its live certificate from the live host only and its sandbox certificate from the sandbox host
    /// only: a sandbox certificate (whose key a sandbox account's tooling may expose more widely) never signs a
    /// delivery that names a live cert URL, nor the reverse.
    @Test(arguments: [(sandboxCN, liveURL, "api.paypal.com"), (liveCN, url, "api.sandbox.paypal.com")])
    func eachNameIsAcceptedOnlyFromItsOwnHost(cn: String, certURL: String, host: String) throws {
        let ca = try CertificateAuthority()
        let (leaf, key) = try ca.issueLeaf(commonName: cn)
        let error = #expect(throws: WebhookRejection.self) {
            try Self.verifyNow(served: leaf.pem, key: key, roots: [ca.certificate], certURL: certURL)
        }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("issued to '\(cn)'") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("served from \(host) carry") == true, "\(error?.message ?? "")")
    }

    /// The cache's validation binds the name to the URL's host too, so a certificate from the wrong host is never
    /// cached.
    @Test func theCachesValidationBindsTheNameToTheHost() throws {
        let ca = try CertificateAuthority()
        let (leaf, _) = try ca.issueLeaf(commonName: Self.sandboxCN)
        let pem = Array(leaf.pem.utf8)
        try PayPalWebhookVerifier.validateSigningCertificate(pem, certURL: Self.url, trustRoots: [ca.certificate])
        #expect(throws: PayPalWebhookVerifier.UntrustedCertificate.self) {
            try PayPalWebhookVerifier.validateSigningCertificate(pem, certURL: Self.liveURL, trustRoots: [ca.certificate])
        }
    }

    @Test(arguments: [
        ("https://api.paypal.com/v1/notifications/certs/CERT-1", "api.paypal.com"),
        ("https://API.Sandbox.PayPal.com./v1/notifications/certs/", "api.sandbox.paypal.com"),
        ("https://user@api.paypal.com:443/v1/", "api.paypal.com"),
        ("http://[::1]:8081/v1/notifications/certs/", "[::1]"),
        ("http://127.0.0.1:8081/v1/notifications/certs/", "127.0.0.1")
    ])
    func hostOfACertURL(url: String, host: String) {
        #expect(PayPalWebhookVerifier.host(of: url) == host)
    }

    @Test func payPalsOwnPrefixesArePayPalHosts() {
        #expect(PayPalWebhookVerifier.defaultCertURLPrefixes.allSatisfy(PayPalWebhookVerifier.isPayPalPrefix))
        #expect(PayPalWebhookVerifier.isPayPalPrefix("https://api-m.paypal.com/v1/notifications/certs/"))
        for other in [
            "http://127.0.0.1:8081/v1/notifications/certs/", "https://paypal.com.evil.example/certs/",
            "https://notpaypal.com/certs/", "not a url"
        ] {
            #expect(!PayPalWebhookVerifier.isPayPalPrefix(other), "\(other)")
        }
    }

    /// A prefix that is neither of PayPal's hosts (paysim on loopback, which issues the sandbox name) keeps
    /// accepting either name.
    @Test(arguments: [liveCN, sandboxCN])
    func otherHostsAcceptEitherName(cn: String) throws {
        let ca = try CertificateAuthority()
        let (leaf, key) = try ca.issueLeaf(commonName: cn)
        let prefix = "http://127.0.0.1:8081/v1/notifications/certs/"
        try Self.verifyNow(
            served: leaf.pem, key: key, roots: [ca.certificate], certURL: prefix + "CERT-sim",
            prefixes: [prefix])
    }

    /// The PEM at the cert URL may carry the leaf's intermediate after it: root (in PAYPAL_TRUST_ROOTS)
    /// → intermediate (only in the served PEM) → leaf verifies, with CRLF line endings too; the leaf alone does not.
    @Test func anIntermediateServedAfterTheLeafCompletesTheChain() throws {
        let root = try CertificateAuthority(commonName: "test root")
        let intermediate = try root.issueIntermediate(commonName: "test intermediate")
        let (leaf, key) = try intermediate.issueLeaf(commonName: Self.sandboxCN, serial: 3)
        let served = leaf.pem + intermediate.certificate.pem
        try Self.verifyNow(served: served, key: key, roots: [root.certificate])
        try Self.verifyNow(served: served.replacingOccurrences(of: "\n", with: "\r\n"), key: key, roots: [root.certificate])
        let alone = #expect(throws: WebhookRejection.self) { try Self.verifyNow(served: leaf.pem, key: key, roots: [root.certificate]) }
        #expect(alone?.code == .untrustedCertificate)
    }

    /// Only the anchors of PAYPAL_TRUST_ROOTS are trusted: a served intermediate of another root is refused, even
    /// with that root served beside it, and so is a served intermediate that has expired.
    @Test func aServedIntermediateThatDoesNotChainToAnAnchorIsUntrusted() throws {
        let anchor = try CertificateAuthority(commonName: "test root")
        let stranger = try CertificateAuthority(commonName: "test root")  // the same name, another key
        let intermediate = try stranger.issueIntermediate(commonName: "test intermediate")
        let (leaf, key) = try intermediate.issueLeaf(commonName: Self.sandboxCN, serial: 3)
        for served in [leaf.pem + intermediate.certificate.pem, leaf.pem + intermediate.certificate.pem + stranger.certificate.pem] {
            let error = #expect(throws: WebhookRejection.self) { try Self.verifyNow(served: served, key: key, roots: [anchor.certificate]) }
            #expect(error?.code == .untrustedCertificate)
            #expect(error?.message.contains("does not chain to PAYPAL_TRUST_ROOTS") == true, "\(error?.message ?? "")")
        }
        let now = Date()
        let expired = try anchor.issueIntermediate(
            commonName: "test intermediate", notBefore: now.addingTimeInterval(-7200),
            notAfter: now.addingTimeInterval(-3600))
        let (late, lateKey) = try expired.issueLeaf(commonName: Self.sandboxCN, serial: 3)
        let error = #expect(throws: WebhookRejection.self) {
            try Self.verifyNow(served: late.pem + expired.certificate.pem, key: lateKey, roots: [anchor.certificate])
        }
        #expect(error?.code == .untrustedCertificate)
    }

    /// As `payrecon serve` configures it (environment → cache → HTTP fetch → validation → verification): a served
    /// intermediate is accepted by the cache's validation too, so the certificate is cached and the delivery accepted.
    @Test func servedIntermediateThroughTheConfiguredWebhook() async throws {
        let root = try CertificateAuthority(commonName: "test root")
        let intermediate = try root.issueIntermediate(commonName: "test intermediate")
        let (leaf, key) = try intermediate.issueLeaf(commonName: Self.sandboxCN, serial: 3)
        let served = Array((leaf.pem + intermediate.certificate.pem).replacingOccurrences(of: "\n", with: "\r\n").utf8)
        let server = HTTPServer(configuration: HTTPServer.Configuration(port: 0, threads: 1, connectionTimeoutSeconds: 5)) {
            request, responder in
            responder.respond(
                request.path.hasPrefix("/v1/notifications/certs/")
                    ? HTTPResponse(status: 200, headers: [("Content-Type", "application/x-pem-file")], body: served)
                    : HTTPResponse(status: 404))
        }
        try server.start()
        defer { server.shutdown(drainTimeout: 1) }
        let roots = FileManager.default.temporaryDirectory.appendingPathComponent("paypal-roots-\(UUID().uuidString).pem")
        try root.certificate.pem.write(to: roots, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: roots) }
        let prefix = "http://127.0.0.1:\(server.port)/v1/notifications/certs/"
        let hooks = try ConfiguredProviders.webhooks(
            environment: Environment([
                "PAYPAL_WEBHOOK_ID": "WH-ID", "PAYPAL_TRUST_ROOTS": roots.path, "PAYPAL_CERT_URL_PREFIXES": prefix
            ]))
        let hook = try #require(hooks[.paypal])
        let now = Date()
        let headers = try Self.delivery(key: key, time: now, certURL: prefix + "CERT-chain")
        let accepted = try await offload { try hook.accept(headers: headers, body: Self.body, now: now) }
        #expect(accepted.dedupeKey == "WH-TEST-1")
    }

    @Test(arguments: [
        "evil.example.com", "messageverificationcerts.paypal.com.evil.example", "messageverificationcerts.paypal.co",
        "MESSAGEVERIFICATIONCERTS.PAYPAL.COM.", "www.paypal.com"
    ])
    func otherCommonNamesAreUntrusted(cn: String) throws {
        let ca = try CertificateAuthority()
        let (leaf, key) = try ca.issueLeaf(commonName: cn)
        let now = Date()
        let v = try PayPalWebhookVerifier(
            webhookID: "WH-ID", certificateSource: FixedCertificateSource(pem: Array(leaf.pem.utf8)),
            trustRoots: [ca.certificate])
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: try Self.delivery(key: key, time: now), body: Self.body, time: .at(now))
        }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("issued to") == true)
    }

    @Test func rightNameButUntrustedIssuer() throws {
        let ca = try CertificateAuthority()
        let (leaf, key) = try ca.issueLeaf(commonName: Self.sandboxCN)
        let now = Date()
        // The default roots (DigiCert) did not issue it.
        let v = try PayPalWebhookVerifier(webhookID: "WH-ID", certificateSource: FixedCertificateSource(pem: Array(leaf.pem.utf8)))
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: try Self.delivery(key: key, time: now), body: Self.body, time: .at(now))
        }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("does not chain") == true)
    }

    @Test func signedByAnotherKeyIsInvalid() throws {
        let ca = try CertificateAuthority()
        let (leaf, _) = try ca.issueLeaf(commonName: Self.sandboxCN)
        let now = Date()
        let v = try PayPalWebhookVerifier(
            webhookID: "WH-ID", certificateSource: FixedCertificateSource(pem: Array(leaf.pem.utf8)),
            trustRoots: [ca.certificate])
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: try Self.delivery(key: ca.key, time: now), body: Self.body, time: .at(now))
        }
        #expect(error?.code == .invalidSignature)
    }

    @Test func leafThatExpiredAfterSigningPassesOnlyAtTransmissionTime() throws {
        let ca = try CertificateAuthority()
        let now = Date()
        let signedAt = now.addingTimeInterval(-120)
        let (leaf, key) = try ca.issueLeaf(
            commonName: Self.sandboxCN,
            notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(-60))
        let v = try PayPalWebhookVerifier(
            webhookID: "WH-ID", certificateSource: FixedCertificateSource(pem: Array(leaf.pem.utf8)),
            trustRoots: [ca.certificate])
        let headers = try Self.delivery(key: key, time: signedAt)
        try v.verify(headers: headers, body: Self.body, time: .signedTime)
        let error = #expect(throws: WebhookRejection.self) { try v.verify(headers: headers, body: Self.body, time: .at(now)) }
        #expect(error?.code == .untrustedCertificate)
        #expect(error?.message.contains("not now") == true)
    }
}

@Suite struct CachingCertificateSourceTests {
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var value = Date(timeIntervalSince1970: 1_700_000_000)
        var now: Date { lock.withLock { value } }
        func advance(_ seconds: TimeInterval) { lock.withLock { value += seconds } }
    }

    @Test func cachesByURLUntilTheTTL() throws {
        let clock = Clock()
        let upstream = CountingCertificateSource(pem: [1, 2, 3])
        let cache = CachingCertificateSource(upstream: upstream, maxEntries: 4, ttl: 100, clock: { clock.now })
        #expect(try cache.pem(for: "a") == [1, 2, 3])
        #expect(try cache.pem(for: "a") == [1, 2, 3])
        #expect(try cache.pem(for: "b") == [1, 2, 3])
        #expect(upstream.calls == ["a", "b"])
        clock.advance(101)
        _ = try cache.pem(for: "a")
        #expect(upstream.calls == ["a", "b", "a"])
        #expect(cache.statistics.hits == 1 && cache.statistics.misses == 3)
    }

    @Test func boundedByMaxEntriesEvictingTheOldest() throws {
        let upstream = CountingCertificateSource(pem: [9])
        let cache = CachingCertificateSource(upstream: upstream, maxEntries: 2)
        for url in ["a", "b", "c"] { _ = try cache.pem(for: url) }
        #expect(cache.count == 2)
        _ = try cache.pem(for: "c")
        _ = try cache.pem(for: "b")
        _ = try cache.pem(for: "a")
        #expect(upstream.calls == ["a", "b", "c", "a"])
        #expect(cache.count == 2)
    }

    /// A URL that failed is not fetched again for 5 minutes (an unsigned sender could otherwise make every request
    /// a fetch); then it may be tried again.
    @Test func failuresAreRememberedForFiveMinutes() throws {
        let clock = Clock()
        let upstream = CountingCertificateSource(pem: nil)
        let cache = CachingCertificateSource(upstream: upstream, clock: { clock.now })
        #expect(throws: CountingCertificateSource.Failure.self) { try cache.pem(for: "a") }
        let again = #expect(throws: CachingCertificateSource.Refused.self) { try cache.pem(for: "a") }
        #expect(again?.reason.contains("failed less than 5 minutes ago") == true)
        #expect(upstream.calls.count == 1)
        clock.advance(301)
        #expect(throws: CountingCertificateSource.Failure.self) { try cache.pem(for: "a") }
        #expect(upstream.calls.count == 2)
        #expect(cache.count == 0)
    }

    /// Only a certificate the validator accepts is cached: a 200 answer that is not PayPal's certificate is a
    /// failure (remembered), never served from the cache for a day.
    @Test func onlyValidatedCertificatesAreCached() throws {
        struct NotACertificate: Error {}
        let upstream = CountingCertificateSource(pem: Array("<html>not a certificate</html>".utf8))
        let cache = CachingCertificateSource(
            upstream: upstream,
            validate: { _, pem, now in
                guard pem.starts(with: Array("-----BEGIN".utf8)) else { throw NotACertificate() }
                return ValidatedCertificate(keepUntil: now.addingTimeInterval(60))
            })
        #expect(throws: NotACertificate.self) { try cache.pem(for: "a") }
        #expect(cache.count == 0)
        #expect(throws: CachingCertificateSource.Refused.self) { try cache.pem(for: "a") }
        #expect(upstream.calls == ["a"])
    }

    /// At most 10 distinct uncached URLs are fetched a minute; the eleventh is refused without a fetch, and a
    /// cached one is still served.
    @Test func newURLsAreRateLimited() throws {
        let clock = Clock()
        let upstream = CountingCertificateSource(pem: [1])
        let cache = CachingCertificateSource(upstream: upstream, clock: { clock.now })
        for i in 0..<10 { _ = try cache.pem(for: "u\(i)") }
        let refused = #expect(throws: CachingCertificateSource.Refused.self) { try cache.pem(for: "u10") }
        #expect(refused?.reason.contains("10 uncached certificate URLs were fetched in the last minute") == true)
        #expect(try cache.pem(for: "u3") == [1])
        #expect(upstream.calls.count == 10)
        clock.advance(61)
        #expect(try cache.pem(for: "u10") == [1])
        #expect(upstream.calls.count == 11)
    }

    /// Many callers missing one URL at once make one fetch and all get its answer.
    @Test func oneFetchAtATimePerURL() async throws {
        let upstream = SlowCertificateSource()
        let cache = CachingCertificateSource(upstream: upstream)
        let results = await withTaskGroup(of: [UInt8]?.self) { group in
            for _ in 0..<8 { group.addTask { await offloadPEM { try? cache.pem(for: "same") } } }
            var all: [[UInt8]?] = []
            for await r in group { all.append(r) }
            return all
        }
        #expect(results.count == 8 && results.allSatisfy { $0 == [5] })
        #expect(upstream.lock.withLock { upstream.calls } == 1)
        #expect(cache.fetches == 1)
    }

    /// Without waiting: a cached PEM at once, a known-bad URL refused at once, and nil (fetch first) otherwise — even
    /// with the budget spent, since `prefetch` decides with the sender and remembers the ask for its turn (refused
    /// here, the ask was never made: a budget a flood keeps spent starved the genuine URL). Asking never fetches,
    /// never spends the budget.
    @Test func withoutWaitingAnswersFromWhatIsKnown() throws {
        let upstream = CountingCertificateSource(pem: [1])
        let cache = CachingCertificateSource(upstream: upstream, maxNewURLsPerMinute: 2)
        #expect(try cache.pemWithoutWaiting(for: "a") == nil)
        #expect(try cache.pemWithoutWaiting(for: "a") == nil)
        #expect(upstream.calls.isEmpty && cache.fetches == 0)
        _ = try cache.pem(for: "a")
        #expect(try cache.pemWithoutWaiting(for: "a") == [1])
        _ = try cache.pem(for: "b")  // the budget of 2 is spent
        #expect(try cache.pemWithoutWaiting(for: "c") == nil)
        #expect(throws: CachingCertificateSource.Refused.self) { try cache.pem(for: "c") }
        #expect(upstream.calls == ["a", "b"])
        let failing = CachingCertificateSource(upstream: CountingCertificateSource(pem: nil))
        _ = try? failing.pem(for: "x")
        #expect(throws: CachingCertificateSource.Refused.self) { try failing.pemWithoutWaiting(for: "x") }
    }

    /// prefetch never blocks its caller: many deliveries missing one URL share one fetch on a thread of the cache's
    /// own, and each continuation runs once it ended — after which the answer is known without waiting.
    @Test func prefetchSharesOneFetchAndBlocksNoCaller() async throws {
        let upstream = SlowCertificateSource()
        let cache = CachingCertificateSource(upstream: upstream)
        let done = Mutex(0)
        let started = Date()
        for _ in 0..<20 { cache.prefetch("same") { done.withLock { $0 += 1 } } }
        #expect(Date().timeIntervalSince(started) < 0.2, "prefetch waited for the fetch")
        #expect(await eventually(5) { done.withLock { $0 } == 20 })
        #expect(upstream.lock.withLock { upstream.calls } == 1)
        #expect(try cache.pemWithoutWaiting(for: "same") == [5])
    }

    /// The continuations kept waiting are bounded (each holds a delivery); beyond the bound they run at once and the
    /// answer is still "fetch first", which the receiver refuses.
    @Test func prefetchKeepsAtMostMaxWaiters() async throws {
        final class Gate: CertificateSource, @unchecked Sendable {
            let open = DispatchSemaphore(value: 0)
            func pem(for url: String) throws -> [UInt8] { open.wait(); return [6] }
        }
        let upstream = Gate()
        let cache = CachingCertificateSource(upstream: upstream, maxWaiters: 3)
        let ran = Mutex(0)
        cache.prefetch("u") { ran.withLock { $0 += 1 } }  // starts the fetch: 1 kept
        for _ in 0..<2 { cache.prefetch("u") { ran.withLock { $0 += 1 } } }  // 3 kept
        for _ in 0..<5 { cache.prefetch("u") { ran.withLock { $0 += 1 } } }  // over the bound: run now
        #expect(ran.withLock { $0 } == 5)
        #expect(try cache.pemWithoutWaiting(for: "u") == nil)
        upstream.open.signal()
        #expect(await eventually(5) { ran.withLock { $0 } == 8 })
    }

    /// A prefetch the rules forbid (budget spent, URL failed) fetches nothing and runs its continuation at once.
    @Test func prefetchThatMayNotFetchRunsAtOnce() throws {
        let upstream = CountingCertificateSource(pem: [1])
        let cache = CachingCertificateSource(upstream: upstream, maxNewURLsPerMinute: 1)
        _ = try cache.pem(for: "a")
        let ran = Mutex(false)
        cache.prefetch("b") { ran.withLock { $0 = true } }
        #expect(ran.withLock { $0 })
        #expect(upstream.calls == ["a"])
    }

    @Test func safeUnderConcurrentUse() async throws {
        let upstream = CountingCertificateSource(pem: [7])
        let cache = CachingCertificateSource(upstream: upstream, maxEntries: 8, maxNewURLsPerMinute: 1000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<200 {
                group.addTask {
                    let pem = try cache.pem(for: "u\(i % 16)")
                    #expect(pem == [7])
                }
            }
            try await group.waitForAll()
        }
        #expect(cache.count <= 8)
        #expect(cache.statistics.hits + cache.statistics.misses == 200)
    }
}

/// Answers [5] after 0.3 s, counting its calls.
final class SlowCertificateSource: CertificateSource, @unchecked Sendable {
    let lock = NSLock(); var calls = 0
    func pem(for url: String) throws -> [UInt8] {
        lock.withLock { calls += 1 }
        Thread.sleep(forTimeInterval: 0.3)
        return [5]
    }
}

/// Runs a blocking call on a thread of its own (the cache blocks its waiters).
func offloadPEM<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { c in Thread { c.resume(returning: body()) }.start() }
}

/// PAYPAL_CERT_URL_PREFIXES are checked at start: a prefix that could be continued into another host or
/// path is a fatal configuration error, not a hole.
@Suite struct CertURLPrefixTests {
    @Test(arguments: [
        ("https://api.paypal.com", "has no path after the host"),
        ("https://api.paypal.com/v1/notifications/certs", "must end in /"),
        ("api.paypal.com/v1/certs/", "is not scheme://host/path/"),
        ("https://user@api.paypal.com/certs/", "has userinfo"),
        ("https://api.paypal.com/../certs/", "contains '..'")
    ])
    func aBadPrefixIsRefusedAtStart(prefix: String, problem: String) {
        let error = #expect(throws: WebhookConfigurationError.self) {
            try PayPalWebhookVerifier(webhookID: "WH", certificateSource: UnavailableCertificateSource(), certURLPrefixes: [prefix])
        }
        #expect(error?.description.contains("PAYPAL_CERT_URL_PREFIXES") == true)
        #expect(error?.description.contains(problem) == true, "\(String(describing: error))")
    }

    @Test func theDefaultsAndAPaysimPrefixAreFine() throws {
        for prefix in PayPalWebhookVerifier.defaultCertURLPrefixes + ["http://127.0.0.1:8080/v1/notifications/certs/"] {
            #expect(PayPalWebhookVerifier.prefixProblem(prefix) == nil, "\(prefix)")
        }
        // And the hole the check closes: without a path, another host would match the prefix.
        #expect("https://api.paypal.com.evil.com/x".hasPrefix("https://api.paypal.com"))
    }
}
