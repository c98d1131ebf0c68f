import Foundation
import Reconciliation
import TextFormats

/// A PayPal Subscriptions subscription as PayPal's records show it: one v1 sale per billing cycle, each naming the
/// subscription in `billing_agreement_id` and created when the cycle is charged (PROVIDER-FACTS PAYPAL-62); a failed
/// renewal is a `denied` sale, retried days later as a new sale; a refunded cycle's sale has its refund record; a
/// charged-back cycle's sale has a dispute the buyer won (the sale then reads `refunded`: the v1 sale states have no
/// `reversed`). Transaction Search lists the completed sales (T0002) and the refunds (T1107) from the same book.
struct PayPalSubscriptionPlan: Sendable {
    var id: String
    var amount: Int64
    var currency: Currency
    /// The first cycle's charge (unix seconds); each later one a calendar month on (the day clamped to the month).
    var start: Int64
    var cycles: Int
    var failedThenRetried: Set<Int> = []
    var retryAfterDays: Int = 3
    var refunded: Set<Int> = []
    var chargedBack: Set<Int> = []

    /// `{"id","amount","currency","start","cycles", "failed_then_retried":[n], "retry_after_days", "refunded":[n],
    /// "charged_back":[n]}` (cycles numbered from 1).
    init(_ json: JSONValue) throws(SimError) {
        guard let id = json["id"]?.stringValue, id.hasPrefix("I-"), id.count > 2 else {
            throw SimError.admin(400, "invalid_field", "id must be a subscription id (I-…)")
        }
        guard let currency = json["currency"]?.stringValue.flatMap(Currency.init(code:)) else {
            throw SimError.admin(400, "invalid_field", "currency must be a known ISO 4217 code")
        }
        guard let amount = json["amount"]?.seedMinorUnits(exponent: currency.exponent), amount > 0 else {
            throw SimError.admin(400, "invalid_field", "amount must be a positive decimal amount in \(currency)")
        }
        guard let start = json["start"]?.stringValue.flatMap(SimTime.parse) else {
            throw SimError.admin(400, "invalid_field", "start must be the first charge's date-time (2026-01-05T10:00:00Z)")
        }
        let cycles = Int(json["cycles"]?.numberLiteral ?? "12") ?? 0
        guard (1...120).contains(cycles) else { throw SimError.admin(400, "invalid_field", "cycles must be 1 to 120") }
        func set(_ key: String) throws(SimError) -> Set<Int> {
            let values = (json[key]?.arrayValue ?? []).compactMap { $0.numberLiteral.flatMap { Int($0) } }
            guard values.allSatisfy({ (1...cycles).contains($0) }) else {
                throw SimError.admin(400, "invalid_field", "\(key): cycles 1 to \(cycles)")
            }
            return Set(values)
        }
        self.id = id; self.currency = currency; self.amount = amount; self.start = start; self.cycles = cycles
        failedThenRetried = try set("failed_then_retried")
        refunded = try set("refunded")
        chargedBack = try set("charged_back")
        retryAfterDays = Int(json["retry_after_days"]?.numberLiteral ?? "3") ?? 3
    }

    /// When cycle `n` (1-based) is charged: `start` moved on `n - 1` calendar months, the day clamped.
    func chargeTime(_ n: Int) -> Int64 {
        let (days, second) = UnixTime.split(start)
        let (y, m, d) = UnixTime.civil(fromDays: days)
        let months = (y * 12 + (m - 1)) + Int64(n - 1)
        let year = months / 12, month = months % 12 + 1
        let length = Int64(UnixTime.daysIn(month: Int(month), year: Int(year)))
        return UnixTime.days(fromYear: year, month: month, day: min(d, length)) * 86_400 + second
    }
}

extension PayPalBook {
    /// Makes the subscription's sales, refunds and disputes; returns what was made, cycle by cycle.
    mutating func makeSubscription(_ plan: PayPalSubscriptionPlan, ids: [String]) throws(SimError) -> JSONValue {
        var made: [JSONValue] = []
        var ids = ids[...]
        func newID() -> String { ids.popFirst() ?? "PP-\(made.count)-\(ids.count)" }
        let total = Money.format(minorUnits: plan.amount / Self.paypalUnit(plan.currency), exponent: Self.paypalDecimals(plan.currency))
        for n in 1...plan.cycles {
            let at = plan.chargeTime(n)
            let time = UnixTime.iso8601(at)
            let saleID = plan.id + String(format: "-%02d", n)
            var sales: [JSONValue] = []
            if plan.failedThenRetried.contains(n) {
                putSale(
                    PayPalSale(
                        id: saleID, state: "denied", amount: plan.amount, currency: plan.currency, parentPayment: "PAYID-" + saleID,
                        billingAgreement: plan.id, reasonCode: nil, createTime: time, updateTime: time))
                sales.append(.object([("id", .string(saleID)), ("state", .string("denied")), ("create_time", .string(time))]))
            }
            let paidID = plan.failedThenRetried.contains(n) ? saleID + "-R" : saleID
            let paidTime = plan.failedThenRetried.contains(n) ? UnixTime.iso8601(at + Int64(plan.retryAfterDays) * 86_400) : time
            putSale(
                PayPalSale(
                    id: paidID, state: "completed", amount: plan.amount, currency: plan.currency, parentPayment: "PAYID-" + paidID,
                    billingAgreement: plan.id, reasonCode: nil, createTime: paidTime, updateTime: paidTime))
            var entry: [(String, JSONValue)] = [("cycle", .integer(n)), ("sale", .string(paidID)), ("create_time", .string(paidTime))]
            if plan.refunded.contains(n) {
                let refund = try refundSale(
                    id: paidID, total: total, currency: plan.currency.code, newID: newID(),
                    now: UnixTime.iso8601(at + 86_400))
                entry.append(("refund", .string(refund.id)))
            }
            if plan.chargedBack.contains(n) {
                let disputeID = "PP-D-" + paidID
                _ = try openDispute(
                    id: disputeID, transactionID: paidID, amountText: nil, status: "OPEN", now: UnixTime.iso8601(at + 86_400))
                _ = try resolveDispute(id: disputeID, buyerWins: true, newID: newID(), now: UnixTime.iso8601(at + 10 * 86_400))
                entry.append(("dispute", .string(disputeID)))
            }
            if !sales.isEmpty { entry.append(("failed", .array(sales))) }
            made.append(.object(entry))
        }
        return .object([("id", .string(plan.id)), ("cycles", .array(made))])
    }
}
