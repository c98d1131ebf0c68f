import COpenSSL
import Foundation

/// The outcome of building and checking a certificate chain.
public enum ChainVerificationResult: Sendable, Equatable {
    /// The leaf chains to one of the trust roots and every certificate is valid at the given time.
    case trusted
    /// It does not; `reason` is libcrypto's explanation (for example "certificate has expired").
    case untrusted(reason: String)

    public var isTrusted: Bool { self == .trusted }
}

/// Certificate-chain verification at a chosen time (libcrypto `X509_STORE` / `X509_verify_cert`).
public enum CertificateChain {
    /// `verify(leaf:trustRoots:at:)` with the roots given as a PEM bundle (root + intermediates, LF or CRLF).
    public static func verify(leaf: X509Certificate, trustRootsPEM: [UInt8], at time: Date) -> ChainVerificationResult {
        do {
            return verify(leaf: leaf, trustRoots: try X509Certificate.parsePEMBundle(trustRootsPEM), at: time)
        } catch {
            return .untrusted(reason: "trust roots: \(error)")
        }
    }

    /// Checks that `leaf` chains to a certificate of `trustRoots` with every certificate valid at `time`.
    ///
    /// `trustRoots` is a bundle of the root and any intermediates the leaf needs: all of them are trusted anchors, and
    /// the ones that are not self-signed are offered as untrusted intermediates too, so a chain
    /// leaf → intermediate → root builds either way. `intermediates` (those served beside the leaf) are offered as
    /// untrusted only: they may complete a chain to an anchor, never end one (a self-signed one among them is not
    /// trusted for being there). Revocation is not checked (there is no network here).
    public static func verify(
        leaf: X509Certificate, intermediates: [X509Certificate] = [], trustRoots: [X509Certificate],
        at time: Date
    ) -> ChainVerificationResult {
        switch trustedWindow(leaf: leaf, intermediates: intermediates, trustRoots: trustRoots, at: time) {
        case .success: .trusted
        case .failure(let untrusted): .untrusted(reason: untrusted.reason)
        }
    }

    /// Why a chain did not verify.
    public struct Untrusted: Error, Sendable, Equatable { public let reason: String }

    /// As `verify`, and when the chain holds, the times at which every certificate of the chain it built (leaf,
    /// intermediates and anchor) is valid: the chain verifies at any time in that window, since nothing else in it
    /// depends on the time (no revocation is checked). A verifier that keeps a certificate can then check a later
    /// time against the window instead of building the chain again.
    public static func trustedWindow(
        leaf: X509Certificate, intermediates: [X509Certificate] = [], trustRoots: [X509Certificate],
        at time: Date
    ) -> Result<DateInterval, Untrusted> {
        guard !trustRoots.isEmpty else { return refuse("no trust roots configured") }
        guard let store = X509_STORE_new() else { return refuse("out of memory") }
        defer { X509_STORE_free(store) }
        guard let untrusted = OPENSSL_sk_new_null() else { return refuse("out of memory") }
        // The stack does not own its elements; they are freed through `owned`.
        defer { OPENSSL_sk_free(untrusted) }
        var owned: [OpaquePointer] = []
        defer { owned.forEach { X509_free($0) } }

        func parse(_ certificate: X509Certificate) -> OpaquePointer? {
            let x509: OpaquePointer? = certificate.der.withUnsafeBufferPointer { buffer in
                var p: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_X509(nil, &p, buffer.count)
            }
            if let x509 { owned.append(x509) }
            return x509
        }

        for root in trustRoots {
            guard let x509 = parse(root) else { return refuse("a trust root does not parse") }
            // X509_STORE_add_cert takes its own reference.
            guard X509_STORE_add_cert(store, x509) == 1 else {
                ERR_clear_error()
                continue  // a duplicate in the bundle is harmless
            }
            if X509_check_issued(x509, x509) != X509_V_OK {
                OPENSSL_sk_push(untrusted, UnsafeRawPointer(x509))
            }
        }
        for intermediate in intermediates {
            guard let x509 = parse(intermediate) else { return refuse("a served intermediate does not parse") }
            OPENSSL_sk_push(untrusted, UnsafeRawPointer(x509))
        }
        guard let leafX509 = parse(leaf) else { return refuse("the certificate does not parse") }
        guard let ctx = X509_STORE_CTX_new() else { return refuse("out of memory") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leafX509, untrusted) == 1 else {
            ERR_clear_error()
            return refuse("cannot initialise chain verification")
        }
        guard let param = X509_STORE_CTX_get0_param(ctx) else { return refuse("out of memory") }
        X509_VERIFY_PARAM_set_time(param, time_t(time.timeIntervalSince1970.rounded(.down)))
        let verified = X509_verify_cert(ctx)
        let error = X509_STORE_CTX_get_error(ctx)
        ERR_clear_error()
        guard verified == 1 else {
            return refuse(X509_verify_cert_error_string(Int(error)).map { String(cString: $0) } ?? "error \(error)")
        }
        // Not owned: the context's chain, alive until X509_STORE_CTX_free.
        guard let chain = X509_STORE_CTX_get0_chain(ctx) else { return refuse("no chain was built") }
        return window(of: chain, at: time)
    }

    /// A chain that did not verify, and why.
    private static func refuse(_ reason: String) -> Result<DateInterval, Untrusted> { .failure(Untrusted(reason: reason)) }

    /// The times every certificate of a built chain (not owned: the context's) is valid at; refused when one's
    /// validity period cannot be read or the window does not hold `time`.
    private static func window(of chain: OpaquePointer, at time: Date) -> Result<DateInterval, Untrusted> {
        var from = Date.distantPast, until = Date.distantFuture
        for index in 0..<OPENSSL_sk_num(chain) {
            guard let raw = OPENSSL_sk_value(chain, index) else { continue }
            let x509 = OpaquePointer(raw)
            guard let notBefore = X509Certificate.date(X509_get0_notBefore(x509)),
                let notAfter = X509Certificate.date(X509_get0_notAfter(x509))
            else {
                return refuse("a certificate of the chain has an unreadable validity period")
            }
            from = max(from, notBefore); until = min(until, notAfter)
        }
        guard from <= time, time <= until else { return refuse("the chain is not valid at the time asked") }
        return .success(DateInterval(start: from, end: until))
    }
}
