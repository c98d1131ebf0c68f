import Foundation
import Reconciliation

/// Paysim's Paypercut state: payment intents and their payments (v2), with the state changes capture, cancel and
/// refund make (contract §6; ../shared/providers/paypercut.md). Amounts are minor units, as Paypercut's API takes them.
public struct PaypercutIntent: Sendable, Equatable {
    public var id: String
    public var account: String?
    public var amount: Int64
    public var currency: Currency
    public var captureMethod: String          // manual | automatic
    public var status: String
    public var amountCapturable: Int64
    public var amountReceived: Int64
    public var created: Int64
    public var paymentID: String?
}

public struct PaypercutPayment: Sendable, Equatable {
    public var id: String
    public var intentID: String
    public var status: String                 // succeeded | pending | failed
    public var amountCaptured: Int64
    public var amountRefunded: Int64
    public var paymentMethod: String
}

struct PaypercutBook: Sendable {
    var intents: [String: PaypercutIntent] = [:]
    var payments: [String: PaypercutPayment] = [:]
    /// Idempotency-Key → (the path it was used on, the answer given).
    var idempotency: [String: (path: String, response: SimResponse)] = [:]

    static func error(_ status: Int, _ type: String, _ code: String, _ message: String) -> SimError {
        SimError(status: status, body: .object(["type": .string(type), "code": .string(code), "message": .string(message),
                                                "trace_id": "paysim-trace"]), code: code)
    }

    static func notFound(_ id: String) -> SimError { error(404, "invalid_request_error", "resource_missing", "No such payment intent: '\(id)'") }

    func intent(_ id: String, account: String?) throws(SimError) -> PaypercutIntent {
        guard let i = intents[id], account == nil || i.account == account else { throw Self.notFound(id) }
        return i
    }

    mutating func capture(_ id: String, account: String?, amount: Int64?, final: Bool) throws(SimError) -> PaypercutIntent {
        var i = try intent(id, account: account)
        guard i.status == "requires_capture" else {
            throw Self.error(400, "invalid_request_error", "payment_intent_unexpected_state", "This PaymentIntent is \(i.status), not requires_capture.")
        }
        let n = amount ?? i.amountCapturable
        guard n > 0, n <= i.amountCapturable else {
            throw Self.error(400, "invalid_request_error", "amount_too_large", "amount_to_capture \(n) is above amount_capturable \(i.amountCapturable).")
        }
        i.amountReceived += n
        i.amountCapturable -= n
        if final || i.amountCapturable == 0 { i.amountCapturable = 0; i.status = "succeeded" }
        if let pid = i.paymentID, var p = payments[pid] { p.amountCaptured += n; p.status = "succeeded"; payments[pid] = p }
        intents[id] = i
        return i
    }

    mutating func cancel(_ id: String, account: String?) throws(SimError) -> PaypercutIntent {
        var i = try intent(id, account: account)
        guard ["requires_payment_method", "requires_capture", "requires_confirmation", "requires_action"].contains(i.status) else {
            throw Self.error(400, "invalid_request_error", "payment_intent_unexpected_state", "A PaymentIntent that is \(i.status) cannot be canceled.")
        }
        i.status = "canceled"; i.amountCapturable = 0
        intents[id] = i
        return i
    }

    mutating func refund(intentID: String, account: String?, amount: Int64?, refundID: String) throws(SimError) -> JSONValue {
        let i = try intent(intentID, account: account)
        guard let pid = i.paymentID, var p = payments[pid], p.amountCaptured > p.amountRefunded else {
            throw Self.error(400, "invalid_request_error", "charge_already_refunded", "Nothing captured is left to refund on \(intentID).")
        }
        let n = amount ?? (p.amountCaptured - p.amountRefunded)
        guard n > 0, n <= p.amountCaptured - p.amountRefunded else {
            throw Self.error(400, "invalid_request_error", "amount_too_large", "Refund amount \(n) is above what is refundable.")
        }
        p.amountRefunded += n
        payments[pid] = p
        return .object(["id": .string(refundID), "object": "refund", "amount": .integer(n), "status": "succeeded",
                        "payment_intent": .string(intentID), "currency": .string(i.currency.code.lowercased())])
    }

    func intentJSON(_ i: PaypercutIntent) -> JSONValue {
        .object(["id": .string(i.id), "object": "payment_intent", "amount": .integer(i.amount),
                 "amount_capturable": .integer(i.amountCapturable), "amount_received": .integer(i.amountReceived),
                 "currency": .object(["iso": .string(i.currency.code), "scale": .integer(Int64(i.currency.exponent))]),
                 "status": .string(i.status), "capture_method": .string(i.captureMethod),
                 "created": .string(SimTime.rfc3339(Date(timeIntervalSince1970: TimeInterval(i.created)))),
                 "latest_payment": i.paymentID.map { .string($0) } ?? .null, "livemode": false])
    }

    func paymentJSON(_ p: PaypercutPayment) -> JSONValue {
        .object(["id": .string(p.id), "object": "payment", "status": .string(p.status), "amount_captured": .integer(p.amountCaptured),
                 "amount_refunded": .integer(p.amountRefunded), "captured": .bool(p.amountCaptured > 0),
                 "payment_method": .string(p.paymentMethod), "payment_intent": .string(p.intentID)])
    }
}
