// `payrecon report --format json`: the contract's names and types, plus a few extras.
import Foundation
import Reconciliation
import TextFormats

extension Report {
    /// The report as JSON (one document, newline-terminated). Amounts are decimal strings in major units with the
    /// currency's digits; `expected` / `actual` are the stored objects as they are.
    ///
    /// Contract fields: `generated_at`, `summary {open, by_kind, amount_at_risk}`, `discrepancies[] {id, provider,
    /// order_id, transaction_ref, kind, status, expected, actual, detail, first_seen, last_seen, occurrences}`.
    /// Extras: `filters`, `summary.rejected_24h`, and per discrepancy `amount_at_risk`, `currency`, `resolved_at`, `acknowledged_at`, `ack_note`, `acknowledged_by`, `evidence_id`
    /// (the check behind it: `payrecon explain ID`).
    public func json() -> [UInt8] {
        var out = jsonValue().serialized()
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// The document as a `JSONValue` (for embedding or tests).
    public func jsonValue() -> JSONValue {
        var filterMembers: [(String, JSONValue)] = [("status", .string(filters.status))]
        filterMembers.append(("provider", filters.provider.map { .string($0.rawValue) } ?? .null))
        filterMembers.append(("kind", filters.kind.map { .string($0.rawValue) } ?? .null))
        filterMembers.append(("since", filters.since.map(JSONValue.string) ?? .null))
        let counted = countedAtRisk()
        let summaryValue = JSONValue.object([
            ("open", .number(String(summary.open))),
            ("by_kind", .object(summary.kindsInOrder.map { ($0.kind.rawValue, .number(String($0.count))) })),
            ("amount_at_risk", .object(summary.amountsInOrder.map { ($0.currency.code, .string($0.formatted)) })),
            ("amount_at_risk_counts", .string(Report.moneyAtRiskRule)),
            ("rejected_24h", .object(summary.rejectedInOrder.map { ($0.reason, .number(String($0.count))) }))
        ])
        return .object([
            ("generated_at", .string(Timestamp.iso8601(generatedAt))),
            ("filters", .object(filterMembers)),
            ("summary", summaryValue),
            (
                "discrepancies",
                .array(
                    discrepancies.map { d in
                        // What the row adds to summary.amount_at_risk (null when not open).
                        var value = d.jsonValue()
                        if case .object(var members) = value {
                            members.append(
                                (
                                    "counted_at_risk",
                                    counted[d.id].flatMap { a in
                                        d.currency.map { .string(Money.format(minorUnits: a, exponent: $0.exponent)) }
                                    } ?? .null
                                ))
                            value = .object(members)
                        }
                        return value
                    })
            )
        ])
    }
}

extension DiscrepancyRow {
    func jsonValue() -> JSONValue {
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        func time(_ value: Date?) -> JSONValue { text(value.map(Timestamp.iso8601)) }
        let fields: [(String, JSONValue)] = [
            ("id", .number(String(id))),
            ("provider", .string(provider.rawValue)),
            ("order_id", text(orderID)),
            ("transaction_ref", .string(transactionRef)),
            ("kind", .string(kind.rawValue)),
            ("status", .string(status.rawValue)),
            ("expected", expected),
            ("actual", actual),
            ("detail", .string(detail)),
            ("first_seen", time(firstSeen)),
            ("last_seen", time(lastSeen)),
            ("occurrences", .number(String(occurrences))),
            ("amount_at_risk", text(formattedAmountAtRisk)),
            ("currency", text(currency?.code)),
            ("resolved_at", time(resolvedAt)),
            ("acknowledged_at", time(acknowledgedAt)),
            ("ack_note", text(ackNote)),
            ("evidence_id", evidenceID.map { .number(String($0)) } ?? .null),
            ("acknowledged_by", text(acknowledgedBy))
        ]
        return .object(fields)
    }
}
