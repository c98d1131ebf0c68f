import Foundation
import Reconciliation
import TextFormats

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
            return try state.withLock { s throws(SimError) in
                .json(200, s.paypercut.intentJSON(try s.paypercut.intent(id, account: account)))
            }
        case .paypercutPayment(let id):
            try expect("GET"); let account = try paypercutAccount(r)
            return try state.withLock { s throws(SimError) in
                .json(200, s.paypercut.paymentJSON(try s.paypercut.payment(id, account: account)))
            }
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
                let refund = try s.paypercut.refund(
                    intentID: intent, account: account, amount: body?["amount"]?.integerValue, refundID: refundID,
                    now: Int64(self.clock().timeIntervalSince1970))
                return (.json(200, refund), refundID)
            }
        case .paypercutPaymentList:
            try expect("GET"); let account = try paypercutAccount(r)
            return try paypercutList(r, account: account, payments: true)
        case .paypercutRefundList:
            try expect("GET"); let account = try paypercutAccount(r)
            return try paypercutList(r, account: account, payments: false)
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
        guard header.hasPrefix("Bearer ") else {
            throw refuse("authentication_invalid", "The Authorization header must be Bearer <secret key>.")
        }
        let presented = String(header.dropFirst("Bearer ".count))
        guard presented == state.withLock({ $0.config.paypercutSecretKey }) else {
            throw refuse("token_invalid", "Invalid API key provided: \(Self.masked(presented)).")
        }
    }

    /// A key as an error message may show it: its first few characters only.
    static func masked(_ key: String) -> String { String(key.prefix(min(8, key.count / 2))) + "****" }

    /// Runs a Paypercut action once per Idempotency-Key: the same key again gets the first answer and changes
    /// nothing; the same key on another path or with other parameters is `409 idempotency_error` ("Keys for idempotent
    /// requests can only be used with the same parameters they were first used with", PAYPERCUT-18).
    func paypercutAction(
        _ route: Route, _ r: SimRequest,
        _ apply: (inout SimState, JSONValue?) throws(SimError) -> (SimResponse, String)
    ) -> SimResponse {
        let key = r.header("idempotency-key").flatMap { $0.isEmpty ? nil : $0 }
        let body = r.body.isEmpty ? nil : try? JSONValue.parse(r.body)
        let now = nowString
        return state.withLock { s in
            if let key, let seen = s.paypercut.idempotency[key] {
                guard seen.path == r.path, seen.body == body else {
                    let e = PaypercutBook.error(
                        409, "idempotency_error", "idempotency_key_in_use",
                        "Keys for idempotent requests can only be used with the same parameters they were first used with.")
                    s.record(
                        SimLogEntry(
                            time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
                            requestID: key, status: 409, result: e.code, resourceID: nil))
                    return e.response
                }
                s.record(
                    SimLogEntry(
                        time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
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
            if let key { s.paypercut.idempotency[key] = (r.path, body, response) }
            s.record(
                SimLogEntry(
                    time: now, provider: "paypercut", method: r.method, path: r.path, idempotencyKey: key,
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
        var parsed: [(PaypercutIntent, PaypercutPayment?, [PaypercutRefund])] = []
        for (n, item) in items.enumerated() {
            func need(_ key: String) throws(SimError) -> JSONValue {
                guard let v = item[key], !v.isNull else { throw SimError.admin(400, "invalid_field", "intent \(n): \(key) is required") }
                return v
            }
            guard let id = try need("id").stringValue, let code = try need("currency").stringValue,
                let currency = Currency(code: code.uppercased()),
                let amount = try need("amount").integerValue, let status = try need("status").stringValue
            else {
                throw SimError.admin(
                    400, "invalid_field", "intent \(n): id, currency (ISO code), amount (minor units) and status are required")
            }
            let method = item["capture_method"]?.stringValue ?? "manual"
            let received = item["amount_received"]?.integerValue ?? (status == "succeeded" ? amount : 0)
            let capturable = item["amount_capturable"]?.integerValue ?? (status == "requires_capture" ? amount : 0)
            var payment: PaypercutPayment?
            if let p = item["payment"], !p.isNull {
                payment = PaypercutPayment(
                    id: p["id"]?.stringValue ?? "pay_" + id, intentID: id,
                    status: p["status"]?.stringValue ?? "succeeded",
                    amountCaptured: p["amount_captured"]?.integerValue ?? received,
                    amountRefunded: p["amount_refunded"]?.integerValue ?? 0,
                    paymentMethod: p["payment_method"]?.stringValue ?? "card")
            } else if status != "requires_payment_method" || received > 0 {
                payment = PaypercutPayment(
                    id: "pay_" + id, intentID: id, status: status == "requires_capture" || status == "succeeded" ? "succeeded" : "pending",
                    amountCaptured: received, amountRefunded: 0, paymentMethod: "card")
            }
            let intent = PaypercutIntent(
                id: id, account: item["account"]?.stringValue, amount: amount, currency: currency,
                captureMethod: method, status: status, amountCapturable: capturable, amountReceived: received,
                created: item["created"]?.integerValue ?? Int64(clock().timeIntervalSince1970),
                paymentID: payment?.id)
            // "refunds": [{id?, amount, created?}]: refunds made before (in the dashboard, say), as the payment's.
            var refunds: [PaypercutRefund] = []
            for (k, refund) in (item["refunds"]?.arrayValue ?? []).enumerated() {
                guard let payment, let n = refund["amount"]?.integerValue, n > 0 else {
                    throw SimError.admin(
                        400, "invalid_field", "intent \(n): refunds[\(k)] needs a positive amount (minor units) and a payment to refund")
                }
                refunds.append(
                    PaypercutRefund(
                        id: refund["id"]?.stringValue ?? "re_\(id)_\(k)", intentID: id, paymentID: payment.id, amount: n,
                        currency: currency, status: refund["status"]?.stringValue ?? "succeeded",
                        created: refund["created"]?.integerValue ?? Int64(clock().timeIntervalSince1970)))
            }
            if !refunds.isEmpty, payment != nil, item["payment"]?["amount_refunded"] == nil {
                payment?.amountRefunded = refunds.filter { $0.status == "succeeded" }.reduce(0) { $0 + $1.amount }
            }
            parsed.append((intent, payment, refunds))
        }
        state.withLock { s in
            for (i, p, refunds) in parsed {
                s.paypercut.intents[i.id] = i
                if let account = i.account { s.paypercut.accounts.insert(account) }
                if let p { s.paypercut.payments[p.id] = p }
                for refund in refunds { s.paypercut.refunds[refund.id] = refund }
            }
        }
        return .json(201, .object(["created": .integer(parsed.count)]))
    }
}

extension Simulator {
    /// `GET /v2/payments` and `GET /v1/refunds` as Paypercut documents them: `start_date` / `end_date` (RFC 3339, both
    /// inclusive here), `limit` (default 10; paysim allows up to 100), `last_key` (the last item's id of the page
    /// before); the answer `{items, last_key}`, `last_key` null on the last page. Newest first, by creation time then id,
    /// so what is made meanwhile does not shift the pages. A request acting as an account (`Paypercut-Account`) sees
    /// only that account's; one without sees the key's own (intents of no connected account).
    func paypercutList(_ r: SimRequest, account: String?, payments: Bool) throws(SimError) -> SimResponse {
        func date(_ name: String) throws(SimError) -> Int64? {
            guard let text = r.query[name] else { return nil }
            guard let t = SimTime.parse(text) else { throw PaypercutBook.invalidParameter(name, "\(name) must be an RFC 3339 date-time.") }
            return t
        }
        let start = try date("start_date"), end = try date("end_date")
        let limit = Int(r.query["limit"] ?? "10") ?? 0
        guard (1...100).contains(limit) else { throw PaypercutBook.invalidParameter("limit", "limit must be between 1 and 100.") }
        let lastKey = r.query["last_key"].flatMap { $0.isEmpty ? nil : $0 }
        return try state.withLock { s throws(SimError) -> SimResponse in
            let book = s.paypercut
            // (created, id, json) of what the account may see.
            var rows: [(Int64, String)] = []
            if payments {
                for p in book.payments.values {
                    guard let intent = book.intents[p.intentID], intent.account == account else { continue }
                    rows.append((intent.created, p.id))
                }
            } else {
                for refund in book.refunds.values {
                    guard let intent = book.intents[refund.intentID], intent.account == account else { continue }
                    rows.append((refund.created, refund.id))
                }
            }
            rows = rows.filter { row in (start.map { row.0 >= $0 } ?? true) && (end.map { row.0 <= $0 } ?? true) }
            rows.sort { ($0.0, $0.1) > ($1.0, $1.1) }
            if let lastKey {
                guard let at = rows.firstIndex(where: { $0.1 == lastKey }) else {
                    throw PaypercutBook.invalidParameter("last_key", "last_key \(lastKey) is not an item of this list.")
                }
                rows.removeFirst(at + 1)
            }
            let page = rows.prefix(limit)
            let items: [JSONValue] = page.map { row in
                payments ? book.paymentJSON(book.payments[row.1]!) : book.refundJSON(book.refunds[row.1]!)
            }
            let next: JSONValue = rows.count > limit ? .string(page.last!.1) : .null
            return .json(200, .object(["items": .array(items), "last_key": next]))
        }
    }
}
