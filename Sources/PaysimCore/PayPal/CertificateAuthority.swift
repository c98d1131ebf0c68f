import COpenSSL
import Crypto
import Foundation
import Providers
import Synchronization

/// An RSA private key owned by libcrypto (generated here; never read from or written to disk by this type).
package final class RSAPrivateKey: @unchecked Sendable {
    // The EVP_PKEY is only touched under `lock` (the class is Sendable because of that).
    private let pointer: OpaquePointer
    private let lock = Mutex(())

    /// Generates a fresh key of `bits` bits (2048 takes a few tens of milliseconds).
    package init(bits: Int32 = 2048) throws(CertificateError) {
        guard let ctx = EVP_PKEY_CTX_new_id(NID_rsaEncryption, nil) else { throw CertificateError("out of memory") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) == 1,
            EVP_PKEY_keygen(ctx, &key) == 1, let key
        else {
            ERR_clear_error()
            throw CertificateError("RSA key generation failed")
        }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    func withKey<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try lock.withLock { _ in try body(pointer) }
    }

    /// RSASSA-PKCS1-v1_5 / SHA-256 signature of `message`.
    package func signSHA256(_ message: [UInt8]) throws(CertificateError) -> [UInt8] {
        let signature: [UInt8]? = withKey { key in
            guard let ctx = EVP_MD_CTX_new() else { return nil }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return nil }
            let input = message.isEmpty ? [0] : message
            var length = 0
            guard input.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, message.count) }) == 1
            else { return nil }
            var out = [UInt8](repeating: 0, count: length)
            let ok = input.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_DigestSign(ctx, o.baseAddress, &length, m.baseAddress, message.count) == 1
                }
            }
            return ok ? Array(out.prefix(length)) : nil
        }
        guard let signature else { ERR_clear_error(); throw CertificateError("RSA signing failed") }
        return signature
    }
}

/// A throwaway certificate authority for tests and the sandbox simulator: issues RSA certificates with chosen
/// names and validity, so PayPal-style signatures can be produced and checked end to end without PayPal.
package struct CertificateAuthority: Sendable {
    /// The CA's own (self-signed) certificate; write its PEM out as the trust roots.
    package let certificate: X509Certificate
    /// The CA's key.
    package let key: RSAPrivateKey

    /// Creates a self-signed CA named `commonName`, valid from `notBefore` to `notAfter`.
    package init(
        commonName: String = "payrecon test root", notBefore: Date = Date(timeIntervalSinceNow: -86_400),
        notAfter: Date = Date(timeIntervalSinceNow: 10 * 365 * 86_400)
    ) throws(CertificateError) {
        let key = try RSAPrivateKey()
        self.key = key
        self.certificate = try CertificateAuthority.issue(
            subjectCN: commonName, subjectKey: key, issuer: nil, issuerKey: key,
            notBefore: notBefore, notAfter: notAfter, role: .root, serial: 1)
    }

    private init(certificate: X509Certificate, key: RSAPrivateKey) {
        self.certificate = certificate
        self.key = key
    }

    /// Issues a subordinate CA for a fresh key (path length 0: it signs leaves, not further CAs), for chains shaped
    /// like PayPal's root → intermediate → leaf. Its certificate is not self-signed: ship it beside the root.
    package func issueIntermediate(
        commonName: String, notBefore: Date = Date(timeIntervalSinceNow: -86_400),
        notAfter: Date = Date(timeIntervalSinceNow: 5 * 365 * 86_400),
        serial: Int = 2
    ) throws(CertificateError) -> CertificateAuthority {
        let intermediateKey = try RSAPrivateKey()
        let intermediate = try CertificateAuthority.issue(
            subjectCN: commonName, subjectKey: intermediateKey, issuer: certificate, issuerKey: key,
            notBefore: notBefore, notAfter: notAfter, role: .intermediate, serial: serial)
        return CertificateAuthority(certificate: intermediate, key: intermediateKey)
    }

    /// Issues a leaf certificate for a fresh key; returns the certificate and the key that signs with it.
    package func issueLeaf(
        commonName: String, notBefore: Date = Date(timeIntervalSinceNow: -3_600),
        notAfter: Date = Date(timeIntervalSinceNow: 365 * 86_400),
        serial: Int = 2
    ) throws(CertificateError) -> (certificate: X509Certificate, key: RSAPrivateKey) {
        let leafKey = try RSAPrivateKey()
        let leaf = try CertificateAuthority.issue(
            subjectCN: commonName, subjectKey: leafKey, issuer: certificate, issuerKey: key,
            notBefore: notBefore, notAfter: notAfter, role: .leaf, serial: serial)
        return (leaf, leafKey)
    }

    private enum Role { case root, intermediate, leaf }

    private static func issue(
        subjectCN: String, subjectKey: RSAPrivateKey, issuer: X509Certificate?, issuerKey: RSAPrivateKey,
        notBefore: Date, notAfter: Date, role: Role, serial: Int
    ) throws(CertificateError) -> X509Certificate {
        guard let x509 = X509_new() else { throw CertificateError("out of memory") }
        defer { X509_free(x509) }
        var issuerX509: OpaquePointer? = nil
        if let issuer {
            issuerX509 = issuer.der.withUnsafeBufferPointer { buffer in
                var p: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_X509(nil, &p, buffer.count)
            }
            guard issuerX509 != nil else { throw CertificateError("issuer does not parse") }
        }
        defer { if let issuerX509 { X509_free(issuerX509) } }

        guard let name = X509_NAME_new() else { throw CertificateError("out of memory") }
        defer { X509_NAME_free(name) }
        var ok = X509_set_version(x509, 2) == 1
        ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(x509), serial) == 1
        ok = ok && ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore.timeIntervalSince1970)) != nil
        ok = ok && ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter.timeIntervalSince1970)) != nil
        ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, "payrecon test", -1, -1, 0) == 1
        ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, subjectCN, -1, -1, 0) == 1
        ok = ok && X509_set_subject_name(x509, name) == 1
        ok = ok && X509_set_issuer_name(x509, issuerX509.map { X509_get_subject_name($0) } ?? name) == 1
        ok = ok && subjectKey.withKey { X509_set_pubkey(x509, $0) } == 1
        guard ok else { ERR_clear_error(); throw CertificateError("cannot fill in the certificate") }

        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuerX509 ?? x509, x509, nil, nil, 0)
        // Key identifiers on every certificate (an issued one also names its issuer's), as strict chain
        // verification (X509_V_FLAG_X509_STRICT) requires.
        let identifiers: [(Int32, String)] =
            issuer == nil
            ? [(NID_subject_key_identifier, "hash")]
            : [(NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always")]
        let extensions: [(Int32, String)]
        switch role {
        case .root:
            extensions = [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
        case .intermediate:
            extensions = [
                (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                (NID_key_usage, "critical,keyCertSign,cRLSign")
            ]
        case .leaf:
            extensions = [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature,keyEncipherment"),
                (NID_ext_key_usage, "serverAuth,clientAuth"), (NID_subject_alt_name, "DNS:\(subjectCN)")
            ]
        }
        for (nid, value) in extensions + identifiers {
            guard let ext = X509V3_EXT_conf_nid(nil, &ctx, nid, value) else {
                ERR_clear_error()
                throw CertificateError("cannot build extension \(nid)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { ERR_clear_error(); throw CertificateError("cannot add extension") }
        }
        guard issuerKey.withKey({ X509_sign(x509, $0, EVP_sha256()) }) > 0 else {
            ERR_clear_error()
            throw CertificateError("cannot sign the certificate")
        }
        guard let der = X509Certificate.derBytes(x509) else { throw CertificateError("cannot encode the certificate") }
        return try X509Certificate(der: der)
    }
}
