// `payrecon actions list`: the action outbox as a table or JSON.
import Foundation
import Reconciliation
import TextFormats

/// One planned action, ready to render.
public struct ActionRow: Sendable, Equatable {
    public var id: Int64
    public var provider: Provider
    public var orderID: String
    /// `capture`, `void`, `refund`, `increment`.
    public var action: String
    /// The operation's own amount, minor units of `currency`.
    public var amount: Int64
    public var currency: Currency
    /// `pending`, `succeeded`, `failed`, `superseded`.
    public var status: String
    public var idempotencyKey: String
    public var createdAt: Date
    /// The cumulative total the action brings the transaction to (minor units).
    public var target: Int64
    public var providerTarget: String?
    public var providerRef: String?
    public var lastError: String?
    public var attempts: Int

    public init(
        id: Int64, provider: Provider, orderID: String, action: String, amount: Int64, currency: Currency,
        status: String, idempotencyKey: String, createdAt: Date, target: Int64 = 0, providerTarget: String? = nil,
        providerRef: String? = nil, lastError: String? = nil, attempts: Int = 0
    ) {
        self.id = id; self.provider = provider; self.orderID = orderID; self.action = action; self.amount = amount
        self.currency = currency; self.status = status; self.idempotencyKey = idempotencyKey; self.createdAt = createdAt
        self.target = target; self.providerTarget = providerTarget; self.providerRef = providerRef
        self.lastError = lastError; self.attempts = attempts
    }

    var formattedAmount: String { Money.format(minorUnits: amount, exponent: currency.exponent) }
}

public enum ActionList {
    /// A JSON array: `id, provider, order_id, action, amount` (string, major units), `currency, status,
    /// idempotency_key, created_at`, plus `target` (major units), `provider_target`, `provider_ref`, `last_error`,
    /// `attempts`. Newline-terminated.
    public static func json(_ rows: [ActionRow]) -> [UInt8] {
        var out = JSONValue.array(
            rows.map { r in
                .object([
                    ("id", .number(String(r.id))),
                    ("provider", .string(r.provider.rawValue)),
                    ("order_id", .string(r.orderID)),
                    ("action", .string(r.action)),
                    ("amount", .string(r.formattedAmount)),
                    ("currency", .string(r.currency.code)),
                    ("status", .string(r.status)),
                    ("idempotency_key", .string(r.idempotencyKey)),
                    ("created_at", .string(Timestamp.iso8601(r.createdAt))),
                    ("target", .string(Money.format(minorUnits: r.target, exponent: r.currency.exponent))),
                    ("provider_target", r.providerTarget.map(JSONValue.string) ?? .null),
                    ("provider_ref", r.providerRef.map(JSONValue.string) ?? .null),
                    ("last_error", r.lastError.map(JSONValue.string) ?? .null),
                    ("attempts", .number(String(r.attempts)))
                ])
            }
        ).serialized()
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// Aligned columns; failed rows red, pending yellow, superseded dim when `colour`.
    public static func table(_ rows: [ActionRow], colour: Bool) -> String {
        guard !rows.isEmpty else { return "No actions match.\n" }
        var table = TextTable([
            .init("ID", .right), .init("PROVIDER"), .init("ORDER"), .init("ACTION"), .init("AMOUNT", .right), .init("CUR"),
            .init("STATUS"), .init("CREATED (UTC)"), .init("IDEMPOTENCY KEY"), .init("LAST ERROR")
        ])
        for r in rows {
            let style: Style =
                switch r.status {
                case "failed": .red
                case "pending": .yellow
                case "superseded": .dim
                default: .none
                }
            table.append(
                [
                    String(r.id), r.provider.rawValue, r.orderID, r.action, r.formattedAmount, r.currency.code, r.status,
                    Timestamp.minutes(r.createdAt), r.idempotencyKey, r.lastError ?? ""
                ], style: style)
        }
        table.indent = ""
        return table.render(colour: colour)
    }
}
