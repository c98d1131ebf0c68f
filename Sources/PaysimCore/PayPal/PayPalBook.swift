import Foundation
import Reconciliation
import TextFormats

// PayPal Orders v2 / Payments v2 resources and the authorization/capture/refund actions (providers/paypal.md §4).

public struct PayPalAuthorization: Sendable, Equatable {
    public var id: String
    public var orderID: String
    /// CREATED, CAPTURED, DENIED, PARTIALLY_CAPTURED, VOIDED, PENDING: payments_payment_v2.json's
    /// `authorization_status`. Older documents also list PARTIALLY_CREATED and EXPIRED (payrecon still reads them),
    /// but an answer carrying one would not validate against the documents, so paysim holds none.
    public var status: String
    public var amount: Int64
    public var createTime: String
    public var updateTime: String
    /// The authorization this reauthorization replaces (named in its `supplementary_data.related_ids`, the one
    /// reading payrecon documents: PayPal publishes no field for it).
    public var parentID: String? = nil
    static let statuses: Set<String> = ["CREATED", "CAPTURED", "DENIED", "PARTIALLY_CAPTURED", "VOIDED", "PENDING"]
}

public struct PayPalCapture: Sendable, Equatable {
    public var id: String
    public var orderID: String
    public var authorizationID: String?
    /// COMPLETED, DECLINED, PARTIALLY_REFUNDED, PENDING, REFUNDED, FAILED (payments_payment_v2.json `capture_status`:
    /// no REVERSED; a chargeback leaves the capture REFUNDED with a reversal record among its refunds)
    public var status: String
    public var amount: Int64
    public var finalCapture: Bool
    public var createTime: String
    public var updateTime: String
    /// `status_details.reason` of a PENDING capture (ECHECK, PENDING_REVIEW, …).
    public var pendingReason: String? = nil
    /// When a capture made PENDING (an eCheck, one held for review) completed, if later than it was made: its money
    /// moved then, so the reports list it pending (P) on the day it was made and completed (S) on this day.
    public var completedTime: String? = nil
    /// When Transaction Search first lists it, if later than it completed (PayPal lists some transactions late).
    public var listedTime: String? = nil
    /// Refunds of this capture stay PENDING with this `status_details.reason` (PayPal's refund_status_details:
    /// ECHECK, "the customer's account is funded through an eCheck, which has not yet cleared") until
    /// `POST /admin/paypal/refunds` completes or fails them; nil: refunds complete at once.
    public var refundsPendingReason: String? = nil
    static let statuses: Set<String> = ["COMPLETED", "DECLINED", "PARTIALLY_REFUNDED", "PENDING", "REFUNDED", "FAILED"]
    /// Captures holding money (counted against the authorization).
    var holdsMoney: Bool { ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED", "PENDING"].contains(status) }
    /// The status before an open dispute flipped it to PARTIALLY_REFUNDED (restored when the seller wins).
    var beforeDispute: String? = nil
}

public struct PayPalRefund: Sendable, Equatable {
    public var id: String
    public var orderID: String
    public var captureID: String
    /// CANCELLED, FAILED, PENDING, COMPLETED
    public var status: String
    public var amount: Int64
    public var createTime: String
    public var updateTime: String
    /// PayPal's record of a reversal (`note_to_payer: "Payment reversed"`): carried by PAYMENT.CAPTURE.REVERSED and
    /// listed among the capture's refunds (the money is back with the buyer either way).
    public var isReversal = false
    /// `status_details.reason` of a PENDING refund (ECHECK).
    public var pendingReason: String? = nil
    /// The caller's `custom_id` from the refund request.
    public var customID: String? = nil
    static let statuses: Set<String> = ["CANCELLED", "FAILED", "PENDING", "COMPLETED"]
    var counts: Bool { status == "COMPLETED" || status == "PENDING" }
}

/// The currency a payee receives in and PayPal's rate to it: `rate` / 10^`scale` of it per major unit of the order's.
public struct PayPalReceivable: Sendable, Equatable {
    public var currency: Currency
    public var rate: Int64
    public var scale: Int
}

public struct PayPalOrder: Sendable, Equatable {
    public var id: String
    /// CAPTURE or AUTHORIZE
    public var intent: String
    /// CREATED, SAVED, APPROVED, VOIDED, COMPLETED, PAYER_ACTION_REQUIRED
    public var status: String
    public var currency: Currency
    public var amount: Int64
    public var merchantID: String
    public var referenceID: String
    public var createTime: String
    public var updateTime: String
    public var authorizationIDs: [String] = []
    /// The currency the payee receives in, when it is not the order's, and PayPal's exchange rate to it (its digits
    /// and how many of them are decimals: "1.0847" is 10847 and 4): captures then state a `receivable_amount` and
    /// refunds a `net_amount_in_receivable_currency`, the net times the rate (payments_payment_v2.json).
    public var receivable: PayPalReceivable? = nil
    public var captureIDs: [String] = []
    public var refundIDs: [String] = []
    static let statuses: Set<String> = ["CREATED", "SAVED", "APPROVED", "VOIDED", "COMPLETED", "PAYER_ACTION_REQUIRED"]
    /// `payee.merchant_id` when a seed names none: a PayPal account id is 13 characters of [2-9A-HJ-NP-Z]
    /// (checkout_orders_v2.json `account_id`: no 0, 1, I or O), so paysim's own name cannot be one.
    public static let defaultMerchantID = "PAYSMMERCHANT"

    /// An order left unapproved expires after about 3 hours, and GET then answers 404 RESOURCE_NOT_FOUND
    /// (paypal/Checkout-PHP-SDK#84; shopware/SwagPayPal#679).
    static let unapprovedLifetimeSeconds: Int64 = 3 * 3600
    func hasExpired(now: Date) -> Bool {
        guard status == "CREATED" || status == "PAYER_ACTION_REQUIRED", let created = SimTime.parse(createTime) else { return false }
        return Int64(now.timeIntervalSince1970) - created > Self.unapprovedLifetimeSeconds
    }
}

/// Everything PayPal-side: orders and their payments, by id.
public struct PayPalBook: Sendable {
    // What Transaction Search lists changes with these: each change drops its index (simple didSet observers, so a
    // dictionary is still changed in place).
    public internal(set) var orders: [String: PayPalOrder] = [:] { didSet { searchIndex = nil } }
    public internal(set) var authorizations: [String: PayPalAuthorization] = [:]
    public internal(set) var captures: [String: PayPalCapture] = [:] { didSet { searchIndex = nil } }
    public internal(set) var refunds: [String: PayPalRefund] = [:] { didSet { searchIndex = nil } }
    /// Disputes (Customer Disputes v1), v1 sales and their refunds (PayPalBook+Events.swift).
    public internal(set) var disputes: [String: PayPalDispute] = [:]
    public internal(set) var sales: [String: PayPalSale] = [:] { didSet { searchIndex = nil } }
    public internal(set) var saleRefunds: [String: PayPalSaleRefund] = [:] { didSet { searchIndex = nil } }
    /// Transaction Search's rows with their times (unix seconds), in time order: built by the first search after a
    /// change, so a backfill's pages do not each walk the whole book.
    var searchIndex: [(time: Int64, row: ReportRow)]?
    /// The webhook events made, oldest first (PayPalBook+WebhookEvents.swift).
    public internal(set) var events: [PayPalEventRecord] = []

    public init() {}

    // MARK: totals

    /// Sums over the order's own payments (not the whole book), so actions stay O(payments of one order).
    func capturedTotal(ofAuthorization id: String) -> Int64 {
        guard let orderID = authorizations[id]?.orderID, let order = orders[orderID] else { return 0 }
        return order.captureIDs.compactMap { captures[$0] }.filter { $0.authorizationID == id && $0.holdsMoney }
            .reduce(0) { $0 + $1.amount }
    }

    func refundedTotal(ofCapture id: String) -> Int64 {
        guard let orderID = captures[id]?.orderID, let order = orders[orderID] else { return 0 }
        return order.refundIDs.compactMap { refunds[$0] }.filter { $0.captureID == id && $0.counts }
            .reduce(0) { $0 + $1.amount }
    }

    // MARK: admin

    /// Create or replace an order with its payments (replacing drops the old order's payments).
    mutating func put(
        _ order: PayPalOrder, authorizations auths: [PayPalAuthorization], captures caps: [PayPalCapture],
        refunds refs: [PayPalRefund]
    ) {
        if let old = orders[order.id] {
            for id in old.authorizationIDs { authorizations[id] = nil }
            for id in old.captureIDs { captures[id] = nil }
            for id in old.refundIDs { refunds[id] = nil }
        }
        var order = order
        order.authorizationIDs = auths.map(\.id)
        order.captureIDs = caps.map(\.id)
        order.refundIDs = refs.map(\.id)
        orders[order.id] = order
        for a in auths { authorizations[a.id] = a }
        for c in caps { captures[c.id] = c }
        for r in refs { refunds[r.id] = r }
    }

    // MARK: actions

    /// `POST /v2/payments/authorizations/{id}/capture`: amount nil captures the remaining amount.
    mutating func capture(
        authorizationID: String, amountText: String?, currency: String?, finalCapture: Bool,
        newID: String, now: String
    ) throws(SimError) -> PayPalCapture {
        guard var auth = authorizations[authorizationID], var order = orders[auth.orderID] else {
            throw SimError.paypalNotFound()
        }
        switch auth.status {
        case "CREATED", "PARTIALLY_CAPTURED": break
        case "VOIDED": throw SimError.paypalUnprocessable("AUTHORIZATION_VOIDED")
        case "CAPTURED": throw SimError.paypalUnprocessable("AUTHORIZATION_ALREADY_CAPTURED")
        case "DENIED": throw SimError.paypalUnprocessable("AUTHORIZATION_DENIED")
        default: throw SimError.paypalUnprocessable("TRANSACTION_REFUSED")
        }
        let alreadyCaptured = capturedTotal(ofAuthorization: auth.id)
        let remaining = auth.amount - alreadyCaptured
        let amount = try Self.parseAmount(
            amountText, currency: currency, order: order, default: remaining,
            mismatchIssue: "AUTH_CAPTURE_CURRENCY_MISMATCH", nothingLeftIssue: "MAX_CAPTURE_AMOUNT_EXCEEDED")
        guard amount <= remaining else { throw SimError.paypalUnprocessable("MAX_CAPTURE_AMOUNT_EXCEEDED") }
        let capture = PayPalCapture(
            id: newID, orderID: order.id, authorizationID: auth.id, status: "COMPLETED",
            amount: amount, finalCapture: finalCapture, createTime: now, updateTime: now)
        auth.status = (finalCapture || alreadyCaptured + amount == auth.amount) ? "CAPTURED" : "PARTIALLY_CAPTURED"
        auth.updateTime = now
        authorizations[auth.id] = auth
        captures[capture.id] = capture
        order.captureIDs.append(capture.id)
        order.updateTime = now
        orders[order.id] = order
        return capture
    }

    /// `POST /v2/payments/authorizations/{id}/void`: only CREATED with nothing captured.
    mutating func void(authorizationID: String, now: String) throws(SimError) -> PayPalAuthorization {
        guard var auth = authorizations[authorizationID] else {
            throw SimError.paypalNotFound()
        }
        switch auth.status {
        case "CREATED":
            guard capturedTotal(ofAuthorization: auth.id) == 0 else { throw SimError.paypalUnprocessable("PREVIOUSLY_CAPTURED") }
        case "VOIDED": throw SimError.paypalUnprocessable("PREVIOUSLY_VOIDED")
        case "CAPTURED", "PARTIALLY_CAPTURED": throw SimError.paypalUnprocessable("PREVIOUSLY_CAPTURED")
        // A denied or pending authorization: of the three issues a void documents, the one that says it cannot be
        // voided (its fixed description speaks of reauthorizations; the issue is what callers read).
        default: throw SimError.paypalUnprocessable("CANNOT_BE_VOIDED")
        }
        auth.status = "VOIDED"
        auth.updateTime = now
        authorizations[auth.id] = auth
        return auth
    }

    /// `POST /v2/payments/captures/{id}/refund`: amount nil refunds what is left.
    mutating func refund(
        captureID: String, amountText: String?, currency: String?, newID: String,
        now: String, customID: String? = nil
    ) throws(SimError) -> PayPalRefund {
        guard var capture = captures[captureID], var order = orders[capture.orderID] else {
            throw SimError.paypalNotFound()
        }
        switch capture.status {
        case "COMPLETED", "PARTIALLY_REFUNDED": break
        case "REFUNDED": throw SimError.paypalUnprocessable("CAPTURE_FULLY_REFUNDED")
        case "PENDING": throw SimError.paypalUnprocessable("PENDING_CAPTURE")
        default: throw SimError.paypalUnprocessable("REFUND_NOT_ALLOWED")
        }
        let refunded = refundedTotal(ofCapture: capture.id)
        let remaining = capture.amount - refunded
        let amount = try Self.parseAmount(
            amountText, currency: currency, order: order, default: remaining,
            mismatchIssue: "REFUND_CAPTURE_CURRENCY_MISMATCH", nothingLeftIssue: "CAPTURE_FULLY_REFUNDED")
        guard amount <= remaining else { throw SimError.paypalUnprocessable("REFUND_AMOUNT_EXCEEDED") }
        var refund = PayPalRefund(
            id: newID, orderID: order.id, captureID: capture.id,
            status: capture.refundsPendingReason == nil ? "COMPLETED" : "PENDING",
            amount: amount, createTime: now, updateTime: now)
        refund.pendingReason = capture.refundsPendingReason
        refund.customID = customID
        capture.status = refunded + amount == capture.amount ? "REFUNDED" : "PARTIALLY_REFUNDED"
        capture.updateTime = now
        captures[capture.id] = capture
        refunds[refund.id] = refund
        order.refundIDs.append(refund.id)
        order.updateTime = now
        orders[order.id] = order
        return refund
    }

    /// A PENDING refund completes, fails or is cancelled (`POST /admin/paypal/refunds`); the capture's status follows
    /// what its refunds that count (COMPLETED and PENDING) add up to.
    mutating func settleRefund(id: String, status: String, now: String) throws(SimError) -> PayPalRefund {
        guard var refund = refunds[id] else { throw SimError.admin(404, "not_found", "no refund \(id)") }
        guard refund.status == "PENDING" else { throw SimError.admin(409, "not_pending", "refund \(id) is \(refund.status), not PENDING") }
        guard ["COMPLETED", "FAILED", "CANCELLED"].contains(status) else {
            throw SimError.admin(400, "invalid_field", "status must be COMPLETED, FAILED or CANCELLED")
        }
        refund.status = status
        refund.updateTime = now
        refunds[id] = refund
        if var capture = captures[refund.captureID] {
            let refunded = refundedTotal(ofCapture: capture.id)
            capture.status = refunded == 0 ? "COMPLETED" : refunded >= capture.amount ? "REFUNDED" : "PARTIALLY_REFUNDED"
            capture.updateTime = now
            captures[capture.id] = capture
        }
        return refund
    }

    /// The amount of a capture or refund body. A missing field is 400; a value PayPal cannot take is 422, where
    /// both routes' documents list DECIMAL_PRECISION, DECIMALS_NOT_SUPPORTED and CANNOT_BE_ZERO_OR_NEGATIVE.
    /// `nothingLeftIssue` answers a call without an amount when nothing is left (each route's own issue).
    private static func parseAmount(
        _ text: String?, currency: String?, order: PayPalOrder, default remaining: Int64,
        mismatchIssue: String, nothingLeftIssue: String
    ) throws(SimError) -> Int64 {
        guard let text else {
            guard remaining > 0 else { throw SimError.paypalUnprocessable(nothingLeftIssue) }
            return remaining
        }
        guard let currency else { throw SimError.paypalInvalid("MISSING_REQUIRED_PARAMETER", field: "/amount/currency_code") }
        guard currency == order.currency.code else { throw SimError.paypalUnprocessable(mismatchIssue, field: "/amount/currency_code") }
        let decimals = Self.paypalDecimals(order.currency)
        guard let units = RequestAmount.minorUnits(text, exponent: decimals) else {
            throw SimError.paypalUnprocessable(decimals == 0 ? "DECIMALS_NOT_SUPPORTED" : "DECIMAL_PRECISION", field: "/amount/value")
        }
        let minor = units * Self.paypalUnit(order.currency)
        guard minor > 0 else { throw SimError.paypalUnprocessable("CANNOT_BE_ZERO_OR_NEGATIVE", field: "/amount/value") }
        return minor
    }
}

// MARK: - JSON shapes

extension PayPalBook {
    func money(_ minor: Int64, _ order: PayPalOrder) -> JSONValue {
        .object([
            "currency_code": .string(order.currency.code),
            "value": .string(
                Money.format(minorUnits: minor / Self.paypalUnit(order.currency), exponent: Self.paypalDecimals(order.currency)))
        ])
    }

    /// PayPal's decimals, which differ from ISO 4217 for HUF and TWD (none at PayPal), as for JPY. The book keeps
    /// ISO minor units; only the API's amounts use PayPal's decimals.
    static func paypalDecimals(_ currency: Currency) -> Int {
        ["HUF", "JPY", "TWD"].contains(currency.code) ? 0 : currency.exponent
    }

    static func paypalUnit(_ currency: Currency) -> Int64 {
        var unit: Int64 = 1
        for _ in 0..<(currency.exponent - paypalDecimals(currency)) { unit *= 10 }
        return unit
    }

    static func link(_ href: String, _ rel: String, _ method: String) -> JSONValue {
        .object(["href": .string(href), "rel": .string(rel), "method": .string(method)])
    }

    func authorizationJSON(_ a: PayPalAuthorization, base: String, standalone: Bool) -> JSONValue {
        guard let order = orders[a.orderID] else { return .null }
        var links = [Self.link("\(base)/v2/payments/authorizations/\(a.id)", "self", "GET")]
        if a.status == "CREATED" || a.status == "PARTIALLY_CAPTURED" {
            links.append(Self.link("\(base)/v2/payments/authorizations/\(a.id)/capture", "capture", "POST"))
        }
        if a.status == "CREATED" { links.append(Self.link("\(base)/v2/payments/authorizations/\(a.id)/void", "void", "POST")) }
        links.append(Self.link("\(base)/v2/checkout/orders/\(order.id)", "up", "GET"))
        let expiry = SimTime.parse(a.createTime).map { SimTime.rfc3339(Date(timeIntervalSince1970: Double($0 + 29 * 86400))) }
        return .object([
            "id": .string(a.id), "status": .string(a.status), "amount": money(a.amount, order),
            // Only a standalone authorization carries supplementary_data (the orders schema's
            // authorization_with_additional_data defines none), and it names the order only.
            "supplementary_data": standalone ? .object(["related_ids": .object(["order_id": .string(order.id)])]) : nil,
            "create_time": .string(a.createTime), "update_time": .string(a.updateTime),
            "expiration_time": expiry.map { .string($0) },
            "links": .array(links)
        ])
    }

    func captureJSON(_ c: PayPalCapture, base: String, standalone: Bool) -> JSONValue {
        guard let order = orders[c.orderID] else { return .null }
        var links = [Self.link("\(base)/v2/payments/captures/\(c.id)", "self", "GET")]
        if c.status == "COMPLETED" || c.status == "PARTIALLY_REFUNDED" {
            links.append(Self.link("\(base)/v2/payments/captures/\(c.id)/refund", "refund", "POST"))
        }
        if let authID = c.authorizationID {
            links.append(Self.link("\(base)/v2/payments/authorizations/\(authID)", "up", "GET"))
        } else {
            links.append(Self.link("\(base)/v2/checkout/orders/\(order.id)", "up", "GET"))
        }
        return .object([
            "id": .string(c.id), "status": .string(c.status), "amount": money(c.amount, order),
            "status_details": c.status == "PENDING" ? c.pendingReason.map { .object(["reason": .string($0)]) } : nil,
            "final_capture": .bool(c.finalCapture),
            // "not available for transactions that are in pending state" (payments_payment_v2.json): captures that
            // moved money only.
            "seller_receivable_breakdown": ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"].contains(c.status)
                ? breakdown(gross: c.amount, fee: PayPalFees.capture(c.amount, order.currency), order) : nil,
            "supplementary_data": standalone
                ? .object([
                    "related_ids": .object([
                        "order_id": .string(order.id),
                        "authorization_id": c.authorizationID.map { .string($0) }
                    ])
                ]) : nil,
            "create_time": .string(c.createTime), "update_time": .string(c.updateTime),
            "links": .array(links)
        ])
    }

    func refundJSON(_ r: PayPalRefund, base: String, standalone _: Bool = true) -> JSONValue {
        guard let order = orders[r.orderID] else { return .null }
        // Cumulative refunded on the capture up to and including this refund (refunds kept in creation order).
        var totalRefunded: Int64 = 0
        for id in order.refundIDs {
            guard let other = refunds[id], other.captureID == r.captureID else { continue }
            if other.counts { totalRefunded += other.amount }
            if id == r.id { break }
        }
        return .object([
            "id": .string(r.id), "status": .string(r.status), "amount": money(r.amount, order),
            "status_details": r.status == "PENDING" ? r.pendingReason.map { .object(["reason": .string($0)]) } : nil,
            "custom_id": r.customID.map { .string($0) },
            "seller_payable_breakdown": breakdown(
                gross: r.amount, fee: r.isReversal ? 0 : PayPalFees.refund(r.amount, order.currency), order,
                totalRefunded: totalRefunded, receivableKey: "net_amount_in_receivable_currency"),
            // A real refund carries no supplementary_data.related_ids: only its `up` link names the capture.
            "note_to_payer": r.isReversal ? "Payment reversed" : nil,
            "create_time": .string(r.createTime), "update_time": .string(r.updateTime),
            "links": .array([
                Self.link("\(base)/v2/payments/refunds/\(r.id)", "self", "GET"),
                Self.link("\(base)/v2/payments/captures/\(r.captureID)", "up", "GET")
            ])
        ])
    }

    /// A capture's seller_receivable_breakdown or a refund's seller_payable_breakdown: gross, the PayPal fee (left
    /// out when there is none), net = gross − fee; a refund's also its capture's total refunded so far.
    func breakdown(
        gross: Int64, fee: Int64, _ order: PayPalOrder, totalRefunded: Int64? = nil, receivableKey: String = "receivable_amount"
    ) -> JSONValue {
        var received: JSONValue? = nil, rate: JSONValue? = nil
        if let r = order.receivable {
            received = searchMoney(
                Self.converted(gross - fee, from: order.currency, to: r.currency, rate: r.rate, scale: r.scale), r.currency)
            rate = .object([
                "source_currency": .string(order.currency.code), "target_currency": .string(r.currency.code),
                "value": .string(Money.format(minorUnits: r.rate, exponent: r.scale))
            ])
        }
        return .object([
            "gross_amount": money(gross, order),
            "paypal_fee": fee > 0 ? money(fee, order) : nil,
            "net_amount": money(gross - fee, order),
            receivableKey: received,
            "exchange_rate": rate,
            "total_refunded_amount": totalRefunded.map { money($0, order) }
        ])
    }

    /// `minor` of `from` times the rate (`rate` / 10^`scale` per major unit) in `to`'s minor units, at PayPal's decimals
    /// for `to`, half up.
    static func converted(_ minor: Int64, from: Currency, to: Currency, rate: Int64, scale: Int) -> Int64 {
        var numerator = Int128(minor) * Int128(rate), denominator = Int128(1)
        for _ in 0..<scale { denominator *= 10 }
        // to's minor units per from's: 10^(e_to − e_from).
        let shift = to.exponent - from.exponent
        if shift > 0 { for _ in 0..<shift { numerator *= 10 } } else { for _ in 0..<(-shift) { denominator *= 10 } }
        // Rounded to PayPal's last digit of `to`.
        let unit = Int128(paypalUnit(to))
        denominator *= unit
        let rounded = (numerator * 2 + denominator) / (denominator * 2)
        return Int64(clamping: rounded * unit)
    }

    func orderJSON(_ o: PayPalOrder, base: String) -> JSONValue {
        var payments: [(String, JSONValue)] = []
        let auths = o.authorizationIDs.compactMap { authorizations[$0] }.map { authorizationJSON($0, base: base, standalone: false) }
        let caps = o.captureIDs.compactMap { captures[$0] }.map { captureJSON($0, base: base, standalone: false) }
        let refs = o.refundIDs.compactMap { refunds[$0] }.map { refundJSON($0, base: base, standalone: false) }
        if !auths.isEmpty { payments.append(("authorizations", .array(auths))) }
        if !caps.isEmpty { payments.append(("captures", .array(caps))) }
        if !refs.isEmpty { payments.append(("refunds", .array(refs))) }
        let unit = JSONValue.object([
            "reference_id": .string(o.referenceID),
            "amount": money(o.amount, o),
            "payee": .object(["merchant_id": .string(o.merchantID)]),
            "payments": payments.isEmpty ? nil : .object(payments)
        ])
        return .object([
            "id": .string(o.id), "intent": .string(o.intent), "status": .string(o.status),
            "purchase_units": .array([unit]),
            "create_time": .string(o.createTime), "update_time": .string(o.updateTime),
            "links": .array([Self.link("\(base)/v2/checkout/orders/\(o.id)", "self", "GET")])
        ])
    }
}
