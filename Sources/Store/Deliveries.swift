import Foundation
import Observability
import Postgres
import Reconciliation
import TextFormats

/// A verified delivery, ready to be stored.
public struct NewDelivery: Sendable {
    public var provider: Provider
    public var dedupeKey: String
    public var eventType: String?
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// PayPal's PAYPAL-TRANSMISSION-ID: a stored delivery with it and another body refuses this one.
    public var transmissionID: String?
    public init(
        provider: Provider, dedupeKey: String, eventType: String?, headers: [(String, String)], body: [UInt8],
        transmissionID: String? = nil
    ) {
        self.provider = provider; self.dedupeKey = dedupeKey; self.eventType = eventType; self.headers = headers; self.body = body
        self.transmissionID = transmissionID
    }
}

/// A delivery answered 4xx, kept for audit.
public struct Rejection: Sendable {
    /// The first 8 KiB of a rejected body, and of its headers, are kept in a sample.
    public static let maxBodyPrefix = 8 * 1024
    public static let maxHeaderBytes = 8 * 1024
    public var provider: Provider
    public var reason: String
    public var message: String
    public var headers: [(String, String)]
    public var bodyPrefix: [UInt8]
    public var bodyBytes: Int64
    public var remoteAddress: String?
    public init(
        provider: Provider, reason: String, message: String, headers: [(String, String)], body: [UInt8], bodyBytes: Int64? = nil,
        remoteAddress: String?
    ) {
        self.provider = provider; self.reason = reason; self.message = message; self.headers = Self.bounded(headers)
        self.bodyPrefix = Array(body.prefix(Self.maxBodyPrefix)); self.bodyBytes = bodyBytes ?? Int64(body.count)
        self.remoteAddress = remoteAddress
    }
}

extension Rejection {
    /// The headers as kept in a sample: in order, up to `maxHeaderBytes` of names and values; a value that would pass
    /// it is cut, and what is left out is said in a last entry.
    static func bounded(_ headers: [(String, String)]) -> [(String, String)] {
        var room = maxHeaderBytes
        var kept: [(String, String)] = []
        for (index, (name, value)) in headers.enumerated() {
            let size = name.utf8.count + value.utf8.count
            if size <= room { kept.append((name, value)); room -= size; continue }
            if name.utf8.count < room {
                kept.append((name, String(decoding: value.utf8.prefix(room - name.utf8.count), as: UTF8.self)))
            }
            kept.append(
                ("payrecon-truncated", "headers past 8 KiB not kept (\(headers.count - index) of \(headers.count) cut or left out)"))
            break
        }
        return kept
    }
}

/// How many deliveries were rejected for one reason, from one address, in one hour (unix seconds of its start).
public struct RejectionCount: Sendable, Hashable {
    public var provider: Provider
    public var reason: String
    public var source: String
    public var hour: Int64
    public var count: Int64
    public init(provider: Provider, reason: String, source: String, hour: Int64, count: Int64) {
        self.provider = provider; self.reason = reason; self.source = source; self.hour = hour; self.count = count
    }
}

/// Where a delivery landed: its row id, and whether this call stored it or found it already stored.
public struct StoredDelivery: Sendable, Equatable {
    public var id: Int64
    public var inserted: Bool
    /// Not stored, and why (its transmission id is already stored with another body): answered 401.
    public var refused: String?
    public init(id: Int64, inserted: Bool, refused: String? = nil) { self.id = id; self.inserted = inserted; self.refused = refused }

    public static func refused(_ why: String) -> StoredDelivery { StoredDelivery(id: 0, inserted: false, refused: why) }
}

/// SQL for the durable inbox. Group commit: many deliveries in one transaction, sent as one
/// pipeline (BEGIN; INSERT…; COMMIT) so a batch costs one round trip and one fsync.
public enum DeliveryStore {
    public static let channel = "payrecon_deliveries"
    /// `statement_timeout` of the receiver's commits unless told otherwise: the commit deadline's default
    /// (PAYRECON_COMMIT_TIMEOUT, 5 s). A statement still running at the deadline has been answered 503 already.
    public static let commitStatementTimeoutMilliseconds = 5000

    /// Commits `deliveries` in one transaction; returns one result per delivery, in order. (Rejections are written by
    /// `recordRejections`, in transactions of their own.)
    /// Identical (provider, dedupe key) pairs within the batch are stored once and all get that row's id
    /// (the first one `inserted` if the row is new). Throws if the transaction did not commit.
    public static func commit(
        _ deliveries: [NewDelivery], on conn: PostgresConnection,
        statementTimeoutMilliseconds: Int = commitStatementTimeoutMilliseconds
    ) throws -> [StoredDelivery] {
        // In-batch dedupe: ON CONFLICT cannot touch the same row twice in one transaction's statement sequence
        // without waiting on itself, and one row per key is what we want anyway.
        let (unique, mapping, extra) = dedupeWithinBatch(deliveries)
        // The receiver's durability does not depend on the server's defaults: the commit waits for the
        // WAL flush, and no statement runs longer than the commit deadline. SET LOCAL ends with the transaction, so
        // nothing is left on the session (PgBouncer in transaction mode hands it to someone else next).
        var statements: [SQL] = [
            SQL("BEGIN"), SQL("SET LOCAL synchronous_commit = on"),
            SQL("SET LOCAL statement_timeout = '\(unescaped: max(1, statementTimeoutMilliseconds))ms'")
        ]
        var insertIndex = statements.count
        if !unique.isEmpty {
            // One INSERT for the batch, its rows as arrays: one parse, plan and executor start whatever the batch size
            // (a VALUES list of seven parameters a row was parsed and planned anew for every batch).
            // Rows in key order: two receivers inserting overlapping keys then lock them in the same order and
            // cannot deadlock each other.
            let rows = unique.indices.sorted { deliveries[unique[$0]].dedupeKey < deliveries[unique[$1]].dedupeKey }
                .map { (d: deliveries[unique[$0]], extra: extra[$0], arrival: Int64(unique[$0])) }
            // A transmission id already stored with another body is refused: PayPal signs a CRC32 of the body, which
            // a different body can match. `transmissions` holds one body hash per transmission id, under a primary key:
            // the first body of a batch, or of two receivers' concurrent batches, is the one recorded (a second insert
            // waits for the first's transaction, then does nothing), and the INSERT below (a statement of its own, so
            // it sees what committed meanwhile) stores only deliveries whose body is the recorded one. Refused rows are
            // simply not in RETURNING.
            let signed = rows.filter { $0.d.transmissionID != nil }
            if !signed.isEmpty {
                statements.append(recordTransmissions(signed))
            }
            insertIndex = statements.count
            statements.append(insertDeliveries(rows))
        }
        if !unique.isEmpty { statements.append(SQL("SELECT pg_notify(\(.text(channel)), '')")) }
        statements.append(SQL("COMMIT"))

        let results = try conn.pipeline(statements)
        // Any failure means the transaction did not commit (the pipeline aborts after the first error).
        for result in results { _ = try result.get() }
        let stored = try storedDeliveries(
            deliveries, unique: unique, extra: extra, results: results, insertIndex: insertIndex)
        return deliveries.indices.map { i in
            let s = stored[mapping[i]]
            if s.refused != nil { return s }
            // Only the first of identical deliveries in a batch is the one that inserted.
            let isFirst = unique[mapping[i]] == i
            return StoredDelivery(id: s.id, inserted: s.inserted && isFirst)
        }
    }

    /// The batch with identical (provider, dedupe key) pairs folded: `unique` holds each pair's first delivery,
    /// `mapping` each delivery's place in `unique`, `extra` how many copies beyond the first each one had.
    private static func dedupeWithinBatch(_ deliveries: [NewDelivery]) -> (unique: [Int], mapping: [Int], extra: [Int64]) {
        var firstIndex: [String: Int] = [:]
        var unique: [Int] = []
        var mapping = [Int](repeating: 0, count: deliveries.count)
        var extra: [Int64] = []  // identical deliveries in this batch beyond the first: redeliveries too
        for (i, d) in deliveries.enumerated() {
            let key = d.provider.rawValue + "\u{0}" + d.dedupeKey
            if let j = firstIndex[key] {
                mapping[i] = j; extra[j] += 1
            } else {
                firstIndex[key] = unique.count; mapping[i] = unique.count; unique.append(i); extra.append(0)
            }
        }
        return (unique, mapping, extra)
    }

    /// The INSERT that records each signed delivery's body hash under its transmission id, unless one is recorded.
    private static func recordTransmissions(_ signed: [(d: NewDelivery, extra: Int64, arrival: Int64)]) -> SQL {
        SQL(
            """
            INSERT INTO transmissions (provider, transmission_id, body_sha256)
            SELECT v.provider, v.transmission_id, sha256(v.body)
            FROM unnest(\(.textArray(signed.map(\.d.provider.rawValue)))::text[], \(.textArray(signed.map { $0.d.transmissionID ?? "" }))::text[], \(.byteaArray(signed.map(\.d.body)))::bytea[], \(.int64Array(signed.map(\.arrival)))::bigint[]) AS v(provider, transmission_id, body, arrival)
            -- One lock order for every receiver (no deadlock between two); within one id, the first to arrive.
            ORDER BY v.transmission_id, v.arrival
            ON CONFLICT (provider, transmission_id) DO NOTHING
            """)
    }

    /// The batch's one INSERT of deliveries (a stored one counts a redelivery instead), returning every row it stored.
    private static func insertDeliveries(_ rows: [(d: NewDelivery, extra: Int64, arrival: Int64)]) -> SQL {
        SQL(
            """
            INSERT INTO deliveries (provider, dedupe_key, event_type, headers, body, redeliveries, last_redelivered_at, transmission_id)
            SELECT v.provider, v.dedupe_key, v.event_type, v.headers::jsonb, v.body, v.redeliveries,
                   CASE WHEN v.redeliveries > 0 THEN now() END, v.transmission_id
            FROM unnest(\(.textArray(rows.map(\.d.provider.rawValue)))::text[], \(.textArray(rows.map(\.d.dedupeKey)))::text[], \(.nullableTextArray(rows.map(\.d.eventType)))::text[], \(.textArray(rows.map { headersJSON($0.d.headers) }))::text[], \(.byteaArray(rows.map(\.d.body)))::bytea[], \(.int64Array(rows.map { $0.extra }))::bigint[], \(.nullableTextArray(rows.map(\.d.transmissionID)))::text[])
                 WITH ORDINALITY AS v(provider, dedupe_key, event_type, headers, body, redeliveries, transmission_id, n)
            WHERE v.transmission_id IS NULL OR EXISTS (
                SELECT 1 FROM transmissions t WHERE t.provider = v.provider AND t.transmission_id = v.transmission_id
                AND t.body_sha256 = sha256(v.body))
            ORDER BY v.n
            ON CONFLICT (provider, dedupe_key) DO UPDATE
                SET redeliveries = deliveries.redeliveries + 1 + excluded.redeliveries, last_redelivered_at = now()
            RETURNING id, redeliveries, provider, dedupe_key
            """)
    }

    /// One result per unique delivery, in `unique`'s order, read from the committed INSERT's rows: its row, or refused
    /// when its transmission id is stored with another body. Throws if a delivery got no row and had no such id.
    private static func storedDeliveries(
        _ deliveries: [NewDelivery], unique: [Int], extra: [Int64], results: [Result<PostgresRows, PostgresError>],
        insertIndex: Int
    ) throws -> [StoredDelivery] {
        // Inserted or updated, told apart by the count alone (serve's role may read no system column such as xmax):
        // an insert stores the batch's own extra copies, an update adds at least one to what was stored.
        var extraByKey: [String: Int64] = [:]
        for (j, i) in unique.enumerated() { extraByKey[deliveries[i].provider.rawValue + "\u{0}" + deliveries[i].dedupeKey] = extra[j] }
        var byKey: [String: StoredDelivery] = [:]
        if !unique.isEmpty {
            for row in try results[insertIndex].get() {
                let key = try row.string("provider") + "\u{0}" + row.string("dedupe_key")
                byKey[key] = StoredDelivery(id: try row.int64("id"), inserted: try row.int64("redeliveries") == extraByKey[key])
            }
        }
        var stored: [StoredDelivery] = []
        for i in unique {
            let d = deliveries[i]
            guard let s = byKey[d.provider.rawValue + "\u{0}" + d.dedupeKey] else {
                guard let tid = d.transmissionID else {
                    throw PostgresError.protocolViolation("INSERT … RETURNING gave no row for a delivery")
                }
                stored.append(.refused("\(d.provider.rawValue) transmission id \(tid) is already stored with another body"))
                continue
            }
            stored.append(s)
        }
        return stored
    }

    /// Which of `keys` (a provider's event ids) a stored delivery already has: what `insertListed` would not store.
    public static func storedKeys(provider: Provider, among keys: [String], on conn: PostgresConnection) throws -> Set<String> {
        guard !keys.isEmpty else { return [] }
        return Set(
            try conn.query(
                "SELECT dedupe_key FROM deliveries WHERE provider = \(.text(provider.rawValue)) AND dedupe_key = ANY(\(.textArray(keys)))"
            ).map { try $0.string("dedupe_key") })
    }

    /// Stores events a provider's own list holds as deliveries (`payrecon backfill`), in one transaction: each one no
    /// delivery brought is inserted, pending, with `source` as its only header, and the worker woken; one already
    /// stored is left as it is (not counted as a redelivery: nothing was delivered). Returns how many were new.
    public static func insertListed(
        provider: Provider, events: [(id: String, eventType: String?, body: [UInt8])], source: String,
        on conn: PostgresConnection
    ) throws -> Int {
        guard !events.isEmpty else { return 0 }
        return try conn.transaction { conn in
            let stored = try conn.query(
                """
                INSERT INTO deliveries (provider, dedupe_key, event_type, headers, body)
                SELECT \(.text(provider.rawValue)), v.id, v.event_type, \(.text(headersJSON([("payrecon-source", source)])))::jsonb, v.body
                FROM unnest(\(.textArray(events.map(\.id)))::text[], \(.nullableTextArray(events.map(\.eventType)))::text[], \(.byteaArray(events.map(\.body)))::bytea[]) AS v(id, event_type, body)
                ORDER BY v.id
                ON CONFLICT (provider, dedupe_key) DO NOTHING
                RETURNING id
                """
            ).count
            if stored > 0 { _ = try conn.execute("SELECT pg_notify(\(.text(channel)), '')") }
            return stored
        }
    }

    /// Samples kept per (provider, reason, hour), and per (provider, reason, day).
    public static let samplesPerHour = 20
    public static let samplesPerDay = 100
    /// Rows of `rejection_counts` an hour, over every provider and reason and every receiver sharing the database
    /// (about 130 bytes each with its index entries: some 260 KiB an hour, 6 MiB a day at worst): past them a source
    /// not yet counted this hour is counted as `other` (one more row per provider and reason).
    public static let countedSourcesPerHour = 2000
    /// The transaction-scoped advisory lock receivers take turns under to count rejections.
    static let rejectionCountsLock: Int64 = 0x5245_4A43  // "REJC"

    /// Records rejections in one short transaction of their own (never in a delivery's): the counts added up, and
    /// each sample stored only while its (provider, reason, hour) has fewer than `samplesPerHour` and its (provider,
    /// reason, day) fewer than `samplesPerDay`. Returns the
    /// samples stored.
    @discardableResult
    public static func recordRejections(_ counts: [RejectionCount], samples: [Rejection], on conn: PostgresConnection) throws -> Int {
        var statements = [SQL("BEGIN")]
        if !counts.isEmpty {
            // A source already counted this hour adds to its row; new ones get rows, in order, while the hour holds
            // fewer than `countedSourcesPerHour` (all providers, reasons and receivers), and the rest count as `other`.
            // The hour's rows are counted once per statement, and receivers take turns (a transaction-scoped lock), so
            // the bound holds across them and a flood of new sources costs one count, not one per source.
            statements.append(SQL("SELECT pg_advisory_xact_lock(\(unescaped: rejectionCountsLock))"))
            statements.append(
                SQL(
                    """
                    WITH x AS (
                        SELECT x.p, x.r, x.s, to_timestamp(x.h) AS hr, x.c,
                               EXISTS (SELECT 1 FROM rejection_counts rc WHERE rc.provider = x.p AND rc.reason = x.r AND rc.source = x.s
                                       AND rc.hour = to_timestamp(x.h)) AS seen
                        FROM unnest(\(.textArray(counts.map(\.provider.rawValue)))::text[], \(.textArray(counts.map(\.reason)))::text[], \(.textArray(counts.map(\.source)))::text[], \(.int64Array(counts.map(\.hour)))::bigint[], \(.int64Array(counts.map(\.count)))::bigint[]) AS x(p, r, s, h, c)),
                    held AS (
                        SELECT hs.hr, (SELECT count(*) FROM rejection_counts rc WHERE rc.hour = hs.hr) AS n FROM (SELECT DISTINCT hr FROM x) hs),
                    ranked AS (
                        SELECT x.*, row_number() OVER (PARTITION BY x.hr, x.seen ORDER BY x.p, x.r, x.s) AS rank FROM x)
                    INSERT INTO rejection_counts (provider, reason, source, hour, count)
                    SELECT m.p, m.r, m.src, m.hr, sum(m.c) FROM (
                        SELECT k.p, k.r, k.hr, k.c,
                               CASE WHEN k.seen OR (SELECT held.n FROM held WHERE held.hr = k.hr) + k.rank <= \(.int64(Int64(countedSourcesPerHour))) THEN k.s ELSE 'other' END AS src
                        FROM ranked k) m
                    GROUP BY m.p, m.r, m.src, m.hr
                    ON CONFLICT (provider, reason, source, hour) DO UPDATE SET count = rejection_counts.count + EXCLUDED.count
                    """))
        }
        for r in samples {
            statements.append(
                SQL(
                    """
                    INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes, remote_addr)
                    SELECT \(.text(r.provider.rawValue)), \(.text(r.reason)), \(.text(r.message)), \(.jsonb(headersJSON(r.headers)))::jsonb, \(.bytea(r.bodyPrefix)), \(.int64(r.bodyBytes)), \(r.remoteAddress.map { .text($0) } ?? .null)
                    WHERE (SELECT count(*) FROM rejected_deliveries WHERE provider = \(.text(r.provider.rawValue)) AND reason = \(.text(r.reason))
                           AND received_at >= date_trunc('hour', now())) < \(.int64(Int64(samplesPerHour)))
                      AND (SELECT count(*) FROM rejected_deliveries WHERE provider = \(.text(r.provider.rawValue)) AND reason = \(.text(r.reason))
                           AND received_at >= date_trunc('day', now())) < \(.int64(Int64(samplesPerDay)))
                    """))
        }
        statements.append(SQL("COMMIT"))
        let results = try conn.pipeline(statements).map { try $0.get() }
        // BEGIN, [counts], one INSERT per sample, COMMIT: the samples' rows are the ones before COMMIT.
        return results.suffix(samples.count + 1).dropLast().reduce(0) { $0 + $1.affectedRows }
    }

    /// A kept rejected-delivery sample, as `payrecon doctor` reads it (unauthenticated: anyone could have sent it).
    public struct StoredRejection: Sendable {
        public var id: Int64
        public var message: String
        public var headers: [(String, String)]
        public var receivedAt: Date
    }

    /// The provider's most recent sample refused for `reason` (an index reads it: provider, reason, received_at).
    public static func latestRejection(provider: Provider, reason: String, on conn: PostgresConnection) throws -> StoredRejection? {
        try conn.query(
            """
            SELECT id, message, headers::text AS headers, received_at FROM rejected_deliveries
            WHERE provider = \(.text(provider.rawValue)) AND reason = \(.text(reason)) ORDER BY received_at DESC, id DESC LIMIT 1
            """
        ).first.map {
            StoredRejection(
                id: try $0.int64("id"), message: try $0.string("message"),
                headers: DeliveryQueue.decodeHeaders(try $0.string("headers")), receivedAt: try $0.date("received_at"))
        }
    }

    /// Headers as a JSON array of [name, value] pairs (order and repeats kept), e.g. `[["Host","a"],["X-Id","7"]]`.
    ///
    /// On the receiver's hot path (every delivery), so built in one pass into one preallocated buffer: a string with
    /// nothing to escape (almost every header) is copied whole. Escaping is the same as `Log.jsonString`: `\"`, `\\`,
    /// `\n`, `\r`, `\t`, other control characters as `\u00xx` (NUL, which jsonb refuses, as U+FFFD), everything else
    /// (DEL, non-ASCII) as is.
    public static func headersJSON(_ headers: [(String, String)]) -> String {
        var capacity = 2
        for (name, value) in headers { capacity += name.utf8.count + value.utf8.count + 8 }
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out.append(UInt8(ascii: "["))
        for (i, (name, value)) in headers.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            JSONValue.writeString(jsonbSafe(name), into: &out)
            out.append(UInt8(ascii: ","))
            JSONValue.writeString(jsonbSafe(value), into: &out)
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// jsonb cannot hold U+0000 (`\u0000` is refused, failing the whole group commit): a NUL a sender put in a header
    /// is stored as U+FFFD. Nothing else is changed.
    static func jsonbSafe(_ s: String) -> String { storable(s) }

    /// Text that says what happened (a delivery's outcome, an action's last error, a run's errors) may quote what a
    /// provider or a sender sent: a NUL in it is stored as U+FFFD, since PostgreSQL's text and jsonb hold none and one
    /// refused row would fail the statement that records a whole batch, again on every try.
    static func storable(_ s: String) -> String {
        s.withoutNUL
    }

    /// Deliveries waiting for the worker (for /metrics).
    public static func pendingCount(on conn: PostgresConnection) throws -> Int64 {
        try conn.query("SELECT count(*) AS n FROM deliveries WHERE status = 'pending'").first.map { try $0.int64("n") } ?? 0
    }
}

/// Kept rejected-delivery samples, as `payrecon rejections list|show` reads them (unauthenticated: anyone could have
/// sent them).
public enum RejectionSamples {
    public struct Sample: Sendable {
        public var id: Int64
        public var provider: Provider
        public var reason: String
        public var message: String
        public var headers: [(String, String)]
        public var bodyPrefix: [UInt8]
        public var bodyBytes: Int64
        public var source: String?
        public var receivedAt: Date

        /// The headers as `payrecon verify --headers` reads them: a JSON object, the first value of each name.
        public var headersJSON: [UInt8] {
            var object: [String: String] = [:]
            for (name, value) in headers where object[name] == nil { object[name] = value }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])) ?? Data("{}".utf8)
            return Array(data)
        }
    }

    /// What `sample` reads of a row.
    static let columns = "id, provider, reason, message, headers::text AS headers, body_prefix, body_bytes, remote_addr, received_at"

    /// Newest first, optionally of one provider and reason.
    public static func list(provider: Provider?, reason: String?, limit: Int, on conn: PostgresConnection) throws -> [Sample] {
        try conn.query(
            """
            SELECT \(unescaped: columns)
            FROM rejected_deliveries WHERE (\(provider.map { .text($0.rawValue) } ?? .null)::text IS NULL OR provider = \(provider.map { .text($0.rawValue) } ?? .null)) AND (\(reason.map { .text($0) } ?? .null)::text IS NULL OR reason = \(reason.map { .text($0) } ?? .null))
            ORDER BY received_at DESC, id DESC LIMIT \(.int64(Int64(limit)))
            """
        ).map(sample)
    }

    public static func find(id: Int64, on conn: PostgresConnection) throws -> Sample? {
        try conn.query(
            """
            SELECT \(unescaped: columns)
            FROM rejected_deliveries WHERE id = \(.int64(id))
            """
        ).first.map(sample)
    }

    static func sample(_ row: PostgresRow) throws -> Sample {
        Sample(
            id: try row.int64("id"), provider: try row.provider("provider"), reason: try row.string("reason"),
            message: try row.string("message"), headers: DeliveryQueue.decodeHeaders(try row.string("headers")),
            bodyPrefix: try row.bytes("body_prefix"), bodyBytes: try row.int64("body_bytes"),
            source: try row.optionalString("remote_addr"), receivedAt: try row.date("received_at"))
    }
}
