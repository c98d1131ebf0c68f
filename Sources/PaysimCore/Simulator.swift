import Foundation
import Providers
import Reconciliation
import Synchronization
import TextFormats

/// One logged modification/action call (`GET /admin/log`).
public struct SimLogEntry: Sendable, Equatable {
    public var time: String
    public var provider: String
    public var method: String
    public var path: String
    /// PXP: the modification's merchantTransactionId; PayPal: PayPal-Request-Id.
    public var idempotencyKey: String?
    public var requestID: String?
    public var status: Int
    /// `applied`, `replayed`, an error code, or `fault_500` / `fault_429` / `dropped`; `answer_dropped` follows an
    /// `applied` entry whose answer was then lost (`drop_after_apply_rate`).
    public var result: String
    /// The new transaction/capture/refund id, or the voided authorization.
    public var resourceID: String?

    var json: JSONValue {
        .object([
            "time": .string(time), "provider": .string(provider), "method": .string(method), "path": .string(path),
            "idempotency_key": idempotencyKey.map { .string($0) } ?? .null,
            "request_id": requestID.map { .string($0) } ?? .null,
            "status": .integer(status), "result": .string(result),
            "resource_id": resourceID.map { .string($0) } ?? .null
        ])
    }
}

struct SimState {
    var config: SimConfig
    var pxp = PXPBook()
    var paypal = PayPalBook()
    var paypercut = PaypercutBook()
    var faults: FaultInjector
    var ids: SplitMix64
    /// PayPal access token → expiry (unix seconds).
    var tokens: [String: Int64] = [:]
    /// PayPal-Request-Id → the answer given.
    var paypalIdempotency: [String: SimResponse] = [:]
    var log: [SimLogEntry] = []
    var counts: [String: Int] = [:]
    /// Provider API requests by provider and the unix second they arrived (before any injected latency): what a
    /// rate-limit benchmark reads. The last `maxSeconds` seconds are kept.
    var perSecond: [String: [Int64: Int]] = [:]
    static let maxLog = 20_000
    static let maxSeconds = 3_600
    /// Provider API requests being answered now (injected latency included), and the most there ever were at once:
    /// how a client's concurrency limit is checked from the provider's side.
    var inFlight = 0
    var inFlightMax = 0

    mutating func countArrival(provider: String, second: Int64) {
        perSecond[provider, default: [:]][second, default: 0] += 1
        if perSecond[provider]!.count > Self.maxSeconds, let oldest = perSecond[provider]!.keys.min() {
            perSecond[provider]![oldest] = nil
        }
    }

    init(config: SimConfig) {
        self.config = config
        faults = FaultInjector(config: config.faults)
        ids = SplitMix64(seed: config.faults.seed ^ 0x5EED_1D5)
    }

    mutating func record(_ entry: SimLogEntry) {
        if log.count >= Self.maxLog { log.removeFirst(log.count - Self.maxLog + 1) }
        log.append(entry)
    }

    static let paypalIDAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    mutating func paypalID() -> String { ids.string(17, alphabet: Self.paypalIDAlphabet) }
}

/// The simulator: PXP and PayPal API paths over in-memory state, the admin API, fault injection and webhook
/// sending. `handle` is pure request → response (no sockets, no sleeping); `respond` adds fault injection and the
/// asynchronous `POST /admin/webhooks/send`.
public final class Simulator: Sendable {
    let state: Mutex<SimState>
    /// The test CA signing PayPal deliveries (nil: PayPal webhooks and cert URLs are unavailable).
    public let ca: PayPalTestCA?
    let clock: @Sendable () -> Date
    let transport: (any WebhookTransport)?

    public init(
        config: SimConfig = SimConfig(), ca: PayPalTestCA?, clock: @escaping @Sendable () -> Date = { Date() },
        transport: (any WebhookTransport)? = nil
    ) {
        state = Mutex(SimState(config: config))
        self.ca = ca
        self.clock = clock
        self.transport = transport
    }

    public static let certName = "CERT-paysim-1"

    /// Sets the base of links and of the PAYPAL-CERT-URL (call once the port is known).
    public func setPublicBaseURL(_ base: String) {
        state.withLock { $0.config.publicBaseURL = base.hasSuffix("/") ? String(base.dropLast()) : base }
    }

    public var config: SimConfig { state.withLock { $0.config } }

    /// The refunds applied to a v1 sale, in minor units.
    public func paypalSaleRefunds(of saleID: String) -> [Int64] {
        state.withLock { s in s.paypal.saleRefunds.values.filter { $0.saleID == saleID }.map(\.amount) }
    }

    /// Every PXP transaction paysim holds, modifications included (what tests count applications by).
    /// The refunds (and reversal records) PayPal holds for an Orders v2 order, in creation order.
    public func paypalRefunds(ofOrder orderID: String) -> [PayPalRefund] {
        state.withLock { s in (s.paypal.orders[orderID]?.refundIDs ?? []).compactMap { s.paypal.refunds[$0] } }
    }
    public func pxpTransactions() -> [PXPTransaction] { state.withLock { Array($0.pxp.transactions.values) } }
    public var certURL: String { state.withLock { "\($0.config.publicBaseURL)/v1/notifications/certs/\(Self.certName)" } }
    public var log: [SimLogEntry] { state.withLock { $0.log } }

    var nowString: String { SimTime.rfc3339Millis(clock()) }

    // MARK: - Entry points

    public func handle(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = []
    ) -> SimResponse {
        handle(SimRequest(method: method, path: path, query: query, headers: headers, body: body))
    }

    /// Answers one request from state, without fault injection. `POST /admin/webhooks/send` needs `respond`.
    public func handle(_ request: SimRequest) -> SimResponse {
        let route = Route(method: request.method, path: request.path)
        state.withLock { $0.counts[route.name, default: 0] += 1 }
        do {
            return try dispatch(route, request)
        } catch {
            return error.response
        }
    }

    /// Answers one request as the server does: fault injection on provider paths, then `handle`.
    public func respond(_ request: SimRequest) async -> SimResponse {
        let route = Route(method: request.method, path: request.path)
        if route.isProviderAPI {
            let second = Int64(Date().timeIntervalSince1970)
            state.withLock {
                $0.countArrival(provider: route.provider ?? "", second: second)
                $0.inFlight += 1
                $0.inFlightMax = max($0.inFlightMax, $0.inFlight)
            }
        }
        defer { if route.isProviderAPI { state.withLock { $0.inFlight -= 1 } } }
        if route.isProviderAPI, request.method == "POST", route.isAction,
            let retryAfter: Int = state.withLock({ $0.faults.refusesAction() ? $0.faults.config.retryAfter : nil }),
            let refused = faultResponse(.tooManyRequests(retryAfter: retryAfter), route: route, request: request)
        {
            return refused  // never applied
        }
        if route.isProviderAPI {
            let decision: FaultDecision? = state.withLock { $0.faults.isActive ? $0.faults.decide() : nil }
            if let decision {
                if decision.delayMs > 0 { try? await Task.sleep(for: .milliseconds(decision.delayMs)) }
                if decision.outcome == .dropAfterApply {
                    if request.method == "POST", route.isAction {
                        _ = handle(request)  // applied (and logged), then the answer is lost
                        let now = nowString
                        state.withLock { s in
                            s.counts["fault.dropped_after_apply", default: 0] += 1
                            s.record(
                                SimLogEntry(
                                    time: now, provider: route.provider ?? "", method: request.method, path: request.path,
                                    idempotencyKey: Self.idempotencyKey(route, request),
                                    requestID: request.header("x-request-id") ?? request.header("paypal-request-id"),
                                    status: 0, result: "answer_dropped", resourceID: nil))
                        }
                        return SimResponse(status: 503, headers: [("Connection", "close")], body: [], drop: true)
                    }
                } else if decision.outcome == .dropBeforeApply {
                    if request.method == "POST", route.isAction, let faulted = faultResponse(.drop, route: route, request: request) {
                        return faulted  // never applied; the caller sees a cut connection
                    }
                } else if let faulted = faultResponse(decision.outcome, route: route, request: request) {
                    return faulted
                }
            }
        }
        if case .adminWebhooksSend = route {
            guard request.method == "POST" else { return Self.methodNotAllowed("POST") }
            state.withLock { $0.counts[route.name, default: 0] += 1 }
            do { return try await sendWebhooks(request) } catch { return error.response }
        }
        return handle(request)
    }

    private func faultResponse(_ outcome: FaultDecision.Outcome, route: Route, request: SimRequest) -> SimResponse? {
        let response: SimResponse
        let result: String
        switch outcome {
        case .pass:
            return nil
        case .serverError:
            result = "fault_500"
            response =
                route.provider == "paypercut"
                ? PaypercutBook.error(500, "api_error", "internal_error", "injected fault").response
                : route.provider == "paypal"
                    ? .json(
                        500,
                        .object([
                            "name": "INTERNAL_SERVER_ERROR", "message": "An internal server error occurred.",
                            "debug_id": "paysim-fault"
                        ]))
                    : .json(500, .object(["errorCode": "InternalError", "errorReason": "injected fault"]))
        case .tooManyRequests(let retryAfter):
            result = "fault_429"
            // retry_after 0: no Retry-After header at all (a 429 that must still back off).
            let retryHeader = retryAfter > 0 ? [("Retry-After", String(retryAfter))] : []
            response =
                route.provider == "paypercut"
                ? .json(429, PaypercutBook.error(429, "rate_limit_error", "rate_limit", "Too many requests.").body, headers: retryHeader)
                : route.provider == "paypal"
                    ? .json(
                        429,
                        .object([
                            "name": "RATE_LIMIT_REACHED", "message": "Too many requests. Blocked due to rate limiting.",
                            "debug_id": "paysim-fault"
                        ]), headers: retryHeader)
                    : .json(429, .object(["errorCode": "TooManyRequests", "errorReason": "injected fault"]), headers: retryHeader)
        case .drop, .dropAfterApply, .dropBeforeApply:
            result = "dropped"
            response = SimResponse(status: 503, headers: [("Connection", "close")], body: [], drop: true)
        }
        state.withLock { s in
            s.counts["fault.\(result)", default: 0] += 1
            if request.method == "POST", route.isAction {
                s.record(
                    SimLogEntry(
                        time: nowString, provider: route.provider ?? "", method: request.method,
                        path: request.path, idempotencyKey: Self.idempotencyKey(route, request),
                        requestID: request.header("x-request-id") ?? request.header("paypal-request-id"),
                        status: response.status, result: result, resourceID: nil))
            }
        }
        return response
    }

    static func idempotencyKey(_ route: Route, _ request: SimRequest) -> String? {
        if route.provider == "paypal" { return request.header("paypal-request-id") }
        if route.provider == "paypercut" { return request.header("idempotency-key") }
        return (try? JSONValue.parse(request.body))?["merchantTransactionId"]?.stringValue
    }

    static func methodNotAllowed(_ allowed: String) -> SimResponse {
        .json(
            405, .object(["error": .object(["code": "method_not_allowed", "message": .string("use \(allowed)")])]),
            headers: [("Allow", allowed)])
    }

    private func dispatch(_ route: Route, _ r: SimRequest) throws(SimError) -> SimResponse {
        func expect(_ method: String) throws(SimError) {
            guard r.method == method else { throw Self.wrongMethod(method) }
        }
        // Each provider's routes live in its own folder (PXP/, PayPal/, Paypercut/); what is left is paysim's own.
        if let answer = try dispatchPXP(route, r) { return answer }
        if let answer = try dispatchPayPal(route, r) { return answer }
        if let answer = try dispatchPaypercut(route, r) { return answer }
        switch route {
        case .healthz:
            return .json(200, .object(["status": "ok"]))
        case .adminSeed:
            try expect("POST"); return try adminSeed(r.body)
        case .adminLog:
            try expect("GET"); return adminLog(r.query)
        case .adminFaults:
            if r.method == "GET" { return .json(200, state.withLock { $0.faults.config.json }) }
            try expect("POST"); return try adminFaults(r.body)
        case .adminReset:
            try expect("POST"); return adminReset()
        case .adminStats:
            try expect("GET"); return adminStats()
        case .adminWebhooksSend:
            throw SimError.admin(501, "async_only", "webhooks are sent through Simulator.respond")
        case .notFound(let provider):
            if provider == "paypal" { throw SimError.paypalNotFound("No such path.") }
            if provider == "pxp" { throw SimError.pxp(404, "NotFound", "no such path") }
            throw SimError.admin(404, "not_found", "no such path")
        default:
            throw SimError.admin(404, "not_found", "no such path")
        }
    }

    var nowSeconds: String { SimTime.rfc3339(clock()) }

    /// 405 for a route asked with another method.
    static func wrongMethod(_ method: String) -> SimError {
        SimError(
            status: 405, body: .object(["error": .object(["code": "method_not_allowed", "message": .string("use \(method)")])]),
            code: "method_not_allowed")
    }

    /// What PayPal answers an app without the disputes scope (`https://uri.paypal.com/services/disputes/read-seller`).
    static var disputesNotAuthorized: SimError {
        SimError.paypal(
            403, name: "NOT_AUTHORIZED", message: "Authorization failed due to insufficient permissions.",
            issue: "PERMISSION_DENIED", description: SimError.paypalDescriptions["PERMISSION_DENIED"]!)
    }

    func logAction(_ route: Route, _ r: SimRequest, key: String?, status: Int, result: String, resourceID: String?) {
        let entry = SimLogEntry(
            time: nowString, provider: route.provider ?? "", method: r.method, path: r.path,
            idempotencyKey: key,
            requestID: r.header("x-request-id"), status: status, result: result,
            resourceID: resourceID)
        state.withLock { $0.record(entry) }
    }

}

// MARK: - Routing

enum Route: Equatable {
    case healthz
    case pxpTransaction(merchant: String, site: String)
    case pxpModifications(String)
    case paypalToken
    case paypalOrder(String)
    case paypalAuthorization(String)
    case paypalAuthorizationCapture(String)
    case paypalAuthorizationVoid(String)
    case paypalCapture(String)
    case paypalCaptureRefund(String)
    case paypalRefund(String)
    case paypalCert(String)
    case paypalSale(String)
    case paypalSaleRefund(String)
    /// `GET /v1/payments/refund/{id}`: a v1 refund.
    case paypalV1Refund(String)
    case paypalDispute(String)
    case paypalDisputes
    case paypalTransactionSearch
    case paypalWebhookEvents
    case paypercutIntent(String)
    case paypercutIntentCapture(String)
    case paypercutIntentCancel(String)
    case paypercutPayment(String)
    case paypercutRefunds
    /// `GET /v2/payments` and `GET /v1/refunds`: Paypercut's lists.
    case paypercutPaymentList, paypercutRefundList
    case adminPaypercutIntents
    case adminPayPalSales, adminPayPalDisputes, adminPayPalReversals, adminPayPalRefunds, adminPayPalSubscriptions
    /// `GET /admin/paypal/reports/STL-yyyymmdd.01.009.CSV` (or TRR-…): the day's report file, `?faults=a,b`.
    case adminPayPalReport(String)
    case adminPXPTransactions, adminPXPBehaviour, adminPayPalPermissions, adminPayPalOrders, adminSeed, adminLog, adminFaults, adminReset,
        adminStats
    case adminRootPEM, adminWebhooksSend
    case notFound(provider: String?)

    init(method: String, path: String) {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map {
            String($0).removingPercentEncoding ?? String($0)
        }
        guard !segments.isEmpty else { self = .notFound(provider: nil); return }
        let s = segments
        switch s[0] {
        case "healthz" where s.count == 1: self = .healthz
        case "api":
            // `/api/v1/transactions/{merchant}/{site}` (GET) vs `/api/v1/transactions/{id}/modifications` (POST).
            if s.count == 5, s[1] == "v1", s[2] == "transactions" {
                self =
                    method != "GET" && s[4] == "modifications"
                    ? .pxpModifications(s[3])
                    : .pxpTransaction(merchant: s[3], site: s[4])
            } else {
                self = .notFound(provider: "pxp")
            }
        case "v1":
            if s.count == 3, s[1] == "oauth2", s[2] == "token" {
                self = .paypalToken
            } else if s.count == 4, s[1] == "notifications", s[2] == "certs" {
                self = .paypalCert(s[3])
            } else if s.count == 4, s[1] == "payments", s[2] == "sale" {
                self = .paypalSale(s[3])
            } else if s.count == 5, s[1] == "payments", s[2] == "sale", s[4] == "refund" {
                self = .paypalSaleRefund(s[3])
            } else if s.count == 4, s[1] == "payments", s[2] == "refund" {
                self = .paypalV1Refund(s[3])
            } else if s.count == 4, s[1] == "customer", s[2] == "disputes" {
                self = .paypalDispute(s[3])
            } else if s.count == 3, s[1] == "customer", s[2] == "disputes" {
                self = .paypalDisputes
            } else if s.count == 3, s[1] == "reporting", s[2] == "transactions" {
                self = .paypalTransactionSearch
            } else if s.count == 3, s[1] == "notifications", s[2] == "webhooks-events" {
                self = .paypalWebhookEvents
            } else if s.count == 3, s[1] == "payment_intents" {
                self = .paypercutIntent(s[2])
            } else if s.count == 4, s[1] == "payment_intents", s[3] == "capture" {
                self = .paypercutIntentCapture(s[2])
            } else if s.count == 4, s[1] == "payment_intents", s[3] == "cancel" {
                self = .paypercutIntentCancel(s[2])
            } else if s.count == 2, s[1] == "refunds" {
                self = method == "GET" ? .paypercutRefundList : .paypercutRefunds
            } else if s.count >= 2, ["payment_intents", "refunds"].contains(s[1]) {
                self = .notFound(provider: "paypercut")
            } else {
                self = .notFound(provider: "paypal")
            }
        case "v2":
            if s.count == 4, s[1] == "checkout", s[2] == "orders" {
                self = .paypalOrder(s[3])
            } else if s.count == 3, s[1] == "payments" {
                self = .paypercutPayment(s[2])
            } else if s.count == 2, s[1] == "payments" {
                self = .paypercutPaymentList
            } else if s.count >= 4, s[1] == "payments" {
                switch (s[2], s.count, s.count == 5 ? s[4] : "") {
                case ("authorizations", 4, _): self = .paypalAuthorization(s[3])
                case ("authorizations", 5, "capture"): self = .paypalAuthorizationCapture(s[3])
                case ("authorizations", 5, "void"): self = .paypalAuthorizationVoid(s[3])
                case ("captures", 4, _): self = .paypalCapture(s[3])
                case ("captures", 5, "refund"): self = .paypalCaptureRefund(s[3])
                case ("refunds", 4, _): self = .paypalRefund(s[3])
                default: self = .notFound(provider: "paypal")
                }
            } else {
                self = .notFound(provider: "paypal")
            }
        case "admin":
            if s.count == 4, s[1] == "paypal", s[2] == "reports" { self = .adminPayPalReport(s[3]); return }
            switch s.dropFirst().joined(separator: "/") {
            case "pxp/transactions": self = .adminPXPTransactions
            case "pxp/behaviour": self = .adminPXPBehaviour
            case "paypal/permissions": self = .adminPayPalPermissions
            case "paypal/orders": self = .adminPayPalOrders
            case "paypercut/intents": self = .adminPaypercutIntents
            case "paypal/sales": self = .adminPayPalSales
            case "paypal/subscriptions": self = .adminPayPalSubscriptions
            case "paypal/disputes": self = .adminPayPalDisputes
            case "paypal/reversals": self = .adminPayPalReversals
            case "paypal/refunds": self = .adminPayPalRefunds
            case "seed": self = .adminSeed
            case "log": self = .adminLog
            case "faults": self = .adminFaults
            case "reset": self = .adminReset
            case "stats": self = .adminStats
            case "paypal/root.pem": self = .adminRootPEM
            case "webhooks/send": self = .adminWebhooksSend
            default: self = .notFound(provider: nil)
            }
        default: self = .notFound(provider: nil)
        }
    }

    var provider: String? {
        switch self {
        case .pxpTransaction, .pxpModifications: return "pxp"
        case .paypalToken, .paypalOrder, .paypalAuthorization, .paypalAuthorizationCapture, .paypalAuthorizationVoid,
            .paypalCapture, .paypalCaptureRefund, .paypalRefund, .paypalCert, .paypalSale, .paypalSaleRefund, .paypalV1Refund,
            .paypalDispute,
            .paypalDisputes, .paypalTransactionSearch, .paypalWebhookEvents:
            return "paypal"
        case .paypercutIntent, .paypercutIntentCapture, .paypercutIntentCancel, .paypercutPayment, .paypercutRefunds,
            .paypercutPaymentList, .paypercutRefundList:
            return "paypercut"
        case .notFound(let p): return p
        default: return nil
        }
    }

    /// Fault injection applies here: the provider API (not /admin, not the cert URL, not /healthz).
    var isProviderAPI: Bool {
        switch self {
        case .paypalCert, .healthz: return false
        case .notFound: return false
        default: return provider != nil
        }
    }

    /// Modification/action calls (logged in /admin/log).
    var isAction: Bool {
        switch self {
        case .pxpModifications, .paypalAuthorizationCapture, .paypalAuthorizationVoid, .paypalCaptureRefund, .paypalSaleRefund,
            .paypercutIntentCapture, .paypercutIntentCancel, .paypercutRefunds:
            return true
        default: return false
        }
    }

    /// A label for counters (ids left out).
    var name: String {
        switch self {
        case .healthz: return "healthz"
        case .pxpTransaction: return "pxp.get_transaction"
        case .pxpModifications: return "pxp.modification"
        case .paypalToken: return "paypal.token"
        case .paypalOrder: return "paypal.get_order"
        case .paypalAuthorization: return "paypal.get_authorization"
        case .paypalAuthorizationCapture: return "paypal.capture"
        case .paypalAuthorizationVoid: return "paypal.void"
        case .paypalCapture: return "paypal.get_capture"
        case .paypalCaptureRefund: return "paypal.refund"
        case .paypalRefund: return "paypal.get_refund"
        case .paypalCert: return "paypal.cert"
        case .paypalSale: return "paypal.get_sale"
        case .paypalSaleRefund: return "paypal.refund_sale"
        case .paypalV1Refund: return "paypal.get_v1_refund"
        case .paypalDispute: return "paypal.get_dispute"
        case .paypalDisputes: return "paypal.list_disputes"
        case .paypalTransactionSearch: return "paypal.search_transactions"
        case .paypalWebhookEvents: return "paypal.list_webhook_events"
        case .adminPayPalSales: return "admin.paypal_sales"
        case .adminPayPalSubscriptions: return "admin.paypal_subscriptions"
        case .adminPayPalDisputes: return "admin.paypal_disputes"
        case .adminPayPalReversals: return "admin.paypal_reversals"
        case .adminPayPalRefunds: return "admin.paypal_refunds"
        case .adminPayPalReport: return "admin.paypal_report"
        case .paypercutIntent: return "paypercut.get_payment_intent"
        case .paypercutIntentCapture: return "paypercut.capture"
        case .paypercutIntentCancel: return "paypercut.cancel"
        case .paypercutPayment: return "paypercut.get_payment"
        case .paypercutRefunds: return "paypercut.refund"
        case .paypercutPaymentList: return "paypercut.list_payments"
        case .paypercutRefundList: return "paypercut.list_refunds"
        case .adminPaypercutIntents: return "admin.paypercut_intents"
        case .adminPXPTransactions: return "admin.pxp_transactions"
        case .adminPayPalOrders: return "admin.paypal_orders"
        case .adminSeed: return "admin.seed"
        case .adminLog: return "admin.log"
        case .adminFaults: return "admin.faults"
        case .adminPXPBehaviour: return "admin.pxp_behaviour"
        case .adminPayPalPermissions: return "admin.paypal_permissions"
        case .adminReset: return "admin.reset"
        case .adminStats: return "admin.stats"
        case .adminRootPEM: return "admin.root_pem"
        case .adminWebhooksSend: return "admin.webhooks_send"
        case .notFound: return "not_found"
        }
    }
}
