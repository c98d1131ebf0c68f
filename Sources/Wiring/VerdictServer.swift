import CivilTime
import Crypto
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

/// Verdicts for `GET /v1/orders/{provider}/{order_id}/verdict`, each from a fresh check (`OrderChecker.verify`) whose
/// provider answers came after the request: verdicts of one order asked before a check of it has its answers share
/// that check (one provider fetch); one asked after gets the next check, which starts when that one ends (what the
/// provider answered before the request is never the answer). At most `maxChecks` checks run at once
/// (a burst of verdicts queues behind them instead of taking every provider call the worker needs; the provider's rate
/// limit is the process's, shared with the worker's calls). At most `maxWaiting` wait for a turn; past them a verdict
/// is answered unavailable at once.
public final class VerdictService: Sendable {
    let pool: PostgresPool
    let checker: OrderChecker
    let checks: AsyncSemaphore
    let maxWaiting: Int
    /// Per order: the check waiting for a slot (requests join it), and the one under way.
    private struct Flight {
        var queued: (id: UInt64, task: Task<VerdictAnswer, Never>)?
        var running: (id: UInt64, task: Task<VerdictAnswer, Never>)?
    }
    private let flights = Mutex<(next: UInt64, byOrder: [String: Flight])>((0, [:]))
    private let waiting = Atomic<Int>(0)
    let logger: Logger

    static let verdicts = Metrics.shared.counter(
        "payrecon_verdicts_total",
        help: "Verdicts answered by the verdict API, by provider and outcome (fulfil, wait, refuse, unknown_order, unavailable, failed)")
    static let seconds = Metrics.shared.histogram(
        "payrecon_verdict_seconds", help: "Verdict API latency, by provider",
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])

    public init(pool: PostgresPool, checker: OrderChecker, maxChecks: Int = 16, maxWaiting: Int = 1024, logger: Logger) {
        self.pool = pool; self.checker = checker; self.checks = AsyncSemaphore(permits: max(1, maxChecks))
        self.maxWaiting = max(0, maxWaiting); self.logger = logger
        for provider in Provider.allCases { Self.seconds.initialise([("provider", provider.rawValue)]) }
    }

    /// The verdict of `provider`:`orderID` now. Callers asking for one order while its check runs get that check's answer.
    public func verdict(provider: Provider, orderID: String) async -> VerdictAnswer {
        let key = provider.rawValue + "\u{0}" + orderID
        let task: Task<VerdictAnswer, Never> = flights.withLock { state in
            var flight = state.byOrder[key] ?? Flight()
            if let queued = flight.queued { return queued.task }
            state.next += 1
            let id = state.next, under = flight.running?.task
            let task = Task { [self] in
                if let under { _ = await under.value }  // began before this request: the next check is this one's
                let answer = await self.decide(provider: provider, orderID: orderID, key: key, id: id)
                self.flights.withLock { state in
                    guard var flight = state.byOrder[key] else { return }
                    if flight.running?.id == id { flight.running = nil }
                    if flight.queued?.id == id { flight.queued = nil }
                    state.byOrder[key] = flight.queued == nil && flight.running == nil ? nil : flight
                }
                return answer
            }
            flight.queued = (id, task)
            state.byOrder[key] = flight
            return task
        }
        return await task.value
    }

    /// The check `id` of `key` has the provider's answers: later requests wait for the next check.
    private func fetched(key: String, id: UInt64) {
        flights.withLock { state in
            guard var flight = state.byOrder[key], let queued = flight.queued, queued.id == id else { return }
            flight.running = queued
            flight.queued = nil
            state.byOrder[key] = flight
        }
    }

    private func decide(provider: Provider, orderID: String, key: String, id: UInt64) async -> VerdictAnswer {
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
        } catch PostgresError.decoding(let what) {
            // Read, but not understood: rows a newer payrecon wrote (a link kind this build does not know).
            return .unavailable("payrecon cannot read what is stored for this order (\(what)): a newer payrecon wrote it; run that version")
        } catch {
            return .unavailable("the database is out of reach")
        }
        guard let (order, known) = found else { return .unknownOrder }
        let checkedAt = Int64(Date().timeIntervalSince1970)
        let (result, verdict, current) = await checker.verify(
            order, known: known, logger: logger,
            fetched: { [self] in self.fetched(key: key, id: id) })
        if let verdict { return .verdict(VerdictReport(order: current, verdict: verdict, checkedAt: checkedAt)) }
        switch result {
        case .transient(let t): return .unavailable(t.reason)
        case .checked: return .unavailable("another check of the order was recorded at the same moment, or the order changed during it")
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

    /// How long a verdict may take before it is answered 503 (its check goes on, and the next verdict may use it).
    public static let deadline: Duration = .seconds(10)

    public init(
        host: String, port: UInt16, token: [UInt8], service: VerdictService, connectionLimit: Int = 256,
        deadline: Duration = VerdictServer.deadline
    ) {
        let expected = SHA256.hash(token)
        var configuration = HTTPServer.Configuration(
            host: host, port: port, threads: 2, maxBodyBytes: 0, connectionTimeoutSeconds: 15,
            connectionLimit: connectionLimit, connectionLimitPerIP: max(1, connectionLimit / 2))
        // A request must be whole and answered within this: a client trickling bytes holds no connection for long.
        configuration.requestTimeout = deadline + .seconds(5)
        server = HTTPServer(configuration: configuration) { request, responder in
            let authorization = request.headers["authorization"] ?? ""
            // The scheme is case-insensitive (RFC 7235); the token is compared whole.
            let given = authorization.lowercased().hasPrefix("bearer ") ? Array(authorization.utf8.dropFirst(7)) : []
            guard !given.isEmpty, constantTimeEquals(SHA256.hash(given), expected) else {
                return responder.respond(
                    .error(
                        status: 401, code: "unauthorized",
                        message: "send Authorization: Bearer with PAYRECON_API_TOKEN",
                        headers: [("WWW-Authenticate", "Bearer")]))
            }
            guard request.method == "GET" else {
                return responder.respond(.error(status: 405, code: "method_not_allowed", message: "use GET", headers: [("Allow", "GET")]))
            }
            // /v1/orders/{provider}/{order_id}/verdict: the order id is everything between (it may hold a '/', sent as %2F).
            let prefix = "/v1/orders/", suffix = "/verdict"
            let inner =
                request.path.hasPrefix(prefix) && request.path.hasSuffix(suffix) && request.path.count > prefix.count + suffix.count
                ? String(request.path.dropFirst(prefix.count).dropLast(suffix.count)) : ""
            let slash = inner.firstIndex(of: "/")
            guard let slash, let provider = Provider(rawValue: String(inner[..<slash])), inner.index(after: slash) < inner.endIndex else {
                return responder.respond(
                    .error(
                        status: 404, code: "not_found",
                        message: "no such endpoint: GET /v1/orders/{provider}/{order_id}/verdict, provider one of "
                            + Provider.allCases.map(\.rawValue).joined(separator: ", ")))
            }
            let orderID = String(inner[inner.index(after: slash)...])
            Task {
                await Self.answer(
                    provider: provider, orderID: orderID, service: service, deadline: deadline, responder: responder)
            }
        }
    }

    /// The verdict, or 503 at the deadline (its check goes on, for whoever asks next), answered and counted.
    static func answer(
        provider: Provider, orderID: String, service: VerdictService, deadline: Duration, responder: HTTPResponder
    ) async {
        let started = DispatchTime.now()
        let answer: VerdictAnswer = await withCheckedContinuation { continuation in
            let answered = Atomic<Bool>(false)
            let answer: @Sendable (VerdictAnswer) -> Void = { a in
                if answered.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
                    continuation.resume(returning: a)
                }
            }
            Task { answer(await service.verdict(provider: provider, orderID: orderID)) }
            Task {
                try? await Task.sleep(for: deadline)
                answer(.unavailable("the check took longer than \(deadline.inSeconds) s"))
            }
        }
        let outcome: String
        switch answer {
        case .verdict(let report):
            outcome = report.verdict.outcome.rawValue
            responder.respond(.json(bytes: report.json()))
        case .unknownOrder:
            outcome = "unknown_order"
            responder.respond(
                .error(
                    status: 404, code: "unknown_order",
                    message: "payrecon holds no \(provider.rawValue) order with that id: import it first"))
        case .unavailable(let why):
            outcome = "unavailable"
            responder.respond(
                .error(
                    status: 503, code: "unavailable", message: "no verdict now: \(why); try again",
                    headers: [("Retry-After", "5")]))
        case .failed(let why):
            outcome = "failed"
            responder.respond(.error(status: 502, code: "provider_answer_unusable", message: "no verdict: \(why)"))
        }
        VerdictService.verdicts.increment([("provider", provider.rawValue), ("outcome", outcome)])
        VerdictService.seconds.observe(
            seconds: Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9,
            [("provider", provider.rawValue)])
    }

    public func start() throws -> UInt16 {
        try server.start()
        return server.port
    }

    public func stop() { server.shutdown(drainTimeout: 5) }
}
