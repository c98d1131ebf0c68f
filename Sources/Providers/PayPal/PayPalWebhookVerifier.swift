import Crypto
import Foundation

/// Verifies PayPal webhook deliveries offline: RSASSA-PKCS1-v1_5 / SHA-256 over
/// `transmission_id|transmission_time|webhook_id|crc32(body)` with the certificate at `PAYPAL-CERT-URL`.
///
/// Order of checks, cheapest and least trusting first (nothing is fetched for a delivery that fails early):
/// 1. `PAYPAL-TRANSMISSION-ID`, `-TIME`, `-SIG`, `-CERT-URL` present → else `missing_signature`;
/// 2. `PAYPAL-AUTH-ALGO`, when present, is `SHA256withRSA` → else `invalid_signature`;
/// 3. the transmission time is RFC 3339 and (unless evaluating at the signed time) within the tolerance of now
///    → else `stale_timestamp`;
/// 4. the cert URL is one plain path segment under an allowed prefix → else `untrusted_certificate` (never fetched);
///    the signature is base64 → else `invalid_signature`;
/// 5. a certificate the source keeps validated (`CachingCertificateSource`): the signature verifies → else
///    `invalid_signature`, then its chain's validity window holds the transmission time and now → else
///    `untrusted_certificate`. A forged delivery naming a cached certificate costs one RSA verification;
/// 6. otherwise fetched through the certificate source, parsed, chained to the trust roots at the transmission time
///    (through any intermediates served after the leaf), subject CN the one PayPal issues for the URL's host
///    (`acceptedCommonNames(forCertURL:)`), and valid now (unless evaluating at the signed time)
///    → else `untrusted_certificate`; then the signature verifies → else `invalid_signature`.
public struct PayPalWebhookVerifier: Sendable {
    public static let transmissionIDHeader = "PAYPAL-TRANSMISSION-ID"
    public static let transmissionTimeHeader = "PAYPAL-TRANSMISSION-TIME"
    public static let transmissionSignatureHeader = "PAYPAL-TRANSMISSION-SIG"
    public static let certURLHeader = "PAYPAL-CERT-URL"
    public static let authAlgorithmHeader = "PAYPAL-AUTH-ALGO"

    /// `PAYPAL_CERT_URL_PREFIXES` default.
    public static let defaultCertURLPrefixes = [
        "https://api.paypal.com/v1/notifications/certs/",
        "https://api.sandbox.paypal.com/v1/notifications/certs/"
    ]
    /// PayPal's live certificate host, and the one name the certificates it serves are issued to.
    public static let liveCertificateHost = "api.paypal.com"
    public static let liveCommonName = "messageverificationcerts.paypal.com"
    /// PayPal's sandbox certificate host, and the one name the certificates it serves are issued to.
    public static let sandboxCertificateHost = "api.sandbox.paypal.com"
    public static let sandboxCommonName = "messageverificationcerts.sandbox.paypal.com"
    /// The subject common names PayPal signs webhooks with.
    public static let signingCommonNames: Set<String> = [liveCommonName, sandboxCommonName]
    /// The webhook id PayPal's public webhook simulator signs its mock events with (docs/PROVIDER-FACTS.md PAYPAL-13).
    public static let simulatorWebhookID = "WEBHOOK_ID"

    /// `PAYPAL_WEBHOOK_ID`: the listener's webhook id, signed into every delivery (`WEBHOOK_ID` for the simulator).
    public let webhookID: String
    public let certURLPrefixes: [String]
    public let trustRoots: [X509Certificate]
    public let tolerance: TimeInterval
    public let certificateSource: any CertificateSource

    public init(
        webhookID: String, certificateSource: any CertificateSource,
        trustRoots: [X509Certificate] = PayPalTrustRoots.defaultCertificates,
        certURLPrefixes: [String] = PayPalWebhookVerifier.defaultCertURLPrefixes,
        tolerance: TimeInterval = WebhookDefaults.signatureTolerance
    ) throws(WebhookConfigurationError) {
        guard !webhookID.isEmpty else { throw WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_WEBHOOK_ID") }
        guard !trustRoots.isEmpty else { throw WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_TRUST_ROOTS") }
        let prefixes = certURLPrefixes.map { $0.trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
        guard !prefixes.isEmpty else { throw WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_CERT_URL_PREFIXES") }
        for prefix in prefixes {
            if let problem = Self.prefixProblem(prefix) {
                throw WebhookConfigurationError(provider: .paypal, variable: "PAYPAL_CERT_URL_PREFIXES", problem: problem)
            }
        }
        self.webhookID = webhookID
        self.certificateSource = certificateSource
        self.trustRoots = trustRoots
        self.certURLPrefixes = prefixes
        self.tolerance = tolerance
    }

    /// Throws the reason the delivery is refused; returns when it is authentic and fresh. May fetch the certificate.
    public func verify(headers: Headers, body: [UInt8], time: VerificationTime) throws(WebhookRejection) {
        _ = try verify(headers: headers, body: body, time: time, waiting: true)
    }

    /// As `verify`, but never waits on the network: false when the certificate must be fetched first
    /// (`prefetchCertificate`, then ask again). Everything checkable without it is checked first, so a delivery
    /// refused for its headers, time or cert URL never causes a fetch.
    public func verifyWithoutWaiting(headers: Headers, body: [UInt8], time: VerificationTime) throws(WebhookRejection) -> Bool {
        try verify(headers: headers, body: body, time: time, waiting: false)
    }

    /// The headers the signature covers, each given once and as signed: the transmission id the one-body-per-
    /// transmission guard stores is byte for byte the value the signature was computed over. Trimmed for the check and
    /// kept raw for the guard, `T`, `T ` and `T\t` verified against one signature as three transmissions, and each
    /// could carry a body forged to the CRC32 PayPal signed.
    static func requireExactSignedHeaders(_ headers: Headers) throws(WebhookRejection) {
        for name in [transmissionIDHeader, transmissionTimeHeader, transmissionSignatureHeader, certURLHeader] {
            let values = headers.values(for: name)
            if values.count > 1 {
                throw WebhookRejection(.invalidSignature, "\(name) is given \(values.count) times; PayPal sends it once")
            }
        }
        if let raw = headers[transmissionIDHeader], let trimmed = headers.nonEmpty(transmissionIDHeader), raw != trimmed {
            throw WebhookRejection(.invalidSignature, "\(transmissionIDHeader) has whitespace around its value; PayPal sends none")
        }
    }

    /// Fetches the delivery's certificate without blocking; `then` runs once `verifyWithoutWaiting` can decide.
    /// `sender`: the address group the delivery came from (it spends that sender's share of the fetch budget).
    public func prefetchCertificate(headers: Headers, sender: String? = nil, then: @escaping @Sendable () -> Void) {
        guard let certURL = headers.nonEmpty(Self.certURLHeader), isAllowed(certURL: certURL) else { return then() }
        certificateSource.prefetch(certURL, sender: sender, then: then)
    }

    private func verify(headers: Headers, body: [UInt8], time: VerificationTime, waiting: Bool) throws(WebhookRejection) -> Bool {
        try Self.requireExactSignedHeaders(headers)
        guard let transmissionID = headers.nonEmpty(Self.transmissionIDHeader) else { throw .missing(Self.transmissionIDHeader) }
        guard let transmissionTime = headers.nonEmpty(Self.transmissionTimeHeader) else { throw .missing(Self.transmissionTimeHeader) }
        guard let signatureText = headers.nonEmpty(Self.transmissionSignatureHeader) else {
            throw .missing(Self.transmissionSignatureHeader)
        }
        guard let certURL = headers.nonEmpty(Self.certURLHeader) else { throw .missing(Self.certURLHeader) }

        if let algorithm = headers.nonEmpty(Self.authAlgorithmHeader), algorithm.lowercased() != "sha256withrsa" {
            throw WebhookRejection(.invalidSignature, "\(Self.authAlgorithmHeader) is \(quoted(algorithm)); only SHA256withRSA is accepted")
        }

        guard let transmittedAt = ISO8601.parse(transmissionTime) else {
            throw WebhookRejection(.staleTimestamp, "\(Self.transmissionTimeHeader) \(quoted(transmissionTime)) is not an RFC 3339 time")
        }
        var now = transmittedAt
        if case .at(let instant) = time {
            now = instant
            if let stale = SignedTimestamp.freshness(
                transmittedAt, now: instant, tolerance: tolerance,
                header: Self.transmissionTimeHeader)
            {
                throw stale
            }
        }

        guard isAllowed(certURL: certURL) else {
            throw WebhookRejection(
                .untrustedCertificate,
                "\(Self.certURLHeader) \(quoted(certURL, limit: 120)) is not one path segment under an allowed prefix (PAYPAL_CERT_URL_PREFIXES); not fetched"
            )
        }
        guard let signature = Base64.decode(signatureText) else {
            throw WebhookRejection(.invalidSignature, "\(Self.transmissionSignatureHeader) is not base64")
        }
        let message = Array(
            Self.signedMessage(
                transmissionID: transmissionID, transmissionTime: transmissionTime,
                webhookID: webhookID, body: body
            ).utf8)

        // A certificate the source keeps was chained and name-checked when it was cached: the signature first (one RSA
        // verification is all a forged delivery naming it costs), then the times against the chain's window.
        if let kept = certificateSource.signingCertificate(for: certURL) {
            guard kept.leaf.verifyRSASHA256(signature: signature, message: message) else { throw Self.badSignature }
            try Self.check(kept.validity, transmittedAt: transmittedAt, now: now, time: time)
            certificateSource.verifiedDelivery(with: certURL)
            return true
        }

        return try verifyWithFetched(
            certURL: certURL, signature: signature, message: message, transmittedAt: transmittedAt, now: now, time: time,
            waiting: waiting)
    }

    /// A delivery whose certificate the source does not keep: the certificate is fetched (false when it is not there
    /// yet and this may not wait), chained and name-checked at the transmission time, then the signature checked.
    private func verifyWithFetched(
        certURL: String, signature: [UInt8], message: [UInt8], transmittedAt: Date, now: Date, time: VerificationTime,
        waiting: Bool
    ) throws(WebhookRejection) -> Bool {
        let pem: [UInt8]
        do {
            if waiting {
                pem = try certificateSource.pem(for: certURL)
            } else {
                guard let available = try certificateSource.pemWithoutWaiting(for: certURL) else { return false }
                pem = available
            }
        } catch {
            throw WebhookRejection(.untrustedCertificate, "cannot fetch the certificate at \(quoted(certURL, limit: 120)): \(error)")
        }
        let signing: SigningCertificate
        do {
            signing = try Self.signingCertificate(pem, certURL: certURL, trustRoots: trustRoots, at: transmittedAt)
        } catch {
            throw WebhookRejection(.untrustedCertificate, error.description)
        }
        try Self.check(signing.validity, transmittedAt: transmittedAt, now: now, time: time)
        guard signing.leaf.verifyRSASHA256(signature: signature, message: message) else { throw Self.badSignature }
        certificateSource.verifiedDelivery(with: certURL)
        return true
    }

    private static var badSignature: WebhookRejection {
        WebhookRejection(
            .invalidSignature,
            "\(transmissionSignatureHeader) does not verify over the transmission id, time, PAYPAL_WEBHOOK_ID and body CRC32 "
                + "(check PAYPAL_WEBHOOK_ID; simulator deliveries use WEBHOOK_ID)")
    }

    /// The chain must be valid at the transmission time, and (unless evaluating at the signed time) now.
    private static func check(_ validity: DateInterval, transmittedAt: Date, now: Date, time: VerificationTime) throws(WebhookRejection) {
        let from = ISO8601.format(validity.start), until = ISO8601.format(validity.end)
        guard validity.contains(transmittedAt) else {
            throw WebhookRejection(
                .untrustedCertificate,
                "the signing certificate's chain is valid from \(from) to \(until), not at the transmission time \(ISO8601.format(transmittedAt))"
            )
        }
        if case .at = time, !validity.contains(now) {
            throw WebhookRejection(
                .untrustedCertificate,
                "the signing certificate is valid from \(from) to \(until), not now; replay old deliveries with --at transmission")
        }
    }

    /// What a fetched certificate must be before it is cached: what `signingCertificate` accepts now (the verifier
    /// checks it again at the transmission time).
    @discardableResult
    public static func validateSigningCertificate(
        _ pem: [UInt8], certURL: String, trustRoots: [X509Certificate],
        now: Date = Date()
    ) throws -> ValidatedCertificate {
        let signing = try signingCertificate(pem, certURL: certURL, trustRoots: trustRoots, at: now)
        return ValidatedCertificate(keepUntil: signing.validity.end, signing: signing)
    }

    /// Why the PEM served at a cert URL is not PayPal's signing certificate.
    public struct UntrustedCertificate: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The leaf of the PEM served at `certURL`, once it is PayPal's signing certificate at `time`: it chains to an
    /// anchor of `trustRoots`, through any intermediates served after it (they complete a chain, they are not
    /// trusted), and its subject CN is the one `acceptedCommonNames(forCertURL:)` allows.
    static func signingCertificate(
        _ pem: [UInt8], certURL: String, trustRoots: [X509Certificate],
        at time: Date
    ) throws(UntrustedCertificate) -> SigningCertificate {
        let served: [X509Certificate]
        do { served = try X509Certificate.parsePEMBundle(pem) } catch {
            throw UntrustedCertificate(description: "the certificate at \(quoted(certURL, limit: 120)) is unreadable: \(error)")
        }
        let leaf = served[0]
        let validity: DateInterval
        switch CertificateChain.trustedWindow(leaf: leaf, intermediates: Array(served.dropFirst()), trustRoots: trustRoots, at: time) {
        case .success(let window): validity = window
        case .failure(let untrusted):
            throw UntrustedCertificate(
                description: "the signing certificate does not chain to PAYPAL_TRUST_ROOTS at \(ISO8601.format(time)): \(untrusted.reason)")
        }
        let names = leaf.subjectCommonNames
        let accepted = acceptedCommonNames(forCertURL: certURL)
        guard names.count == 1, accepted.contains(names[0]) else {
            let issuedTo = names.map { quoted($0) }.joined(separator: ", ")
            let only = accepted.count == 1 ? ", the one name PayPal's certificates served from \(host(of: certURL) ?? "?") carry" : ""
            throw UntrustedCertificate(
                description: "the signing certificate is issued to \(issuedTo), not \(accepted.sorted().joined(separator: " or "))\(only)")
        }
        return SigningCertificate(leaf: leaf, validity: validity)
    }

    /// The names a certificate served at `certURL` may be issued to. PayPal's live host serves the live certificate
    /// and its sandbox host the sandbox one, so each name is accepted only from its own host: a sandbox certificate
    /// never vouches for a delivery naming a live cert URL, nor the reverse. Any other host (paysim on loopback, a
    /// prefix an operator added) may serve either.
    public static func acceptedCommonNames(forCertURL certURL: String) -> Set<String> {
        switch host(of: certURL) {
        case liveCertificateHost: [liveCommonName]
        case sandboxCertificateHost: [sandboxCommonName]
        default: signingCommonNames
        }
    }

    /// Why `webhookID` cannot be used with `certURLPrefixes`, or nil. `WEBHOOK_ID` is the id PayPal's public webhook
    /// simulator signs with, and anyone can aim that simulator at any listener: when PayPal's own certificate URLs
    /// are allowed, its mock events verify, so anyone could post events this listener accepts. With only other
    /// prefixes (paysim on loopback, which signs with that id too) it is harmless.
    public static func simulatorWebhookIDProblem(webhookID: String, certURLPrefixes: [String]) -> String? {
        guard webhookID == simulatorWebhookID, let own = certURLPrefixes.first(where: isPayPalPrefix) else { return nil }
        return "PAYPAL_WEBHOOK_ID=\(simulatorWebhookID) is refused: it is the id PayPal's public webhook simulator signs its mock "
            + "events with, and anyone can aim that simulator at any listener, so with PayPal's own certificate URLs allowed "
            + "(PAYPAL_CERT_URL_PREFIXES includes \(own)) anyone could post events this listener would accept. Set "
            + "PAYPAL_WEBHOOK_ID to the id PayPal gave this listener's webhook when it was subscribed (the developer dashboard "
            + "lists it with the app's webhooks); \(simulatorWebhookID) is accepted only when no prefix is on a paypal.com host "
            + "(a local simulator such as paysim)"
    }

    /// The prefix is on one of PayPal's own hosts (paypal.com or a host under it): the certificates there are
    /// PayPal's, which also sign its public simulator's events.
    public static func isPayPalPrefix(_ prefix: String) -> Bool {
        guard let host = host(of: prefix) else { return false }
        return host == "paypal.com" || host.hasSuffix(".paypal.com")
    }

    /// The host of a `scheme://[userinfo@]host[:port]/…` URL, lower-cased and without a final dot; nil when it has none.
    static func host(of url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        var authority = url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        if authority.first == "[", let close = authority.firstIndex(of: "]") {
            host = authority[...close]  // an IPv6 literal: its colons are not a port
        } else {
            host = authority.prefix { $0 != ":" }
        }
        let name = host.hasSuffix(".") ? host.dropLast() : host
        return name.isEmpty ? nil : name.lowercased()
    }

    /// Why a cert-URL prefix is refused, or nil: it must be `scheme://host/path/`, ending in `/`, so it cannot be
    /// continued into another host (`https://api.paypal.com` would let `https://api.paypal.com.evil.com/` through).
    public static func prefixProblem(_ prefix: String) -> String? {
        guard let scheme = prefix.range(of: "://"), !prefix[..<scheme.lowerBound].isEmpty,
            prefix[..<scheme.lowerBound].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." })
        else {
            return "'\(prefix)' is not scheme://host/path/ (e.g. https://api.paypal.com/v1/notifications/certs/)"
        }
        let rest = prefix[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/"), slash != rest.startIndex else {
            return "'\(prefix)' has no path after the host: it must be scheme://host/path/ ending in /"
        }
        let host = rest[..<slash]
        guard !host.contains("@"), !host.contains("?"), !host.contains("#") else {
            return "'\(prefix)' has userinfo, a query or a fragment in its host"
        }
        guard prefix.hasSuffix("/") else { return "'\(prefix)' must end in / (else it could be continued into another path)" }
        guard !prefix.contains(".."), !prefix.contains("?"), !prefix.contains("#") else { return "'\(prefix)' contains '..', '?' or '#'" }
        return nil
    }

    /// `transmission_id|transmission_time|webhook_id|crc32 decimal`: the string PayPal signs.
    public static func signedMessage(transmissionID: String, transmissionTime: String, webhookID: String, body: [UInt8]) -> String {
        "\(transmissionID)|\(transmissionTime)|\(webhookID)|\(CRC32.checksum(body))"
    }

    /// The URL starts with an allowed prefix and continues with one plain path segment: no `/`, no `.` or `..`
    /// segment, query, fragment, userinfo, percent-escape, backslash or whitespace. A prefix cannot be escaped, and no
    /// two URLs name one resource (HTTP clients fold `./`, `x/../` and `//` into another URL, which let a stranger make
    /// many cache entries of the genuine certificate, each evicting another).
    public func isAllowed(certURL: String) -> Bool { Self.isAllowed(certURL: certURL, prefixes: certURLPrefixes) }

    /// `isAllowed(certURL:)` against `prefixes` (what `payrecon doctor` asks of a stored delivery's cert URL).
    /// The longest segment after an allowed prefix (PayPal's are 32 bytes).
    public static let maxCertSegmentBytes = 128

    public static func isAllowed(certURL: String, prefixes: [String]) -> Bool {
        // Bytes, not String.hasPrefix: Unicode equivalence must not decide what is under an allowed prefix.
        guard let prefix = prefixes.first(where: { Array(certURL.utf8).starts(with: $0.utf8) }) else { return false }
        let rest = certURL.utf8.dropFirst(prefix.utf8.count)
        // PayPal's segment is `CERT-` and three 8-hex groups; a long one is only memory a stranger makes us keep.
        guard !rest.isEmpty, rest.count <= maxCertSegmentBytes, !certURL.contains(".."), !rest.elementsEqual(".".utf8) else { return false }
        return rest.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)
                || c == UInt8(ascii: "-") || c == UInt8(ascii: "_") || c == UInt8(ascii: ".") || c == UInt8(ascii: "~")
        }
    }
}
