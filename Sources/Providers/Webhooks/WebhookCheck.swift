import Crypto
import Foundation
import Reconciliation

/// The core of `payrecon verify pxp|paypal|paypercut`: checks one delivery offline, exactly as the receiver would
/// (signature, freshness, certificate, then the body's shape). The CLI reads the files and prints `outcome.line`.
///
/// Decisions:
/// - With `--cert FILE` the PEM stands in for the fetch, but `PAYPAL-CERT-URL` must still be under an allowed prefix:
///   the verdict is the one the receiver would give to the same headers.
/// - A validly signed body that is not the provider's event shape is `invalid: malformed_body: …` (the receiver
///   answers it 400): "valid" means the receiver would store it.
/// - `--at transmission` evaluates every time check at the delivery's own signed timestamp (replays of recorded
///   deliveries whose certificates have since expired); `--at TIME` uses TIME as now.
public enum WebhookCheck {
    /// The instant the time checks use.
    public enum At: Sendable, Hashable {
        case now
        case transmission
        case time(Date)

        /// `now`, `transmission`, unix seconds / milliseconds, or ISO 8601; nil for anything else.
        public init?(argument: String) {
            switch argument.lowercased() {
            case "now": self = .now
            case "transmission": self = .transmission
            default:
                guard let date = SignedTimestamp.parse(argument) else { return nil }
                self = .time(date)
            }
        }
    }

    /// The parsed command-line options (file contents already read).
    public struct Options: Sendable {
        public var provider: Provider
        public var body: [UInt8]
        /// The `--headers` file: a JSON object of header names to string values.
        public var headersJSON: [UInt8]
        /// `--webhook-id` (PayPal; else `PAYPAL_WEBHOOK_ID`).
        public var webhookID: String?
        /// `--cert` PEM (PayPal): used instead of fetching `PAYPAL-CERT-URL`.
        public var certPEM: [UInt8]?
        /// `--roots` PEM bundle (PayPal); nil = the bundled DigiCert roots.
        public var rootsPEM: [UInt8]?
        /// `--key`: PXP hash key or Paypercut webhook secret.
        public var key: String?
        public var at: At
        public var hmacAlgorithm: HMACAlgorithm
        public var tolerance: TimeInterval
        public var certURLPrefixes: [String]

        public init(
            provider: Provider, body: [UInt8], headersJSON: [UInt8], webhookID: String? = nil,
            certPEM: [UInt8]? = nil, rootsPEM: [UInt8]? = nil, key: String? = nil, at: At = .now,
            hmacAlgorithm: HMACAlgorithm = .sha256, tolerance: TimeInterval = WebhookDefaults.signatureTolerance,
            certURLPrefixes: [String] = PayPalWebhookVerifier.defaultCertURLPrefixes
        ) {
            self.provider = provider; self.body = body; self.headersJSON = headersJSON; self.webhookID = webhookID
            self.certPEM = certPEM; self.rootsPEM = rootsPEM; self.key = key; self.at = at
            self.hmacAlgorithm = hmacAlgorithm; self.tolerance = tolerance; self.certURLPrefixes = certURLPrefixes
        }
    }

    /// The verdict.
    public enum Outcome: Sendable, Hashable {
        case valid
        case invalid(WebhookRejection)

        /// `valid` or `invalid: <code>: <message>`.
        public var line: String {
            switch self {
            case .valid: "valid"
            case .invalid(let rejection): "invalid: \(rejection)"
            }
        }

        /// 0 valid, 1 invalid.
        public var exitCode: Int32 { self == .valid ? 0 : 1 }
    }

    /// The options cannot be used (exit 2): a missing key, an unreadable headers file, …
    public struct UsageError: Error, Sendable, Hashable, CustomStringConvertible {
        public let message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// Checks the delivery. `certificateSource` is used for PayPal when no `--cert` is given (nil: `--cert` is required).
    public static func run(
        _ options: Options, certificateSource: (any CertificateSource)? = nil,
        now: Date = Date()
    ) throws(UsageError) -> Outcome {
        let headers = try headers(fromJSON: options.headersJSON)
        let time: VerificationTime
        switch options.at {
        case .now: time = .at(now)
        case .transmission: time = .signedTime
        case .time(let date): time = .at(date)
        }
        do {
            switch options.provider {
            case .pxp:
                let verifier: PXPWebhookVerifier
                do {
                    verifier = try PXPWebhookVerifier(
                        key: options.key ?? "", algorithm: options.hmacAlgorithm,
                        tolerance: options.tolerance)
                } catch {
                    throw UsageError("--key is required for pxp (or set PXP_WEBHOOK_KEY)")
                }
                try verifier.verify(headers: headers, body: options.body, time: time)
            case .paypercut:
                let verifier: PaypercutWebhookVerifier
                do {
                    verifier = try PaypercutWebhookVerifier(secret: options.key ?? "", tolerance: options.tolerance)
                } catch {
                    throw UsageError("--key is required for paypercut (or set PAYPERCUT_WEBHOOK_SECRET)")
                }
                try verifier.verify(headers: headers, body: options.body, time: time)
            case .paypal:
                try verifyPayPal(options, headers: headers, time: time, certificateSource: certificateSource)
            }
            _ = try WebhookDeliverySummary.parse(provider: options.provider, body: options.body, headers: headers)
            return .valid
        } catch let error as UsageError {
            throw error
        } catch let rejection as WebhookRejection {
            return .invalid(rejection)
        } catch {
            throw UsageError("\(error)")
        }
    }

    /// PayPal's check: the certificate given (or fetched by `certificateSource`), chained to the trust roots.
    static func verifyPayPal(
        _ options: Options, headers: Headers, time: VerificationTime, certificateSource: (any CertificateSource)?
    ) throws {
        guard let webhookID = options.webhookID, !webhookID.isEmpty else {
            throw UsageError("--webhook-id is required for paypal (or set PAYPAL_WEBHOOK_ID)")
        }
        let source: any CertificateSource
        if let pem = options.certPEM {
            source = FixedCertificateSource(pem: pem)
        } else if let certificateSource {
            source = certificateSource
        } else {
            throw UsageError("--cert FILE is required for paypal: verify works offline and does not fetch PAYPAL-CERT-URL")
        }
        var roots = PayPalTrustRoots.defaultCertificates
        if let rootsPEM = options.rootsPEM {
            do {
                roots = try X509Certificate.parsePEMBundle(rootsPEM)
            } catch {
                throw UsageError("--roots: \(error)")
            }
        }
        let verifier: PayPalWebhookVerifier
        do {
            verifier = try PayPalWebhookVerifier(
                webhookID: webhookID, certificateSource: source, trustRoots: roots,
                certURLPrefixes: options.certURLPrefixes, tolerance: options.tolerance)
        } catch {
            throw UsageError("\(error)")
        }
        do { try verifier.verify(headers: headers, body: options.body, time: time) } catch {
            // A certificate that could not be had says nothing of the delivery: not "invalid", but cannot tell.
            if error.code == .untrustedCertificate, error.message.hasPrefix("cannot fetch the certificate") {
                throw UsageError("cannot verify: \(error.message); pass the certificate with --cert FILE")
            }
            throw error
        }
    }

    /// Reads a `--headers` file: a JSON object whose values are strings.
    public static func headers(fromJSON bytes: [UInt8]) throws(UsageError) -> Headers {
        guard let json = try? JSONSerialization.jsonObject(with: Data(bytes)), let object = json as? [String: Any] else {
            throw UsageError("--headers: expected a JSON object of header names to string values")
        }
        var fields: [(String, String)] = []
        for name in object.keys.sorted() {
            guard let value = object[name] as? String else {
                throw UsageError("--headers: the value of \(name) is not a string")
            }
            fields.append((name, value))
        }
        return Headers(fields)
    }
}

extension WebhookCheck.Options {
    /// The options as the receiver would configure the provider from `environment`: its webhook
    /// secret (`PXP_WEBHOOK_KEY`, `PAYPAL_WEBHOOK_ID`, `PAYPERCUT_WEBHOOK_SECRET`, or `NAME_FILE`),
    /// `PXP_WEBHOOK_HMAC`, `PAYRECON_SIGNATURE_TOLERANCE`, `PAYPAL_CERT_URL_PREFIXES` and, without `rootsPEM`,
    /// `PAYPAL_TRUST_ROOTS`.
    public init(
        provider: Provider, body: [UInt8], headersJSON: [UInt8], certPEM: [UInt8]?, rootsPEM: [UInt8]?,
        at: WebhookCheck.At, environment env: Environment
    ) throws(ConfigurationError) {
        let secret = try env.secret(ProviderRegistry.definition(provider).webhookSecretVariable)
        let name = try env.choice("PXP_WEBHOOK_HMAC", ["sha256", "sha512", "sha1"], default: "sha256")
        var roots = rootsPEM
        if roots == nil, let path = env["PAYPAL_TRUST_ROOTS"] {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("PAYPAL_TRUST_ROOTS \(path): cannot read the file")
            }
            roots = Array(data)
        }
        self.init(
            provider: provider, body: body, headersJSON: headersJSON,
            webhookID: provider == .paypal ? secret : nil, certPEM: certPEM, rootsPEM: roots,
            key: provider == .paypal ? nil : secret, at: at, hmacAlgorithm: HMACAlgorithm(configuration: name) ?? .sha256,
            tolerance: try env.signatureTolerance(),
            certURLPrefixes: PayPalProvider.certURLPrefixes(env))
    }
}
