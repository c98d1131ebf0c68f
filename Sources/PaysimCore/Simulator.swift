import Foundation
import Providers
import Reconciliation
import Synchronization

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
        .object(["time": .string(time), "provider": .string(provider), "method": .string(method), "path": .string(path),
              "idempotency_key": idempotencyKey.map { .string($0) } ?? .null,
              "request_id": requestID.map { .string($0) } ?? .null,
              "status": .integer(status), "result": .string(result),
              "resource_id": resourceID.map { .string($0) } ?? .null])
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

    public init(config: SimConfig = SimConfig(), ca: PayPalTestCA?, clock: @escaping @Sendable () -> Date = { Date() },
                transport: (any WebhookTransport)? = nil) {
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
    public func pxpTransactions() -> [PXPTransaction] { state.withLock { Array($0.pxp.transactions.values) } }
    public var certURL: String { state.withLock { "\($0.config.publicBaseURL)/v1/notifications/certs/\(Self.certName)" } }
    public var log: [SimLogEntry] { state.withLock { $0.log } }

    var nowString: String { SimTime.rfc3339Millis(clock()) }

    // MARK: - Entry points

    public func handle(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                       body: [UInt8] = []) -> SimResponse {
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
        if route.isProviderAPI {
            let decision: FaultDecision? = state.withLock { $0.faults.isActive ? $0.faults.decide() : nil }
            if let decision {
                if decision.delayMs > 0 { try? await Task.sleep(for: .milliseconds(decision.delayMs)) }
                if decision.outcome == .dropAfterApply {
                    if request.method == "POST", route.isAction {
                        _ = handle(request)   // applied (and logged), then the answer is lost
                        let now = nowString
                        state.withLock { s in
                            s.counts["fault.dropped_after_apply", default: 0] += 1
                            s.record(SimLogEntry(time: now, provider: route.provider ?? "", method: request.method, path: request.path,
                                                 idempotencyKey: Self.idempotencyKey(route, request),
                                                 requestID: request.header("x-request-id") ?? request.header("paypal-request-id"),
                                                 status: 0, result: "answer_dropped", resourceID: nil))
                        }
                        return SimResponse(status: 503, headers: [("Connection", "close")], body: [], drop: true)
                    }
                } else if decision.outcome == .dropBeforeApply {
                    if request.method == "POST", route.isAction, let faulted = faultResponse(.drop, route: route, request: request) {
                        return faulted   // never applied; the caller sees a cut connection
                    }
                } else if let faulted = faultResponse(decision.outcome, route: route, request: request) { return faulted }
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
            response = route.provider == "paypercut"
                ? PaypercutBook.error(500, "api_error", "internal_error", "injected fault").response
                : route.provider == "paypal"
                ? .json(500, .object(["name": "INTERNAL_SERVER_ERROR", "message": "An internal server error occurred.",
                                   "debug_id": "paysim-fault"]))
                : .json(500, .object(["errorCode": "InternalError", "errorReason": "injected fault"]))
        case .tooManyRequests(let retryAfter):
            result = "fault_429"
            // retry_after 0: no Retry-After header at all (a 429 that must still back off).
            let retryHeader = retryAfter > 0 ? [("Retry-After", String(retryAfter))] : []
            response = route.provider == "paypercut"
                ? .json(429, PaypercutBook.error(429, "rate_limit_error", "rate_limit", "Too many requests.").body, headers: retryHeader)
                : route.provider == "paypal"
                ? .json(429, .object(["name": "RATE_LIMIT_REACHED", "message": "Too many requests. Blocked due to rate limiting.",
                                   "debug_id": "paysim-fault"]), headers: retryHeader)
                : .json(429, .object(["errorCode": "TooManyRequests", "errorReason": "injected fault"]), headers: retryHeader)
        case .drop, .dropAfterApply, .dropBeforeApply:
            result = "dropped"
            response = SimResponse(status: 503, headers: [("Connection", "close")], body: [], drop: true)
        }
        state.withLock { s in
            s.counts["fault.\(result)", default: 0] += 1
            if request.method == "POST", route.isAction {
                s.record(SimLogEntry(time: nowString, provider: route.provider ?? "", method: request.method,
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
        .json(405, .object(["error": .object(["code": "method_not_allowed", "message": .string("use \(allowed)")])]),
              headers: [("Allow", allowed)])
    }

    private func dispatch(_ route: Route, _ r: SimRequest) throws(SimError) -> SimResponse {
        func expect(_ method: String) throws(SimError) {
            guard r.method == method else {
                throw SimError(status: 405, body: .object(["error": .object(["code": "method_not_allowed",
                                                                        "message": .string("use \(method)")])]),
                               code: "method_not_allowed")
            }
        }
        switch route {
        case .healthz:
            return .json(200, .object(["status": "ok"]))
        case .pxpTransaction(let merchant, let site):
            try expect("GET"); try checkPXPAuth(r)
            return try pxpGet(merchant: merchant, site: site, query: r.query)
        case .pxpModifications(let id):
            try expect("POST"); try checkPXPAuth(r)
            return try pxpModify(parentID: id, r)
        case .paypalToken:
            try expect("POST")
            return try paypalToken(r)
        case .paypercutIntent(let id):
            try expect("GET"); let account = try paypercutAccount(r)
            return try state.withLock { s throws(SimError) in .json(200, s.paypercut.intentJSON(try s.paypercut.intent(id, account: account))) }
        case .paypercutPayment(let id):
            try expect("GET"); let account = try paypercutAccount(r)
            return try state.withLock { s throws(SimError) in .json(200, s.paypercut.paymentJSON(try s.paypercut.payment(id, account: account))) }
        case .paypercutIntentCapture(let id):
            try expect("POST"); let account = try paypercutAccount(r)
            return paypercutAction(route, r) { s, body throws(SimError) in
                let amount = body?["amount_to_capture"]?.integerValue
                let final = body?["final_capture"]?.boolValue ?? false
                let i = try s.paypercut.capture(id, account: account, amount: amount, final: final)
                return (.json(200, s.paypercut.intentJSON(i)), i.id)
            }
        case .paypercutIntentCancel(let id):
            try expect("POST"); let account = try paypercutAccount(r)
            return paypercutAction(route, r) { s, _ throws(SimError) in
                let i = try s.paypercut.cancel(id, account: account)
                return (.json(200, s.paypercut.intentJSON(i)), i.id)
            }
        case .paypercutRefunds:
            try expect("POST"); let account = try paypercutAccount(r)
            return paypercutAction(route, r) { s, body throws(SimError) in
                guard let intent = body?["payment_intent"]?.stringValue else { throw PaypercutBook.missingParameter("payment_intent") }
                let refundID = "re_" + s.paypalID().lowercased()
                let refund = try s.paypercut.refund(intentID: intent, account: account, amount: body?["amount"]?.integerValue, refundID: refundID)
                return (.json(200, refund), refundID)
            }
        case .adminPaypercutIntents:
            try expect("POST"); return try adminPutPaypercut(r.body)
        case .paypalOrder(let id):
            try expect("GET"); try checkBearer(r)
            let now = clock()
            return try state.withLock { s throws(SimError) in
                guard let order = s.paypal.orders[id], !order.hasExpired(now: now) else {
                    throw SimError.paypalNotFound()
                }
                return .json(200, s.paypal.orderJSON(order, base: s.config.publicBaseURL))
            }
        case .paypalAuthorization(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let a = s.paypal.authorizations[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.authorizationJSON(a, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalCapture(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let c = s.paypal.captures[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.captureJSON(c, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalRefund(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let x = s.paypal.refunds[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.refundJSON(x, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalAuthorizationCapture(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, body throws(SimError) in
                let (amount, currency) = try Self.paypalAmount(body)
                var final = false
                if let f = body?["final_capture"], !f.isNull {
                    guard let b = f.boolValue else {
                        throw SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX", field: "/final_capture")
                    }
                    final = b
                }
                let capture = try s.paypal.capture(authorizationID: id, amountText: amount, currency: currency,
                                                   finalCapture: final, newID: s.paypalID(), now: self.nowSeconds)
                return (.json(201, s.paypal.captureJSON(capture, base: s.config.publicBaseURL, standalone: true)), capture.id)
            }
        case .paypalAuthorizationVoid(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, _ throws(SimError) in
                let auth = try s.paypal.void(authorizationID: id, now: self.nowSeconds)
                return (.json(200, s.paypal.authorizationJSON(auth, base: s.config.publicBaseURL, standalone: true)), auth.id)
            }
        case .paypalCaptureRefund(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, body throws(SimError) in
                let (amount, currency) = try Self.paypalAmount(body)
                let refund = try s.paypal.refund(captureID: id, amountText: amount, currency: currency,
                                                 newID: s.paypalID(), now: self.nowSeconds)
                return (.json(201, s.paypal.refundJSON(refund, base: s.config.publicBaseURL, standalone: true)), refund.id)
            }
        case .paypalSale(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let sale = s.paypal.sales[id] else { throw SimError.paypalNotFound("The requested resource ID was not found.") }
                return .json(200, s.paypal.saleJSON(sale, base: s.config.publicBaseURL))
            }
        case .paypalSaleRefund(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, body throws(SimError) in
                let amount = body?["amount"]
                let refund = try s.paypal.refundSale(id: id, total: amount?["total"]?.scalarText, currency: amount?["currency"]?.stringValue,
                                                     newID: s.paypalID(), now: self.nowSeconds)
                return (.json(201, s.paypal.saleRefundJSON(refund, base: s.config.publicBaseURL)), refund.id)
            }
        case .paypalDispute(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                // Reading a dispute needs the app's disputes scope (customer_disputes_v1.json security); without it
                // PayPal refuses (PAYPAL-DISPUTES-PERMISSION).
                guard s.config.paypalDisputesPermission else { throw Self.disputesNotAuthorized }
                guard let d = s.paypal.disputes[id] else { throw SimError.paypalNotFound("The requested resource ID was not found.") }
                return .json(200, s.paypal.disputeJSON(d, base: s.config.publicBaseURL))
            }
        case .paypalDisputes:
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                // Listing needs the same scope as reading one (customer_disputes_v1.json `disputes.list` security).
                guard s.config.paypalDisputesPermission else { throw Self.disputesNotAuthorized }
                return .json(200, try s.paypal.disputeListJSON(query: r.query, base: s.config.publicBaseURL))
            }
        case .adminPayPalSales:
            try expect("POST"); return try adminPutPayPalSales(r.body)
        case .adminPayPalDisputes:
            try expect("POST"); return try adminPayPalDispute(r.body)
        case .adminPayPalReversals:
            try expect("POST"); return try adminPayPalReversal(r.body)
        case .paypalCert(let name):
            try expect("GET")
            guard name == Self.certName, let ca else {
                return SimResponse(status: 404, headers: [("Content-Type", "text/plain")], body: Array("not found\n".utf8))
            }
            return SimResponse(status: 200, headers: [("Content-Type", "application/x-pem-file"),
                                                      ("Cache-Control", "public,max-age=86400")],
                               body: Array(ca.leafPEMWithCRLF.utf8))
        case .adminPXPTransactions:
            if r.method == "GET" {
                // Every PXP transaction, modifications included, as PXP's GET shows each, with its parent: how the
                // chaos runs count what was applied.
                let all = state.withLock { Array($0.pxp.transactions.values) }.sorted { $0.systemTransactionID < $1.systemTransactionID }
                return .json(200, .object(["transactions": .array(all.map { t in
                    .object([("transaction", t.json), ("parent", t.parentID.map { .string($0) } ?? .null),
                             ("operation", t.operation.map { .string($0) } ?? .null)])
                })]))
            }
            try expect("POST"); return try adminPutPXP(r.body)
        case .adminPayPalPermissions:
            if r.method == "POST" {
                let json = try Self.parseAdminBody(r.body)
                guard let disputes = json["disputes"]?.boolValue else {
                    throw SimError.admin(400, "invalid_field", "disputes must be a boolean (whether the app may read disputes)")
                }
                state.withLock { $0.config.paypalDisputesPermission = disputes }
            } else { try expect("GET") }
            return .json(200, .object(["disputes": .bool(state.withLock { $0.config.paypalDisputesPermission })]))
        case .adminPXPBehaviour:
            if r.method == "GET" { return .json(200, state.withLock { $0.config.pxpBehaviour.json }) }
            try expect("POST")
            let json = try Self.parseAdminBody(r.body)
            let behaviour = try state.withLock { s throws(SimError) -> PXPBehaviour in
                s.config.pxpBehaviour = try PXPBehaviour.parse(json, base: s.config.pxpBehaviour)
                return s.config.pxpBehaviour
            }
            return .json(200, behaviour.json)
        case .adminPayPalOrders:
            try expect("POST"); return try adminPutPayPal(r.body)
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
        case .adminRootPEM:
            try expect("GET")
            guard let ca else { throw SimError.admin(404, "no_ca", "paysim runs without a PayPal test CA") }
            return SimResponse(status: 200, headers: [("Content-Type", "application/x-pem-file")],
                               body: Array(ca.trustBundlePEM.utf8))
        case .adminWebhooksSend:
            throw SimError.admin(501, "async_only", "webhooks are sent through Simulator.respond")
        case .notFound(let provider):
            if provider == "paypal" { throw SimError.paypalNotFound("No such path.") }
            if provider == "pxp" { throw SimError.pxp(404, "NotFound", "no such path") }
            throw SimError.admin(404, "not_found", "no such path")
        }
    }

    var nowSeconds: String { SimTime.rfc3339(clock()) }

    /// What PayPal answers an app without the disputes scope (`https://uri.paypal.com/services/disputes/read-seller`).
    static var disputesNotAuthorized: SimError {
        SimError.paypal(403, name: "NOT_AUTHORIZED", message: "Authorization failed due to insufficient permissions.",
                        issue: "PERMISSION_DENIED", description: SimError.paypalDescriptions["PERMISSION_DENIED"]!)
    }

    // MARK: - PXP

    /// Checks `Authorization: PXP-UST1 {tokenId}:{timestamp}:{hmac}`, `X-Request-Id` and `X-Client-Id`.
    func checkPXPAuth(_ r: SimRequest) throws(SimError) {
        let config = state.withLock { $0.config }
        func reject(_ reason: String) -> SimError { SimError.pxp(401, "Unauthorized", reason) }
        guard let header = r.header("authorization") else { throw reject("missing Authorization header") }
        let prefix = "PXP-UST1 "
        guard header.hasPrefix(prefix) else { throw reject("Authorization scheme must be PXP-UST1") }
        // tokenId up to the first ':', hmac after the last (an ISO 8601 timestamp has colons of its own).
        let credential = header.dropFirst(prefix.count)
        guard let first = credential.firstIndex(of: ":"), let last = credential.lastIndex(of: ":"), first < last else {
            throw reject("Authorization must be PXP-UST1 {tokenId}:{timestamp}:{hmac}")
        }
        let parts = [String(credential[..<first]), String(credential[credential.index(after: first)..<last]),
                     String(credential[credential.index(after: last)...])]
        guard !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw reject("Authorization must be PXP-UST1 {tokenId}:{timestamp}:{hmac}")
        }
        guard simConstantTimeEquals(Array(parts[0].utf8), Array(config.pxpTokenID.utf8)) else {
            throw reject("unknown token id")
        }
        guard Self.isPXPTimestamp(parts[1]) else { throw reject("timestamp must be unix seconds, unix milliseconds or ISO 8601") }
        guard let requestID = r.header("x-request-id"), !requestID.isEmpty else { throw reject("missing X-Request-Id") }
        guard let clientID = r.header("x-client-id"),
              simConstantTimeEquals(Array(clientID.utf8), Array(config.pxpClientID.utf8))
        else { throw reject("missing or unknown X-Client-Id") }
        guard verifyPXPSignature(request: r, tokenValue: config.pxpTokenValue, timestamp: parts[1],
                                 requestID: requestID, signature: parts[2])
        else { throw reject("signature does not match") }
    }


    private func pxpGet(merchant: String, site: String, query: [String: String]) throws(SimError) -> SimResponse {
        let found: PXPTransaction? = state.withLock { s in
            if let mtid = query["merchantTransactionId"], !mtid.isEmpty {
                let t = s.pxp.find(merchant: merchant, site: site, merchantTransactionID: mtid)
                // A PXP whose lookup by merchantTransactionId finds only the merchant's own transactions (undocumented).
                if t?.parentID != nil, !s.config.pxpBehaviour.findsModifications { return nil }
                return t.flatMap { s.pxp.lookedUp($0.systemTransactionID) }
            }
            if let sid = query["systemTransactionId"], !sid.isEmpty,
               let t = s.pxp.find(systemTransactionID: sid), t.merchant == merchant, t.site == site {
                return t
            }
            return nil
        }
        guard query["merchantTransactionId"] != nil || query["systemTransactionId"] != nil else {
            throw SimError.pxp(400, "InvalidRequest", "merchantTransactionId or systemTransactionId is required")
        }
        guard let found else { throw SimError.pxp(404, "TransactionNotFound", "transaction not found") }
        return .json(200, found.json)
    }

    private func pxpModify(parentID: String, _ r: SimRequest) throws(SimError) -> SimResponse {
        let route = Route.pxpModifications(parentID)
        let modification: PXPModificationRequest
        do {
            modification = try PXPModificationRequest.parse(r.body)
        } catch {
            logAction(route, r, key: nil, status: error.status, result: error.code, resourceID: nil)
            throw error
        }
        let now = nowString
        let outcome: Result<PXPBook.Outcome, SimError> = state.withLock { s in
            let id = s.ids.uuid()
            do throws(SimError) {
                return .success(try s.pxp.modify(parentID: parentID, modification, newSystemTransactionID: id, now: now,
                                                 behaviour: s.config.pxpBehaviour))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(.applied(let t)):
            logAction(route, r, key: modification.merchantTransactionID, status: 200, result: "applied",
                      resourceID: t.systemTransactionID)
            return .json(200, t.json)
        case .success(.replayed(let t)):
            logAction(route, r, key: modification.merchantTransactionID, status: 200, result: "replayed",
                      resourceID: t.systemTransactionID)
            return .json(200, t.json)
        case .failure(let error):
            logAction(route, r, key: modification.merchantTransactionID, status: error.status, result: error.code,
                      resourceID: nil)
            throw error
        }
    }

    private func logAction(_ route: Route, _ r: SimRequest, key: String?, status: Int, result: String, resourceID: String?) {
        let entry = SimLogEntry(time: nowString, provider: route.provider ?? "", method: r.method, path: r.path,
                                idempotencyKey: key,
                                requestID: r.header("x-request-id"), status: status, result: result,
                                resourceID: resourceID)
        state.withLock { $0.record(entry) }
    }

    // MARK: - PayPal

    private func paypalToken(_ r: SimRequest) throws(SimError) -> SimResponse {
        let config = state.withLock { $0.config }
        func reject() -> SimError {
            SimError(status: 401, body: .object(["error": "invalid_client", "error_description": "Client Authentication failed"]),
                     code: "invalid_client")
        }
        guard let header = r.header("authorization"), header.hasPrefix("Basic "),
              let decoded = Base64.decode(String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces))
        else { throw reject() }
        let expected = Array("\(config.paypalClientID):\(config.paypalSecret)".utf8)
        guard simConstantTimeEquals(decoded, expected) else { throw reject() }
        let form = SimRequest.parseQuery(String(decoding: r.body, as: UTF8.self))
        guard form["grant_type"] == "client_credentials" else {
            throw SimError(status: 400, body: .object(["error": "unsupported_grant_type",
                                                    "error_description": "Grant Type is NULL or not client_credentials"]),
                           code: "unsupported_grant_type")
        }
        let now = Int64(clock().timeIntervalSince1970)
        let token: String = state.withLock { s in
            if s.tokens.count > 10_000 { s.tokens = s.tokens.filter { $0.value > now } }
            let token = "A21AA" + s.ids.string(60, alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))
            s.tokens[token] = now + config.paypalTokenLifetime
            return token
        }
        return .json(200, .object([
            "scope": "https://uri.paypal.com/services/payments/payment https://uri.paypal.com/services/payments/refund",
            "access_token": .string(token), "token_type": "Bearer", "app_id": "APP-PAYSIM",
            "expires_in": .integer(config.paypalTokenLifetime), "nonce": .string(SimTime.rfc3339(clock()) + "paysim"),
        ]))
    }

    func checkBearer(_ r: SimRequest) throws(SimError) {
        let now = Int64(clock().timeIntervalSince1970)
        let valid: Bool = state.withLock { s in
            guard let header = r.header("authorization"), header.hasPrefix("Bearer ") else { return false }
            let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            guard let expiry = s.tokens[token] else { return false }
            return expiry > now
        }
        guard valid else {
            // The message every document's `error_401` allows, and the debug_id the v1 `error` requires.
            throw SimError(status: 401, body: .object([
                "name": "AUTHENTICATION_FAILURE",
                "message": "Authentication failed due to missing authorization header, or invalid authentication credentials.",
                "debug_id": "paysim",
                "links": .array([PayPalBook.link("https://developer.paypal.com/docs/api/overview/#error", "information_link", "GET")]),
            ]), code: "AUTHENTICATION_FAILURE")
        }
    }

    /// `amount {currency_code, value}` of a capture or refund body, both nil when absent.
    static func paypalAmount(_ body: JSONValue?) throws(SimError) -> (String?, String?) {
        guard let amount = body?["amount"], !amount.isNull else { return (nil, nil) }
        guard amount.objectMembers != nil, let value = amount["value"]?.scalarText else {
            throw SimError.paypalInvalid("MISSING_REQUIRED_PARAMETER", field: "/amount/value")
        }
        return (value, amount["currency_code"]?.stringValue)
    }

    /// Runs a PayPal action once per PayPal-Request-Id: a repeated id gets the stored answer and changes nothing.
    private func paypalAction(
        _ route: Route, _ r: SimRequest,
        _ apply: (inout SimState, JSONValue?) throws(SimError) -> (SimResponse, String)
    ) -> SimResponse {
        let requestID = r.header("paypal-request-id").flatMap { $0.isEmpty ? nil : $0 }
        var body: JSONValue?
        var parseError: SimError?
        // PayPal-Request-Id is at most 108 characters (checkout_orders_v2.json), 78 on the v1 sale refund
        // (payments_payment_v1.json `paypal_request_id`); a longer one is refused.
        let limit: Int
        if case .paypalSaleRefund = route { limit = 78 } else { limit = 108 }
        if let requestID, requestID.count > limit {
            parseError = SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX", field: "PayPal-Request-Id")
        }
        // A body that is not a JSON object is INVALID_PARAMETER_SYNTAX: the 400s the capture and refund documents
        // list have no MALFORMED_REQUEST_JSON.
        if parseError == nil, !r.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let parsed = try? JSONValue.parse(r.body)
            if parsed?.objectMembers == nil { parseError = SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX") }
            body = parsed
        }
        let now = nowString
        return state.withLock { s in
            if let requestID, let cached = s.paypalIdempotency[requestID] {
                s.record(SimLogEntry(time: now, provider: "paypal", method: r.method, path: r.path, idempotencyKey: requestID,
                                     requestID: requestID, status: cached.status, result: "replayed", resourceID: nil))
                return cached
            }
            let response: SimResponse
            let result: String
            var resourceID: String?
            if let parseError {
                response = parseError.response; result = parseError.code
            } else {
                do throws(SimError) {
                    let (answer, id) = try apply(&s, body)
                    response = answer; result = "applied"; resourceID = id
                } catch {
                    response = error.response; result = error.code
                }
            }
            if let requestID, requestID.count <= limit { s.paypalIdempotency[requestID] = response }
            s.record(SimLogEntry(time: now, provider: "paypal", method: r.method, path: r.path, idempotencyKey: requestID,
                                 requestID: requestID, status: response.status, result: result, resourceID: resourceID))
            return response
        }
    }
}

// MARK: - Paypercut

extension Simulator {
    /// The account a Paypercut request acts as, once its credentials are checked: authentication first (401), then
    /// the account context (403 `account_invalid`), as the docs order them; neither is kept under an Idempotency-Key,
    /// so the same key goes through once the credentials or the account are right.
    func paypercutAccount(_ r: SimRequest) throws(SimError) -> String? {
        try checkPaypercutAuth(r)
        let header = r.header("paypercut-account") ?? r.header("x-paypercut-account")
        return try state.withLock { s throws(SimError) in try s.paypercut.account(header) }
    }

    /// `Authorization: Bearer <secret key>`, else 401 with the documented authentication codes: none given
    /// (`authentication_required`), not a Bearer credential (`authentication_invalid`), an unknown key
    /// (`token_invalid`, showing the key masked, as Paypercut's messages do).
    func checkPaypercutAuth(_ r: SimRequest) throws(SimError) {
        func refuse(_ code: String, _ message: String) -> SimError { PaypercutBook.error(401, "authentication_error", code, message) }
        guard let header = r.header("authorization"), !header.isEmpty else {
            throw refuse("authentication_required", "This endpoint requires an API key: send Authorization: Bearer <secret key>.")
        }
        guard header.hasPrefix("Bearer ") else { throw refuse("authentication_invalid", "The Authorization header must be Bearer <secret key>.") }
        let presented = String(header.dropFirst("Bearer ".count))
        guard presented == state.withLock({ $0.config.paypercutSecretKey }) else {
            throw refuse("token_invalid", "Invalid API key provided: \(Self.masked(presented)).")
        }
    }

    /// A key as an error message may show it: its first few characters only.
    static func masked(_ key: String) -> String { String(key.prefix(min(8, key.count / 2))) + "****" }

    /// Runs a Paypercut action once per Idempotency-Key: the same key again gets the first answer and changes
    /// nothing; the same key on another path is `409 idempotency_error`.
    func paypercutAction(_ route: Route, _ r: SimRequest,
                         _ apply: (inout SimState, JSONValue?) throws(SimError) -> (SimResponse, String)) -> SimResponse {
        let key = r.header("idempotency-key").flatMap { $0.isEmpty ? nil : $0 }
        let body = r.body.isEmpty ? nil : try? JSONValue.parse(r.body)
        let now = nowString
        return state.withLock { s in
            if let key, let seen = s.paypercut.idempotency[key] {
                guard seen.path == r.path else {
                    let e = PaypercutBook.error(409, "idempotency_error", "idempotency_key_in_use",
                                                "Keys for idempotent requests can only be used with the same parameters they were first used with.")
                    s.record(SimLogEntry(time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
                                         requestID: key, status: 409, result: e.code, resourceID: nil))
                    return e.response
                }
                s.record(SimLogEntry(time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
                                     requestID: key, status: seen.response.status, result: "replayed", resourceID: nil))
                return seen.response
            }
            let response: SimResponse, result: String
            var resourceID: String?
            do throws(SimError) {
                let (answer, id) = try apply(&s, body)
                response = answer; result = "applied"; resourceID = id
            } catch {
                response = error.response; result = error.code
            }
            if let key { s.paypercut.idempotency[key] = (r.path, response) }
            s.record(SimLogEntry(time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
                                 requestID: key, status: response.status, result: result, resourceID: resourceID))
            return response
        }
    }

    /// `POST /admin/paypercut/intents`: one intent or an array of them: `{id, account?, amount, currency, capture_method,
    /// status, amount_capturable?, amount_received?, created?, payment?: {id?, status, amount_captured, amount_refunded?,
    /// payment_method?}}`, amounts in minor units. An intent's `account` becomes one the secret key may act for.
    func adminPutPaypercut(_ bytes: [UInt8]) throws(SimError) -> SimResponse {
        guard let json = try? JSONValue.parse(bytes) else { throw SimError.admin(400, "malformed_body", "expected JSON") }
        let items = json.arrayValue ?? [json]
        var parsed: [(PaypercutIntent, PaypercutPayment?)] = []
        for (n, item) in items.enumerated() {
            func need(_ key: String) throws(SimError) -> JSONValue {
                guard let v = item[key], !v.isNull else { throw SimError.admin(400, "invalid_field", "intent \(n): \(key) is required") }
                return v
            }
            guard let id = try need("id").stringValue, let code = try need("currency").stringValue, let currency = Currency(code: code.uppercased()),
                  let amount = try need("amount").integerValue, let status = try need("status").stringValue else {
                throw SimError.admin(400, "invalid_field", "intent \(n): id, currency (ISO code), amount (minor units) and status are required")
            }
            let method = item["capture_method"]?.stringValue ?? "manual"
            let received = item["amount_received"]?.integerValue ?? (status == "succeeded" ? amount : 0)
            let capturable = item["amount_capturable"]?.integerValue ?? (status == "requires_capture" ? amount : 0)
            var payment: PaypercutPayment?
            if let p = item["payment"], !p.isNull {
                payment = PaypercutPayment(id: p["id"]?.stringValue ?? "pay_" + id, intentID: id,
                                           status: p["status"]?.stringValue ?? "succeeded",
                                           amountCaptured: p["amount_captured"]?.integerValue ?? received,
                                           amountRefunded: p["amount_refunded"]?.integerValue ?? 0,
                                           paymentMethod: p["payment_method"]?.stringValue ?? "card")
            } else if status != "requires_payment_method" || received > 0 {
                payment = PaypercutPayment(id: "pay_" + id, intentID: id, status: status == "requires_capture" || status == "succeeded" ? "succeeded" : "pending",
                                           amountCaptured: received, amountRefunded: 0, paymentMethod: "card")
            }
            let intent = PaypercutIntent(id: id, account: item["account"]?.stringValue, amount: amount, currency: currency,
                                         captureMethod: method, status: status, amountCapturable: capturable, amountReceived: received,
                                         created: item["created"]?.integerValue ?? Int64(clock().timeIntervalSince1970),
                                         paymentID: payment?.id)
            parsed.append((intent, payment))
        }
        state.withLock { s in
            for (i, p) in parsed {
                s.paypercut.intents[i.id] = i
                if let account = i.account { s.paypercut.accounts.insert(account) }
                if let p { s.paypercut.payments[p.id] = p }
            }
        }
        return .json(201, .object(["created": .integer(parsed.count)]))
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
    case paypalDispute(String)
    case paypalDisputes
    case paypercutIntent(String)
    case paypercutIntentCapture(String)
    case paypercutIntentCancel(String)
    case paypercutPayment(String)
    case paypercutRefunds
    case adminPaypercutIntents
    case adminPayPalSales, adminPayPalDisputes, adminPayPalReversals
    case adminPXPTransactions, adminPXPBehaviour, adminPayPalPermissions, adminPayPalOrders, adminSeed, adminLog, adminFaults, adminReset, adminStats
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
                self = method != "GET" && s[4] == "modifications" ? .pxpModifications(s[3])
                    : .pxpTransaction(merchant: s[3], site: s[4])
            } else {
                self = .notFound(provider: "pxp")
            }
        case "v1":
            if s.count == 3, s[1] == "oauth2", s[2] == "token" { self = .paypalToken }
            else if s.count == 4, s[1] == "notifications", s[2] == "certs" { self = .paypalCert(s[3]) }
            else if s.count == 4, s[1] == "payments", s[2] == "sale" { self = .paypalSale(s[3]) }
            else if s.count == 5, s[1] == "payments", s[2] == "sale", s[4] == "refund" { self = .paypalSaleRefund(s[3]) }
            else if s.count == 4, s[1] == "customer", s[2] == "disputes" { self = .paypalDispute(s[3]) }
            else if s.count == 3, s[1] == "customer", s[2] == "disputes" { self = .paypalDisputes }
            else if s.count == 3, s[1] == "payment_intents" { self = .paypercutIntent(s[2]) }
            else if s.count == 4, s[1] == "payment_intents", s[3] == "capture" { self = .paypercutIntentCapture(s[2]) }
            else if s.count == 4, s[1] == "payment_intents", s[3] == "cancel" { self = .paypercutIntentCancel(s[2]) }
            else if s.count == 2, s[1] == "refunds" { self = .paypercutRefunds }
            else if s.count >= 2, ["payment_intents", "refunds"].contains(s[1]) { self = .notFound(provider: "paypercut") }
            else { self = .notFound(provider: "paypal") }
        case "v2":
            if s.count == 4, s[1] == "checkout", s[2] == "orders" { self = .paypalOrder(s[3]) }
            else if s.count == 3, s[1] == "payments" { self = .paypercutPayment(s[2]) }
            else if s.count >= 4, s[1] == "payments" {
                switch (s[2], s.count, s.count == 5 ? s[4] : "") {
                case ("authorizations", 4, _): self = .paypalAuthorization(s[3])
                case ("authorizations", 5, "capture"): self = .paypalAuthorizationCapture(s[3])
                case ("authorizations", 5, "void"): self = .paypalAuthorizationVoid(s[3])
                case ("captures", 4, _): self = .paypalCapture(s[3])
                case ("captures", 5, "refund"): self = .paypalCaptureRefund(s[3])
                case ("refunds", 4, _): self = .paypalRefund(s[3])
                default: self = .notFound(provider: "paypal")
                }
            } else { self = .notFound(provider: "paypal") }
        case "admin":
            switch s.dropFirst().joined(separator: "/") {
            case "pxp/transactions": self = .adminPXPTransactions
            case "pxp/behaviour": self = .adminPXPBehaviour
            case "paypal/permissions": self = .adminPayPalPermissions
            case "paypal/orders": self = .adminPayPalOrders
            case "paypercut/intents": self = .adminPaypercutIntents
            case "paypal/sales": self = .adminPayPalSales
            case "paypal/disputes": self = .adminPayPalDisputes
            case "paypal/reversals": self = .adminPayPalReversals
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
             .paypalCapture, .paypalCaptureRefund, .paypalRefund, .paypalCert, .paypalSale, .paypalSaleRefund, .paypalDispute,
             .paypalDisputes: return "paypal"
        case .paypercutIntent, .paypercutIntentCapture, .paypercutIntentCancel, .paypercutPayment, .paypercutRefunds: return "paypercut"
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
             .paypercutIntentCapture, .paypercutIntentCancel, .paypercutRefunds: return true
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
        case .paypalDispute: return "paypal.get_dispute"
        case .paypalDisputes: return "paypal.list_disputes"
        case .adminPayPalSales: return "admin.paypal_sales"
        case .adminPayPalDisputes: return "admin.paypal_disputes"
        case .adminPayPalReversals: return "admin.paypal_reversals"
        case .paypercutIntent: return "paypercut.get_payment_intent"
        case .paypercutIntentCapture: return "paypercut.capture"
        case .paypercutIntentCancel: return "paypercut.cancel"
        case .paypercutPayment: return "paypercut.get_payment"
        case .paypercutRefunds: return "paypercut.refund"
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
