import Foundation
import Reconciliation
import TextFormats

// What PayPal does after a payment: disputes (Customer Disputes v1), chargebacks (a capture REVERSED, with PayPal's
// reversal record), and v1 sales (PayPal Subscriptions and the classic Payments API) with their refunds. Shapes
// from `customer_disputes_v1.json`, `payments_payment_v2.json`, the v1 Payments API and the real sale deliveries in
// (Tests/ProvidersTests/Fixtures/paypal).

public struct PayPalDispute: Sendable, Equatable {
    public var id: String
    /// `disputed_transactions[0].seller_transaction_id`: a capture or a sale.
    public var transactionID: String
    /// OPEN, WAITING_FOR_BUYER_RESPONSE, WAITING_FOR_SELLER_RESPONSE, UNDER_REVIEW, RESOLVED, OTHER
    public var status: String
    public var amount: Int64
    public var currency: Currency
    public var createTime: String
    public var updateTime: String
    /// RESOLVED_BUYER_FAVOUR, RESOLVED_SELLER_FAVOUR, … once resolved.
    public var outcome: String?
    static let statuses: Set<String> = [
        "OPEN", "WAITING_FOR_BUYER_RESPONSE", "WAITING_FOR_SELLER_RESPONSE", "UNDER_REVIEW", "RESOLVED", "OTHER"
    ]
}

public struct PayPalSale: Sendable, Equatable {
    public var id: String
    /// completed, partially_refunded, pending, refunded, denied: payments_payment_v1.json's `sale.state`, which has
    /// no `reversed` (a chargeback leaves the sale refunded, as it leaves a v2 capture REFUNDED).
    public var state: String
    public var amount: Int64
    public var currency: Currency
    /// The payment the sale belongs to: payments_payment_v1.json makes `parent_payment` a required field of a sale.
    public var parentPayment: String
    public var billingAgreement: String?
    public var reasonCode: String?
    public var createTime: String
    public var updateTime: String
    public var refundIDs: [String] = []
    static let states: Set<String> = ["completed", "partially_refunded", "pending", "refunded", "denied"]
}

public struct PayPalSaleRefund: Sendable, Equatable {
    public var id: String
    public var saleID: String
    public var amount: Int64
    public var createTime: String
}

extension PayPalBook {
    static func notFound() -> SimError {
        SimError.paypalNotFound()
    }

    // MARK: chargebacks and disputes

    /// A chargeback as PayPal shows it (providers/paypal.md §8): a COMPLETED refund-shaped record of what the buyer
    /// got back (`note_to_payer` "Payment reversed", its `up` link to the capture), listed among the capture's
    /// refunds and carried by PAYMENT.CAPTURE.REVERSED; the capture turns REFUNDED (its published statuses have no
    /// REVERSED).
    mutating func reverse(captureID: String, newID: String, now: String) throws(SimError) -> PayPalRefund {
        guard var capture = captures[captureID] else { throw Self.notFound() }
        guard ["COMPLETED", "PARTIALLY_REFUNDED"].contains(capture.status) else {
            throw SimError.admin(409, "not_reversible", "capture \(captureID) is \(capture.status)")
        }
        let left = capture.amount - refundedTotal(ofCapture: capture.id)
        capture.status = "REFUNDED"
        capture.beforeDispute = nil
        capture.updateTime = now
        captures[capture.id] = capture
        let record = PayPalRefund(
            id: newID, orderID: capture.orderID, captureID: capture.id, status: "COMPLETED", amount: left,
            createTime: now, updateTime: now, isReversal: true)
        refunds[record.id] = record
        if var order = orders[capture.orderID] { order.refundIDs.append(record.id); orders[order.id] = order }
        return record
    }

    /// Opens a dispute on a capture or a sale, for `amount` (default: all of it).
    mutating func openDispute(
        id: String, transactionID: String, amountText: String?, status: String, now: String
    ) throws(SimError) -> PayPalDispute {
        let currency: Currency, full: Int64
        if let c = captures[transactionID], let o = orders[c.orderID] {
            currency = o.currency; full = c.amount
        } else if let sale = sales[transactionID] {
            currency = sale.currency; full = sale.amount
        } else {
            throw SimError.admin(404, "not_found", "no PayPal capture or sale \(transactionID)")
        }
        var amount = full
        if let amountText {
            guard let minor = RequestAmount.minorUnits(amountText, exponent: currency.exponent), minor > 0, minor <= full else {
                throw SimError.admin(400, "invalid_field", "amount must be a positive \(currency) amount up to the disputed payment")
            }
            amount = minor
        }
        guard PayPalDispute.statuses.contains(status), status != "RESOLVED" else {
            throw SimError.admin(400, "invalid_field", "status must be an open dispute status")
        }
        let d = PayPalDispute(
            id: id, transactionID: transactionID, status: status, amount: amount, currency: currency,
            createTime: now, updateTime: now, outcome: nil)
        disputes[id] = d
        // Opening a dispute flips the capture to PARTIALLY_REFUNDED at once, with no refund record (sandbox report,
        // paypal/Checkout-NodeJS-SDK#31); back when the seller wins.
        if var c = captures[transactionID], c.status == "COMPLETED" {
            c.beforeDispute = c.status
            c.status = "PARTIALLY_REFUNDED"
            c.updateTime = now
            captures[c.id] = c
        }
        return d
    }

    /// Resolves a dispute; when the buyer wins, PayPal takes the money back: the capture turns REFUNDED with a
    /// reversal record, a sale turns refunded (the v1 sale states have no reversed). Returns the dispute and the
    /// reversal record, if any.
    mutating func resolveDispute(id: String, buyerWins: Bool, newID: String, now: String) throws(SimError) -> (PayPalDispute, PayPalRefund?)
    {
        guard var d = disputes[id] else { throw SimError.admin(404, "not_found", "no PayPal dispute \(id)") }
        d.status = "RESOLVED"
        d.outcome = buyerWins ? "RESOLVED_BUYER_FAVOUR" : "RESOLVED_SELLER_FAVOUR"
        d.updateTime = now
        disputes[id] = d
        guard buyerWins else {
            if var c = captures[d.transactionID], let before = c.beforeDispute {
                c.status = before; c.beforeDispute = nil; c.updateTime = now; captures[c.id] = c
            }
            return (d, nil)
        }
        if captures[d.transactionID] != nil { return (d, try reverse(captureID: d.transactionID, newID: newID, now: now)) }
        if var sale = sales[d.transactionID] { sale.state = "refunded"; sale.updateTime = now; sales[sale.id] = sale }
        return (d, nil)
    }

    // MARK: v1 sales

    mutating func putSale(_ sale: PayPalSale) { sales[sale.id] = sale }

    /// POST /v1/payments/sale/{id}/refund: `amount {total, currency}`; none refunds what is left.
    mutating func refundSale(id: String, total: String?, currency: String?, newID: String, now: String) throws(SimError) -> PayPalSaleRefund
    {
        guard var sale = sales[id] else { throw Self.notFound() }
        guard sale.state == "completed" || sale.state == "partially_refunded" else {
            throw SimError.paypalUnprocessable("TRANSACTION_REFUSED", "The sale is \(sale.state) and cannot be refunded.")
        }
        let refunded = sale.refundIDs.compactMap { saleRefunds[$0] }.reduce(Int64(0)) { $0 + $1.amount }
        let left = sale.amount - refunded
        var amount = left
        if let total {
            guard currency == sale.currency.code else {
                throw SimError.paypalUnprocessable("CURRENCY_MISMATCH", "Refund currency must match the sale's (\(sale.currency.code)).")
            }
            let decimals = Self.paypalDecimals(sale.currency)
            guard let units = RequestAmount.minorUnits(total, exponent: decimals), units > 0 else {
                throw SimError.paypalInvalid(
                    decimals == 0 ? "DECIMALS_NOT_SUPPORTED" : "VALIDATION_ERROR", "amount.total \(total) is not valid.")
            }
            amount = units * Self.paypalUnit(sale.currency)
        }
        guard amount <= left, amount > 0 else {
            throw SimError.paypalUnprocessable("REFUND_EXCEEDED_TRANSACTION_AMOUNT", "Refund amount exceeds what is left of the sale.")
        }
        let refund = PayPalSaleRefund(id: newID, saleID: id, amount: amount, createTime: now)
        saleRefunds[refund.id] = refund
        sale.refundIDs.append(refund.id)
        sale.state = amount == left ? "refunded" : "partially_refunded"
        sale.updateTime = now
        sales[sale.id] = sale
        return refund
    }

    // MARK: JSON

    func v1Money(_ minor: Int64, _ currency: Currency) -> JSONValue {
        .object([
            "total": .string(Money.format(minorUnits: minor / Self.paypalUnit(currency), exponent: Self.paypalDecimals(currency))),
            "currency": .string(currency.code)
        ])
    }

    func disputeJSON(_ d: PayPalDispute, base: String) -> JSONValue {
        let money = JSONValue.object([
            "currency_code": .string(d.currency.code),
            "value": .string(
                Money.format(
                    minorUnits: d.amount / Self.paypalUnit(d.currency),
                    exponent: Self.paypalDecimals(d.currency)))
        ])
        return .object([
            "dispute_id": .string(d.id), "create_time": .string(d.createTime), "update_time": .string(d.updateTime),
            "disputed_transactions": .array([.object(["seller_transaction_id": .string(d.transactionID)])]),
            "reason": "MERCHANDISE_OR_SERVICE_NOT_RECEIVED", "status": .string(d.status), "dispute_amount": money,
            "dispute_outcome": d.outcome.map { .object(["outcome_code": .string($0)]) },
            "dispute_life_cycle_stage": d.status == "RESOLVED" ? "CHARGEBACK" : "INQUIRY",
            "links": .array([Self.link("\(base)/v1/customer/disputes/\(d.id)", "self", "GET")])
        ])
    }

    /// `GET /v1/customer/disputes`: the disputes as summaries (`dispute_search` of customer_disputes_v1.json: `items`
    /// of `dispute_info`, latest created first, and `links`), `page_size` (1…50, default 10) at a time, with a `next`
    /// link while more remain. `items` is left out when there is none (the schema's `minItems: 1`). Other filters are
    /// not applied.
    func disputeListJSON(query: [String: String], base: String) throws(SimError) -> JSONValue {
        func invalid(_ field: String, _ description: String) -> SimError {
            SimError.paypal(
                400, name: "INVALID_REQUEST", message: "Request is not well-formed, syntactically incorrect, or violates schema.",
                issue: "INVALID_PARAMETER_VALUE", description: description, field: field)
        }
        var pageSize = 10
        if let text = query["page_size"] {
            guard let n = Int(text), (1...50).contains(n) else {
                throw invalid("page_size", "page_size must be a whole number from 1 to 50.")
            }
            pageSize = n
        }
        var offset = 0
        if let token = query["next_page_token"] {
            guard let n = Int(token), n >= 0 else { throw invalid("next_page_token", "next_page_token is not one this API issued.") }
            offset = n
        }
        let all = disputes.values.sorted { ($0.createTime, $0.id) > ($1.createTime, $1.id) }
        let page = all.dropFirst(offset).prefix(pageSize)
        let items: [JSONValue] = page.map { d in
            .object([
                "dispute_id": .string(d.id), "create_time": .string(d.createTime), "update_time": .string(d.updateTime),
                "reason": "MERCHANDISE_OR_SERVICE_NOT_RECEIVED", "status": .string(d.status),
                "dispute_amount": .object([
                    "currency_code": .string(d.currency.code),
                    "value": .string(
                        Money.format(
                            minorUnits: d.amount / Self.paypalUnit(d.currency),
                            exponent: Self.paypalDecimals(d.currency)))
                ]),
                "dispute_life_cycle_stage": d.status == "RESOLVED" ? "CHARGEBACK" : "INQUIRY",
                "links": .array([Self.link("\(base)/v1/customer/disputes/\(d.id)", "self", "GET")])
            ])
        }
        let list = "\(base)/v1/customer/disputes?page_size=\(pageSize)"
        var links = [Self.link(list + (offset > 0 ? "&next_page_token=\(offset)" : ""), "self", "GET")]
        if offset + page.count < all.count { links.append(Self.link(list + "&next_page_token=\(offset + page.count)", "next", "GET")) }
        return .object(["items": items.isEmpty ? nil : .array(items), "links": .array(links)])
    }

    func saleJSON(_ s: PayPalSale, base: String) -> JSONValue {
        .object([
            "id": .string(s.id), "state": .string(s.state), "amount": v1Money(s.amount, s.currency),
            "payment_mode": "INSTANT_TRANSFER", "reason_code": s.state == "pending" ? s.reasonCode.map { .string($0) } : nil,
            "transaction_fee": s.state == "pending" || s.state == "denied"
                ? nil
                : .object([
                    "value": v1Money(PayPalFees.capture(s.amount, s.currency), s.currency)["total"]!, "currency": .string(s.currency.code)
                ]),
            "parent_payment": .string(s.parentPayment), "billing_agreement_id": s.billingAgreement.map { .string($0) },
            "create_time": .string(s.createTime), "update_time": .string(s.updateTime),
            "links": .array([
                Self.link("\(base)/v1/payments/sale/\(s.id)", "self", "GET"),
                Self.link("\(base)/v1/payments/sale/\(s.id)/refund", "refund", "POST")
            ])
        ])
    }

    func saleRefundJSON(_ r: PayPalSaleRefund, base: String) -> JSONValue {
        guard let sale = sales[r.saleID] else { return .null }
        return .object([
            "id": .string(r.id), "state": "completed", "amount": v1Money(r.amount, sale.currency), "sale_id": .string(r.saleID),
            "parent_payment": .string(sale.parentPayment), "create_time": .string(r.createTime), "update_time": .string(r.createTime),
            "links": .array([
                Self.link("\(base)/v1/payments/refund/\(r.id)", "self", "GET"),
                Self.link("\(base)/v1/payments/sale/\(r.saleID)", "sale", "GET")
            ])
        ])
    }

    /// A sale from an admin or seed object: `{"id", "state", "amount", "currency", "parent_payment"?,
    /// "billing_agreement_id"?, "reason_code"?, "create_time"?}`. Without a `parent_payment` (a Subscriptions sale
    /// names its billing agreement instead) the sale gets one of its own, `PAYID-` and its id, since the document
    /// requires one.
    static func sale(from json: JSONValue, newID: String, now: String) throws(SimError) -> PayPalSale {
        guard json.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "a PayPal sale must be an object") }
        guard let currency = json["currency"]?.stringValue.flatMap(Currency.init(code:)) else {
            throw SimError.admin(400, "invalid_field", "currency must be a known ISO 4217 code")
        }
        guard let amount = json["amount"]?.seedMinorUnits(exponent: currency.exponent) else {
            throw SimError.admin(400, "invalid_field", "amount must be a decimal amount in \(currency)")
        }
        let state = json["state"]?.stringValue ?? "completed"
        guard PayPalSale.states.contains(state) else {
            throw SimError.admin(400, "invalid_field", "state must be one of \(PayPalSale.states.sorted().joined(separator: ", "))")
        }
        let time = json["create_time"]?.stringValue ?? now
        let id = json["id"]?.stringValue ?? newID
        return PayPalSale(
            id: id, state: state, amount: amount, currency: currency,
            parentPayment: json["parent_payment"]?.stringValue ?? "PAYID-\(id)",
            billingAgreement: json["billing_agreement_id"]?.stringValue,
            reasonCode: json["reason_code"]?.stringValue, createTime: time, updateTime: time)
    }
}
