import PayreconTesting
import Foundation
import Observability
import HTTP
import PaysimCore
@_spi(Positional) import Postgres
import Providers
import Reconciliation
import Store
import Testing
import TextFormats
import Worker

/// The worker against a throwaway schema and an in-process paysim on an ephemeral port (the only fake, spoken to
/// over real HTTP by the real PXP and PayPal clients). Deliveries are stored directly (the receiver is tested
/// elsewhere); bodies come from paysim's own webhook builder so they look like what the providers send.
///
///     try await WorkerHarness.with { h in ... }   // cleans up whatever the test does
final class WorkerHarness: @unchecked Sendable {
    /// One PayPal test CA for the whole run (RSA key generation is the slow part).
    static let ca: PayPalTestCA = try! PayPalTestCA()
    static let merchant = "M1", site = "S1"

    let database: TestDatabase
    let pool: PostgresPool
    let simulator: Simulator
    let paysim: PaysimServer
    let paysimURL: String
    let http = URLSessionHTTPClient(configuration: .init(timeout: .seconds(20), maxConcurrentRequests: 64, maxConnectionsPerHost: 64))
    let gateway: ProviderGateway
    let checker: OrderChecker
    let processor: DeliveryProcessor
    let executor: ActionExecutor
    /// What the worker and the executor logged.
    let log = CapturedLog()

    /// - Parameter retry: the provider clients' in-call retries; none by default so a fault is one transient outcome.
    init(retry: RetryPolicy = .none, pendingMaxSeconds: Int64 = 86_400) throws {
        database = try TestDatabase.create()
        pool = PostgresPool(conninfo: database.url, size: 8, acquireTimeout: .seconds(30))
        let config = SimConfig()  // known credentials: paysim's defaults
        simulator = Simulator(config: config, ca: Self.ca, transport: nil)
        paysim = PaysimServer(simulator: simulator, host: "127.0.0.1", port: 0, threads: 4)
        let port = try paysim.start()
        paysimURL = "http://127.0.0.1:\(port)"
        simulator.setPublicBaseURL(paysimURL)
        // As in production, every request passes CountedTransport (where a check's answers are kept as evidence).
        let base = HTTPClientTransport(client: http)
        func transport(_ provider: Provider) -> CountedTransport { CountedTransport(base: base, provider: provider) }
        let pxp = PXPClient(
            configuration: PXPConfiguration(
                baseURL: paysimURL + "/api/v1", clientID: config.pxpClientID,
                tokenID: config.pxpTokenID, tokenValue: config.pxpTokenValue,
                timeout: .seconds(10)),
            transport: transport(.pxp), retry: retry)
        let paypal = PayPalClient(
            configuration: PayPalConfiguration(
                baseURL: paysimURL, clientID: config.paypalClientID,
                secret: config.paypalSecret, timeout: .seconds(10)),
            transport: transport(.paypal), retry: retry)
        let paypercut = PaypercutClient(
            configuration: PaypercutConfiguration(
                baseURL: paysimURL, secretKey: config.paypercutSecretKey,
                timeout: .seconds(10)),
            transport: transport(.paypercut), retry: retry)
        gateway = ProviderGateway(
            ConfiguredProviders(apis: [
                .pxp: PXPProvider.API(client: pxp), .paypal: PayPalProvider.API(client: paypal),
                .paypercut: PaypercutProvider.API(client: paypercut)
            ]))
        checker = OrderChecker(pool: pool, gateway: gateway, pendingMaxSeconds: pendingMaxSeconds)
        processor = DeliveryProcessor(pool: pool, checker: checker)
        // No grace before a provider's "not found" is trusted: the tests decide when time has passed (PXPUnknownOutcomeTests has its own).
        executor = ActionExecutor(pool: pool, gateway: gateway, checker: checker, inDoubtGrace: .zero, logger: log.logger)
    }

    /// Runs `body` with a fresh harness and always tears it down.
    static func with(
        retry: RetryPolicy = .none, pendingMaxSeconds: Int64 = 86_400, _ body: (WorkerHarness) async throws -> Void
    ) async throws {
        let h = try await offload { try WorkerHarness(retry: retry, pendingMaxSeconds: pendingMaxSeconds) }
        do { try await body(h) } catch { await h.stop(); throw error }
        await h.stop()
    }

    func stop() async {
        await paysim.shutdown(drainTimeout: 1)
        await offload { [pool, database] in
            pool.close(); database.drop()
        }
    }

    // MARK: paysim's admin API (over HTTP)

    @discardableResult
    func admin(_ path: String, _ body: String? = nil, method: String = "POST") async throws -> [String: Any] {
        let r = try await http.send(
            HTTPClientRequest(
                method: method, url: paysimURL + path,
                headers: [("Content-Type", "application/json")], body: body.map { Array($0.utf8) }))
        guard (200..<300).contains(r.status) else { throw TestSetupError("paysim \(method) \(path) answered \(r.status): \(r.text)") }
        return (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
    }

    /// Seeds a PXP transaction at merchant M1 / site S1; returns its systemTransactionId.
    @discardableResult
    func seedPXP(
        _ mtid: String, intent: String = "Authorisation", value: String = "20.00", currency: String = "GBP",
        state: String = "Authorised", merchant: String = WorkerHarness.merchant, site: String = WorkerHarness.site,
        authorisedAmount: String? = nil
    ) async throws -> String {
        let auth = authorisedAmount.map { #","authorisedAmount":"\#($0)""# } ?? ""
        let answer = try await admin(
            "/admin/pxp/transactions",
            """
            {"merchant":"\(merchant)","site":"\(site)","merchantTransactionId":"\(mtid)","intent":"\(intent)",
             "currency":"\(currency)","value":"\(value)","state":"\(state)"\(auth)}
            """)
        return try #require(answer["systemTransactionId"] as? String)
    }

    /// `n` authorised PXP transactions TX-0… at paysim (M1/S1, GBP 20.00) and their orders O-0… for 20.00.
    func seedPXPOrders(_ n: Int, fulfilment: Fulfilment = .fulfilled) async throws {
        let seeds = (0..<n).map {
            #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX-\#($0)","intent":"Authorisation","currency":"GBP","value":"20.00"}"#
        }
        try await admin("/admin/pxp/transactions", "[" + seeds.joined(separator: ",") + "]")
        try insert((0..<n).map { WorkerHarness.order(.pxp, "O-\($0)", ref: "TX-\($0)", amount: 2000, fulfilment: fulfilment) })
    }

    /// What a `payrecon` subprocess needs to reach this database and paysim's PXP, PayPal and Paypercut APIs.
    var payreconEnvironment: [String: String] {
        let config = simulator.config
        return [
            "DATABASE_URL": database.url,
            "PXP_API_BASE_URL": paysimURL + "/api/v1", "PXP_CLIENT_ID": config.pxpClientID,
            "PXP_TOKEN_ID": config.pxpTokenID, "PXP_TOKEN_VALUE": config.pxpTokenValue,
            "PAYPAL_API_BASE_URL": paysimURL, "PAYPAL_CLIENT_ID": config.paypalClientID,
            "PAYPAL_CLIENT_SECRET": config.paypalSecret,
            "PAYPERCUT_API_BASE_URL": paysimURL, "PAYPERCUT_SECRET_KEY": config.paypercutSecretKey
        ]
    }

    /// Seeds a PayPal order (paysim's admin shape: id, intent, status, currency, amount, merchant_id, authorizations, captures, refunds).
    func seedPayPal(_ json: String) async throws { try await admin("/admin/paypal/orders", json) }

    /// Sets paysim's faults (`{"error_rate":1.0}`, `{"rate_429":1.0,"retry_after":120}`, `{}` keeps the rest).
    func faults(_ json: String) async throws { try await admin("/admin/faults", json) }
    func clearFaults() async throws { try await faults(#"{"latency_ms":0,"error_rate":0,"rate_429":0,"drop_rate":0}"#) }

    /// The capture/void/refund/modification calls paysim received.
    func paysimLog(provider: String? = nil) async throws -> [[String: Any]] {
        let answer = try await admin("/admin/log" + (provider.map { "?provider=\($0)" } ?? ""), method: "GET")
        return answer["entries"] as? [[String: Any]] ?? []
    }

    // MARK: Orders and deliveries

    static func order(
        _ provider: Provider = .pxp, _ id: String, ref: String? = nil, intent: Intent = .authorisation,
        amount: Int64 = 2000, currency: String = "GBP", fulfilment: Fulfilment = .fulfilled, refund: Int64 = 0,
        merchant: String? = WorkerHarness.merchant, site: String? = WorkerHarness.site
    ) -> Order {
        Order(
            provider: provider, orderID: id, merchant: merchant, site: provider == .pxp ? site : nil, transactionRef: ref ?? "TX-" + id,
            intent: intent, amount: Money(minorUnits: amount, currency: Currency(code: currency)!), fulfilment: fulfilment,
            refundAmount: refund)
    }

    func insert(_ orders: Order...) throws { try insert(orders) }
    func insert(_ orders: [Order]) throws {
        let conn = try database.connect(); defer { conn.close() }
        _ = try OrderStore.upsert(orders, on: conn)
    }

    /// Stores a delivery as the receiver would have (dedupe key = X-Request-Id / event id); returns its id.
    @discardableResult
    func store(_ provider: Provider, body: [UInt8], dedupeKey: String = UUID().uuidString, headers: [(String, String)] = []) throws -> Int64
    {
        let conn = try database.connect(); defer { conn.close() }
        let stored = try DeliveryStore.commit(
            [
                NewDelivery(
                    provider: provider, dedupeKey: dedupeKey, eventType: nil,
                    headers: headers, body: body)
            ], on: conn)
        return stored[0].id
    }

    @discardableResult
    func store(_ provider: Provider, json: String) throws -> Int64 { try store(provider, body: Array(json.utf8)) }

    /// Builds deliveries with paysim's webhook builder (`/admin/webhooks/send`'s body without a target) and stores
    /// them; returns their ids. `transform` may rewrite a body (e.g. strip related_ids).
    @discardableResult
    func storeWebhook(_ request: String, transform: (([String: Any]) -> Any)? = nil) throws -> [Int64] {
        let deliveries = try simulator.webhookDeliveries(try JSONValue.parse(request))
        var ids: [Int64] = []
        for d in deliveries where !d.isRepeat {
            var body = d.body
            if let transform, let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
                body = Array(try JSONSerialization.data(withJSONObject: transform(object)))
            }
            let provider: Provider =
                d.header("PAYPAL-TRANSMISSION-ID") != nil ? .paypal : d.header("Paypercut-Signature") != nil ? .paypercut : .pxp
            ids.append(try store(provider, body: body, dedupeKey: d.id, headers: d.headers))
        }
        return ids
    }

    // MARK: The worker

    func worker(
        owner: String = "w-" + UUID().uuidString.prefix(8), maxAttempts: Int = 10, baseDelay: Duration = .seconds(60),
        lease: Duration = .seconds(30), batchSize: Int = 8, executeActions: Bool = false
    ) -> QueueWorker {
        QueueWorker(
            configuration: .init(
                owner: owner, lease: lease, batchSize: batchSize, poll: .milliseconds(200),
                attempt: DeliveryAttempt(maxAttempts: maxAttempts, baseDelay: baseDelay),
                executeActions: executeActions),
            conninfo: database.url, pool: pool, processor: processor, executor: executor, logger: log.logger)
    }

    /// `payrecon work --once`.
    @discardableResult
    func runOnce(
        owner: String = "w-" + UUID().uuidString.prefix(8), maxAttempts: Int = 10, baseDelay: Duration = .seconds(60)
    ) async -> QueueWorker.Totals {
        await worker(owner: owner, maxAttempts: maxAttempts, baseDelay: baseDelay).run(once: true)
    }

    func sweep(since: Date? = nil, provider: Provider? = nil, concurrency: Int = 4) async throws -> ReconcileSweep.Summary {
        try await ReconcileSweep(pool: pool, checker: checker, logger: Logger()).run(
            .init(since: since, provider: provider, concurrency: concurrency))
    }

    // MARK: Reading state

    func delivery(_ id: Int64) throws -> QueuedDelivery {
        let conn = try database.connect(); defer { conn.close() }
        return try #require(try DeliveryQueue.find(id: id, on: conn))
    }

    func actions() throws -> [StoredAction] {
        let conn = try database.connect(); defer { conn.close() }
        return try ActionStore.list(status: nil, limit: 10_000, on: conn)
    }

    struct Discrepancy: Sendable {
        var id: Int64, orderID: String?, transactionRef: String, kind: String, status: String, occurrences: Int64, resolvedAt: Date?
    }

    func discrepancies(_ provider: Provider? = nil) throws -> [Discrepancy] {
        let conn = try database.connect(); defer { conn.close() }
        return try conn.query(
            """
            SELECT id, order_id, transaction_ref, kind, status, occurrences::bigint AS occurrences, resolved_at FROM discrepancies
            WHERE ($1::text IS NULL OR provider = $1) ORDER BY id
            """, [provider.map { .text($0.rawValue) } ?? .null]
        ).map {
            Discrepancy(
                id: try $0.int64("id"), orderID: try $0.optionalString("order_id"), transactionRef: try $0.string("transaction_ref"),
                kind: try $0.string("kind"), status: try $0.string("status"), occurrences: try $0.int64("occurrences"),
                resolvedAt: try $0.optionalDate("resolved_at"))
        }
    }

    func openKinds(order: String) throws -> Set<String> {
        Set(try discrepancies().filter { $0.orderID == order && $0.status == "open" }.map(\.kind))
    }

    func execute(_ sql: String, _ params: [PostgresValue] = []) throws {
        let conn = try database.connect(); defer { conn.close() }
        _ = try conn.execute(sql, params)
    }

    /// Polls `condition` until it holds or `seconds` pass (never a sleep as the assertion itself).
    func eventually(_ seconds: Double = 15, _ condition: () async throws -> Bool) async throws -> Bool {
        try await PayreconTesting.eventually(seconds, condition)
    }
}
