import COpenSSL
import Foundation

public struct PayPalTestCAError: Error, CustomStringConvertible, Sendable {
    public let step: String
    public let detail: String
    public var description: String { "test CA: \(step) failed: \(detail)" }
}

/// A throwaway PKI shaped like PayPal's webhook signing chain: an RSA-2048 root "paysim Test Root CA", an
/// intermediate "paysim Test Intermediate CA", and a leaf `CN=messageverificationcerts.sandbox.paypal.com`
/// (valid now-1d ... now+365d) whose key signs deliveries (RSA-SHA256 PKCS#1 v1.5).
///
/// `trustBundlePEM` (root + intermediate) is what payrecon's `PAYPAL_TRUST_ROOTS` should hold; `leafPEM` is what
/// the cert URL serves (like PayPal, the leaf alone).
public final class PayPalTestCA: @unchecked Sendable {
    public let rootPEM: String
    public let intermediatePEM: String
    public let leafPEM: String
    public static let leafCommonName = "messageverificationcerts.sandbox.paypal.com"

    /// Owned EVP_PKEY*; read-only after init (libcrypto allows concurrent signing with one key).
    private let leafKey: OpaquePointer

    public var trustBundlePEM: String { rootPEM + intermediatePEM }

    public init(now: Date = Date()) throws {
        let rootKey = try Self.generateRSAKey()
        defer { EVP_PKEY_free(rootKey) }
        let intermediateKey = try Self.generateRSAKey()
        defer { EVP_PKEY_free(intermediateKey) }
        let leafKey = try Self.generateRSAKey()

        let nowSeconds = Int64(now.timeIntervalSince1970)
        do {
            let root = try Self.makeCertificate(
                subject: [("O", "paysim"), ("CN", "paysim Test Root CA")], issuer: nil, serial: 1,
                key: rootKey, signer: rootKey, notBefore: nowSeconds - 86400, notAfter: nowSeconds + 10 * 365 * 86400,
                extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                             (NID_subject_key_identifier, "hash")])
            defer { X509_free(root) }
            let intermediate = try Self.makeCertificate(
                subject: [("O", "paysim"), ("CN", "paysim Test Intermediate CA")], issuer: root, serial: 2,
                key: intermediateKey, signer: rootKey, notBefore: nowSeconds - 86400,
                notAfter: nowSeconds + 5 * 365 * 86400,
                extensions: [(NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                             (NID_key_usage, "critical,keyCertSign,cRLSign"),
                             (NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always")])
            defer { X509_free(intermediate) }
            let leaf = try Self.makeCertificate(
                subject: [("C", "US"), ("ST", "California"), ("L", "San Jose"), ("O", "PayPal, Inc."),
                          ("CN", Self.leafCommonName)],
                issuer: intermediate, serial: 3, key: leafKey, signer: intermediateKey,
                notBefore: nowSeconds - 86400, notAfter: nowSeconds + 365 * 86400,
                extensions: [(NID_basic_constraints, "critical,CA:FALSE"),
                             (NID_key_usage, "critical,digitalSignature,keyEncipherment"),
                             (NID_ext_key_usage, "serverAuth,clientAuth"),
                             (NID_subject_alt_name, "DNS:\(Self.leafCommonName)"),
                             (NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always")])
            defer { X509_free(leaf) }
            rootPEM = try Self.pem(root)
            intermediatePEM = try Self.pem(intermediate)
            leafPEM = try Self.pem(leaf)
        } catch {
            EVP_PKEY_free(leafKey)
            throw error
        }
        self.leafKey = leafKey
    }

    deinit { EVP_PKEY_free(leafKey) }

    /// The leaf as PayPal's cert URL serves it: PEM with CRLF line endings.
    public var leafPEMWithCRLF: String { leafPEM.replacingOccurrences(of: "\n", with: "\r\n") }

    /// RSA-SHA256 PKCS#1 v1.5 signature by the leaf key.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw PayPalTestCAError(step: "EVP_MD_CTX_new", detail: SimCrypto.lastError()) }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, leafKey) == 1 else {
            throw PayPalTestCAError(step: "EVP_DigestSignInit", detail: SimCrypto.lastError())
        }
        var length = 0
        let ok1 = message.withUnsafeBufferPointer { EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }
        guard ok1 == 1 else { throw PayPalTestCAError(step: "EVP_DigestSign", detail: SimCrypto.lastError()) }
        var signature = [UInt8](repeating: 0, count: length)
        let ok2 = message.withUnsafeBufferPointer { EVP_DigestSign(ctx, &signature, &length, $0.baseAddress, $0.count) }
        guard ok2 == 1 else { throw PayPalTestCAError(step: "EVP_DigestSign", detail: SimCrypto.lastError()) }
        return Array(signature.prefix(length))
    }

    // MARK: - libcrypto plumbing

    private static func generateRSAKey() throws -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nil) else {
            throw PayPalTestCAError(step: "EVP_PKEY_CTX_new_id", detail: SimCrypto.lastError())
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1 else {
            throw PayPalTestCAError(step: "RSA keygen init", detail: SimCrypto.lastError())
        }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(ctx, &key) == 1, let key else {
            throw PayPalTestCAError(step: "EVP_PKEY_keygen", detail: SimCrypto.lastError())
        }
        return key
    }

    private static func makeCertificate(
        subject: [(String, String)], issuer: OpaquePointer?, serial: Int, key: OpaquePointer, signer: OpaquePointer,
        notBefore: Int64, notAfter: Int64, extensions: [(Int32, String)]
    ) throws -> OpaquePointer {
        guard let cert = X509_new() else { throw PayPalTestCAError(step: "X509_new", detail: SimCrypto.lastError()) }
        var ok = true
        ok = ok && X509_set_version(cert, 2) == 1
        ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(cert), serial) == 1
        var before = time_t(notBefore), after = time_t(notAfter)
        ok = ok && X509_time_adj_ex(X509_getm_notBefore(cert), 0, 0, &before) != nil
        ok = ok && X509_time_adj_ex(X509_getm_notAfter(cert), 0, 0, &after) != nil
        ok = ok && X509_set_pubkey(cert, key) == 1
        let name = X509_get_subject_name(cert)
        for (field, value) in subject {
            ok = ok && X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1
        }
        ok = ok && X509_set_issuer_name(cert, issuer.map { X509_get_subject_name($0) } ?? name) == 1
        guard ok else {
            X509_free(cert)
            throw PayPalTestCAError(step: "certificate fields", detail: SimCrypto.lastError())
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? cert, cert, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                X509_free(cert)
                throw PayPalTestCAError(step: "extension \(nid)", detail: SimCrypto.lastError())
            }
            let added = X509_add_ext(cert, ext, -1)
            X509_EXTENSION_free(ext)
            guard added == 1 else {
                X509_free(cert)
                throw PayPalTestCAError(step: "X509_add_ext", detail: SimCrypto.lastError())
            }
        }
        guard X509_sign(cert, signer, EVP_sha256()) > 0 else {
            X509_free(cert)
            throw PayPalTestCAError(step: "X509_sign", detail: SimCrypto.lastError())
        }
        return cert
    }

    private static func pem(_ cert: OpaquePointer) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw PayPalTestCAError(step: "BIO_new", detail: SimCrypto.lastError()) }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, cert) == 1 else {
            throw PayPalTestCAError(step: "PEM_write_bio_X509", detail: SimCrypto.lastError())
        }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = BIO_read(bio, &buffer, Int32(buffer.count))
            if n <= 0 { break }
            out += buffer.prefix(Int(n))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
