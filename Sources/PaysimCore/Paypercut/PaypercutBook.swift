import Foundation
import Reconciliation
import TextFormats

/// Paysim's Paypercut state: payment intents and their payments (v2), with the state changes capture, cancel and
/// refund make. Amounts are minor units, as Paypercut's API takes them.
public struct PaypercutIntent: Sendable, Equatable {
    public var id: String
    public var account: String?
    public var amount: Int64
    public var currency: Currency
    public var captureMethod: String  // manual | automatic
    public var status: String
    public var amountCapturable: Int64
    public var amountReceived: Int64
    public var created: Int64
    public var paymentID: String?
}

public struct PaypercutPayment: Sendable, Equatable {
    public var id: String
    public var intentID: String
    public var status: String  // succeeded | pending | failed
    public var amountCaptured: Int64
    public var amountRefunded: Int64
    public var paymentMethod: String
}

/// A refund (RefundResponse): what was given back of an intent's payment, and when.
public struct PaypercutRefund: Sendable, Equatable {
    public var id: String
    public var intentID: String
    public var paymentID: String
    public var amount: Int64
    public var currency: Currency
    public var status: String  // pending | requires_action | succeeded | failed | canceled
    public var created: Int64
}

struct PaypercutBook: Sendable {
    var intents: [String: PaypercutIntent] = [:]
    var payments: [String: PaypercutPayment] = [:]
    var refunds: [String: PaypercutRefund] = [:]
    /// The connected accounts paysim's secret key may act for: every account a seeded intent belongs to.
    var accounts: Set<String> = []
    /// Idempotency-Key → (the path it was used on, the answer given).
    var idempotency: [String: (path: String, body: JSONValue?, response: SimResponse)] = [:]

    // MARK: Errors

    /// Paypercut's error object, top level, not wrapped in `{"error": …}`: `type`, `code`, `param` (null unless a
    /// parameter is at fault), `message`, `trace_id` (docs.paypercut.io/docs/developer-resources/error-object).
    static func error(_ status: Int, _ type: String, _ code: String, _ message: String, param: String? = nil) -> SimError {
        SimError(
            status: status,
            body: .object([
                "type": .string(type), "code": .string(code), "param": param.map { .string($0) } ?? .null,
                "message": .string(message), "trace_id": "paysim-trace"
            ]), code: code)
    }

    /// 404: "does not exist or is not accessible in the current context" (docs error handling); `resource_missing`
    /// is Stripe's code, not a documented one (PAYPERCUT-5).
    static func notFound(_ what: String, _ id: String) -> SimError {
        error(404, "invalid_request_error", "resource_missing", "No such \(what): '\(id)'")
    }

    /// 403 `account_invalid`, an authorization error: "the authenticated principal cannot access the selected
    /// account, or the account does not exist" (docs error codes). `invalid_request_error` is the nearest type the
    /// published ApiErrorType enum has.
    static func accountInvalid(_ account: String) -> SimError {
        error(403, "invalid_request_error", "account_invalid", "The API key cannot act for account '\(account)', or it does not exist.")
    }

    /// 409: the request "conflicts with the current state of the resource" (its status does not allow the operation
    /// at all). Paypercut documents no code for it; `state_conflict` is paysim's own.
    static func stateConflict(_ message: String) -> SimError { error(409, "invalid_request_error", "state_conflict", message) }

    /// 422 `amount_too_large`: the status allows the operation, but the amount is more than the resource holds now
    /// ("well-formed but cannot be processed in its current state"); the one Stripe-style code Paypercut documents.
    static func amountTooLarge(_ param: String, _ message: String) -> SimError {
        error(422, "invalid_request_error", "amount_too_large", message, param: param)
    }

    /// 400 `parameter_invalid`: a value no state could take (docs error codes, invalid request errors).
    static func invalidParameter(_ param: String, _ message: String) -> SimError {
        error(400, "invalid_request_error", "parameter_invalid", message, param: param)
    }

    /// 400 `missing_required_param`.
    static func missingParameter(_ param: String) -> SimError {
        error(400, "invalid_request_error", "missing_required_param", "\(param) is required.", param: param)
    }

    // MARK: The account context

    /// The account a request acts as, from `Paypercut-Account` (or its alias `X-Paypercut-Account`): nil, the
    /// platform's own, without one; an account the key may not act for is refused before anything is looked up.
    func account(_ header: String?) throws(SimError) -> String? {
        guard let header, !header.isEmpty else { return nil }
        guard accounts.contains(header) else { throw Self.accountInvalid(header) }
        return header
    }

    // MARK: Reads and actions

    /// The intent as `account` sees it: another account's intent is not found there; the platform sees all.
    func intent(_ id: String, account: String?) throws(SimError) -> PaypercutIntent {
        guard let i = intents[id], account == nil || i.account == account else { throw Self.notFound("payment intent", id) }
        return i
    }

    /// The payment (v2) as `account` sees it: through its intent's account.
    func payment(_ id: String, account: String?) throws(SimError) -> PaypercutPayment {
        guard let p = payments[id], account == nil || intents[p.intentID]?.account == account else { throw Self.notFound("payment", id) }
        return p
    }

    /// Captures `amount` (all that is capturable when nil) of a `requires_capture` intent; any other status is a
    /// conflict (already captured, cancelled), and more than is capturable now is `amount_too_large`.
    mutating func capture(_ id: String, account: String?, amount: Int64?, final: Bool) throws(SimError) -> PaypercutIntent {
        var i = try intent(id, account: account)
        guard i.status == "requires_capture" else {
            throw Self.stateConflict("This payment intent is \(i.status); only a requires_capture payment intent can be captured.")
        }
        if let amount, amount <= 0 { throw Self.invalidParameter("amount_to_capture", "amount_to_capture must be a positive integer.") }
        let n = amount ?? i.amountCapturable
        guard n <= i.amountCapturable else {
            throw Self.amountTooLarge("amount_to_capture", "amount_to_capture \(n) is above amount_capturable \(i.amountCapturable).")
        }
        i.amountReceived += n
        i.amountCapturable -= n
        if final || i.amountCapturable == 0 { i.amountCapturable = 0; i.status = "succeeded" }
        if let pid = i.paymentID, var p = payments[pid] { p.amountCaptured += n; p.status = "succeeded"; payments[pid] = p }
        intents[id] = i
        return i
    }

    /// Cancels from the states the docs allow it in; a succeeded, cancelled or processing intent is a conflict.
    mutating func cancel(_ id: String, account: String?) throws(SimError) -> PaypercutIntent {
        var i = try intent(id, account: account)
        guard ["requires_payment_method", "requires_capture", "requires_confirmation", "requires_action"].contains(i.status) else {
            throw Self.stateConflict("This payment intent is \(i.status) and cannot be canceled.")
        }
        i.status = "canceled"; i.amountCapturable = 0
        intents[id] = i
        return i
    }

    /// Refunds `amount` (all that remains when nil) of what the intent's payment captured. Nothing captured, or
    /// everything already refunded, is a conflict; more than remains is `amount_too_large` (docs: refunding an
    /// already-refunded charge, or more than remains, raises an error).
    mutating func refund(intentID: String, account: String?, amount: Int64?, refundID: String, now: Int64) throws(SimError) -> JSONValue {
        let i = try intent(intentID, account: account)
        guard let pid = i.paymentID, var p = payments[pid], p.amountCaptured > 0 else {
            throw Self.stateConflict("Payment intent \(intentID) is \(i.status) and has no captured payment to refund.")
        }
        let remaining = p.amountCaptured - p.amountRefunded
        guard remaining > 0 else { throw Self.stateConflict("The payment of \(intentID) is already fully refunded.") }
        if let amount, amount <= 0 { throw Self.invalidParameter("amount", "amount must be a positive integer.") }
        let n = amount ?? remaining
        guard n <= remaining else { throw Self.amountTooLarge("amount", "Refund amount \(n) is above the \(remaining) left to refund.") }
        p.amountRefunded += n
        payments[pid] = p
        let refund = PaypercutRefund(
            id: refundID, intentID: intentID, paymentID: pid, amount: n, currency: i.currency, status: "succeeded", created: now)
        refunds[refundID] = refund
        return refundJSON(refund)
    }

    func refundJSON(_ r: PaypercutRefund) -> JSONValue {
        .object([
            "id": .string(r.id), "object": "refund", "amount": .integer(r.amount), "status": .string(r.status),
            "payment_intent": .string(r.intentID), "payment": .string(r.paymentID), "currency": .string(r.currency.code.lowercased()),
            "created": .string(SimTime.rfc3339(Date(timeIntervalSince1970: TimeInterval(r.created))))
        ])
    }

    func intentJSON(_ i: PaypercutIntent) -> JSONValue {
        .object([
            "id": .string(i.id), "object": "payment_intent", "amount": .integer(i.amount),
            "amount_capturable": .integer(i.amountCapturable), "amount_received": .integer(i.amountReceived),
            "currency": .object(["iso": .string(i.currency.code), "scale": .integer(Int64(i.currency.exponent))]),
            "status": .string(i.status), "capture_method": .string(i.captureMethod),
            "created": .string(SimTime.rfc3339(Date(timeIntervalSince1970: TimeInterval(i.created)))),
            "latest_payment": i.paymentID.map { .string($0) } ?? .null, "livemode": false
        ])
    }

    func paymentJSON(_ p: PaypercutPayment) -> JSONValue {
        let intent = intents[p.intentID]
        let created = intent.map { JSONValue.string(SimTime.rfc3339(Date(timeIntervalSince1970: TimeInterval($0.created)))) }
        var balance: JSONValue?
        if let intent, p.status == "succeeded", p.amountCaptured > 0 {
            // The Payment model's balance_transaction {id, amount, fee, net, exchange_rate, currency, created}.
            let fee = Self.fee(p.amountCaptured)
            balance = .object([
                "id": .string(p.id + "-bt"), "amount": .integer(p.amountCaptured), "fee": .integer(fee),
                "net": .integer(p.amountCaptured - fee), "exchange_rate": .null,
                "currency": .string(intent.currency.code.lowercased()), "created": created
            ])
        }
        return .object([
            "id": .string(p.id), "object": "payment", "status": .string(p.status), "amount_captured": .integer(p.amountCaptured),
            "amount_refunded": .integer(p.amountRefunded), "captured": .bool(p.amountCaptured > 0),
            "payment_method": .string(p.paymentMethod), "payment_intent": .string(p.intentID), "created": created,
            "balance_transaction": balance
        ])
    }

    /// paysim's Paypercut fee (a model: Paypercut publishes no price list payrecon reads, and payrecon only reads the
    /// fee an answer states): 1.4% of the captured amount, half up, plus 20 minor units, never more than the amount.
    static func fee(_ captured: Int64) -> Int64 {
        let (product, overflow) = captured.multipliedReportingOverflow(by: 140)
        let percent = overflow ? captured / 10_000 * 140 : (product + 5_000) / 10_000
        return min(captured, percent + 20)
    }
}
