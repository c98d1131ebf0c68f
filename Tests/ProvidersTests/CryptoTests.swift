import Crypto
import PaysimCore
import Foundation
import Testing
@testable import Providers

@Suite struct HMACTests {
    // RFC 2202 / RFC 4231 test case 2.
    @Test(arguments: [
        (HMACAlgorithm.sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        (.sha256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (
            .sha512,
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        )
    ])
    func rfcVectors(algorithm: HMACAlgorithm, hex: String) {
        let mac = Crypto.HMAC.authenticate(algorithm, key: "Jefe", message: "what do ya want for nothing?")
        #expect(Hex.encode(mac) == hex)
        #expect(mac.count == algorithm.digestLength)
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA256("", "") from any reference implementation.
        #expect(
            Hex.encode(Crypto.HMAC.authenticate(.sha256, key: [], message: []))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test(arguments: [("sha256", HMACAlgorithm.sha256), ("SHA-512", .sha512), ("HmacSHA1", .sha1), ("sha1", .sha1)])
    func configurationNames(text: String, algorithm: HMACAlgorithm) {
        #expect(HMACAlgorithm(configuration: text) == algorithm)
    }

    @Test(arguments: ["md5", "", "sha384", "sha-3"])
    func unknownConfigurationNames(text: String) {
        #expect(HMACAlgorithm(configuration: text) == nil)
    }
}

@Suite struct DigestAndEncodingTests {
    @Test func sha256() {
        #expect(Crypto.SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Crypto.SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test(arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")
    ])
    func base64RFC4648(plain: String, encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    @Test func base64AllBytesRoundTrip() {
        let bytes = (0..<256).map { UInt8($0) } + [0xff, 0xfe]
        #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }

    @Test(arguments: [
        "Zg", "Zg=", "Zm9v\n", " Zm9v", "Zm9v YmFy", "Zm9-", "Zm9_", "Z===", "Zg==Zg==", "=Zg=", "Zh==", "Zm9=", "Zm=v", "****", "Zm9vY"
    ])
    func base64RejectsGarbage(text: String) {
        #expect(Base64.decode(text) == nil)
    }

    @Test func hexRoundTripAndRejections() {
        #expect(Hex.decode("00ffA0") == [0x00, 0xff, 0xa0])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
        #expect(Hex.decode("") == [])
    }

    @Test func constantTimeComparison() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(!constantTimeEquals([], [0]))
        #expect(constantTimeEquals([], []))
    }

    @Test func crc32CheckValue() {
        #expect(CRC32.checksum(Array("test_string".utf8)) == 157_791_623)
        #expect(CRC32.checksum([]) == 0)
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    }
}

@Suite struct X509Tests {
    @Test(arguments: Fixture.paypalVectors)
    func parsesLFAndCRLFIdentically(name: String) throws {
        let lf = try X509Certificate.parsePEM(Fixture.bytes("paypal/\(name)/cert.pem"))
        let crlf = try X509Certificate.parsePEM(Fixture.bytes("paypal/\(name)/cert.as_served_crlf.pem"))
        #expect(lf == crlf)
        #expect(lf.subjectCommonName == "messageverificationcerts.sandbox.paypal.com")
        #expect(lf.issuerCommonNames == ["DigiCert SHA2 Extended Validation Server CA"])
        let expected = try Fixture.json("paypal/\(name)/expected.json")
        let cert = try #require(expected["cert"] as? [String: Any])
        #expect(Crypto.SHA256.hex(lf.der) == cert["sha256_fingerprint"] as? String)
        #expect(lf.notBefore == ISO8601.parse(try #require(cert["not_before"] as? String)))
        #expect(lf.notAfter == ISO8601.parse(try #require(cert["not_after"] as? String)))
        #expect(!lf.isSelfSigned)
    }

    @Test func pemRoundTrip() throws {
        let cert = try X509Certificate.parsePEM(Fixture.bytes("paypal/\(Fixture.paypalVectors[0])/cert.pem"))
        #expect(try X509Certificate.parsePEM(Array(cert.pem.utf8)) == cert)
        #expect(try X509Certificate(der: cert.der) == cert)
    }

    @Test func bundleParsesInOrder() throws {
        let roots = try Fixture.digicertRoots()
        #expect(
            roots.map(\.subjectCommonNames) == [["DigiCert High Assurance EV Root CA"], ["DigiCert SHA2 Extended Validation Server CA"]])
        #expect(roots[0].isSelfSigned)
        #expect(!roots[1].isSelfSigned)
    }

    @Test func bundleGluedByCatWithoutFinalNewlineParses() throws {
        // The DigiCert root file has no final newline: `cat root.pem intermediate.pem` glues END and BEGIN lines.
        let root = try Fixture.bytes("paypal/certs/DigiCertHighAssuranceEVRootCA.pem")
        #expect(root.last != UInt8(ascii: "\n"))
        let glued = root + (try Fixture.bytes("paypal/certs/DigiCertSHA2ExtendedValidationServerCA.pem"))
        #expect(try X509Certificate.parsePEMBundle(glued) == (try Fixture.digicertRoots()))
    }

    @Test func embeddedTrustRootsMatchTheFixturesAndTheRepoFile() throws {
        #expect(PayPalTrustRoots.defaultCertificates == (try Fixture.digicertRoots()) + [try Fixture.digicertG2Root()])
        // certs/paypal-trust-roots.pem at the package root (the PAYPAL_TRUST_ROOTS default file) holds the same bundle.
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let file = try Data(contentsOf: packageRoot.appendingPathComponent("certs/paypal-trust-roots.pem"))
        #expect(try X509Certificate.parsePEMBundle(Array(file)) == PayPalTrustRoots.defaultCertificates)
    }

    /// Both chains PayPal has signed with: the EV root with its SHA2 EV intermediate, and DigiCert
    /// Global Root G2 (PayPal's announced chain from October 2024), each the certificate DigiCert published.
    @Test func defaultTrustRootsHoldBothDigiCertChains() throws {
        let roots = PayPalTrustRoots.defaultCertificates
        #expect(
            roots.map(\.subjectCommonNames) == [
                ["DigiCert High Assurance EV Root CA"],
                ["DigiCert SHA2 Extended Validation Server CA"], ["DigiCert Global Root G2"]
            ])
        #expect(roots.map(\.isSelfSigned) == [true, false, true])
        #expect(
            roots.map { Crypto.SHA256.hex($0.der) } == [
                "7431e5f4c3c1ce4690774f0b61e05440883ba9a01ed00ba6abd7806ed3b118cf",
                "403e062a2653059113285baf80a0d4ae422c848c9f78fad01fc94bc5b87fef1a",
                "cb3ccbb76031e5e0138f8dd39a23f9de47ffc35e43c1144cea27d46a5ab1cb5f"
            ])
        #expect(roots.last?.notAfter == ISO8601.parse("2038-01-15T12:00:00Z"))
    }

    @Test(arguments: [
        "",
        "hello",
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"
    ])
    func rejectsNonCertificates(text: String) {
        #expect(throws: CertificateError.self) { try X509Certificate.parsePEM(Array(text.utf8)) }
    }

    @Test func rejectsDamagedSecondBlock() throws {
        let good = try Fixture.bytes("paypal/certs/DigiCertHighAssuranceEVRootCA.pem")
        let bad = Array("\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)
        #expect(throws: CertificateError.self) { try X509Certificate.parsePEMBundle(good + bad) }
    }

    @Test func rejectsGarbageDER() {
        #expect(throws: CertificateError.self) { try X509Certificate(der: [0x30, 0x03, 0x01, 0x01, 0xff]) }
        #expect(throws: CertificateError.self) { try X509Certificate(der: []) }
    }

    @Test(arguments: Fixture.paypalVectors)
    func chainsAtTransmissionTimeOnly(name: String) throws {
        let vector = try PayPalVector(name)
        let leaf = try X509Certificate.parsePEM(vector.certCRLFPEM)
        let roots = try Fixture.digicertRoots()
        #expect(CertificateChain.verify(leaf: leaf, trustRoots: roots, at: vector.transmissionTime) == .trusted)
        // The leaf expired in 2017.
        let now = CertificateChain.verify(leaf: leaf, trustRoots: roots, at: Date())
        #expect(now == .untrusted(reason: "certificate has expired"))
        // Before it was issued.
        #expect(!CertificateChain.verify(leaf: leaf, trustRoots: roots, at: ISO8601.parse("2014-01-01T00:00:00Z")!).isTrusted)
    }

    @Test func chainNeedsTheIntermediateAndTheRoot() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let leaf = try X509Certificate.parsePEM(vector.certPEM)
        let roots = try Fixture.digicertRoots()
        #expect(!CertificateChain.verify(leaf: leaf, trustRoots: [roots[0]], at: vector.transmissionTime).isTrusted)
        #expect(!CertificateChain.verify(leaf: leaf, trustRoots: [], at: vector.transmissionTime).isTrusted)
        #expect(
            CertificateChain.verify(leaf: leaf, trustRootsPEM: Array(PayPalTrustRoots.defaultPEM.utf8), at: vector.transmissionTime)
                .isTrusted)
        #expect(!CertificateChain.verify(leaf: leaf, trustRootsPEM: Array("junk".utf8), at: vector.transmissionTime).isTrusted)
        // Order in the bundle does not matter.
        #expect(CertificateChain.verify(leaf: leaf, trustRoots: roots.reversed(), at: vector.transmissionTime).isTrusted)
        // A self-signed leaf trusted by nobody.
        #expect(!CertificateChain.verify(leaf: roots[0], trustRoots: [roots[1]], at: vector.transmissionTime).isTrusted)
    }

    @Test func rsaVerifyOfARecordedSignature() throws {
        let vector = try PayPalVector(Fixture.paypalVectors[0])
        let leaf = try X509Certificate.parsePEM(vector.certPEM)
        let signatureText = try #require(vector.headers["PAYPAL-TRANSMISSION-SIG"])
        let signature = try #require(Base64.decode(signatureText))
        let message = try #require(try vector.expected["signed_message"] as? String)
        #expect(leaf.verifyRSASHA256(signature: signature, message: Array(message.utf8)))
        #expect(!leaf.verifyRSASHA256(signature: signature, message: Array((message + "0").utf8)))
        #expect(!leaf.verifyRSASHA256(signature: Array(signature.dropLast()), message: Array(message.utf8)))
        #expect(!leaf.verifyRSASHA256(signature: [], message: Array(message.utf8)))
        // The root's key did not make this signature.
        #expect(!(try Fixture.digicertRoots()[0]).verifyRSASHA256(signature: signature, message: Array(message.utf8)))
    }

    @Test func generatedAuthorityIssuesCertificatesThatChainAndSign() throws {
        let ca = try CertificateAuthority(commonName: "test root")
        let (leaf, key) = try ca.issueLeaf(commonName: "messageverificationcerts.paypal.com")
        #expect(ca.certificate.isSelfSigned)
        #expect(leaf.subjectCommonName == "messageverificationcerts.paypal.com")
        #expect(leaf.issuerCommonNames == ["test root"])
        #expect(CertificateChain.verify(leaf: leaf, trustRoots: [ca.certificate], at: Date()) == .trusted)
        let other = try CertificateAuthority(commonName: "test root")
        #expect(!CertificateChain.verify(leaf: leaf, trustRoots: [other.certificate], at: Date()).isTrusted)
        let signature = try key.signSHA256(Array("hello".utf8))
        #expect(leaf.verifyRSASHA256(signature: signature, message: Array("hello".utf8)))
        #expect(!ca.certificate.verifyRSASHA256(signature: signature, message: Array("hello".utf8)))
    }
}
