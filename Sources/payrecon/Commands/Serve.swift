import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Receiver

let serveCommand = Command(
    name: "serve",
    summary: "Receive webhooks: verify, store durably, answer 2xx only after commit.",
    options: [
        .init(name: "--listen", value: "HOST:PORT", help: "Override PAYRECON_LISTEN (default 127.0.0.1:8080)."),
        .init(name: "--threads", value: "N", help: "HTTP worker threads (default: 4)."),
        .init(name: "--port-file", value: "FILE", help: "Write the bound port here once listening (useful with port 0)."),
    ],
    details: """
        Endpoints: POST /webhooks/pxp, /webhooks/paypal, /webhooks/paypercut; GET /healthz, /readyz, /metrics.
        A provider's endpoint is enabled when its secret is set: PXP_WEBHOOK_KEY, PAYPAL_WEBHOOK_ID,
        PAYPERCUT_WEBHOOK_SECRET. SIGTERM or Ctrl-C drains in-flight deliveries and exits 0.
        """
) { args in
    let env = Environment()
    let url = try env.databaseURL()
    let (host, port) = try env.listenAddress(flag: args.value("--listen"))
    let threads = try args.int("--threads", default: 4, range: 1...256)
    let maxBody = try env.int("PAYRECON_MAX_BODY_BYTES", default: 1_048_576, range: 1...(64 << 20))
    let endpoints = try webhookEndpoints(env)
    let pool = PostgresPool(conninfo: url, size: 8, acquireTimeout: 5)
    if !pool.healthy() {
        Log.warning("database not reachable at start; deliveries get 503 until it is", [:])
    }
    let receiver = Receiver(configuration: .init(host: host, port: port, maxBodyBytes: maxBody, threads: threads),
                            endpoints: endpoints, pool: pool)
    let bound: UInt16
    do { bound = try receiver.start() } catch { throw FatalError("\(error)") }
    if let file = args.value("--port-file") { try? "\(bound)\n".write(toFile: file, atomically: true, encoding: .utf8) }
    let signal = await Signals.waitForTermination()
    Log.info("draining", ["signal": signal])
    receiver.shutdown()
    pool.close()
    return Exit.ok
}

/// The enabled endpoints, from the environment (contract §3).
func webhookEndpoints(_ env: Environment) throws -> [any WebhookEndpoint] {
    var endpoints: [any WebhookEndpoint] = []
    let tolerance = TimeInterval(try env.duration("PAYRECON_SIGNATURE_TOLERANCE", default: "10m"))
    if let key = env["PXP_WEBHOOK_KEY"] {
        let algoName = try env.choice("PXP_WEBHOOK_HMAC", ["sha256", "sha512", "sha1"], default: "sha256")
        guard let algo = HMACAlgorithm(configuration: algoName) else { throw FatalError("PXP_WEBHOOK_HMAC=\(algoName) is not supported") }
        endpoints.append(VerifyingEndpoint.pxp(try PXPWebhookVerifier(key: key, algorithm: algo, tolerance: tolerance)))
    } else {
        Log.warning("PXP webhooks disabled: PXP_WEBHOOK_KEY is not set", [:])
    }
    if let webhookID = env["PAYPAL_WEBHOOK_ID"] {
        let roots = try trustRoots(env)
        let source = CachingCertificateSource(upstream: HTTPCertificateSource())
        endpoints.append(VerifyingEndpoint.paypal(try PayPalWebhookVerifier(
            webhookID: webhookID, certificateSource: source, trustRoots: roots,
            certURLPrefixes: env.list("PAYPAL_CERT_URL_PREFIXES", default: PayPalWebhookVerifier.defaultCertURLPrefixes.joined(separator: ",")),
            tolerance: tolerance)))
    } else {
        Log.warning("PayPal webhooks disabled: PAYPAL_WEBHOOK_ID is not set", [:])
    }
    if let secret = env["PAYPERCUT_WEBHOOK_SECRET"] {
        endpoints.append(VerifyingEndpoint.paypercut(try PaypercutWebhookVerifier(secret: secret, tolerance: tolerance)))
    }
    return endpoints
}

/// `PAYPAL_TRUST_ROOTS` (a PEM file), else the DigiCert root and intermediate shipped with payrecon.
func trustRoots(_ env: Environment) throws -> [X509Certificate] {
    guard let path = env["PAYPAL_TRUST_ROOTS"] else { return PayPalTrustRoots.defaultCertificates }
    guard let data = FileManager.default.contents(atPath: path) else {
        throw FatalError("PAYPAL_TRUST_ROOTS=\(path) cannot be read: point it at a PEM file with the root and intermediates")
    }
    do {
        let certs = try X509Certificate.parsePEMBundle(Array(data))
        guard !certs.isEmpty else { throw FatalError("PAYPAL_TRUST_ROOTS=\(path) holds no certificate") }
        return certs
    } catch let e as FatalError { throw e } catch {
        throw FatalError("PAYPAL_TRUST_ROOTS=\(path) is not a PEM bundle: \(error)")
    }
}
