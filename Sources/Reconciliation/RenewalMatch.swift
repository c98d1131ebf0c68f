/// Which order of a subscription (or billing agreement) one of its payments belongs to. Orders of an agreement either
/// all carry billing periods (one renewal each) or none does (one order holds every payment, summed). A payment is the
/// order's whose period holds the time the provider's answer says it was created; a payment no period holds, or that two
/// hold, belongs to none and is reported (`unknown_order`), never counted on a guess: counted on a wrong renewal, a
/// refund wanted for one cycle could be taken from another's payment.
public enum RenewalMatch: Sendable, Hashable {
    /// No order of the agreement has a period: each holds every payment (as before periods).
    case all
    /// The one order whose period holds the payment.
    case order(String)
    /// No order is the payment's: `detail` names the payment, the agreement, and the period it falls in.
    case unheld(detail: String)

    /// - Parameters:
    ///   - payment: how the payment is named in the detail (`PayPal sale 5TY…`).
    ///   - createdAt: when the provider's answer says the payment was created; nil when it does not say.
    ///   - orders: the agreement's orders, with their periods.
    public static func of(
        payment: String, agreement: String, createdAt: Int64?,
        orders: [(orderID: String, period: BillingPeriod?)]
    ) -> RenewalMatch {
        let periodic = orders.compactMap { o in o.period.map { (orderID: o.orderID, period: $0) } }
        guard !periodic.isEmpty else { return .all }
        let named = "\(payment) of \(agreement)"
        if periodic.count < orders.count {
            let without = orders.filter { $0.period == nil }.map(\.orderID).sorted().joined(separator: ", ")
            return .unheld(
                detail: "\(named) is counted on no order: of its orders some have a billing period and \(without) none "
                    + "(which would hold every payment); give each order of the agreement a period")
        }
        guard let createdAt else {
            return .unheld(
                detail: "\(named) is counted on no order: the provider's answer does not say when it was created, so no "
                    + "billing period can be said to hold it")
        }
        let created = UnixTime.iso8601(createdAt)
        let holders = periodic.filter { $0.period.contains(createdAt) }.sorted { $0.orderID < $1.orderID }
        if holders.count == 1 { return .order(holders[0].orderID) }
        if holders.count > 1 {
            let list = holders.map { "\($0.orderID) (\($0.period))" }.joined(separator: ", ")
            return .unheld(
                detail: "\(named), created \(created), is held by the billing periods of orders \(list), which overlap: "
                    + "counted on neither until the periods are corrected")
        }
        let before = periodic.filter { $0.period.end <= createdAt }.max { $0.period.end < $1.period.end }
        let after = periodic.filter { $0.period.start > createdAt }.min { $0.period.start < $1.period.start }
        let gap: String
        switch (before, after) {
        case let (b?, a?):
            let period = BillingPeriod(start: b.period.end, end: a.period.start).map(\.description) ?? UnixTime.dateOrTime(b.period.end)
            gap = "it falls in \(period), between order \(b.orderID)'s period and order \(a.orderID)'s"
        case let (b?, nil):
            gap = "it falls after the last recorded period (order \(b.orderID)'s, which ended \(UnixTime.dateOrTime(b.period.end)))"
        case let (nil, a?):
            gap = "it falls before the first recorded period (order \(a.orderID)'s, from \(UnixTime.dateOrTime(a.period.start)))"
        case (nil, nil):
            gap = "it falls in no recorded period"  // unreachable: a period holds it, or one ends before or starts after it
        }
        return .unheld(
            detail: "\(named), created \(created), falls in no order's billing period: \(gap). A renewal not "
                + "recorded: import an order for that period")
    }
}
