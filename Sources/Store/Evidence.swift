import Foundation
import Postgres
import Reconciliation

/// One raw provider answer a check or a call used.
public struct EvidenceAnswer: Sendable, Equatable {
    public var method: String
    public var url: String
    /// nil: no answer (the body says what happened).
    public var status: Int?
    public var fetchedAt: Date
    /// Of the whole answer.
    public var sha256: [UInt8]
    public var length: Int
    /// Empty when not kept (`bodyKept`: past a check's bounds).
    public var body: [UInt8]
    public var bodyKept: Bool
    public init(method: String, url: String, status: Int?, fetchedAt: Date, sha256: [UInt8], length: Int, body: [UInt8], bodyKept: Bool) {
        self.method = method; self.url = url; self.status = status; self.fetchedAt = fetchedAt; self.sha256 = sha256
        self.length = length; self.body = body; self.bodyKept = bodyKept
    }
}

/// What a check keeps as evidence (sql/0017): the hashes of its answers always; the answers themselves and the
/// decision when it decided something.
public struct CheckEvidence: Sendable {
    public var source: CheckSource
    public var deliveryID: Int64?
    public var answers: [EvidenceAnswer]
    public init(source: CheckSource, deliveryID: Int64?, answers: [EvidenceAnswer]) {
        self.source = source; self.deliveryID = deliveryID; self.answers = answers
    }
}

/// What one check decided, as kept with its evidence.
struct DecisionRecord: Codable {
    var decision: Decision
    var findings: [String]
    var planned: [String]
    var superseded: [String]
}

/// A decision record as `evidence.decision` stores it (jsonb): the document `JSONEncoder` makes of it (nil optionals
/// left out, keys sorted), written directly as `SnapshotJSON` writes a snapshot. Every check that decides something
/// keeps one, and a profile of a first sweep over 100,000 orders (three in ten of its checks decide) found the encoder
/// at about 75 µs of each of those checks, on the thread that records every group. `DecisionJSONTests` holds every
/// field to the encoder's document.
enum DecisionJSON {
    static func encode(_ r: DecisionRecord) -> String {
        var w = JSONDocumentWriter()
        w.out.reserveCapacity(512)
        w.open()
        w.key("decision"); w.open()
        if let f = r.decision.figures {
            w.key("figures"); w.open()
            w.key("amount"); w.int(f.amount)
            w.key("authorised"); w.int(f.authorised)
            w.key("captured"); w.int(f.captured)
            w.key("currency"); w.currency(f.currency)
            w.key("disputed"); w.int(f.disputed)
            w.key("fulfilment"); w.string(f.fulfilment.rawValue)
            w.key("intent"); w.string(f.intent.rawValue)
            w.key("rawState"); w.string(f.rawState)
            w.key("refundAmount"); w.int(f.refundAmount)
            w.key("refunded"); w.int(f.refunded)
            w.key("reversed"); w.int(f.reversed)
            w.key("state"); w.string(f.state.rawValue)
            w.close()
        }
        w.key("fired"); w.openArray()
        for fired in r.decision.fired {
            w.element(); w.open(); w.key("row"); w.string(fired.row.rawValue); w.key("yields"); w.string(fired.yields); w.close()
        }
        w.closeArray()
        w.close()
        w.key("findings"); w.strings(r.findings)
        w.key("planned"); w.strings(r.planned)
        w.key("superseded"); w.strings(r.superseded)
        w.close()
        return String(decoding: w.out, as: UTF8.self)
    }
}

/// Writes and reads `evidence`, `evidence_answers` and `action_calls`.
public enum EvidenceStore {
    /// `SELECT nextval(...)` for `n` evidence rows: ids taken before a group is planned, so the discrepancies and
    /// actions a check writes can name its evidence in the same round trip.
    static func allocate(_ n: Int) -> SQL {
        SQL("SELECT nextval('evidence_id_seq') AS id FROM generate_series(1, \(.int64(Int64(n)))::bigint)")
    }

    /// One row to insert.
    struct Row {
        var id: Int64
        var provider: Provider
        var orderID: String?
        var transactionRef: String
        var checkedAt: Date
        var evidence: CheckEvidence
        /// Space-separated, or nil when the check decided nothing (then no answer is kept).
        var decided: String?
        var decision: String?
    }

    /// The evidence rows of a group, one statement.
    static func insert(_ rows: [Row]) throws -> SQL {
        SQL(
            """
            INSERT INTO evidence (id, provider, order_id, transaction_ref, checked_at, source, delivery_id, answer_hashes, decided, decision)
            SELECT id, provider, order_id, transaction_ref, checked_at::timestamptz, source, delivery_id, answer_hashes, decided, decision::jsonb
            FROM unnest(\(.int64Array(rows.map(\.id)))::bigint[], \(.textArray(rows.map(\.provider.rawValue)))::text[], \(.nullableTextArray(rows.map(\.orderID)))::text[], \(.textArray(rows.map(\.transactionRef)))::text[], \(.textArray(try rows.map { try PostgresValue.timestampText($0.checkedAt) }))::text[], \(.textArray(rows.map(\.evidence.source.rawValue)))::text[], \(.nullableTextArray(rows.map { $0.evidence.deliveryID.map(String.init) }))::bigint[], \(.byteaArray(rows.map { $0.evidence.answers.flatMap(\.sha256) }))::bytea[], \(.nullableTextArray(rows.map(\.decided)))::text[], \(.nullableTextArray(rows.map(\.decision)))::text[])
                 AS e(id, provider, order_id, transaction_ref, checked_at, source, delivery_id, answer_hashes, decided, decision)
            """)
    }

    /// The raw answers of the checks that decided something: one statement for all (bodies go binary).
    static func insertAnswers(_ answers: [(evidenceID: Int64, answers: [EvidenceAnswer])]) throws -> [SQL] {
        let rows = answers.flatMap { e in e.answers.enumerated().map { (e.evidenceID, Int64($0.offset), $0.element) } }
        guard !rows.isEmpty else { return [] }
        return [
            SQL(
                """
                INSERT INTO evidence_answers (evidence_id, position, fetched_at, method, url, status, sha256, length, body, body_kept)
                SELECT evidence_id, position, fetched_at::timestamptz, method, url, status::integer, sha256, length, body, body_kept
                FROM unnest(\(.int64Array(rows.map(\.0)))::bigint[], \(.int64Array(rows.map(\.1)))::bigint[], \(.textArray(try rows.map { try PostgresValue.timestampText($0.2.fetchedAt) }))::text[], \(.textArray(rows.map(\.2.method)))::text[], \(.textArray(rows.map(\.2.url)))::text[], \(.nullableTextArray(rows.map { $0.2.status.map(String.init) }))::text[], \(.byteaArray(rows.map(\.2.sha256)))::bytea[], \(.int64Array(rows.map { Int64($0.2.length) }))::bigint[],
                            \(.byteaArray(rows.map(\.2.body)))::bytea[], \(.textArray(rows.map { $0.2.bodyKept ? "true" : "false" }))::text[]::boolean[])
                     AS a(evidence_id, position, fetched_at, method, url, status, sha256, length, body, body_kept)
                """)
        ]
    }

    static func encode(_ record: DecisionRecord) -> String { DecisionJSON.encode(record) }

    /// Records evidence outside a check's group (the executor's re-fetch before a call): always with its answers.
    /// Returns its id.
    public static func record(
        provider: Provider, orderID: String?, transactionRef: String, checkedAt: Date, evidence: CheckEvidence,
        decided: String, decision: Decision, findings: [Finding], planned: [String],
        on conn: PostgresConnection
    ) throws -> Int64 {
        try conn.transaction { tx in
            guard let id = try tx.query("SELECT nextval('evidence_id_seq') AS id").first.map({ try $0.int64("id") }) else {
                throw PostgresError.protocolViolation("nextval returned no row")
            }
            let record = DecisionRecord(decision: decision, findings: findings.map(\.kind.rawValue), planned: planned, superseded: [])
            let row = Row(
                id: id, provider: provider, orderID: orderID, transactionRef: transactionRef, checkedAt: checkedAt,
                evidence: evidence, decided: decided, decision: encode(record))
            _ = try tx.pipeline([try insert([row])] + insertAnswers([(id, evidence.answers)])).map { try $0.get() }
            return id
        }
    }

    /// One call made for an action.
    public struct Call: Sendable {
        public var sentAt: Date
        public var method: String
        public var url: String
        public var idempotencyKey: String?
        public var requestBody: [UInt8]
        public var status: Int?
        public var sha256: [UInt8]
        public var length: Int
        public var body: [UInt8]
        public var bodyKept: Bool
        public init(
            sentAt: Date, method: String, url: String, idempotencyKey: String?, requestBody: [UInt8], status: Int?,
            sha256: [UInt8], length: Int, body: [UInt8], bodyKept: Bool
        ) {
            self.sentAt = sentAt; self.method = method; self.url = url; self.idempotencyKey = idempotencyKey
            self.requestBody = requestBody; self.status = status; self.sha256 = sha256; self.length = length; self.body = body
            self.bodyKept = bodyKept
        }
    }

    /// Records the calls made for an action's attempt, with the outcome the executor came to (before it records
    /// that outcome on the action: a call made is kept even when the executor lost its lease).
    public static func recordCalls(
        actionID: Int64, attempt: Int, evidenceID: Int64?, calls: [Call], outcome: String,
        on conn: PostgresConnection
    ) throws {
        guard !calls.isEmpty else { return }
        let statements = calls.map { c in
            SQL(
                """
                INSERT INTO action_calls (action_id, attempt, evidence_id, sent_at, method, url, idempotency_key, request_body, status,
                                          sha256, length, body, body_kept, outcome)
                VALUES (\(.int64(actionID)), \(.int64(Int64(attempt))), \(evidenceID.map { .int64($0) } ?? .null), \(.timestamptz(c.sentAt)), \(.text(c.method)), \(.text(c.url)), \(c.idempotencyKey.map { .text($0) } ?? .null), \(.bytea(c.requestBody)), \(c.status.map { .int64(Int64($0)) } ?? .null), \(.bytea(c.sha256)), \(.int64(Int64(c.length))), \(.bytea(c.body)), \(.bool(c.bodyKept)), \(.text(outcome)))
                """)
        }
        _ = try conn.pipeline(statements).map { try $0.get() }
    }
}
