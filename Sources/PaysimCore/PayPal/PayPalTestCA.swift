import Crypto
import Foundation
import Providers

/// A throwaway PKI shaped like PayPal's webhook signing chain, built on Providers' `CertificateAuthority`: an
/// RSA-2048 root "paysim Test Root CA", an intermediate "paysim Test Intermediate CA", and a leaf
/// `CN=messageverificationcerts.sandbox.paypal.com` (valid now-1d ... now+365d) whose key signs deliveries
/// (RSA-SHA256 PKCS#1 v1.5).
///
/// `trustBundlePEM` (root + intermediate) is what payrecon's `PAYPAL_TRUST_ROOTS` should hold; `leafPEM` is what
/// the cert URL serves (like PayPal, the leaf alone).
public final class PayPalTestCA: Sendable {
    public let rootPEM: String
    public let intermediatePEM: String
    public let leafPEM: String
    public static let leafCommonName = "messageverificationcerts.sandbox.paypal.com"

    private let leafKey: RSAPrivateKey

    public var trustBundlePEM: String { rootPEM + intermediatePEM }

    public init(now: Date = Date()) throws {
        let dayAgo = now.addingTimeInterval(-86_400)
        let root = try CertificateAuthority(
            commonName: "paysim Test Root CA", notBefore: dayAgo,
            notAfter: now.addingTimeInterval(10 * 365 * 86_400))
        let intermediate = try root.issueIntermediate(
            commonName: "paysim Test Intermediate CA", notBefore: dayAgo,
            notAfter: now.addingTimeInterval(5 * 365 * 86_400), serial: 2)
        let leaf = try intermediate.issueLeaf(
            commonName: Self.leafCommonName, notBefore: dayAgo,
            notAfter: now.addingTimeInterval(365 * 86_400), serial: 3)
        rootPEM = root.certificate.pem
        intermediatePEM = intermediate.certificate.pem
        leafPEM = leaf.certificate.pem
        leafKey = leaf.key
    }

    /// The leaf as PayPal's cert URL serves it: PEM with CRLF line endings.
    public var leafPEMWithCRLF: String { leafPEM.replacingOccurrences(of: "\n", with: "\r\n") }

    /// RSA-SHA256 PKCS#1 v1.5 signature by the leaf key.
    public func sign(_ message: [UInt8]) throws -> [UInt8] { try leafKey.signSHA256(message) }
}
