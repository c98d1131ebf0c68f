// `payrecon explain --format json`: the same chain, whole (raw answers as text when they are UTF-8, else base64).
import Foundation
import Reconciliation
import TextFormats

extension Explanation {
    public func json() -> [UInt8] {
        var out = jsonValue().serialized()
        out.append(UInt8(ascii: "\n"))
        return out
    }

    public func jsonValue() -> JSONValue {
        typealias J = ExplanationJSON
        return .object([
            ("generated_at", J.time(generatedAt)), ("provider", .string(provider.rawValue)), ("order_id", J.text(orderID)),
            ("transaction_ref", .string(transactionRef)), ("discrepancy", subject.map(J.discrepancy) ?? .null),
            ("timeline", .array(timeline.map(J.event))), ("checks_left_out", .number(String(checksLeftOut)))
        ])
    }

    /// A raw body: its text when it is UTF-8, else `{"base64": …}`.
    static func bodyValue(_ body: [UInt8]) -> JSONValue {
        if let text = String(validating: body, as: UTF8.self) { return .string(text) }
        return .object([("base64", .string(Data(body).base64EncodedString()))])
    }
}

/// The pieces of `Explanation.jsonValue`, one per kind of value on the timeline.
enum ExplanationJSON {
    static func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    static func time(_ value: Date?) -> JSONValue { text(value.map(Timestamp.iso8601Millis)) }
    static func id(_ value: Int64?) -> JSONValue { value.map { .number(String($0)) } ?? .null }
    static func status(_ value: Int?) -> JSONValue { value.map { .number(String($0)) } ?? .null }

    static func version(_ v: Explanation.OrderVersion) -> JSONValue {
        .object([
            ("since", time(v.since)), ("replaced_at", time(v.replacedAt)), ("source", .string(v.source)),
            ("fields", .object(v.fields.map { ($0.0, .string($0.1)) }))
        ])
    }

    static func discrepancy(_ d: Explanation.DiscrepancyLine) -> JSONValue {
        .object([
            ("id", id(d.id)), ("kind", .string(d.kind.rawValue)), ("status", .string(d.status)), ("detail", .string(d.detail)),
            ("expected", d.expected), ("actual", d.actual), ("first_seen", time(d.firstSeen)), ("last_seen", time(d.lastSeen)),
            ("resolved_at", time(d.resolvedAt)), ("occurrences", .number(String(d.occurrences))), ("evidence_id", id(d.evidenceID))
        ])
    }

    static func decision(_ d: Decision?) -> JSONValue {
        guard let d else { return .null }
        var members: [(String, JSONValue)] = [
            (
                "rules",
                .array(
                    d.fired.map {
                        .object([("row", .string($0.row.rawValue)), ("rule", .string($0.row.words)), ("yields", .string($0.yields))])
                    })
            )
        ]
        if let f = d.figures {
            func m(_ v: Int64) -> JSONValue { .string(Money.format(minorUnits: v, exponent: f.currency.exponent)) }
            members.append(
                (
                    "saw",
                    .object([
                        ("currency", .string(f.currency.code)), ("amount", m(f.amount)), ("refund_amount", m(f.refundAmount)),
                        ("fulfilment", .string(f.fulfilment.rawValue)), ("intent", .string(f.intent.rawValue)),
                        ("state", .string(f.state.rawValue)),
                        ("raw_state", .string(f.rawState)), ("A", m(f.authorised)), ("C", m(f.captured)), ("R", m(f.refunded)),
                        ("V", m(f.reversed)), ("D", m(f.disputed))
                    ])
                ))
        }
        return .object(members)
    }

    static func check(_ c: Explanation.Check, at: Date) -> JSONValue {
        .object([
            ("at", time(at)), ("event", .string("check")), ("evidence_id", id(c.evidenceID)), ("source", .string(c.source.rawValue)),
            ("delivery_id", id(c.deliveryID)), ("decided", .array(c.decided.map(JSONValue.string))),
            ("answer_sha256", .array(c.hashes.map(JSONValue.string))),
            (
                "answers",
                .array(
                    c.answers.map { a in
                        .object([
                            ("fetched_at", time(a.fetchedAt)), ("method", .string(a.method)), ("url", .string(a.url)),
                            ("status", status(a.status)),
                            ("sha256", .string(a.sha256)), ("length", .number(String(a.length))),
                            ("body", a.body.map(Explanation.bodyValue) ?? .null)
                        ])
                    })
            ),
            ("decision", decision(c.decision)), ("decision_unreadable", text(c.decisionUnreadable)),
            ("findings", .array(c.findings.map(JSONValue.string))),
            ("planned", .array(c.planned.map(JSONValue.string))), ("superseded", .array(c.superseded.map(JSONValue.string))),
            (
                "settlement",
                c.settlement.map { s in
                    .object([
                        ("file", text(s.fileName)), ("kind", text(s.kind)), ("account", text(s.account)), ("sha256", text(s.sha256)),
                        ("line", s.line.map { .number(String($0)) } ?? .null), ("row", text(s.row))
                    ])
                } ?? .null
            )
        ])
    }

    static func event(_ event: Explanation.Event) -> JSONValue {
        switch event {
        case .version(let v): return .object([("at", time(event.at)), ("event", .string("order")), ("order", version(v))])
        case .delivery(let d):
            return .object([
                ("at", time(event.at)), ("event", .string("delivery")), ("delivery_id", id(d.id)), ("event_type", text(d.eventType)),
                ("status", .string(d.status)), ("outcome", text(d.outcome))
            ])
        case .check(let c): return check(c, at: event.at)
        case .opened(let d):
            return .object([("at", time(event.at)), ("event", .string("discrepancy_opened")), ("discrepancy", discrepancy(d))])
        case .acknowledged(let d):
            return .object([
                ("at", time(event.at)), ("event", .string("discrepancy_acknowledged")), ("discrepancy_id", id(d.id)),
                ("by", text(d.acknowledgedBy)), ("note", text(d.ackNote)), ("console_address", text(d.acknowledgedFrom))
            ])
        case .resolved(let d):
            return .object([("at", time(event.at)), ("event", .string("discrepancy_resolved")), ("discrepancy_id", id(d.id))])
        case .planned(let a):
            return .object([
                ("at", time(event.at)), ("event", .string("action_planned")), ("action_id", id(a.id)), ("action", .string(a.kind)),
                ("amount", .string(a.amount)), ("currency", .string(a.currency)), ("idempotency_key", .string(a.idempotencyKey)),
                ("status", .string(a.status)), ("provider_ref", text(a.providerRef)), ("last_error", text(a.lastError)),
                ("evidence_id", id(a.evidenceID))
            ])
        case .call(let a, let c):
            return .object([
                ("at", time(event.at)), ("event", .string("action_call")), ("action_id", id(a.id)), ("attempt", .number(String(c.attempt))),
                ("evidence_id", id(c.evidenceID)), ("method", .string(c.method)), ("url", .string(c.url)),
                ("idempotency_key", text(c.idempotencyKey)), ("request", Explanation.bodyValue(c.request)), ("status", status(c.status)),
                ("sha256", .string(c.sha256)), ("length", .number(String(c.length))),
                ("answer", c.body.map(Explanation.bodyValue) ?? .null), ("outcome", text(c.outcome))
            ])
        }
    }
}
