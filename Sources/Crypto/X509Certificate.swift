import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Why a certificate could not be read.
public struct CertificateError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An X.509 certificate, held as its DER bytes (a plain value: every operation parses a fresh libcrypto object and
/// frees it before returning, so nothing C-side is shared between threads).
public struct X509Certificate: Sendable, Hashable {
    /// The DER encoding.
    public let der: [UInt8]

    /// Parses one DER certificate.
    public init(der: [UInt8]) throws(CertificateError) {
        let parsed = X509Certificate.withParsedDER(der) { _ in true } ?? false
        guard parsed else { throw CertificateError("not a DER X.509 certificate") }
        self.der = der
    }

    private init(validatedDER: [UInt8]) { self.der = validatedDER }

    /// The first certificate of a PEM text (LF or CRLF line endings).
    public static func parsePEM(_ pem: [UInt8]) throws(CertificateError) -> X509Certificate {
        let all = try parsePEMBundle(pem)
        return all[0]
    }

    /// Every certificate of a PEM bundle, in order; throws when there is none or a block is damaged.
    public static func parsePEMBundle(_ pem: [UInt8]) throws(CertificateError) -> [X509Certificate] {
        guard !pem.isEmpty, pem.count <= Int(Int32.max) else { throw CertificateError("empty PEM input") }
        // `cat a.pem b.pem` of files without a final newline glues "-----END …----------BEGIN …": split them again.
        let text = splitGluedBlocks(pem)
        var certificates: [X509Certificate] = []
        let result: CertificateError? = text.withUnsafeBytes { raw -> CertificateError? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                return CertificateError("out of memory reading PEM")
            }
            defer { BIO_free(bio) }
            while true {
                guard let x509 = PEM_read_bio_X509(bio, nil, nil, nil) else { break }
                defer { X509_free(x509) }
                guard let der = derBytes(x509) else { return CertificateError("cannot re-encode certificate") }
                certificates.append(X509Certificate(validatedDER: der))
            }
            // The loop ends at end of input (PEM_R_NO_START_LINE) or at a damaged block; only the first is fine.
            let error = ERR_peek_last_error()
            ERR_clear_error()
            if certificates.isEmpty { return CertificateError("no PEM certificate (expected -----BEGIN CERTIFICATE-----)") }
            if error != 0 && !isNoStartLine(error) { return CertificateError("damaged PEM certificate block") }
            return nil
        }
        if let result { throw result }
        return certificates
    }

    private static func splitGluedBlocks(_ pem: [UInt8]) -> [UInt8] {
        let glue = Array("----------BEGIN ".utf8)
        guard pem.count >= glue.count else { return pem }
        var out: [UInt8] = []
        out.reserveCapacity(pem.count + 8)
        var i = 0
        while i < pem.count {
            if pem[i] == UInt8(ascii: "-"), i + glue.count <= pem.count, Array(pem[i..<(i + glue.count)]) == glue {
                out.append(contentsOf: Array("-----\n-----BEGIN ".utf8))
                i += glue.count
            } else {
                out.append(pem[i])
                i += 1
            }
        }
        return out
    }

    /// The certificate as PEM text with LF line endings.
    public var pem: String {
        let body = Base64.encode(der)
        var lines = ["-----BEGIN CERTIFICATE-----"]
        var index = body.startIndex
        while index < body.endIndex {
            let end = body.index(index, offsetBy: 64, limitedBy: body.endIndex) ?? body.endIndex
            lines.append(String(body[index..<end]))
            index = end
        }
        lines.append("-----END CERTIFICATE-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Every commonName (CN) of the subject, in order (usually exactly one).
    public var subjectCommonNames: [String] {
        withX509 { x509 in X509Certificate.commonNames(X509_get_subject_name(x509)) } ?? []
    }

    /// The subject's commonName when there is exactly one, else nil.
    public var subjectCommonName: String? {
        let names = subjectCommonNames
        return names.count == 1 ? names[0] : nil
    }

    /// Every commonName of the issuer.
    public var issuerCommonNames: [String] {
        withX509 { x509 in X509Certificate.commonNames(X509_get_issuer_name(x509)) } ?? []
    }

    /// Start of the validity period.
    public var notBefore: Date? { withX509 { X509Certificate.date(X509_get0_notBefore($0)) } ?? nil }

    /// End of the validity period.
    public var notAfter: Date? { withX509 { X509Certificate.date(X509_get0_notAfter($0)) } ?? nil }

    /// True when `date` lies within notBefore…notAfter (inclusive).
    public func isValid(at date: Date) -> Bool {
        guard let from = notBefore, let to = notAfter else { return false }
        return from <= date && date <= to
    }

    /// True when the subject and issuer names are equal and the certificate verifies under its own key.
    public var isSelfSigned: Bool {
        withX509 { x509 in X509_check_issued(x509, x509) == X509_V_OK } ?? false
    }

    /// Verifies an RSASSA-PKCS1-v1_5 / SHA-256 signature over `message` with this certificate's public key.
    /// False for any other key type, a wrong signature, or a damaged input.
    public func verifyRSASHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard !signature.isEmpty else { return false }
        let ok =
            withX509 { x509 -> Bool in
                guard let key = X509_get0_pubkey(x509), EVP_PKEY_get_base_id(key) == NID_rsaEncryption else { return false }
                guard let ctx = EVP_MD_CTX_new() else { return false }
                defer { EVP_MD_CTX_free(ctx) }
                guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
                let messageBytes = message.isEmpty ? [0] : message
                return signature.withUnsafeBufferPointer { s in
                    messageBytes.withUnsafeBufferPointer { m in
                        EVP_DigestVerify(ctx, s.baseAddress, s.count, m.baseAddress, message.count) == 1
                    }
                }
            } ?? false
        ERR_clear_error()
        return ok
    }

    // MARK: - libcrypto plumbing

    /// Runs `body` with a freshly parsed `X509*`, freed afterwards; nil if the DER does not parse.
    func withX509<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T? {
        try X509Certificate.withParsedDER(der, body)
    }

    static func withParsedDER<T>(_ der: [UInt8], _ body: (OpaquePointer) throws -> T) rethrows -> T? {
        guard !der.isEmpty, der.count <= Int(Int.max / 2) else { return nil }
        let x509: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &p, buffer.count)
        }
        guard let x509 else { ERR_clear_error(); return nil }
        defer { X509_free(x509) }
        return try body(x509)
    }

    package static func derBytes(_ x509: OpaquePointer) -> [UInt8]? {
        let length = i2d_X509(x509, nil)
        guard length > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509(x509, &p)
        }
        return written == length ? out : nil
    }

    private static func commonNames(_ name: OpaquePointer?) -> [String] {
        guard let name else { return [] }
        var result: [String] = []
        var index: Int32 = -1
        while true {
            index = X509_NAME_get_index_by_NID(name, NID_commonName, index)
            if index < 0 { break }
            guard let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else { continue }
            var utf8: UnsafeMutablePointer<UInt8>? = nil
            let length = ASN1_STRING_to_UTF8(&utf8, data)
            guard length >= 0, let utf8 else { ERR_clear_error(); continue }
            defer { CRYPTO_free(utf8, #fileID, #line) }
            let bytes = Array(UnsafeBufferPointer(start: utf8, count: Int(length)))
            // A NUL inside a name is an old spoofing trick ("good.com\0.evil.com"): never match such a name.
            if bytes.contains(0) { result.append("\u{FFFD}"); continue }
            result.append(String(decoding: bytes, as: UTF8.self))
        }
        return result
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var t = tm()
        guard ASN1_TIME_to_tm(time, &t) == 1 else { ERR_clear_error(); return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&t)))
    }

    private static func isNoStartLine(_ error: UInt) -> Bool {
        // ERR_GET_REASON is a macro; the reason is the low 23 bits (OpenSSL 3).
        Int32(error & 0x7FFFFF) == PEM_R_NO_START_LINE
    }
}
