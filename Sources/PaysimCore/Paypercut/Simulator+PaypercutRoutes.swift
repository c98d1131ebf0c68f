import Foundation
import Reconciliation

// Paypercut as paysim serves it: payment intents, payments and refunds, and its admin route.
extension Simulator {
    /// Paypercut's routes; nil for a route that is not Paypercut's.
    func dispatchPaypercut(_ route: Route, _ r: SimRequest) throws(SimError) -> SimResponse? {
        func expect(_ method: String) throws(SimError) {
            guard r.method == method else { throw Self.wrongMethod(method) }
        }
        switch route {
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
        default:
            return nil
        }
    }
}

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
