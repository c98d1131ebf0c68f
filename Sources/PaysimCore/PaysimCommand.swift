import Crypto
import Foundation
import Reconciliation
import Observability
import Synchronization

/// paysim's command line: flags (which win) over environment variables over defaults.
public struct PaysimOptions: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8089
    public var publicURL: String?
    public var seedFile: String?
    public var paypalRootOut: String?
    public var portFile: String?
    public var threads = 4
    public var config = SimConfig()

    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case help
        case usage(String)
        public var description: String {
            switch self {
            case .help: return "help requested"
            case .usage(let message): return message
            }
        }
    }

    public static let help = """
        paysim — a PXP, PayPal and Paypercut sandbox simulator for payrecon's tests, demo and benchmarks.

        USAGE: paysim [options]

        Serves (one process):
          PXP     GET  /api/v1/transactions/{merchant}/{site}?merchantTransactionId=…|systemTransactionId=…
                  POST /api/v1/transactions/{systemTransactionId}/modifications   (Capture, FinalCapture, Void, Refund, Incremental)
                  both require Authorization: PXP-UST1 {tokenId}:{timestamp}:{hmac}, X-Request-Id, X-Client-Id
          PayPal  POST /v1/oauth2/token (Basic client_id:secret, grant_type=client_credentials)
                  GET  /v2/checkout/orders/{id}, /v2/payments/authorizations/{id}, /captures/{id}, /refunds/{id}
                  POST /v2/payments/authorizations/{id}/capture, /authorizations/{id}/void, /captures/{id}/refund
                  (Bearer token; PayPal-Request-Id makes a POST idempotent)
                  GET  /v1/customer/disputes?page_size=N, /v1/customer/disputes/{id}   (403 without the disputes scope)
                  GET  /v1/notifications/certs/CERT-paysim-1   (the webhook signing leaf, PEM with CRLF)
                  GET  /v1/reporting/transactions?start_date&end_date&page_size&page   (Transaction Search: 31 days,
                       3-hour lag, RESULTSET_TOO_LARGE, 403 without the permission)
                  GET  /v1/notifications/webhooks-events?start_time&end_time&page_size&transaction_id&event_type
                       (every event paysim made, delivered or lost; next links; 45 days)
          Paypercut GET /v1/payment_intents/{id}, /v2/payments/{id}; POST …/capture, …/cancel, /v1/refunds
                  GET  /v2/payments, /v1/refunds ?start_date&end_date&limit&last_key   ({items, last_key})
          Admin   POST /admin/pxp/transactions, /admin/paypal/orders, /admin/seed, /admin/faults, /admin/reset,
                  /admin/webhooks/send;  GET /admin/log, /admin/faults, /admin/stats, /admin/paypal/root.pem, /healthz

        Options (a flag overrides its environment variable):
          --listen HOST:PORT          address to serve (default 127.0.0.1:8089; port 0 picks a free port)
          --public-url URL            base of links and PAYPAL-CERT-URL (default http://HOST:PORT as bound)
          --port-file FILE            write the bound port to FILE once listening
          --seed-file FILE            load {"pxp": [...], "paypal": [...]} at startup (same as POST /admin/seed)
          --paypal-root-out FILE      write the test CA's root + intermediate PEM (for PAYPAL_TRUST_ROOTS)
          --pxp-client-id ID          expected X-Client-Id              (PXP_CLIENT_ID; default paysim-client)
          --pxp-token-id ID           expected PXP-UST1 token id        (PXP_TOKEN_ID; default paysim-token)
          --pxp-token-value VALUE     PXP-UST1 token value              (PXP_TOKEN_VALUE)
          --pxp-merchant-group NAME   eventOwner.merchantGroup in PXP webhooks (default paysim-group)
          --paypal-client-id ID       OAuth2 client id                  (PAYPAL_CLIENT_ID; default paysim-paypal-client)
          --paypal-secret SECRET      OAuth2 client secret              (PAYPAL_CLIENT_SECRET)
          --paypal-token-lifetime S   expires_in of access tokens, seconds (default 32400)
          --pxp-webhook-key KEY       HMAC key for PXP deliveries       (PXP_WEBHOOK_KEY)
          --paypal-webhook-id ID      webhook id signed into PayPal deliveries (PAYPAL_WEBHOOK_ID; default WEBHOOK_ID)
          --latency-ms N              added latency on provider API paths (default 0)
          --latency-jitter-ms N       extra random latency 0...N
          --error-rate R              share of provider calls answered 500 (0...1)
          --rate-429 R                share answered 429 with Retry-After
          --retry-after S             Retry-After seconds for 429 (default 1)
          --drop-rate R               share whose connection is closed (answered 503, Connection: close, no body)
          --seed N                    seed of the fault sequence (deterministic per seed)
          --paypal-no-disputes-permission  answer GET /v1/customer/disputes and /v1/customer/disputes/{id} with 403, as for
                                      an app without the scope
          --pxp-behaviour LIST        what PXP does where it documents nothing, e.g. dedupe=no,lookup=no,
                                      partial-capture=captured,increment=value,timestamp=ms (defaults: dedupe=yes,
                                      lookup=yes, partial-capture=authorised, increment=authorised, timestamp=seconds)
          --threads N                 HTTP worker threads (default 4)
          -h, --help                  show this help

        Admin bodies (JSON; amounts are decimal strings or numbers in major units, parsed exactly):
          /admin/pxp/transactions  {merchant, site, merchantTransactionId, intent (Authorisation|EstimatedAuthorisation|
                                   Purchase|Payout|...), currency, value, state (default Authorised), authorisedAmount?,
                                   createdAt?, systemTransactionId?, entryType?, fundingType?,
                               reportedSite? (the site the answer reports, if not the path's)}  (or an array of them)
          /admin/paypal/orders     {id, intent (CAPTURE|AUTHORIZE), status (default COMPLETED), currency, amount,
                                   merchant_id?, reference_id?, create_time?, receivable_currency? and exchange_rate?
                                   (the payee receives in another currency), authorizations: [{id?, status?, amount?}],
                                   captures: [{id?, status?, amount?, authorization_id?, final_capture?, completed_time?
                                   (a pending payment that cleared later), listed_time? (Transaction Search lists it late)}],
                                   refunds: [{id?, status?, amount?, capture_id?}]}  (or an array of them)
          /admin/seed, --seed-file {"pxp": [transaction...], "paypal": [order...]}   (all or nothing)
          /admin/faults            {latency_ms, latency_jitter_ms, error_rate, rate_429, retry_after, drop_rate,
                                   drop_after_apply_rate, seed}
          /admin/pxp/behaviour     {dedupe?, lookup?, partial_capture?, increment?, timestamp?}  (GET shows it)
          /admin/webhooks/send     {provider: pxp|paypal, target: URL, count?, forged?, duplicate?, body?: {...}, and
                                   pxp: merchantTransactionId | systemTransactionId, merchant?, site?, state?, event_code?,
                                        nested?, array?;
                                   paypal: event_type, resource_id | order_id, webhook_id?, create_time?;
                                   lost?: made and listed by the provider, never sent (no target needed)}
          /admin/log[?provider=&since=N]  the capture/void/refund/modification calls received, with their results

        Faults apply to provider API paths only (not /admin, not the cert URL). Logs are JSON lines on stderr.
        SIGTERM or SIGINT stops paysim cleanly (exit 0). Exit 2 on a usage or startup error.
        """

    /// Parses `arguments` (without the program name). Throws `.help` for -h/--help.
    public static func parse(_ arguments: [String], environment: [String: String] = [:]) throws(ParseError) -> PaysimOptions {
        var options = PaysimOptions()
        let env: [(String, WritableKeyPath<SimConfig, String>)] = [
            ("PXP_CLIENT_ID", \.pxpClientID), ("PXP_TOKEN_ID", \.pxpTokenID), ("PXP_TOKEN_VALUE", \.pxpTokenValue),
            ("PAYPAL_CLIENT_ID", \.paypalClientID), ("PAYPAL_CLIENT_SECRET", \.paypalSecret),
            ("PXP_WEBHOOK_KEY", \.pxpWebhookKey), ("PAYPAL_WEBHOOK_ID", \.paypalWebhookID)
        ]
        for (name, path) in env { if let v = environment[name], !v.isEmpty { options.config[keyPath: path] = v } }

        var faults = FaultConfig()
        var i = 0
        while i < arguments.count {
            var flag = arguments[i]
            var inline: String?
            if flag.hasPrefix("--"), let eq = flag.firstIndex(of: "=") {
                inline = String(flag[flag.index(after: eq)...])
                flag = String(flag[..<eq])
            }
            if flag == "-h" || flag == "--help" { throw .help }
            func value() throws(ParseError) -> String {
                if let inline { return inline }
                i += 1
                guard i < arguments.count else { throw .usage("\(flag) needs a value") }
                return arguments[i]
            }
            func int(_ range: ClosedRange<Int>) throws(ParseError) -> Int {
                let v = try value()
                guard let n = Int(v), range.contains(n) else { throw .usage("\(flag) must be an integer in \(range), not \(v)") }
                return n
            }
            func rate() throws(ParseError) -> Double {
                let v = try value()
                guard let r = Double(v), r >= 0, r <= 1 else { throw .usage("\(flag) must be a number between 0 and 1, not \(v)") }
                return r
            }
            func text() throws(ParseError) -> String {
                let v = try value()
                guard !v.isEmpty else { throw .usage("\(flag) must not be empty") }
                return v
            }
            switch flag {
            case "--listen":
                let v = try value()
                guard let colon = v.lastIndex(of: ":"), let port = UInt16(v[v.index(after: colon)...]) else {
                    throw .usage("--listen must be HOST:PORT, not \(v)")
                }
                let host = String(v[..<colon])
                options.host = host.isEmpty ? "127.0.0.1" : host
                options.port = port
            case "--public-url": options.publicURL = try text()
            case "--port-file": options.portFile = try text()
            case "--seed-file": options.seedFile = try text()
            case "--paypal-root-out": options.paypalRootOut = try text()
            case "--pxp-client-id": options.config.pxpClientID = try text()
            case "--pxp-token-id": options.config.pxpTokenID = try text()
            case "--pxp-token-value": options.config.pxpTokenValue = try text()
            case "--pxp-merchant-group": options.config.pxpMerchantGroup = try text()
            case "--paypal-client-id": options.config.paypalClientID = try text()
            case "--paypal-secret": options.config.paypalSecret = try text()
            case "--paypal-token-lifetime": options.config.paypalTokenLifetime = Int64(try int(1...31_536_000))
            case "--pxp-webhook-key": options.config.pxpWebhookKey = try text()
            case "--paypal-webhook-id": options.config.paypalWebhookID = try text()
            case "--latency-ms": faults.latencyMs = try int(0...600_000)
            case "--latency-jitter-ms": faults.latencyJitterMs = try int(0...600_000)
            case "--error-rate": faults.errorRate = try rate()
            case "--rate-429": faults.rate429 = try rate()
            case "--retry-after": faults.retryAfter = try int(0...86_400)
            case "--drop-rate": faults.dropRate = try rate()
            case "--seed":
                let v = try value()
                guard let seed = UInt64(v) else { throw .usage("--seed must be a non-negative integer, not \(v)") }
                faults.seed = seed
            case "--paypal-no-disputes-permission": options.config.paypalDisputesPermission = false
            case "--pxp-behaviour":
                switch PXPBehaviour.parse(try value()) {
                case .success(let b): options.config.pxpBehaviour = b
                case .failure(let e): throw .usage("--pxp-behaviour: \(e.message)")
                }
            case "--threads": options.threads = try int(1...256)
            default:
                throw .usage("unknown option \(flag)")
            }
            i += 1
        }
        guard faults.errorRate + faults.rate429 + faults.dropRate <= 1 else {
            throw .usage("--error-rate + --rate-429 + --drop-rate must not exceed 1")
        }
        options.config.faults = faults
        return options
    }
}

/// Runs paysim until SIGTERM/SIGINT. Returns the process exit code.
public enum PaysimApp {
    public static func run(_ options: PaysimOptions) async -> Int32 {
        let ca: PayPalTestCA
        do { ca = try PayPalTestCA() } catch {
            Log.error("cannot create the PayPal test CA", ["error": "\(error)"])
            return 2
        }
        let simulator = Simulator(config: options.config, ca: ca, transport: HTTPClientWebhookTransport())
        if let seedFile = options.seedFile {
            do {
                let data = try Data(contentsOf: URL(fileURLWithPath: seedFile))
                let (pxp, paypal) = try simulator.seed(Array(data))
                Log.info("seeded", ["file": seedFile, "pxp": pxp, "paypal": paypal])
            } catch {
                Log.error("cannot load the seed file", ["file": seedFile, "error": "\(error)"])
                return 2
            }
        }
        if let out = options.paypalRootOut {
            do { try Data(ca.trustBundlePEM.utf8).write(to: URL(fileURLWithPath: out), options: .atomic) } catch {
                Log.error("cannot write the PayPal root PEM", ["file": out, "error": "\(error)"])
                return 2
            }
        }
        let server = PaysimServer(simulator: simulator, host: options.host, port: options.port, threads: options.threads)
        let port: UInt16
        do { port = try server.start() } catch {
            Log.error("cannot listen", ["address": "\(options.host):\(options.port)", "error": "\(error)"])
            return 2
        }
        let linkHost = options.host == "0.0.0.0" ? "127.0.0.1" : options.host
        simulator.setPublicBaseURL(options.publicURL ?? "http://\(linkHost):\(port)")
        if let portFile = options.portFile {
            do { try Data("\(port)\n".utf8).write(to: URL(fileURLWithPath: portFile), options: .atomic) } catch {
                Log.error("cannot write the port file", ["file": portFile, "error": "\(error)"])
                await server.shutdown(drainTimeout: 0)
                return 2
            }
        }
        let faults = options.config.faults
        var listening: [String: any Sendable] = [
            "address": "\(options.host):\(port)", "port": port,
            "cert_url": simulator.certURL
        ]
        if FaultInjector(config: faults).isActive { listening["faults"] = faults.json.serializedText }
        Log.info("listening", listening)
        let signal = await waitForTermination()
        Log.info("stopping", ["signal": signal])
        await server.shutdown(drainTimeout: 5)
        Log.info("stopped")
        return 0
    }

    /// Waits for SIGTERM or SIGINT; returns its name.
    static func waitForTermination() async -> String {
        Foundation.signal(SIGTERM, SIG_IGN)
        Foundation.signal(SIGINT, SIG_IGN)
        let done = Mutex<CheckedContinuation<String, Never>?>(nil)
        var sources: [DispatchSourceSignal] = []
        let name = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            done.withLock { $0 = continuation }
            for (number, label) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    let c = done.withLock { value -> CheckedContinuation<String, Never>? in
                        defer { value = nil }
                        return value
                    }
                    c?.resume(returning: label)
                }
                source.resume()
                sources.append(source)
            }
        }
        for source in sources { source.cancel() }
        return name
    }
}
