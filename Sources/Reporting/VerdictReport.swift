import Reconciliation
import TextFormats

/// A verdict as `payrecon check` prints it (and the verdict API serves it): the same fields in JSON and in a table.
public struct VerdictReport: Sendable {
    public var order: Order
    public var verdict: Verdict
    /// When the check that decided it fetched the provider's answers (unix seconds).
    public var checkedAt: Int64

    public init(order: Order, verdict: Verdict, checkedAt: Int64) { self.order = order; self.verdict = verdict; self.checkedAt = checkedAt }

    /// The figures the verdict saw, in the order's currency's major units (nil: the provider knows none of its
    /// transactions).
    var figures: [(String, String)]? {
        guard let s = verdict.snapshot else { return nil }
        func m(_ v: Int64) -> String { Money.format(minorUnits: v, exponent: s.currency.exponent) }
        return [
            ("currency", s.currency.code), ("A", m(s.authorised)), ("C", m(s.captured)), ("R", m(s.refunded)), ("V", m(s.reversed)),
            ("D", m(s.disputed)), ("state", s.state.rawValue), ("raw_state", s.rawState), ("method", s.method ?? "")
        ]
    }

    public func jsonValue() -> JSONValue {
        .object([
            ("provider", .string(order.provider.rawValue)), ("order_id", .string(order.orderID)),
            ("verdict", .string(verdict.outcome.rawValue)), ("reasons", .array(verdict.reasons.map { .string($0) })),
            ("checked_at", .string(UnixTime.iso8601(checkedAt))),
            (
                "order",
                .object([
                    ("intent", .string(order.intent.rawValue)),
                    ("amount", .string(Money.format(minorUnits: order.amount.minorUnits, exponent: order.amount.currency.exponent))),
                    ("currency", .string(order.amount.currency.code)),
                    ("refund_amount", .string(Money.format(minorUnits: order.refundAmount, exponent: order.amount.currency.exponent))),
                    ("fulfilment", .string(order.fulfilment.rawValue))
                ])
            ),
            ("figures", figures.map { .object($0.map { ($0.0, .string($0.1)) }) } ?? .null)
        ])
    }

    public func json() -> [UInt8] {
        var out = jsonValue().serialized()
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// `pxp:ORD-1  fulfil`, then the reasons, one a line, and the figures.
    public func table() -> String {
        var lines = ["\(order.provider.rawValue):\(order.orderID)  \(verdict.outcome.rawValue)  (checked \(UnixTime.iso8601(checkedAt)))"]
        for reason in verdict.reasons { lines.append("  - " + reason) }
        let amount = Money.format(minorUnits: order.amount.minorUnits, exponent: order.amount.currency.exponent)
        lines.append("  order: \(order.intent.rawValue) \(amount) \(order.amount.currency.code), fulfilment \(order.fulfilment.rawValue)")
        if let figures {
            lines.append("  provider: " + figures.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        } else {
            lines.append("  provider: knows none of the order's transactions")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
