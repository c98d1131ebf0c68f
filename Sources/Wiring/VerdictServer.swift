import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Reporting
import Store
import Synchronization
import Worker

/// What the merchant's fulfilment system is told for one order: the verdict of a fresh check, or why there is none.
public enum VerdictAnswer: Sendable {
    case verdict(VerdictReport)
    /// payrecon holds no such order.
    case unknownOrder
    /// The database or the provider is out of reach, or the check could not be recorded now: try again.
    case unavailable(String)
    /// The provider's answer cannot be used (credentials, an answer that does not read): an operator must look.
    case failed(String)
}

/// Verdicts for `GET /v1/orders/{provider}/{order_id}/verdict`, each from a fresh check (`OrderChecker.verify`):
/// concurrent verdicts of one order share one check (one provider fetch), and at most `maxChecks` checks run at once
/// (a burst of verdicts queues behind them instead of taking every provider call the worker needs; the provider's rate
/// limit is the process's, shared with the worker's calls). At most `maxWaiting` wait for a turn; past them a verdict
/// is answered unavailable at once.
public final class VerdictService: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker
    let checks: AsyncSemaphore
    let maxWaiting: Int
    private let flights = Mutex<[String: Task<VerdictAnswer, Never>]>([:])
    private let waiting = Atomic<Int>(0)
    let logger: Logger

    static let verdicts = Metrics.shared.counter("payrecon_verdicts_total",
                                                 help: "Verdicts answered by the verdict API, by provider and outcome (fulfil, wait, refuse, unknown_order, unavailable, failed)")
    static let seconds = Metrics.shared.histogram("payrecon_verdict_seconds", help: "Verdict API latency, by provider",
                                                  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])

    public init(pool: PostgresPool, checker: OrderChecker, maxChecks: Int = 16, maxWaiting: Int = 1024, logger: Logger = Logger()) {
        self.pool = pool; self.checker = checker; self.checks = AsyncSemaphore(permits: max(1, maxChecks))
        self.maxWaiting = max(0, maxWaiting); self.logger = logger
        for provider in Provider.allCases { Self.seconds.initialise([("provider", provider.rawValue)]) }
    }

    /// The verdict of `provider`:`orderID` now. Callers asking for one order while its check runs get that check's answer.
    public func verdict(provider: Provider, orderID: String) async -> VerdictAnswer {
        let key = provider.rawValue + "\u{0}" + orderID
        let task: Task<VerdictAnswer, Never> = flights.withLock { inFlight in
            if let running = inFlight[key] { return running }
            let task = Task { [self] in
                let answer = await self.decide(provider: provider, orderID: orderID)
                _ = self.flights.withLock { $0.removeValue(forKey: key) }
                return answer
            }
            inFlight[key] = task
            return task
        }
        return await task.value
    }

    private func decide(provider: Provider, orderID: String) async -> VerdictAnswer {
        guard waiting.add(1, ordering: .relaxed).newValue <= maxWaiting else {
            waiting.subtract(1, ordering: .relaxed)
            return .unavailable("too many verdicts wait for a check")
        }
        do { try await checks.acquire() } catch {
            waiting.subtract(1, ordering: .relaxed)
            return .unavailable("cancelled")
        }
        waiting.subtract(1, ordering: .relaxed)
        defer { checks.release() }
        // The order and what the check needs of it beforehand, in one trip to the pool.
        let found: (order: Order, known: OrderChecker.Known?)?
        do {
            found = try await pool.run { conn in
                guard let order = try OrderStore.find(provider: provider, orderID: orderID, on: conn) else { return nil }
                return (order, try OrderChecker.known(provider: provider, orderIDs: [orderID], on: conn)[orderID])
            }
        } catch {
            return .unavailable("the database is out of reach")
        }
        guard let (order, known) = found else { return .unknownOrder }
        let checkedAt = Int64(Date().timeIntervalSince1970)
        let (result, verdict) = await checker.verify(order, known: known, log: logger)
        if let verdict { return .verdict(VerdictReport(order: order, verdict: verdict, checkedAt: checkedAt)) }
        switch result {
        case .transient(let reason, _): return .unavailable(reason)
        case .checked: return .unavailable("another check of the order was recorded at the same moment")
        case .unreadable(let reason), .failed(let reason): return .failed(reason)
        }
    }
}

/// `payrecon work --api-listen H:P` (PAYRECON_API_LISTEN): `GET /v1/orders/{provider}/{order_id}/verdict` for the
/// merchant's fulfilment system, only with `Authorization: Bearer` equal to PAYRECON_API_TOKEN (compared in constant
/// time, as SHA-256 digests so not even its length is learned). 200 with the verdict's JSON (`VerdictReport`), 401
/// without the token, 404 for an order payrecon does not hold, 503 with Retry-After while the database or the provider
/// is out of reach, 502 when the provider's answer cannot be used: never a guess.
public final class VerdictServer: Sendable {
    let server: HTTPServer

    public init(host: String, port: UInt16, token: [UInt8], service: VerdictService, connectionLimit: Int = 256) {
        let expected = SHA256.hash(token)
        server = HTTPServer(configuration: .init(host: host, port: port, threads: 2, maxBodyBytes: 0, connectionTimeoutSeconds: 30,
                                                 connectionLimit: connectionLimit)) { request, responder in
            let authorization = request.headers["authorization"] ?? ""
            let given = authorization.hasPrefix("Bearer ") ? Array(authorization.utf8.dropFirst(7)) : []
            guard !given.isEmpty, constantTimeEquals(SHA256.hash(given), expected) else {
                return responder.respond(.error(status: 401, code: "unauthorized",
                                                message: "send Authorization: Bearer with PAYRECON_API_TOKEN",
                                                headers: [("WWW-Authenticate", "Bearer")]))
            }
            guard request.method == "GET" else {
                return responder.respond(.error(status: 405, code: "method_not_allowed", message: "use GET", headers: [("Allow", "GET")]))
            }
            let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 6, parts[0].isEmpty, parts[1] == "v1", parts[2] == "orders", parts[5] == "verdict", !parts[4].isEmpty,
                  let provider = Provider(rawValue: parts[3]) else {
                return responder.respond(.error(status: 404, code: "not_found",
                                                message: "no such endpoint: GET /v1/orders/{provider}/{order_id}/verdict, provider one of "
                                                    + Provider.allCases.map(\.rawValue).joined(separator: ", ")))
            }
            let orderID = parts[4]
            let started = DispatchTime.now()
            Task {
                let answer = await service.verdict(provider: provider, orderID: orderID)
                let outcome: String
                switch answer {
                case .verdict(let report):
                    outcome = report.verdict.outcome.rawValue
                    responder.respond(.json(bytes: report.json()))
                case .unknownOrder:
                    outcome = "unknown_order"
                    responder.respond(.error(status: 404, code: "unknown_order",
                                             message: "payrecon holds no \(provider.rawValue) order with that id: import it first"))
                case .unavailable(let why):
                    outcome = "unavailable"
                    responder.respond(.error(status: 503, code: "unavailable", message: "no verdict now: \(why); try again",
                                             headers: [("Retry-After", "5")]))
                case .failed(let why):
                    outcome = "failed"
                    responder.respond(.error(status: 502, code: "provider_answer_unusable", message: "no verdict: \(why)"))
                }
                VerdictService.verdicts.increment([("provider", provider.rawValue), ("outcome", outcome)])
                VerdictService.seconds.observe(seconds: Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9,
                                               [("provider", provider.rawValue)])
            }
        }
    }

    public func start() throws -> UInt16 {
        try server.start()
        return server.port
    }

    public func stop() { server.shutdown(drainTimeout: 5) }
}
