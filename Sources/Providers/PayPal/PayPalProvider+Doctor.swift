import Crypto
import Foundation
import HTTP
import Reconciliation
import TextFormats

// `payrecon doctor` for PayPal: the OAuth2 client credentials and an authenticated read of an order that does not
// exist (404, not 401 or 403); the disputes permission payrecon needs to read a dispute (docs/PROVIDER-FACTS.md
// PAYPAL-40); and the signing certificate of the last stored delivery, fetched and checked the way the receiver's
// verifier checks it (PAYPAL-12: the chain PayPal signs from can change).
extension PayPalProvider.API {
    static let doctorCredentials = "paypal credentials"
    static let doctorDisputes = "paypal disputes permission"
    static let doctorCertificate = "paypal certificate of the last stored delivery"
    static let doctorSearch = "paypal transaction search permission"
    /// An order id of the documented shape (`^[A-Z0-9]+$`, at most 36) that PayPal never issues.
    static let doctorOrderID = "PAYRECONDOCTOR0NOSUCHORDER"
    /// The scope an app needs to read its disputes (customer_disputes_v1.json security).
    public static let disputesScope = "https://uri.paypal.com/services/disputes/read-seller"

    public func doctor(_ context: DoctorContext) async -> [DoctorCheck] {
        guard let client else { return [] }
        var checks: [DoctorCheck] = []
        let token = await Self.doctorToken(client)
        switch token {
        case .failure(let problem):
            checks.append(.failed(Self.doctorCredentials, problem.description))
            checks.append(.skipped(Self.doctorDisputes, "not checked: PayPal issued no access token (see \(Self.doctorCredentials))"))
        case .success(let token):
            checks.append(await Self.doctorOrderRead(client, token: token))
            checks.append(await Self.doctorDisputesRead(client, token: token))
            // Only when the nightly run backfills from PayPal: the search needs a permission of its own.
            if (try? context.environment.backfill())?.contains(where: { $0.provider == .paypal }) == true {
                checks.append(await Self.doctorSearchRead(client, token: token))
            }
        }
        checks.append(await Self.doctorCertificateCheck(context))
        return checks
    }

    /// The token PayPal issues for PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET, or what is wrong.
    static func doctorToken(_ client: PayPalClient) async -> Result<String, DoctorProblem> {
        let request = client.tokenRequest()
        let asked = DoctorProbe.target(request)
        let base = client.configuration.baseURL
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return .failure(
                DoctorProblem("\(asked) got no answer (\(reason)): check PAYPAL_API_BASE_URL (\(base)) and that this host can reach it"))
        case .answered(let r) where (200..<300).contains(r.status):
            guard let json = try? JSONValue.parse(r.body), let token = json["access_token"]?.stringValue, !token.isEmpty else {
                return .failure(DoctorProblem("\(asked) answered \(r.status) without an access_token: check PAYPAL_API_BASE_URL (\(base))"))
            }
            return .success(token)
        case .answered(let r) where r.status == 401 || r.status == 400 || r.status == 403:
            return .failure(
                DoctorProblem(
                    "\(asked) answered \(r.status)\(doctorSummary(r)): PayPal refused the client credentials. "
                        + "Set PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET to the app's (developer.paypal.com, Apps & Credentials), "
                        + "for PAYPAL_API_BASE_URL's environment (\(base)): sandbox and live apps have different ones"))
        case .answered(let r):
            return .failure(
                DoctorProblem(
                    "\(asked) answered \(r.status)\(doctorSummary(r)): "
                        + (r.status == 429 || r.status >= 500
                            ? "PayPal could not answer now; run doctor again later"
                            : "check PAYPAL_API_BASE_URL (\(base))")))
        }
    }

    /// GET of an order that does not exist: 404 proves the token reads orders.
    static func doctorOrderRead(_ client: PayPalClient, token: String) async -> DoctorCheck {
        let request = client.apiRequest(
            method: "GET", segments: ["v2", "checkout", "orders", doctorOrderID], body: nil, requestID: nil, token: token)
        let asked = DoctorProbe.target(request)
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return .failed(
                doctorCredentials,
                "an access token was issued, but \(asked) got no answer (\(reason)): check the network to PAYPAL_API_BASE_URL")
        case .answered(let r):
            switch r.status {
            case 404:
                return .ok(doctorCredentials, "PayPal issued an access token, and \(asked) answered 404 for an order that does not exist")
            case 401, 403:
                return .failed(
                    doctorCredentials,
                    "PayPal issued an access token, but \(asked) answered \(r.status)\(doctorSummary(r)): the app "
                        + "may not read orders; check its features (Accept payments) on developer.paypal.com, or that PAYPAL_CLIENT_ID "
                        + "is the merchant's own app")
            case 200..<300:
                return .ok(doctorCredentials, "PayPal issued an access token, and \(asked) answered \(r.status)")
            case 429, 500..<600:
                return .failed(
                    doctorCredentials,
                    "\(asked) answered \(r.status)\(doctorSummary(r)): PayPal could not answer now; run doctor again later")
            default:
                return .failed(
                    doctorCredentials,
                    "\(asked) answered \(r.status)\(doctorSummary(r)), not 404: every PayPal order check would fail "
                        + "this way; check PAYPAL_API_BASE_URL (\(client.configuration.baseURL))")
            }
        }
    }

    /// GET /v1/customer/disputes?page_size=1: answered (even with no dispute) means payrecon may read disputes; 403 means
    /// the app lacks the permission, and payrecon then holds every refund of a disputed capture (it cannot see the dispute).
    static func doctorDisputesRead(_ client: PayPalClient, token: String) async -> DoctorCheck {
        let request = client.apiRequest(
            method: "GET", segments: ["v1", "customer", "disputes"], query: [("page_size", "1")], body: nil,
            requestID: nil, token: token)
        let asked = DoctorProbe.target(request)
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return .failed(doctorDisputes, "\(asked) got no answer (\(reason)): check the network to PAYPAL_API_BASE_URL")
        case .answered(let r):
            switch r.status {
            case 200..<300:
                return .ok(doctorDisputes, "\(asked) answered \(r.status): the app may read disputes")
            case 403:
                return .failed(
                    doctorDisputes,
                    "\(asked) answered 403\(doctorSummary(r)): the app lacks the disputes permission (scope "
                        + "\(disputesScope)). Enable Disputes in the app's features on developer.paypal.com (or, for a partner app, "
                        + "ask PayPal to grant the scope); until then payrecon cannot read a dispute and holds every refund of a "
                        + "disputed capture")
            case 401:
                return .failed(
                    doctorDisputes, "\(asked) answered 401\(doctorSummary(r)) with a freshly issued token: check PAYPAL_API_BASE_URL")
            case 429, 500..<600:
                return .failed(
                    doctorDisputes, "\(asked) answered \(r.status)\(doctorSummary(r)): PayPal could not answer now; run doctor again later")
            default:
                return .failed(
                    doctorDisputes,
                    "\(asked) answered \(r.status)\(doctorSummary(r)): expected 200 (the disputes list) or 403 "
                        + "(no permission); check PAYPAL_API_BASE_URL (\(client.configuration.baseURL))")
            }
        }
    }

    /// One page of one transaction of an hour PayPal lists by now (4 to 5 hours ago): answered (even with none) means
    /// the app may use Transaction Search; 403 means it lacks the permission, and `backfill` would stop with exit 2.
    static func doctorSearchRead(_ client: PayPalClient, token: String) async -> DoctorCheck {
        let now = Int64(Date().timeIntervalSince1970)
        let request = client.apiRequest(
            method: "GET", segments: ["v1", "reporting", "transactions"],
            query: [
                ("start_date", UnixTime.iso8601(now - 5 * 3_600)), ("end_date", UnixTime.iso8601(now - 4 * 3_600)),
                ("fields", "transaction_info"), ("page_size", "1")
            ],
            body: nil, requestID: nil, token: token)
        let asked = DoctorProbe.target(request)
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return .failed(doctorSearch, "\(asked) got no answer (\(reason)): check the network to PAYPAL_API_BASE_URL")
        case .answered(let r):
            switch r.status {
            case 200..<300:
                return .ok(doctorSearch, "\(asked) answered \(r.status): the app may use Transaction Search (PAYRECON_BACKFILL)")
            case 403:
                return .failed(
                    doctorSearch,
                    "\(asked) answered 403\(doctorSummary(r)): the app lacks the Transaction Search permission "
                        + "PAYRECON_BACKFILL needs. Enable Transaction search in the app's features on developer.paypal.com (it can "
                        + "take hours to apply); until then payrecon backfill exits 2 and the nightly run skips it")
            case 429, 500..<600:
                return .failed(
                    doctorSearch, "\(asked) answered \(r.status)\(doctorSummary(r)): PayPal could not answer now; run doctor again later")
            default:
                return .failed(
                    doctorSearch,
                    "\(asked) answered \(r.status)\(doctorSummary(r)): expected 200 (a page of transactions) or 403 "
                        + "(no permission); check PAYPAL_API_BASE_URL (\(client.configuration.baseURL))")
            }
        }
    }

    /// The receiver's fetcher (64 KiB at most), with more time: no sender is waiting behind this one fetch.
    static let doctorCertificateSource = HTTPCertificateSource(
        client: CurlHTTPClient(
            configuration: .init(
                timeout: .seconds(20), maxConcurrentRequests: 1, maxResponseBytes: 64 * 1024)))

    /// The certificate named by the last stored delivery's PAYPAL-CERT-URL: under PAYPAL_CERT_URL_PREFIXES, fetched
    /// as the receiver fetches it, chained to PAYPAL_TRUST_ROOTS now and issued to the name PayPal uses for that host
    /// (`PayPalWebhookVerifier.signingCertificate`, the receiver's own check). With no delivery stored, the last one
    /// refused `untrusted_certificate` is checked instead: a trust-root problem refuses every delivery, so none is
    /// ever stored, and that refusal is the one trace of it.
    static func doctorCertificateCheck(
        _ context: DoctorContext, source: any CertificateSource = doctorCertificateSource
    ) async -> DoctorCheck {
        let header = PayPalWebhookVerifier.certURLHeader
        let certURL: String, whose: String
        var refused: DoctorRejection?
        switch context.lastDelivery {
        case .unavailable(let why): return .skipped(doctorCertificate, "not checked: \(why)")
        case .found(let delivery):
            guard let url = delivery.headers.nonEmpty(header) else {
                return .failed(doctorCertificate, "delivery \(delivery.id) has no \(header) header")
            }
            certURL = url; whose = "delivery \(delivery.id)"
        case .none:
            guard case .found(let sample) = context.lastUntrustedCertificate, let url = sample.headers.nonEmpty(header) else {
                return .skipped(
                    doctorCertificate,
                    "no PayPal delivery is stored yet: run payrecon doctor again after the first one to check its certificate")
            }
            certURL = url; refused = sample
            whose =
                "no delivery is stored; the last one refused untrusted_certificate, sample \(sample.id) of \(ISO8601.format(sample.receivedAt))"
        }
        // What a refusal adds to a failure: every delivery so far met the same fate, though a sample proves nothing of its sender.
        let sofar =
            refused.map { _ in " Every PayPal delivery so far was refused this way (a sample is unauthenticated: anyone may have sent it)."
            } ?? ""
        let env = context.environment
        let prefixes = PayPalProvider.certURLPrefixes(env)
        if let problem = prefixes.lazy.compactMap(PayPalWebhookVerifier.prefixProblem).first {
            return .failed(doctorCertificate, "PAYPAL_CERT_URL_PREFIXES: \(problem)")
        }
        guard PayPalWebhookVerifier.isAllowed(certURL: certURL, prefixes: prefixes) else {
            return .failed(
                doctorCertificate,
                "\(header) \(certURL) (\(whose)) is not under PAYPAL_CERT_URL_PREFIXES "
                    + "(\(prefixes.joined(separator: ", "))): the receiver refuses such deliveries (401 untrusted_certificate) "
                    + "without fetching; if that URL is PayPal's, add its prefix.\(sofar)")
        }
        return await doctorChainCheck(certURL: certURL, whose: whose, refused: refused, sofar: sofar, env: env, source: source)
    }

    /// The certificate at an allowed `certURL`, fetched as the receiver fetches it and chained to PAYPAL_TRUST_ROOTS
    /// now: whether the receiver accepts deliveries signed with it, and if not what to change.
    static func doctorChainCheck(
        certURL: String, whose: String, refused: DoctorRejection?, sofar: String, env: Environment, source: any CertificateSource
    ) async -> DoctorCheck {
        let roots: [X509Certificate]
        do { roots = try PayPalProvider.trustRoots(env) } catch { return .failed(doctorCertificate, error.description) }
        let fetched: Result<[UInt8], any Error> = await withCheckedContinuation { done in
            // The fetch blocks (as the receiver's certificate thread does): never on the cooperative pool.
            DispatchQueue.global().async { done.resume(returning: Result { try source.pem(for: certURL) }) }
        }
        let pem: [UInt8]
        switch fetched {
        case .success(let bytes): pem = bytes
        case .failure(let error):
            return .failed(doctorCertificate, "cannot fetch \(certURL) (\(whose)): \(error); check that this host can reach it.\(sofar)")
        }
        let leaf: X509Certificate
        do { leaf = try PayPalWebhookVerifier.signingCertificate(pem, certURL: certURL, trustRoots: roots, at: Date()).leaf } catch {
            let roots =
                env["PAYPAL_TRUST_ROOTS"].map { "PAYPAL_TRUST_ROOTS=\($0)" }
                ?? "the DigiCert roots shipped with payrecon (PAYPAL_TRUST_ROOTS unset)"
            return .failed(
                doctorCertificate,
                "\(certURL) (\(whose)): \(error.description). The receiver refuses every "
                    + "delivery signed with it (401 untrusted_certificate): point PAYPAL_TRUST_ROOTS at a PEM bundle holding the root "
                    + "this certificate chains to (now: \(roots)).\(sofar)")
        }
        let name = leaf.subjectCommonNames.first ?? "?"
        let until = leaf.notAfter.map(ISO8601.format) ?? "?"
        let before = refused.map { " (the refusal was: \($0.message); deliveries signed with it verify now)" } ?? ""
        return .ok(
            doctorCertificate, "\(certURL) (\(whose)) chains to PAYPAL_TRUST_ROOTS; issued to \(name), valid until \(until)\(before)")
    }

    /// ` (NAME: message)` of a PayPal error (`error: error_description` of an OAuth2 one), else a short excerpt.
    static func doctorSummary(_ response: ProviderResponse) -> String {
        if let json = try? JSONValue.parse(response.body) {
            if let name = json["name"]?.stringValue { return " (" + name + (json["message"]?.stringValue.map { ": " + $0 } ?? "") + ")" }
            if let error = json["error"]?.stringValue {
                return " (" + error + (json["error_description"]?.stringValue.map { ": " + $0 } ?? "") + ")"
            }
        }
        let text = DoctorProbe.excerpt(response.body)
        return text.isEmpty ? "" : " (\(text))"
    }
}

/// What is wrong, as a doctor line says it.
struct DoctorProblem: Error {
    var description: String
    init(_ description: String) { self.description = description }
}
