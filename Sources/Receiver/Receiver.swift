import CivilTime
import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Synchronization

/// `payrecon serve`: the webhook endpoint (README: Commands; docs/OPERATIONS.md).
///
/// Per delivery: route → size → signature on the raw bytes → parse (dedupe key) → group commit → 200. A 2xx is
/// answered only from the commit's completion; every 4xx is recorded in `rejected_deliveries`.
public final class Receiver: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: UInt16
        public var maxBodyBytes: Int
        public var threads: Int
        public var connectionTimeoutSeconds: UInt32
        public var drainSeconds: Int
        /// PAYRECON_MAX_CONNECTIONS and PAYRECON_MAX_CONNECTIONS_PER_IP: one sender cannot take every
        /// connection slot.
        public var maxConnections: Int
        public var maxConnectionsPerIP: Int
        /// PAYRECON_COMMIT_TIMEOUT: a delivery whose commit has not finished by then is answered 503
        /// storage_unavailable (it may still commit: the provider's redelivery is then a duplicate).
        public var commitTimeout: Duration
        /// PAYRECON_REQUEST_TIMEOUT: longest a request may take to its answer, however steadily it trickles (MHD's
        /// own timeout, `connectionTimeoutSeconds`, only bounds idle periods).
        public var requestTimeout: Duration
        /// PAYRECON_TRUSTED_PROXIES: from these peers the last X-Forwarded-For hop is the sender (per-sender limits,
        /// rejection counts and samples; never authentication), and the per-IP connection limit does not apply.
        public var trustedProxies: [AddressRange]
        /// PAYRECON_MAX_BODY_BUFFER: bytes of bodies held at once, all connections together (`BodyBudget`).
        public var maxBodyBuffer: Int
        /// PAYRECON_METRICS_LISTEN: where /metrics, /readyz and /healthz are answered instead of the webhook listener
        /// (nil: on the webhook listener).
        public var metricsHost: String?
        public var metricsPort: UInt16
        public init(
            host: String = "127.0.0.1", port: UInt16 = 8080, maxBodyBytes: Int = 1_048_576, threads: Int = 4,
            connectionTimeoutSeconds: UInt32 = 15, drainSeconds: Int = 20, maxConnections: Int = 1000, maxConnectionsPerIP: Int = 256,
            commitTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(30), trustedProxies: [AddressRange] = [],
            maxBodyBuffer: Int = Receiver.defaultMaxBodyBuffer, metricsHost: String? = nil, metricsPort: UInt16 = 0
        ) {
            self.host = host; self.port = port; self.maxBodyBytes = maxBodyBytes; self.threads = threads
            self.connectionTimeoutSeconds = connectionTimeoutSeconds; self.drainSeconds = drainSeconds
            self.maxConnections = maxConnections; self.maxConnectionsPerIP = maxConnectionsPerIP
            self.commitTimeout = commitTimeout
            self.requestTimeout = requestTimeout
            self.trustedProxies = trustedProxies
            self.maxBodyBuffer = maxBodyBuffer
            self.metricsHost = metricsHost; self.metricsPort = metricsPort
        }
    }

    /// PAYRECON_MAX_BODY_BUFFER's default: 256 MiB.
    public static let defaultMaxBodyBuffer = 256 << 20

    private let configuration: Configuration
    /// One per configured provider; replaced whole by `replaceEndpoints` (SIGHUP), never edited.
    private let webhookTable: Mutex<[Provider: any ProviderWebhook]>
    private var webhooks: [Provider: any ProviderWebhook] { webhookTable.withLock { $0 } }
    private let storage: any ReceiverStorage
    private let committer: GroupCommitter
    private let server: Mutex<HTTPServer?> = Mutex(nil)
    private let metricsServer: Mutex<HTTPServer?> = Mutex(nil)
    /// Headers stored as sent, lower-cased, per provider (the rest by name with `[redacted]`).
    private let storedHeaders: [String: Set<String>]
    private let metrics = ReceiverMetrics()
    private let logger: Logger
    /// Request ids: a random prefix per process and a counter, so lines of one delivery can be found together.
    private let requestPrefix = String(UInt32.random(in: .min ... .max), radix: 16)
    private let requestCounter = Atomic<UInt64>(0)
    /// What `/readyz` and `/metrics` answer from: refreshed in the background every `probeSeconds`, so neither ever
    /// waits on the database nor runs a query per scrape.
    private let probe: StorageProbe
    /// Rejections are counted and sampled apart from deliveries, bounded in bytes.
    private let rejections: RejectionLane
    /// Where verification keeps what it learned (one thread for the receiver's life, reloads included).
    private let material: ReceiverMaterialStore

    /// `webhooks`: the webhook side of each provider that is configured; the others answer 503 `provider_not_configured`.
    /// `expectedMigrations`: the versions of the migrations this payrecon ships; `/readyz` is 503 while the database
    /// lacks any of them.
    public convenience init(
        configuration: Configuration, webhooks: [Provider: any ProviderWebhook], pool: PostgresPool,
        expectedMigrations: [String] = [], logger: Logger
    ) {
        self.init(
            configuration: configuration, webhooks: webhooks,
            storage: PostgresReceiverStorage(
                pool: pool, statementTimeoutMilliseconds: Int((configuration.commitTimeout.inSeconds * 1000).rounded(.up)),
                expectedMigrations: expectedMigrations),
            logger: logger)
    }

    /// The receiver over any storage (`PostgresReceiverStorage` in production; an in-memory one in tests).
    public init(configuration: Configuration, webhooks: [Provider: any ProviderWebhook], storage: any ReceiverStorage, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.webhookTable = Mutex(webhooks)
        self.storedHeaders = Dictionary(
            uniqueKeysWithValues: ProviderRegistry.definitions.map { definition in
                (definition.provider.rawValue, Set((definition.webhookHeaders + Self.headersAlwaysStored).map { $0.lowercased() }))
            })
        self.storage = storage
        self.committer = GroupCommitter(storage: storage, logger: logger)
        self.rejections = RejectionLane(storage: storage, logger: logger)
        self.material = ReceiverMaterialStore(storage: storage, logger: logger)
        metrics.initialise()
        let probe = StorageProbe(storage: storage)
        self.probe = probe
        Metrics.shared.addCollector {
            guard let n = probe.pending else { return [] }
            return [
                (name: "payrecon_deliveries_pending", help: "Stored deliveries waiting for the worker (refreshed every 2 s).", value: n)
            ]
        }
        Metrics.shared.addCollector {
            guard let pending = probe.migrationsPending else { return [] }
            return [
                (
                    name: "payrecon_migrations_pending",
                    help: "Migrations this payrecon ships that the database lacks (run payrecon migrate).",
                    value: Int64(pending.count)
                )
            ]
        }
        Metrics.shared.addCollector { [weak self] in
            guard let held = self?.bodyBufferBytes else { return [] }
            return [
                (
                    name: "payrecon_body_buffer_bytes",
                    help: "Bytes of webhook bodies held in memory now (PAYRECON_MAX_BODY_BUFFER bounds them).",
                    value: Int64(held)
                )
            ]
        }
    }

    /// Starts listening; returns the bound port (useful with port 0).
    @discardableResult
    public func start() throws -> UInt16 {
        var http = HTTPServer.Configuration(
            host: configuration.host, port: configuration.port, threads: configuration.threads,
            maxBodyBytes: configuration.maxBodyBytes,
            connectionTimeoutSeconds: configuration.connectionTimeoutSeconds,
            connectionLimit: configuration.maxConnections,
            connectionLimitPerIP: configuration.maxConnectionsPerIP,
            requestTimeout: configuration.requestTimeout,
            onRequestTimeout: { [metrics] in metrics.requestTimedOut() })
        http.connectionLimitPerIPExempt = configuration.trustedProxies
        http.maxBodyBuffer = configuration.maxBodyBuffer
        let separateMetrics = configuration.metricsHost != nil
        let s = HTTPServer(configuration: http) { [self] request, responder in
            handle(request, responder, operations: !separateMetrics)
        }
        // What verification kept from earlier runs (PayPal's certificates), before the first delivery.
        for webhook in webhooks.values { webhook.keep(in: material) }
        probe.start()
        if let host = configuration.metricsHost {
            let m = HTTPServer(
                configuration: .init(
                    host: host, port: configuration.metricsPort, threads: 1, maxBodyBytes: 4096,
                    connectionTimeoutSeconds: 10, connectionLimit: 64)
            ) { [self] request, responder in
                guard ["/healthz", "/readyz", "/metrics"].contains(request.path) else {
                    return responder.respond(.error(404, "not_found", "no such endpoint: \(request.path)"))
                }
                handle(request, responder, operations: true)
            }
            try m.start()
            metricsServer.withLock { $0 = m }
            logger.info("operations endpoints listening", ["address": "\(host):\(m.port)"])
        }
        try s.start()
        server.withLock { $0 = s }
        logger.info(
            "receiver listening",
            ["address": "\(configuration.host):\(s.port)", "providers": webhooks.keys.map(\.rawValue).sorted().joined(separator: ",")])
        return s.port
    }

    /// Bytes of webhook bodies held in memory now (PAYRECON_MAX_BODY_BUFFER bounds them).
    public var bodyBufferBytes: Int { server.withLock { $0?.bodyBufferBytes } ?? 0 }

    /// Puts `new` in place of the providers' webhook sides (SIGHUP: the secrets re-read). A request already deciding
    /// keeps the one it read; the next one uses the new: nothing is dropped. What verification keeps (PayPal's
    /// certificates) is restored into the new ones first.
    public func replaceWebhooks(_ new: [Provider: any ProviderWebhook]) {
        for webhook in new.values { webhook.keep(in: material) }
        webhookTable.withLock { $0 = new }
        logger.info("webhook secrets re-read", ["providers": new.keys.map(\.rawValue).sorted().joined(separator: ",")])
    }

    /// The port `/metrics`, `/readyz` and `/healthz` are answered on (the webhook port without PAYRECON_METRICS_LISTEN).
    public var operationsPort: UInt16 {
        metricsServer.withLock { $0?.port } ?? server.withLock { $0?.port } ?? 0
    }

    /// Stops accepting, answers what is in flight (each after its commit), then returns.
    public func shutdown() {
        let deadline = DispatchTime.now() + .seconds(configuration.drainSeconds)
        server.withLock { $0 }?.shutdown(drainTimeout: Double(configuration.drainSeconds))
        metricsServer.withLock { $0 }?.shutdown(drainTimeout: 1)
        _ = committer.drain(timeout: deadline)
        rejections.drain(timeout: deadline)
        probe.stop()
        logger.info("receiver stopped")
    }

    // MARK: - Routing

    /// `operations`: whether this listener answers /healthz, /readyz and /metrics (not the webhook listener when
    /// PAYRECON_METRICS_LISTEN puts them elsewhere: a proxy in front of the webhooks then publishes nothing else).
    func handle(_ request: HTTPRequest, _ responder: HTTPResponder, operations: Bool = true) {
        let path = request.path
        if path.hasPrefix("/webhooks/") {
            let name = String(path.dropFirst("/webhooks/".count))
            guard let provider = Provider(rawValue: name) else {
                return responder.respond(.error(404, "not_found", "no such endpoint: \(path)"))
            }
            guard request.method == "POST" else {
                return responder.respond(.error(405, "method_not_allowed", "use POST for \(path)", headers: [("Allow", "POST")]))
            }
            return receive(provider, request, responder)
        }
        switch path {
        case "/healthz" where operations, "/readyz" where operations, "/metrics" where operations:
            guard request.method == "GET" || request.method == "HEAD" else {
                return responder.respond(.error(405, "method_not_allowed", "use GET for \(path)", headers: [("Allow", "GET, HEAD")]))
            }
            if path == "/healthz" { return responder.respond(.json(200, #"{"status":"ok"}"#)) }
            if path == "/metrics" {
                return responder.respond(
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                        body: Array(Metrics.shared.render().utf8)))
            }
            if let pending = probe.migrationsPending, !pending.isEmpty {
                return responder.respond(
                    .error(
                        503, "migrations_pending",
                        "the database lacks \(pending.count) migration(s) this payrecon needs (\(pending.prefix(3).joined(separator: ", "))\(pending.count > 3 ? ", …" : "")): "
                            + "run payrecon migrate", headers: [("Retry-After", "30")]))
            }
            let ready = probe.ready
            return responder.respond(
                ready
                    ? .json(200, #"{"status":"ready"}"#)
                    : .error(503, "storage_unavailable", "the database is not reachable", headers: [("Retry-After", "5")]))
        default:
            responder.respond(.error(404, "not_found", "no such endpoint: \(path)"))
        }
    }

    // MARK: - Receiving a delivery

    private func receive(_ provider: Provider, _ request: HTTPRequest, _ responder: HTTPResponder) {
        let started = DispatchTime.now()
        // The request's logger is built only when a line is written: nothing is formatted on the path that logs nothing.
        let requestNumber = requestCounter.add(1, ordering: .relaxed).newValue
        let log: @Sendable () -> Logger = { [logger, requestPrefix] in
            logger.with(["request_id": requestPrefix + "-" + String(requestNumber), "provider": provider.rawValue])
        }
        let headers = Self.stored(request.headers.pairs, keeping: storedHeaders[provider.rawValue] ?? [])
        let sender = resolvedSender(of: request)
        let reject: @Sendable (Int, String, String) -> Void = { [self] status, code, message in
            let own = rejections.record(
                Rejection(
                    provider: provider, reason: code, message: message, headers: headers,
                    body: request.body, bodyBytes: request.headers["content-length"].flatMap { Int64($0) },
                    remoteAddress: sender))
            metrics.delivery(provider, outcome: code)
            // The first 10 per (provider, reason) a minute; the rest in the lane's one summary line a minute.
            if own {
                var fields: [String: any Sendable] = ["reason": code, "status": status, "source": sender ?? "?"]
                if let id = Self.providerDeliveryID(request.headers, provider: provider) {
                    fields["provider_delivery_id"] = String(id.prefix(128))
                }
                log().info("delivery rejected", fields)
            }
            responder.respond(.error(status, code, message))
        }
        if request.bodyOverBudget {
            return answerBodyBufferFull(provider, responder)
        }
        if request.bodyTooLarge {
            return reject(413, "body_too_large", "the body is larger than PAYRECON_MAX_BODY_BYTES (\(configuration.maxBodyBytes) bytes)")
        }
        guard let webhook = webhooks[provider] else {
            return answerNotConfigured(provider, responder)
        }
        // Decided on this thread without waiting on anything. Only a PayPal delivery whose certificate is neither cached
        // nor known bad needs a fetch (at most 10 new URLs a minute, one fetch per URL): it is answered from the fetch's
        // continuation, and no thread waits for it — least of all this one, which serves other connections.
        @Sendable func decide(fetched: Bool) {
            switch Acceptance(webhook, headers: request.headers, body: request.body, now: Date()) {
            case .accepted(let accepted):
                // The sender's group is trusted with the fetch budget only once the delivery is stored as new (in
                // `store`): a replay of a genuine delivery, answered duplicate, proves nothing about who sends it.
                store(accepted, provider, request, headers, started: started, log: log, responder) {
                    if let sender { webhook.verified(from: sender) }
                }
            case .rejected(let rejection): reject(rejection.status, rejection.code, rejection.message)
            case .needsFetch where fetched:
                reject(
                    401, "untrusted_certificate",
                    "the certificate this delivery names is not cached and was not fetched: the fetch "
                        + "budget (10 new certificate URLs a minute; senders of no verified delivery share 5 of them, 2 for one sender) "
                        + "is spent, another sender group has the turn, or too many deliveries wait on fetches; a redelivery is fetched "
                        + "when the budget allows (each sender group's asks are remembered and served in turn)")
            case .needsFetch: webhook.prepare(headers: request.headers, sender: sender) { decide(fetched: true) }
            }
        }
        decide(fetched: false)
    }

    /// Who sent the delivery: the peer, or behind a trusted proxy the last X-Forwarded-For hop (for per-sender
    /// limits, rejection counts and samples; never authentication).
    private func resolvedSender(of request: HTTPRequest) -> String? {
        configuration.trustedProxies.isEmpty
            ? request.remoteAddress
            : SenderAddress.resolve(
                peer: request.remoteAddress, forwardedFor: request.headers.values(for: "X-Forwarded-For"),
                trustedProxies: configuration.trustedProxies)
    }

    /// Answers 503 `body_buffer_full`: the bodies held at once are at PAYRECON_MAX_BODY_BUFFER.
    private func answerBodyBufferFull(_ provider: Provider, _ responder: HTTPResponder) {
        // Not the sender's fault, and not a rejection to keep: the receiver holds as many bodies as it may.
        metrics.delivery(provider, outcome: "body_buffer_full")
        responder.respond(
            .error(
                503, "body_buffer_full",
                "the receiver holds as many request bodies as PAYRECON_MAX_BODY_BUFFER allows; retry later",
                headers: [("Retry-After", "5")]))
    }

    /// Answers 503 `provider_not_configured`, naming the secret that would configure the provider.
    private func answerNotConfigured(_ provider: Provider, _ responder: HTTPResponder) {
        metrics.delivery(provider, outcome: "provider_not_configured")
        responder.respond(
            .error(
                503, "provider_not_configured",
                "\(provider.rawValue) webhooks are not configured on this receiver: set \(ProviderRegistry.definition(provider).webhookSecretVariable)",
                headers: [("Retry-After", "300")]))
    }

    /// Where commit deadlines fire.
    static let deadlines = DedicatedThread(name: "commit-deadline")

    /// `newlyStored`: run when the delivery is stored as a new row (not a duplicate, not refused).
    private func store(
        _ accepted: AcceptedEvent, _ provider: Provider, _ request: HTTPRequest, _ headers: [(String, String)],
        started: DispatchTime, log: @escaping @Sendable () -> Logger, _ responder: HTTPResponder,
        newlyStored: @escaping @Sendable () -> Void = {}
    ) {
        let delivery = NewDelivery(
            provider: provider, dedupeKey: accepted.dedupeKey, eventType: accepted.eventType,
            headers: headers, body: request.body, transmissionID: accepted.transmissionID)
        // One answer per delivery: the commit's, or 503 at the commit deadline, whichever comes first. The timer holds only
        // this small box; a commit that answers first empties it, so the responder and everything it keeps are released at
        // once rather than held for PAYRECON_COMMIT_TIMEOUT (at 9,000 deliveries a second, 45,000 requests' worth).
        let answer = FirstAnswer(deadline: { [metrics, configuration] in
            metrics.delivery(provider, outcome: "storage_unavailable")
            log().warning(
                "delivery not committed within PAYRECON_COMMIT_TIMEOUT; answered 503", ["timeout_s": configuration.commitTimeout.inSeconds])
            responder.respond(
                .error(
                    503, "storage_unavailable",
                    "the delivery was not committed in time; retry later (a retry of a delivery that did commit is a duplicate)",
                    headers: [("Retry-After", "5")]))
        })
        Self.deadlines.after(configuration.commitTimeout) { answer.deadlinePassed() }
        committer.store(delivery) { [metrics, log] outcome in
            guard answer.commitEnded() else {
                log().info("delivery committed after its 503 at the commit deadline; its redelivery will be a duplicate")
                return
            }
            switch outcome {
            case .stored(let stored) where stored.refused != nil:
                // Signed, but its transmission was already stored with another body: a forged body matching the CRC32
                // PayPal signed. Counted as a rejection; nothing is stored.
                metrics.delivery(provider, outcome: "invalid_signature")
                log().warning("delivery refused: transmission id reused with another body")
                responder.respond(.error(401, "invalid_signature", stored.refused!))
            case .stored(let stored):
                if stored.inserted { newlyStored() }
                let status = stored.inserted ? "accepted" : "duplicate"
                metrics.delivery(provider, outcome: status)
                metrics.ack(provider, since: started)
                if Log.level <= .debug { log().debug("delivery stored", ["delivery_id": stored.id, "status": status]) }
                responder.respond(.json(200, #"{"status":"\#(status)","event_id":\#(stored.id)}"#))
            case .unavailable(let why, let databaseDown):
                metrics.delivery(provider, outcome: "storage_unavailable")
                // The database could not be reached: /readyz says so at once; the probe turns it back. A full queue
                // or one refused write (a signed delivery the database will not take) leaves readiness alone.
                if databaseDown { self.probe.markUnavailable() }
                log().warning("delivery not stored", ["error": why])
                responder.respond(
                    .error(
                        503, "storage_unavailable", "the delivery could not be stored; retry later",
                        headers: [("Retry-After", "5")]))
            }
        }
    }
}

extension Receiver {
    /// Stored as sent with every provider's deliveries and samples, beside the headers its verification reads.
    static let headersAlwaysStored = ["Content-Type", "Content-Length", "User-Agent", "X-Forwarded-For"]

    /// Headers as stored with a delivery or a rejection sample: those in `keeping` (lower-case names) as sent, every
    /// other by name with the value `[redacted]` — proxies add credentials under many names, and a denylist of three
    /// missed them.
    static func stored(_ headers: [(String, String)], keeping: Set<String>) -> [(String, String)] {
        headers.map { keeping.contains($0.0.lowercased()) ? $0 : ($0.0, "[redacted]") }
    }

    /// The provider's own id of a rejected delivery, for its log line (unauthenticated: whatever the sender wrote).
    static func providerDeliveryID(_ headers: HTTPHeaders, provider: Provider) -> String? {
        ProviderRegistry.definition(provider).webhookDeliveryIDHeader.flatMap { headers.nonEmpty($0) }
    }
}

extension HTTPResponse {
    static func json(_ status: Int, _ body: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body.utf8))
    }
    /// The contract's error body: `{"error":{"code":"...","message":"..."}}`.
    static func error(_ status: Int, _ code: String, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        .json(status, #"{"error":{"code":\#(Log.jsonString(code)),"message":\#(Log.jsonString(message))}}"#, headers: headers)
    }
}
