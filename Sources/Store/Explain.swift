import Foundation
import Postgres
import Reconciliation
import TextFormats

/// The SQL behind `payrecon explain`: read only, parameterized. Everything kept about one order (or one transaction
/// no order holds), assembled into an `Explanation`.
public enum ExplainStore {
    /// What `payrecon explain` was asked about.
    public enum Subject: Sendable, Equatable {
        case discrepancy(Int64)
        case order(Provider, String)
    }

    /// Nothing is stored under the subject: the message says what and what to try.
    public struct NotFound: Error, CustomStringConvertible, Sendable { public var description: String }

    /// At most this many checks are shown (the newest); older ones are counted.
    public static let checkLimit = 500

    /// `bodyLimit`: read at most this many bytes of each raw answer (the timeline and the HTML show only their start;
    /// the JSON wants them whole: nil).
    public static func explain(
        _ subject: Subject, bodyLimit: Int? = nil, now: Date = Date(), on conn: PostgresConnection
    ) throws -> Explanation {
        let (provider, orderID, transactionRef, asked) = try Self.resolve(subject, on: conn)
        var explanation = Explanation(generatedAt: now, provider: provider, orderID: orderID, transactionRef: transactionRef)
        var refs = [transactionRef]
        if let orderID {
            refs = try readOrder(provider: provider, orderID: orderID, refs: refs, into: &explanation, on: conn)
        }
        let scope = Scope(provider: provider, orderID: orderID, transactionRef: transactionRef, refs: refs)
        try readChecks(scope, bodyLimit: bodyLimit, into: &explanation, on: conn)
        explanation.deliveries = try deliveries(scope, checkDeliveries: explanation.checks.compactMap(\.deliveryID), on: conn)
        // Discrepancies: the order's, and the unknown_order its transactions raised before it held them.
        explanation.discrepancies = try conn.query(
            """
            SELECT id, kind, status, detail, expected::text AS expected, actual::text AS actual, first_seen, last_seen, resolved_at, occurrences,
                   evidence_id, acknowledged_at, acknowledged_by, ack_note,
                   (SELECT a.address FROM console_audit a WHERE a.target = 'discrepancy ' || d.id AND a.action = 'acknowledge'
                    ORDER BY a.id DESC LIMIT 1) AS acknowledged_from
            FROM discrepancies d WHERE \(scope.evidenceWhere) ORDER BY id
            """
        ).compactMap(Self.discrepancy)
        if let asked { explanation.subject = explanation.discrepancies.first { $0.id == asked } }
        if let orderID { explanation.actions = try actions(provider: provider, orderID: orderID, bodyLimit: bodyLimit, on: conn) }
        return explanation
    }

    /// What the explanation covers: the order, or the transaction no order holds, and the rows kept of either.
    struct Scope {
        var provider: Provider, orderID: String?, transactionRef: String, refs: [String]
        /// Checks and discrepancies: of the order, and of its transactions before an order held them (unknown_order).
        var evidenceWhere: SQL {
            let p = PostgresValue.text(provider.rawValue)
            guard let orderID else { return "provider = \(p) AND order_id IS NULL AND transaction_ref = \(.text(transactionRef))" }
            return "provider = \(p) AND (order_id = \(.text(orderID)) OR (order_id IS NULL AND transaction_ref = ANY(\(.textArray(refs)))))"
        }
        /// The checks a discrepancy, an action or a call of it points at.
        var pinnedWhere: SQL {
            let p = PostgresValue.text(provider.rawValue)
            guard let orderID else {
                return
                    "SELECT evidence_id FROM discrepancies WHERE provider = \(p) AND order_id IS NULL AND transaction_ref = \(.text(transactionRef))"
            }
            let o = PostgresValue.text(orderID)
            return """
                SELECT evidence_id FROM discrepancies WHERE \(evidenceWhere)
                UNION SELECT evidence_id FROM actions WHERE provider = \(p) AND order_id = \(o)
                UNION SELECT c.evidence_id FROM action_calls c JOIN actions a ON a.id = c.action_id WHERE a.provider = \(p) AND a.order_id = \(o)
                """
        }
    }

    /// The provider, order and transaction a subject names, and the discrepancy asked about.
    static func resolve(
        _ subject: Subject, on conn: PostgresConnection
    ) throws
        -> (provider: Provider, orderID: String?, transactionRef: String, asked: Int64?)
    {
        switch subject {
        case .discrepancy(let id):
            guard let row = try conn.query("SELECT provider, order_id, transaction_ref FROM discrepancies WHERE id = \(.int64(id))").first
            else {
                throw NotFound(description: "no discrepancy \(id): see `payrecon discrepancies list --status all` for the ids there are")
            }
            return (try row.provider("provider"), try row.optionalString("order_id"), try row.string("transaction_ref"), id)
        case .order(let p, let id):
            let known = try conn.query(
                """
                SELECT (SELECT transaction_ref FROM orders WHERE provider = \(.text(p.rawValue)) AND order_id = \(.text(id))) AS ref,
                       EXISTS (SELECT 1 FROM discrepancies WHERE provider = \(.text(p.rawValue)) AND order_id = \(.text(id)))
                    OR EXISTS (SELECT 1 FROM evidence WHERE provider = \(.text(p.rawValue)) AND order_id = \(.text(id)))
                    OR EXISTS (SELECT 1 FROM actions WHERE provider = \(.text(p.rawValue)) AND order_id = \(.text(id))) AS seen
                """
            ).first
            let ref = try known?.optionalString("ref")
            let seen = try known?.bool("seen") ?? false
            guard ref != nil || seen else {
                throw NotFound(
                    description: "no \(p.rawValue) order \(id) is stored: see `payrecon report --status all` for the orders payrecon has "
                        + "checked, or import it with `payrecon orders import FILE`")
            }
            return (p, id, ref ?? "", nil)
        }
    }

    /// The order as stored now and each version it replaced; returns the order's transactions (`refs` if none stored).
    static func readOrder(
        provider: Provider, orderID: String, refs known: [String], into explanation: inout Explanation,
        on conn: PostgresConnection
    ) throws -> [String] {
        let p = PostgresValue.text(provider.rawValue), o = PostgresValue.text(orderID)
        var refs = known
        var created: Date?
        if let row = try conn.query(
            """
            SELECT o.*, (SELECT json_agg(t.transaction_ref ORDER BY t.position)::text FROM order_transactions t
                         WHERE t.provider = o.provider AND t.order_id = o.order_id) AS refs,
                        (SELECT json_agg(t.transaction_ref)::text FROM order_transactions t
                         WHERE t.provider = o.provider AND t.order_id = o.order_id AND t.source = 'learned') AS learned,
                   extract(epoch FROM o.period_start)::bigint AS period_start_s, extract(epoch FROM o.period_end)::bigint AS period_end_s
            FROM orders o WHERE o.provider = \(p) AND o.order_id = \(o)
            """
        ).first {
            created = try row.date("created_at")
            let currency = Currency(code: try row.string("currency"))
            func amount(_ column: String) throws -> String {
                let minor = try row.int64(column)
                return currency.map { Money.format(minorUnits: minor, exponent: $0.exponent) } ?? String(minor)
            }
            if let list = try row.optionalString("refs"), let parsed = try? JSONValue.parse(list).arrayValue {
                refs = parsed.compactMap(\.stringValue)
            }
            let learned = Set(
                (try row.optionalString("learned")).flatMap { try? JSONValue.parse($0).arrayValue }?.compactMap(\.stringValue) ?? [])
            var fields = [
                ("merchant", try row.string("merchant")), ("site", try row.string("site")),
                ("transaction_ref", try row.string("transaction_ref"))
            ]
            // The order's transactions when it has several; those payrecon learned from a provider's answer (not from
            // where the order came from) say so.
            if refs.count > 1 {
                fields.append(("transactions", refs.map { learned.contains($0) ? $0 + " (learned)" : $0 }.joined(separator: " ")))
            }
            // A subscription's renewal: the billing period it charges.
            if let start = try row.optionalInt64("period_start_s"), let end = try row.optionalInt64("period_end_s"),
                let period = BillingPeriod(start: start, end: end)
            {
                fields.append(("period", period.description))
            }
            explanation.order = Explanation.OrderVersion(
                since: try row.date("updated_at"), replacedAt: nil, source: try row.string("source"),
                fields: fields + [
                    ("intent", try row.string("intent")),
                    ("amount", try amount("amount_minor")), ("currency", try row.string("currency")),
                    ("fulfilment", try row.string("fulfilment")), ("refund_amount", try amount("refund_amount_minor"))
                ])
        }
        explanation.replaced = try replacedVersions(provider: provider, orderID: orderID, on: conn)
        // The order was stored when it was created: the first version's time is created_at.
        if let created {
            if explanation.replaced.isEmpty { explanation.order?.since = created } else { explanation.replaced[0].since = created }
        }
        return refs
    }

    /// The newest checks (at most `checkLimit`) and every one a discrepancy, an action or a call points at, each with
    /// the answers it kept and the settlement line behind it.
    static func readChecks(_ scope: Scope, bodyLimit: Int?, into explanation: inout Explanation, on conn: PostgresConnection) throws {
        let total = try conn.query("SELECT count(*) AS n FROM evidence WHERE \(scope.evidenceWhere)").first?.int64("n") ?? 0
        // The newest checks, and always those a discrepancy, an action or a call of it points at (the check that opened a
        // discrepancy may be older than the newest 500 of an order checked often).
        let evidenceRows = try conn.query(
            """
            SELECT id, checked_at, source, delivery_id, answer_hashes, decided, decision::text AS decision FROM evidence
            WHERE id IN (SELECT id FROM evidence WHERE \(scope.evidenceWhere) ORDER BY id DESC LIMIT \(unescaped: checkLimit))
               OR id IN (\(scope.pinnedWhere))
            ORDER BY id DESC
            """)
        explanation.checksLeftOut = max(0, Int(total) - evidenceRows.count)
        let decidedIDs = try evidenceRows.filter { try $0.optionalString("decided") != nil }.map { try $0.int64("id") }
        let answers = try Self.answers(of: decidedIDs, bodyLimit: bodyLimit, on: conn)
        let settlement = try Self.settlementSources(
            of: try evidenceRows.filter { try $0.string("source") == CheckSource.settlement.rawValue }.map { try $0.int64("id") }, on: conn)
        explanation.checks = try evidenceRows.reversed().map { try Self.check($0, answers: answers, settlement: settlement) }
    }

    /// The answers the checks `ids` kept, in the order they were read.
    static func answers(of ids: [Int64], bodyLimit: Int?, on conn: PostgresConnection) throws -> [Int64: [Explanation.Answer]] {
        var answers: [Int64: [Explanation.Answer]] = [:]
        guard !ids.isEmpty else { return answers }
        for row in try conn.query(
            """
            SELECT evidence_id, fetched_at, method, url, status, sha256, length, body_kept,
                   \(unescaped: bodyLimit.map { "substring(body from 1 for \(max(0, $0)))" } ?? "body") AS body
            FROM evidence_answers WHERE evidence_id = ANY(\(.int64Array(ids))) ORDER BY evidence_id, position
            """)
        {
            answers[try row.int64("evidence_id"), default: []].append(
                Explanation.Answer(
                    fetchedAt: try row.date("fetched_at"), method: try row.string("method"), url: try row.string("url"),
                    status: try row.optionalInt64("status").map { Int($0) }, sha256: Self.hex(try row.bytes("sha256")),
                    length: Int(try row.int64("length")), body: try row.bool("body_kept") ? try row.bytes("body") : nil))
        }
        return answers
    }

    /// What a settlement file raised: the file and the line behind each of the checks `ids`.
    static func settlementSources(of ids: [Int64], on conn: PostgresConnection) throws -> [Int64: Explanation.SettlementSource] {
        var settlement: [Int64: Explanation.SettlementSource] = [:]
        guard !ids.isEmpty else { return settlement }
        for row in try conn.query(
            """
            SELECT s.evidence_id, f.name, f.kind, f.account, f.sha256, s.line, s.row_text
            FROM settlement_evidence s LEFT JOIN settlement_files f ON f.id = s.file_id WHERE s.evidence_id = ANY(\(.int64Array(ids)))
            """)
        {
            settlement[try row.int64("evidence_id")] = Explanation.SettlementSource(
                fileName: try row.optionalString("name"), kind: try row.optionalString("kind"), account: try row.optionalString("account"),
                sha256: try row.optionalBytes("sha256").map(Self.hex), line: try row.optionalInt64("line").map { Int($0) },
                row: try row.optionalString("row_text"))
        }
        return settlement
    }

    /// One check as the timeline shows it.
    static func check(
        _ row: PostgresRow, answers: [Int64: [Explanation.Answer]], settlement: [Int64: Explanation.SettlementSource]
    ) throws
        -> Explanation.Check
    {
        let id = try row.int64("id")
        let hashes = try row.bytes("answer_hashes")
        // A decision that does not read is said so, never shown as none (a later payrecon may add a row this one
        // does not know). What does read (the findings, the actions planned and superseded) is still shown.
        var record: DecisionRecord?, unreadable: String?, lists: [String: [String]] = [:]
        if let text = try row.optionalString("decision") {
            do { record = try JSONDecoder().decode(DecisionRecord.self, from: Data(text.utf8)) } catch {
                let stored = try? JSONValue.parse(Array(text.utf8))
                for key in ["findings", "planned", "superseded"] { lists[key] = stored?[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
                unreadable = Self.decodingReason(error, in: stored)
            }
        }
        return Explanation.Check(
            evidenceID: id, at: try row.date("checked_at"), source: try checkSource(row.string("source")),
            deliveryID: try row.optionalInt64("delivery_id"),
            hashes: stride(from: 0, to: hashes.count, by: 32).map { Self.hex(Array(hashes[$0..<min($0 + 32, hashes.count)])) },
            decided: (try row.optionalString("decided") ?? "").split(separator: " ").map(String.init).reduce(into: [String]()) { words, w in
                // "not sent" is two words.
                if w == "sent", words.last == "not" { words[words.count - 1] = "not sent" } else { words.append(w) }
            },
            decision: record?.decision, findings: record?.findings ?? lists["findings"] ?? [],
            planned: record?.planned ?? lists["planned"] ?? [],
            superseded: record?.superseded ?? lists["superseded"] ?? [],
            answers: answers[id] ?? [], decisionUnreadable: unreadable, settlement: settlement[id])
    }

    /// Deliveries that named the order (or whose check looked up the transaction).
    static func deliveries(_ scope: Scope, checkDeliveries: [Int64], on conn: PostgresConnection) throws -> [Explanation.Delivery] {
        try conn.query(
            """
            SELECT id, event_type, received_at, status, outcome, last_error FROM deliveries
            WHERE id = ANY(\(.int64Array(checkDeliveries))::bigint[]) OR id IN (SELECT delivery_id FROM delivery_orders WHERE provider = \(.text(scope.provider.rawValue)) AND order_id = \(scope.orderID.map { .text($0) } ?? .null))
            ORDER BY id
            """
        ).map { row in
            let status = try row.string("status")
            let outcome =
                status == "pending"
                ? try row.optionalString("last_error").map { "being retried: \($0)" } : try row.optionalString("outcome")
            return Explanation.Delivery(
                id: try row.int64("id"), eventType: try row.optionalString("event_type"), receivedAt: try row.date("received_at"),
                status: status, outcome: outcome)
        }
    }

    /// The calls made for one action, oldest first (each raw answer read up to `bodyLimit` bytes).
    public static func calls(of action: StoredAction, bodyLimit: Int?, on conn: PostgresConnection) throws -> [Explanation.Call] {
        try actions(provider: action.provider, orderID: action.orderID, only: action.id, bodyLimit: bodyLimit, on: conn).first?.calls ?? []
    }

    /// The order's actions, each with the calls made for it.
    /// `only`: that action of the order alone.
    static func actions(
        provider: Provider, orderID: String, only: Int64? = nil, bodyLimit: Int?, on conn: PostgresConnection
    ) throws -> [Explanation.Action] {
        let p = PostgresValue.text(provider.rawValue)
        let one: SQL = only.map { "AND id = \(.int64($0))" } ?? ""
        let actionRows = try conn.query(
            """
            SELECT id, action, amount_minor, currency, status, idempotency_key, created_at, updated_at, last_error, provider_ref, evidence_id
            FROM actions WHERE provider = \(p) AND order_id = \(.text(orderID)) \(one) ORDER BY id
            """)
        var calls: [Int64: [Explanation.Call]] = [:]
        let ids = try actionRows.map { try $0.int64("id") }
        if !ids.isEmpty {
            for row in try conn.query(
                """
                SELECT action_id, attempt, evidence_id, sent_at, method, url, idempotency_key, request_body, status, sha256, length,
                       body_kept, \(unescaped: bodyLimit.map { "substring(body from 1 for \(max(0, $0)))" } ?? "body") AS body, outcome
                FROM action_calls WHERE action_id = ANY(\(.int64Array(ids))) ORDER BY id
                """)
            {
                calls[try row.int64("action_id"), default: []].append(
                    Explanation.Call(
                        attempt: Int(try row.int64("attempt")), sentAt: try row.date("sent_at"), method: try row.string("method"),
                        url: try row.string("url"), idempotencyKey: try row.optionalString("idempotency_key"),
                        request: try row.bytes("request_body"),
                        status: try row.optionalInt64("status").map { Int($0) }, sha256: Self.hex(try row.bytes("sha256")),
                        length: Int(try row.int64("length")), body: try row.bool("body_kept") ? try row.bytes("body") : nil,
                        outcome: try row.optionalString("outcome"), evidenceID: try row.optionalInt64("evidence_id")))
            }
        }
        return try actionRows.map { row in
            let id = try row.int64("id"), code = try row.string("currency"), minor = try row.int64("amount_minor")
            return Explanation.Action(
                id: id, kind: try row.string("action"),
                amount: Currency(code: code).map { Money.format(minorUnits: minor, exponent: $0.exponent) } ?? String(minor),
                currency: code, status: try row.string("status"), idempotencyKey: try row.string("idempotency_key"),
                createdAt: try row.date("created_at"), updatedAt: try row.date("updated_at"),
                lastError: try row.optionalString("last_error"),
                providerRef: try row.optionalString("provider_ref"), evidenceID: try row.optionalInt64("evidence_id"),
                calls: calls[id] ?? [])
        }
    }

    /// The versions of the order an import replaced, oldest first, shown as the current one is.
    static func replacedVersions(provider: Provider, orderID: String, on conn: PostgresConnection) throws -> [Explanation.OrderVersion] {
        try conn.query(
            """
            SELECT valid_from, replaced_at, source, value::text AS value FROM order_versions
            WHERE provider = \(.text(provider.rawValue)) AND order_id = \(.text(orderID)) ORDER BY replaced_at
            """
        ).map { row in
            let value = (try? JSONValue.parse(try row.string("value"))) ?? .object([])
            let currency = value["currency"]?.stringValue.flatMap(Currency.init(code:))
            func field(_ name: String) -> String { value[name]?.stringValue ?? value[name]?.numberLiteral ?? "" }
            func amount(_ name: String) -> String {
                guard let minor = Int64(field(name)) else { return field(name) }
                return currency.map { Money.format(minorUnits: minor, exponent: $0.exponent) } ?? String(minor)
            }
            // The period of a version kept since sql/0024 (a jsonb timestamp), as the current one is shown.
            let start = value["period_start"]?.stringValue.flatMap({ UnixTime.scanISO8601($0, lenient: true)?.seconds }),
                end = value["period_end"]?.stringValue.flatMap({ UnixTime.scanISO8601($0, lenient: true)?.seconds })
            let period = start.flatMap { s in end.flatMap { BillingPeriod(start: s, end: $0) } }
            return Explanation.OrderVersion(
                since: try row.date("valid_from"), replacedAt: try row.date("replaced_at"), source: try row.string("source"),
                fields: [("merchant", field("merchant")), ("site", field("site")), ("transaction_ref", field("transaction_ref"))]
                    + (period.map { [("period", $0.description)] } ?? [])
                    + [
                        ("intent", field("intent")), ("amount", amount("amount_minor")), ("currency", field("currency")),
                        ("fulfilment", field("fulfilment")), ("refund_amount", amount("refund_amount_minor"))
                    ])
        }
    }

    static func discrepancy(_ row: PostgresRow) throws -> Explanation.DiscrepancyLine? {
        guard let kind = DiscrepancyKind(rawValue: try row.string("kind")) else { return nil }
        var line = Explanation.DiscrepancyLine(
            id: try row.int64("id"), kind: kind, status: try row.string("status"), detail: try row.string("detail"),
            expected: (try? JSONValue.parse(try row.string("expected"))) ?? .object([]),
            actual: (try? JSONValue.parse(try row.string("actual"))) ?? .object([]),
            firstSeen: try row.date("first_seen"), lastSeen: try row.date("last_seen"), resolvedAt: try row.optionalDate("resolved_at"),
            occurrences: Int(try row.int64("occurrences")), evidenceID: try row.optionalInt64("evidence_id"))
        line.acknowledgedAt = try row.optionalDate("acknowledged_at")
        line.acknowledgedBy = try row.optionalString("acknowledged_by")
        line.ackNote = try row.optionalString("ack_note")
        line.acknowledgedFrom = try row.optionalString("acknowledged_from")
        return line
    }

    /// What a JSONDecoder error says, in a line: the field it stopped at, why, and the value stored there (from `stored`,
    /// the document parsed; at most 200 characters of it).
    static func decodingReason(_ error: any Error, in stored: JSONValue?) -> String {
        let keys: [any CodingKey], why: String
        switch error as? DecodingError {
        case .dataCorrupted(let c)?: (keys, why) = (c.codingPath, c.debugDescription)
        case .keyNotFound(let key, let c)?: (keys, why) = (c.codingPath + [key], "missing")
        case .typeMismatch(_, let c)?, .valueNotFound(_, let c)?: (keys, why) = (c.codingPath, c.debugDescription)
        default: return "\(error)"
        }
        let path = keys.reduce("") { path, key in
            key.intValue.map { path + "[\($0)]" } ?? (path.isEmpty ? key.stringValue : path + "." + key.stringValue)
        }
        var value = stored
        for key in keys {
            if let i = key.intValue {
                value = value?.arrayValue.flatMap { i < $0.count ? $0[i] : nil }
            } else {
                value = value?[key.stringValue]
            }
        }
        let shown =
            value.map { v -> String in
                let text = String(decoding: v.serialized(), as: UTF8.self)
                return "; stored there: " + String(text.prefix(200)) + (text.count > 200 ? "…" : "")
            } ?? ""
        return "\(path.isEmpty ? "(the whole record)" : path): \(why)\(shown)"
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0x0f)]) }
        return String(decoding: out, as: UTF8.self)
    }

    static func checkSource(_ text: String) throws -> CheckSource {
        guard let source = CheckSource(rawValue: text) else {
            throw PostgresError.decoding("evidence.source '\(text)' is none this payrecon knows (a newer version wrote it?)")
        }
        return source
    }
}
