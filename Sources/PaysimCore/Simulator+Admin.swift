import Foundation
import Reconciliation
import TextFormats

// The admin API: seeding state, reading the action log, setting faults.

extension Simulator {
    /// Seeds from a JSON document `{"pxp": [transaction...], "paypal": [order...]}` (the `--seed-file` format and
    /// `POST /admin/seed`). All or nothing: one invalid entry rejects the whole document.
    public func seed(_ body: [UInt8]) throws -> (pxp: Int, paypal: Int) {
        do {
            let json = try Self.parseAdminBody(body)
            let counts = try applySeed(json)
            if let list = json["paypercut"], !list.isNull { _ = try adminPutPaypercut(list.serialized()) }
            return counts
        } catch {
            throw SeedError(message: Self.errorMessage(error))
        }
    }

    public struct SeedError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    static func errorMessage(_ error: SimError) -> String {
        error.body["error"]?["message"]?.stringValue ?? error.code
    }

    /// Admin bodies are bounded by the HTTP server's body limit and seed files are the operator's own, so the
    /// document size limit is lifted (a million-transaction seed for the benchmarks is ~150 MB).
    static func parseAdminBody(_ body: [UInt8]) throws(SimError) -> JSONValue {
        do { return try JSONValue.parse(body, limits: .init(maxDepth: 64, maxBytes: Int.max)) } catch {
            throw SimError.admin(400, "malformed_body", "\(error)")
        }
    }

    private func applySeed(_ json: JSONValue) throws(SimError) -> (pxp: Int, paypal: Int) {
        guard json.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "expected {\"pxp\": [...], \"paypal\": [...]}") }
        let pxpList = json["pxp"] ?? json["pxp_transactions"] ?? .array([])
        let paypalList = json["paypal"] ?? json["paypal_orders"] ?? .array([])
        let salesList = json["paypal_sales"] ?? .array([])
        guard let pxpItems = pxpList.arrayValue, let paypalItems = paypalList.arrayValue, let saleItems = salesList.arrayValue else {
            throw SimError.admin(400, "malformed_body", "pxp, paypal and paypal_sales must be arrays")
        }
        let now = nowString
        return try state.withLock { s throws(SimError) in
            var pxp: [PXPTransaction] = []
            for (i, item) in pxpItems.enumerated() {
                do throws(SimError) { pxp.append(try PXPTransaction.fromAdmin(item, systemTransactionID: s.ids.uuid(), now: now)) } catch {
                    throw SimError.admin(400, error.code, "pxp[\(i)]: \(Self.errorMessage(error))")
                }
            }
            var paypal: [PayPalOrderSeed] = []
            for (i, item) in paypalItems.enumerated() {
                do throws(SimError) { paypal.append(try PayPalOrderSeed.parse(item, ids: &s.ids, now: now)) } catch {
                    throw SimError.admin(400, error.code, "paypal[\(i)]: \(Self.errorMessage(error))")
                }
            }
            var sales: [PayPalSale] = []
            for (i, item) in saleItems.enumerated() {
                do throws(SimError) { sales.append(try PayPalBook.sale(from: item, newID: s.paypalID(), now: now)) } catch {
                    throw SimError.admin(400, error.code, "paypal_sales[\(i)]: \(Self.errorMessage(error))")
                }
            }
            for t in pxp { s.pxp.put(t) }
            for o in paypal { s.paypal.put(o.order, authorizations: o.authorizations, captures: o.captures, refunds: o.refunds) }
            for sale in sales { s.paypal.putSale(sale) }
            return (pxp.count, paypal.count)
        }
    }

    func adminSeed(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let (pxp, paypal) = try applySeed(json)
        if let list = json["paypercut"], !list.isNull { _ = try adminPutPaypercut(list.serialized()) }
        return .json(200, .object(["pxp": .integer(pxp), "paypal": .integer(paypal)]))
    }

    /// One transaction object, or an array of them.
    func adminPutPXP(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let items = json.arrayValue ?? [json]
        let now = nowString
        let stored: [PXPTransaction] = try state.withLock { s throws(SimError) in
            var list: [PXPTransaction] = []
            for item in items { list.append(try PXPTransaction.fromAdmin(item, systemTransactionID: s.ids.uuid(), now: now)) }
            for t in list { s.pxp.put(t) }
            return list
        }
        let rendered = stored.map(\.json)
        return .json(201, json.arrayValue == nil ? rendered[0] : .array(rendered))
    }

    /// `POST /admin/paypal/sales`: one v1 sale object, or an array of them (`PayPalBook.sale(from:)`).
    func adminPutPayPalSales(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let items = json.arrayValue ?? [json]
        let now = nowString
        let rendered: [JSONValue] = try state.withLock { s throws(SimError) in
            var list: [PayPalSale] = []
            for item in items { list.append(try PayPalBook.sale(from: item, newID: s.paypalID(), now: now)) }
            for sale in list { s.paypal.putSale(sale) }
            return list.map { s.paypal.saleJSON($0, base: s.config.publicBaseURL) }
        }
        return .json(201, json.arrayValue == nil ? rendered[0] : .array(rendered))
    }

    /// `POST /admin/paypal/subscriptions`: a PayPal Subscriptions subscription's year (or `cycles`) of renewals, with
    /// failed-then-retried, refunded and charged-back cycles (`PayPalSubscriptionPlan`); answers what was made.
    func adminPayPalSubscription(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let plan = try PayPalSubscriptionPlan(try Self.parseAdminBody(body))
        return try state.withLock { s throws(SimError) in
            let ids = (0..<(2 * plan.cycles)).map { _ in s.paypalID() }
            return .json(201, try s.paypal.makeSubscription(plan, ids: ids))
        }
    }

    /// `POST /admin/paypal/disputes`: `{"transaction_id": capture or sale, "amount"?, "status"?, "id"?}` opens one;
    /// `{"resolve": id, "outcome": "buyer"|"seller"}` resolves it (the buyer winning reverses the capture).
    func adminPayPalDispute(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let now = nowString
        return try state.withLock { s throws(SimError) in
            if let id = json["resolve"]?.stringValue {
                let outcome = json["outcome"]?.stringValue ?? "buyer"
                guard outcome == "buyer" || outcome == "seller" else {
                    throw SimError.admin(400, "invalid_field", "outcome must be buyer or seller")
                }
                let (d, reversal) = try s.paypal.resolveDispute(id: id, buyerWins: outcome == "buyer", newID: s.paypalID(), now: now)
                return .json(
                    200,
                    .object([
                        "dispute": s.paypal.disputeJSON(d, base: s.config.publicBaseURL),
                        "reversal": reversal.map { s.paypal.refundJSON($0, base: s.config.publicBaseURL) }
                    ]))
            }
            guard let transaction = json["transaction_id"]?.stringValue else {
                throw SimError.admin(400, "missing_field", "transaction_id (a capture or sale id) or resolve is required")
            }
            let id = json["id"]?.stringValue ?? "PP-D-\(s.ids.string(5, alphabet: Array("0123456789")))"
            let d = try s.paypal.openDispute(
                id: id, transactionID: transaction, amountText: json["amount"]?.scalarText,
                status: json["status"]?.stringValue ?? "OPEN", now: now)
            return .json(201, s.paypal.disputeJSON(d, base: s.config.publicBaseURL))
        }
    }

    /// `POST /admin/paypal/reversals`: `{"capture_id"}` reverses a capture (a chargeback); answers the reversal record.
    func adminPayPalReversal(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        guard let capture = json["capture_id"]?.stringValue else { throw SimError.admin(400, "missing_field", "capture_id is required") }
        let now = nowString
        return try state.withLock { s throws(SimError) in
            let record = try s.paypal.reverse(captureID: capture, newID: s.paypalID(), now: now)
            return .json(201, s.paypal.refundJSON(record, base: s.config.publicBaseURL))
        }
    }

    /// `POST /admin/paypal/refunds`: `{"refund_id", "status"}` completes, fails or cancels a PENDING refund.
    func adminPayPalRefund(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        guard let id = json["refund_id"]?.stringValue else { throw SimError.admin(400, "missing_field", "refund_id is required") }
        guard let status = json["status"]?.stringValue?.uppercased() else {
            throw SimError.admin(400, "missing_field", "status is required")
        }
        let now = nowString
        return try state.withLock { s throws(SimError) in
            let refund = try s.paypal.settleRefund(id: id, status: status, now: now)
            return .json(200, s.paypal.refundJSON(refund, base: s.config.publicBaseURL))
        }
    }

    /// One order object, or an array of them.
    func adminPutPayPal(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let items = json.arrayValue ?? [json]
        let now = nowString
        let rendered: [JSONValue] = try state.withLock { s throws(SimError) in
            var list: [PayPalOrderSeed] = []
            for item in items { list.append(try PayPalOrderSeed.parse(item, ids: &s.ids, now: now)) }
            for o in list { s.paypal.put(o.order, authorizations: o.authorizations, captures: o.captures, refunds: o.refunds) }
            return list.compactMap { o in s.paypal.orders[o.order.id].map { s.paypal.orderJSON($0, base: s.config.publicBaseURL) } }
        }
        return .json(201, json.arrayValue == nil ? rendered[0] : .array(rendered))
    }

    /// `GET /admin/log[?provider=pxp|paypal][&since=N]`: the action calls received, oldest first.
    func adminLog(_ query: [String: String]) -> SimResponse {
        let entries = state.withLock { $0.log }
        let provider = query["provider"]
        let since = query["since"].flatMap(Int.init) ?? 0
        let filtered = entries.enumerated().filter { index, entry in
            index >= since && (provider == nil || entry.provider == provider)
        }.map { $0.element.json }
        return .json(200, .object(["count": .integer(filtered.count), "entries": .array(filtered)]))
    }

    func adminFaults(_ body: [UInt8]) throws(SimError) -> SimResponse {
        let json = try Self.parseAdminBody(body)
        let current = state.withLock { $0.faults.config }
        let config = try FaultConfig.parse(json, base: current)
        setFaults(config)
        return .json(200, config.json)
    }

    /// Replaces the fault configuration and restarts its random sequence from `config.seed`.
    public func setFaults(_ config: FaultConfig) {
        state.withLock { s in
            s.faults = FaultInjector(config: config)
            s.config.faults = config
        }
    }

    /// Forgets all transactions, orders, tokens, idempotency keys, the log, counters and faults.
    func adminReset() -> SimResponse {
        state.withLock { s in
            let config = s.config, answering = s.inFlight  // requests being answered now still finish after the reset
            s = SimState(config: config)
            s.inFlight = answering
            s.faults = FaultInjector(config: FaultConfig())
            s.config.faults = FaultConfig()
        }
        return .json(200, .object(["status": "reset"]))
    }

    func adminStats() -> SimResponse {
        let (counts, pxp, orders, logCount, perSecond, inFlightMax) = state.withLock { s in
            (s.counts, s.pxp.transactions.count, s.paypal.orders.count, s.log.count, s.perSecond, s.inFlightMax)
        }
        let requests = JSONValue.object(counts.sorted { $0.key < $1.key }.map { ($0.key, .integer($0.value)) })
        let seconds = JSONValue.object(
            perSecond.sorted { $0.key < $1.key }.map { provider, bySecond in
                (provider, .object(bySecond.sorted { $0.key < $1.key }.map { (String($0.key), .integer($0.value)) }))
            })
        return .json(
            200,
            .object([
                "requests": requests, "requests_per_second": seconds, "pxp_transactions": .integer(pxp),
                "paypal_orders": .integer(orders), "log_entries": .integer(logCount),
                "provider_requests_in_flight_max": .integer(inFlightMax)
            ]))
    }
}

/// A parsed `POST /admin/paypal/orders` object.
struct PayPalOrderSeed {
    var order: PayPalOrder
    var authorizations: [PayPalAuthorization]
    var captures: [PayPalCapture]
    var refunds: [PayPalRefund]

    static func parse(_ json: JSONValue, ids: inout SplitMix64, now: String) throws(SimError) -> PayPalOrderSeed {
        guard json.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "a PayPal order must be an object") }
        func string(_ object: JSONValue, _ key: String, _ where_: String) throws(SimError) -> String? {
            guard let value = object[key], !value.isNull else { return nil }
            guard let s = value.stringValue, !s.isEmpty else {
                throw SimError.admin(400, "invalid_field", "\(where_)\(key) must be a non-empty string")
            }
            return s
        }
        func time(_ object: JSONValue, _ where_: String) throws(SimError) -> String {
            guard let t = try string(object, "create_time", where_) else { return now }
            guard SimTime.parse(t) != nil else { throw SimError.admin(400, "invalid_field", "\(where_)create_time must be RFC 3339") }
            return t
        }
        /// An optional RFC 3339 time no earlier than `than` (a capture's completion or listing, after it was made).
        func later(_ object: JSONValue, _ key: String, than: String, _ where_: String) throws(SimError) -> String? {
            guard let text = try string(object, key, where_) else { return nil }
            guard let at = SimTime.parse(text), at >= SimTime.parse(than) ?? .min else {
                throw SimError.admin(400, "invalid_field", "\(where_)\(key) must be an RFC 3339 time no earlier than its create_time")
            }
            return text
        }
        func newID() -> String { ids.string(17, alphabet: SimState.paypalIDAlphabet) }
        let id = try string(json, "id", "") ?? newID()
        let intent = (try string(json, "intent", "") ?? "CAPTURE").uppercased()
        guard intent == "CAPTURE" || intent == "AUTHORIZE" else {
            throw SimError.admin(400, "invalid_field", "intent must be CAPTURE or AUTHORIZE")
        }
        let status = (try string(json, "status", "") ?? "COMPLETED").uppercased()
        guard PayPalOrder.statuses.contains(status) else {
            throw SimError.admin(400, "invalid_field", "status must be one of \(PayPalOrder.statuses.sorted().joined(separator: ", "))")
        }
        guard let currency = try string(json, "currency", "").flatMap(Currency.init(code:)) else {
            throw SimError.admin(400, "invalid_field", "currency must be a known ISO 4217 code")
        }
        func amount(_ object: JSONValue, _ key: String, _ where_: String, default fallback: Int64?) throws(SimError) -> Int64 {
            guard let value = object[key], !value.isNull else {
                if let fallback { return fallback }
                throw SimError.admin(400, "missing_field", "\(where_)\(key) is required")
            }
            guard let minor = value.seedMinorUnits(exponent: currency.exponent) else {
                throw SimError.admin(400, "invalid_field", "\(where_)\(key) must be a decimal amount in \(currency)")
            }
            return minor
        }
        let total = try amount(json, "amount", "", default: nil)
        let createTime = try time(json, "")
        // A payee who receives in another currency: `receivable_currency` and PayPal's `exchange_rate` ("1.0847").
        var receivable: PayPalReceivable?
        if let code = try string(json, "receivable_currency", "") {
            guard let to = Currency(code: code), to != currency else {
                throw SimError.admin(400, "invalid_field", "receivable_currency must be a known ISO 4217 code other than the order's")
            }
            guard let text = try string(json, "exchange_rate", ""), let dot = text.firstIndex(of: ".") ?? Optional(text.endIndex),
                case let digits = text.replacingOccurrences(of: ".", with: ""), !digits.isEmpty, digits.count <= 15,
                digits.allSatisfy({ $0.isASCII && $0.isNumber }), let rate = Int64(digits), rate > 0
            else {
                throw SimError.admin(400, "invalid_field", "exchange_rate must be a positive decimal (\"1.0847\") with receivable_currency")
            }
            receivable = PayPalReceivable(
                currency: to, rate: rate, scale: text.distance(from: dot, to: text.endIndex) - (dot == text.endIndex ? 0 : 1))
        }
        var order = PayPalOrder(
            id: id, intent: intent, status: status, currency: currency,
            amount: total, merchantID: try string(json, "merchant_id", "") ?? PayPalOrder.defaultMerchantID,
            referenceID: try string(json, "reference_id", "") ?? "default",
            createTime: createTime, updateTime: createTime)
        order.receivable = receivable
        func list(_ key: String) throws(SimError) -> [JSONValue] {
            guard let value = json[key], !value.isNull else { return [] }
            guard let items = value.arrayValue else { throw SimError.admin(400, "invalid_field", "\(key) must be an array") }
            return items
        }
        func statusOf(_ object: JSONValue, _ where_: String, allowed: Set<String>, default fallback: String) throws(SimError) -> String {
            let s = (try string(object, "status", where_) ?? fallback).uppercased()
            guard allowed.contains(s) else {
                throw SimError.admin(400, "invalid_field", "\(where_)status must be one of \(allowed.sorted().joined(separator: ", "))")
            }
            return s
        }
        var auths: [PayPalAuthorization] = []
        for (i, item) in try list("authorizations").enumerated() {
            let w = "authorizations[\(i)]."
            let t = try time(item, w)
            let parent = try string(item, "reauthorizes", w)
            if let parent, !auths.contains(where: { $0.id == parent }) {
                throw SimError.admin(400, "invalid_field", "\(w)reauthorizes \(parent) is not an earlier authorization of this order")
            }
            auths.append(
                PayPalAuthorization(
                    id: try string(item, "id", w) ?? newID(), orderID: id,
                    status: try statusOf(item, w, allowed: PayPalAuthorization.statuses, default: "CREATED"),
                    amount: try amount(item, "amount", w, default: total), createTime: t, updateTime: t, parentID: parent))
        }
        var caps: [PayPalCapture] = []
        for (i, item) in try list("captures").enumerated() {
            let w = "captures[\(i)]."
            let t = try time(item, w)
            var authID = try string(item, "authorization_id", w)
            if authID == nil, intent == "AUTHORIZE" { authID = auths.first?.id }
            if let authID, !auths.contains(where: { $0.id == authID }) {
                throw SimError.admin(400, "invalid_field", "\(w)authorization_id \(authID) is not an authorization of this order")
            }
            var final = false
            if let f = item["final_capture"], !f.isNull {
                guard let b = f.boolValue else { throw SimError.admin(400, "invalid_field", "\(w)final_capture must be a boolean") }
                final = b
            }
            caps.append(
                PayPalCapture(
                    id: try string(item, "id", w) ?? newID(), orderID: id, authorizationID: authID,
                    status: try statusOf(item, w, allowed: PayPalCapture.statuses, default: "COMPLETED"),
                    amount: try amount(item, "amount", w, default: total), finalCapture: final, createTime: t, updateTime: t,
                    pendingReason: try string(item, "status_details_reason", w),
                    completedTime: try later(item, "completed_time", than: t, w), listedTime: try later(item, "listed_time", than: t, w),
                    refundsPendingReason: try string(item, "refunds_pending_reason", w)))
        }
        var refs: [PayPalRefund] = []
        for (i, item) in try list("refunds").enumerated() {
            let w = "refunds[\(i)]."
            let t = try time(item, w)
            guard let captureID = try string(item, "capture_id", w) ?? caps.first?.id else {
                throw SimError.admin(400, "invalid_field", "\(w)a refund needs a capture")
            }
            guard let capture = caps.first(where: { $0.id == captureID }) else {
                throw SimError.admin(400, "invalid_field", "\(w)capture_id \(captureID) is not a capture of this order")
            }
            refs.append(
                PayPalRefund(
                    id: try string(item, "id", w) ?? newID(), orderID: id, captureID: captureID,
                    status: try statusOf(item, w, allowed: PayPalRefund.statuses, default: "COMPLETED"),
                    amount: try amount(item, "amount", w, default: capture.amount), createTime: t, updateTime: t,
                    pendingReason: try string(item, "status_details_reason", w)))
        }
        return PayPalOrderSeed(order: order, authorizations: auths, captures: caps, refunds: refs)
    }
}
