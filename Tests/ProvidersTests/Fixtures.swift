import Crypto
import Foundation
import Testing
@testable import Providers

/// Reads test fixtures from the bundle (copied into Fixtures/; nothing outside the package at run time).
enum Fixture {
    static let root: URL = {
        guard let url = Bundle.module.url(forResource: "Fixtures", withExtension: nil) else {
            fatalError("Fixtures missing from the test bundle")
        }
        return url
    }()

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: root.appendingPathComponent(path)))
    }

    static func string(_ path: String) throws -> String {
        String(decoding: try bytes(path), as: UTF8.self)
    }

    static func json(_ path: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes(path))) as? [String: Any])
    }

    static let paypalVectors = [
        "01-sdk-java-dotnet-sandbox-2015-sale-completed",
        "02-sdk-node-python-sandbox-2015-sale-completed",
        "03-sdk-php-sample-sandbox-2016-sale-completed"
    ]

    /// The DigiCert root + intermediate, from the fixture files (not the embedded constant, which is tested separately).
    static func digicertRoots() throws -> [X509Certificate] {
        try X509Certificate.parsePEMBundle(bytes("paypal/certs/DigiCertHighAssuranceEVRootCA.pem"))
            + X509Certificate.parsePEMBundle(bytes("paypal/certs/DigiCertSHA2ExtendedValidationServerCA.pem"))
    }

    /// DigiCert Global Root G2, as Debian's ca-certificates ships it (`mozilla/DigiCert_Global_Root_G2.crt`).
    static func digicertG2Root() throws -> X509Certificate {
        try X509Certificate.parsePEM(bytes("paypal/certs/DigiCertGlobalRootG2.pem"))
    }
}

/// One recorded PayPal delivery.
struct PayPalVector: Sendable, CustomTestStringConvertible {
    let name: String
    var body: [UInt8]
    var headers: Headers
    var webhookID: String
    let certPEM: [UInt8]
    let certCRLFPEM: [UInt8]
    let transmissionTime: Date

    var testDescription: String { name }

    init(_ name: String) throws {
        self.name = name
        body = try Fixture.bytes("paypal/\(name)/body.bin")
        headers = try WebhookCheck.headers(fromJSON: Fixture.bytes("paypal/\(name)/headers.json"))
        webhookID = try Fixture.string("paypal/\(name)/webhook_id.txt")
        certPEM = try Fixture.bytes("paypal/\(name)/cert.pem")
        certCRLFPEM = try Fixture.bytes("paypal/\(name)/cert.as_served_crlf.pem")
        let time = try #require(headers["paypal-transmission-time"])
        transmissionTime = try #require(ISO8601.parse(time))
    }

    var expected: [String: Any] { get throws { try Fixture.json("paypal/\(name)/expected.json") } }
}

/// A certificate source that counts fetches (and can fail).
final class CountingCertificateSource: CertificateSource, @unchecked Sendable {
    private let lock = NSLock()
    private var _calls: [String] = []
    let pemBytes: [UInt8]?

    init(pem: [UInt8]?) { self.pemBytes = pem }

    var calls: [String] { lock.withLock { _calls } }

    struct Failure: Error, CustomStringConvertible { var description: String { "connection refused" } }

    func pem(for url: String) throws -> [UInt8] {
        lock.withLock { _calls.append(url) }
        guard let pemBytes else { throw Failure() }
        return pemBytes
    }
}
