import Foundation
import Postgres
import Reconciliation

/// `payrecon settlement import`: a provider's settlement file kept whole or not at all, its new lines judged against
/// the movements payrecon knows (`SettlementRules`), and what settlement alone opens and resolves kept true.
public enum SettlementStore {
    public struct Imported: Sendable, Equatable {
        public var fileID: Int64
        /// The same bytes were imported before (as `fileID`): nothing was done.
        public var alreadyImported: Bool
        public var summary: SettlementReportSummary
        /// Lines in the file, and those no earlier file had brought.
        public var lines: Int
        public var newLines: Int
        /// Transaction detail rows not kept: pending (a later file lists them completed) and denied (no money moved).
        public var pending: Int = 0
        public var denied: Int = 0
        /// Rows with no Transaction ID: the account's own, kept with the file.
        public var accountRows: Int = 0
        /// The account the file was judged as: its header's, else the payee its captures share (nil: none).
        public var account: String?
        /// Where the header's account names none of the payees of the captures it lists, in words: then no capture is
        /// judged by it, and that is said rather than left quiet.
        public var accountNote: String?
        /// Findings the new lines opened or counted again.
        public var findings: [DiscrepancyKind: Int]
    }

    /// What settlement evaluation opened and resolved across every file.
    public struct Evaluated: Sendable, Equatable {
        public var opened: [DiscrepancyKind: Int] = [:]
        public var resolved = 0
    }

    /// Imports one file in one transaction: the file row, its lines (in batches, each judged as it is stored), then the
    /// evaluation of what settlement says as a whole. `read` streams the file's lines (and throws to reject it).
    public static func importFile(provider: Provider, name: String, sha256: [UInt8], now: Date, deadlineSeconds: Int64,
                                  read: (_ each: ([SettlementLine]) throws -> Void) throws -> SettlementReportSummary,
                                  on conn: PostgresConnection) throws -> Imported {
        try conn.transaction { tx in
            // One import at a time: lines are identified across files, and the evaluation reads them all.
            _ = try tx.execute("SELECT pg_advisory_xact_lock(hashtext('payrecon.settlement'))")
            let p = PostgresValue.text(provider.rawValue)
            if let existing = try tx.query("SELECT id, kind, account, to_char(day, 'YYYY-MM-DD') AS day, body_rows, problems::text AS problems FROM settlement_files WHERE provider = $1 AND sha256 = $2",
                                           [p, .bytea(sha256)]).first {
                let summary = SettlementReportSummary(kind: try existing.optionalString("kind"), account: try existing.optionalString("account"),
                                                      day: try existing.optionalString("day"), bodyRows: Int(try existing.int64("body_rows")))
                return Imported(fileID: try existing.int64("id"), alreadyImported: true, summary: summary, lines: summary.bodyRows, newLines: 0, findings: [:])
            }
            guard let fileID = try tx.query("INSERT INTO settlement_files (provider, sha256, name, body_rows) VALUES ($1, $2, $3, 0) RETURNING id",
                                            [p, .bytea(sha256), .text(name)]).first.map({ try $0.int64("id") }) else {
                throw PostgresError.decoding("settlement_files: no id returned")
            }
            var lines = 0, newLines = 0, pending = 0, denied = 0, accountRows = 0
            var payees = Set<String>()
            var findings: [DiscrepancyKind: Int] = [:]
            let summary = try read { all in
                lines += all.count
                // A row that moved no money is no line: a pending one waits for the later file that lists it completed,
                // a denied one moved nothing. An account row is kept with its file, no transaction's.
                var batch: [SettlementLine] = [], account: [SettlementLine] = []
                for line in all {
                    switch line.status {
                    case .pending: pending += 1
                    case .denied: denied += 1
                    case .completed, .reversed: if line.isAccountRow { account.append(line) } else { batch.append(line) }
                    }
                }
                accountRows += account.count
                try insertAccountRows(account, fileID: fileID, on: tx)
                payees.formUnion(try self.payees(of: batch, provider: provider, on: tx))
                let inserted = try insert(batch, provider: provider, fileID: fileID, on: tx).map { var l = $0; l.fileID = fileID; return l }
                newLines += inserted.count
                var judged = try judge(inserted, provider: provider, on: tx)
                judged += try conflicts(batch.map { var l = $0; l.fileID = fileID; return l }, inserted: inserted, provider: provider, fileID: fileID, on: tx)
                try record(judged, provider: provider, on: tx)
                for j in judged { findings[j.finding.kind, default: 0] += 1 }
            }
            // The file's account: its header's, else the one payee its captures share, else none.
            let account = summary.account ?? (payees.count == 1 ? payees.first : nil)
            var accountNote: String?
            if let stated = summary.account, !payees.isEmpty, !payees.contains(stated) {
                accountNote = "its header names account \(stated), but the captures it lists were paid to \(payees.sorted().joined(separator: ", ")): "
                    + "they are not judged by this file (check that the header's account is the payee's merchant id)"
            }
            _ = try tx.execute("""
                UPDATE settlement_files SET kind = $2, account = $3, day = $4::date, period_start = to_timestamp($5::bigint),
                    period_end = to_timestamp($6::bigint), body_rows = $7, lines_new = $8, problems = $9, account_rows = $10,
                    pending_rows = $11, denied_rows = $12, utc_offset = $13
                WHERE id = $1
                """, [.int64(fileID), summary.kind.map { .text($0) } ?? .null, account.map { .text($0) } ?? .null,
                      summary.day.map { .text($0) } ?? .null, summary.periodStart.map { .int64($0) } ?? .null,
                      summary.periodEnd.map { .int64($0) } ?? .null, .int64(Int64(summary.bodyRows)), .int64(Int64(newLines)),
                      .textArray(summary.problems), .int64(Int64(accountRows)), .int64(Int64(pending)), .int64(Int64(denied)),
                      summary.utcOffset.map { .int64(Int64($0)) } ?? .null])
            let evaluated = try evaluate(provider: provider, now: now, deadlineSeconds: deadlineSeconds, on: tx)
            for (kind, n) in evaluated.opened { findings[kind, default: 0] += n }
            return Imported(fileID: fileID, alreadyImported: false, summary: summary, lines: lines, newLines: newLines, pending: pending,
                            denied: denied, accountRows: accountRows, account: account, accountNote: accountNote, findings: findings)
        }
    }

    /// The accounts the captures of a batch's payment lines were paid to (as payrecon's movements hold them).
    static func payees(of batch: [SettlementLine], provider: Provider, on tx: PostgresConnection) throws -> Set<String> {
        let ids = batch.filter { $0.role == .payment }.map(\.transactionID)
        guard !ids.isEmpty else { return [] }
        return Set(try tx.query("""
            SELECT DISTINCT account FROM movements WHERE provider = $1 AND kind = 'capture' AND movement_id = ANY($2) AND account IS NOT NULL
            """, [.text(provider.rawValue), .textArray(ids)]).map { try $0.string("account") })
    }

    /// Keeps a file's account rows (no Transaction ID) under the file and line that brought them.
    static func insertAccountRows(_ rows: [SettlementLine], fileID: Int64, on tx: PostgresConnection) throws {
        guard !rows.isEmpty else { return }
        _ = try tx.execute("""
            INSERT INTO settlement_account_rows (file_id, line, event_code, direction, initiated_at, completed_at, currency, gross_minor,
                                                 fee_minor, fee_direction, fee_currency)
            SELECT $1, u.line, u.code, u.direction, to_timestamp(u.initiated::bigint), to_timestamp(u.completed::bigint), u.currency, u.gross,
                   u.fee::bigint, u.fee_direction, u.fee_currency
            FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[],
                        $11::text[]) AS u(line, code, direction, initiated, completed, currency, gross, fee, fee_direction, fee_currency)
            """, [.int64(fileID), .int64Array(rows.map { Int64($0.line) }), .textArray(rows.map(\.eventCode)),
                  .textArray(rows.map(\.direction.rawValue)), .nullableTextArray(rows.map { $0.initiatedAt.map(String.init) }),
                  .nullableTextArray(rows.map { $0.completedAt.map(String.init) }), .textArray(rows.map(\.currency.code)),
                  .int64Array(rows.map(\.gross)), .nullableTextArray(rows.map { $0.fee.map(String.init) }),
                  .nullableTextArray(rows.map { $0.fee == nil ? nil : $0.feeDirection?.rawValue }),
                  .nullableTextArray(rows.map { $0.fee == nil ? nil : $0.feeCurrency?.code })])
    }

    /// Stores a batch; returns the lines no earlier file had (a line is (transaction id, event code, direction)).
    static func insert(_ batch: [SettlementLine], provider: Provider, fileID: Int64, on tx: PostgresConnection) throws -> [SettlementLine] {
        func opt(_ v: String?) -> String? { v }
        let rows = try tx.query("""
            INSERT INTO settlement_lines (provider, transaction_id, event_code, direction, role, file_id, line, reference_id, reference_type,
                                          invoice_id, custom_field, initiated_at, completed_at, currency, gross_minor, fee_minor,
                                          fee_direction, fee_currency)
            SELECT DISTINCT ON (l.transaction_id, l.event_code, l.direction)
                   $1, l.transaction_id, l.event_code, l.direction, l.role, $2, l.line, l.reference_id, l.reference_type, l.invoice_id,
                   l.custom_field, to_timestamp(l.initiated_at), to_timestamp(l.completed_at), l.currency, l.gross, l.fee, l.fee_direction,
                   l.fee_currency
            FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[],
                        $12::text[], $13::text[], $14::text[], $15::bigint[], $16::text[], $17::text[], $18::text[], $19::bigint[])
                 AS u(transaction_id, event_code, direction, role, line, reference_id, reference_type, invoice_id, custom_field,
                      initiated_at_t, completed_at_t, currency, gross, fee_t, fee_direction, fee_currency, n),
                 LATERAL (SELECT u.*, u.initiated_at_t::bigint AS initiated_at, u.completed_at_t::bigint AS completed_at,
                                 u.fee_t::bigint AS fee) l
            ORDER BY l.transaction_id, l.event_code, l.direction, l.n
            ON CONFLICT DO NOTHING
            RETURNING transaction_id, event_code, direction
            """, [.text(provider.rawValue), .int64(fileID),
                  .textArray(batch.map(\.transactionID)), .textArray(batch.map(\.eventCode)), .textArray(batch.map(\.direction.rawValue)),
                  .textArray(batch.map(\.role.rawValue)), .int64Array(batch.map { Int64($0.line) }),
                  .nullableTextArray(batch.map(\.referenceID)), .nullableTextArray(batch.map(\.referenceType)),
                  .nullableTextArray(batch.map(\.invoiceID)), .nullableTextArray(batch.map(\.customField)),
                  .nullableTextArray(batch.map { $0.initiatedAt.map(String.init) }), .nullableTextArray(batch.map { $0.completedAt.map(String.init) }),
                  .textArray(batch.map(\.currency.code)), .int64Array(batch.map(\.gross)),
                  .nullableTextArray(batch.map { $0.fee.map(String.init) }), .nullableTextArray(batch.map { $0.feeDirection?.rawValue }),
                  .nullableTextArray(batch.map { $0.feeCurrency?.code }), .int64Array(batch.indices.map(Int64.init))])
        var inserted = Set<String>()
        for row in rows { inserted.insert(try row.string("transaction_id") + "\u{0}" + row.string("event_code") + "\u{0}" + row.string("direction")) }
        var seen = Set<String>()
        return batch.filter { l in
            let key = l.transactionID + "\u{0}" + l.eventCode + "\u{0}" + l.direction.rawValue
            return inserted.contains(key) && seen.insert(key).inserted
        }
    }

    /// The lines of a batch that were not new: each is compared with the line kept under the same identity (from an
    /// earlier file, or earlier in this one). The same line with another amount, currency or fee is a
    /// settlement_mismatch: one of the two copies is wrong, and which one was kept must not decide it silently.
    static func conflicts(_ batch: [SettlementLine], inserted: [SettlementLine], provider: Provider, fileID: Int64,
                          on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        func key(_ l: SettlementLine) -> String { l.transactionID + "\u{0}" + l.eventCode + "\u{0}" + l.direction.rawValue }
        var kept = Set(inserted.map { key($0) }.map { $0 + "\u{0}first" })
        var repeated: [SettlementLine] = []
        for l in batch {
            // The first copy of each new line was stored; every other copy is compared.
            if kept.remove(key(l) + "\u{0}first") == nil { repeated.append(l) }
        }
        guard !repeated.isEmpty else { return [] }
        var stored: [String: (gross: Int64, currency: String, fee: Int64?, feeDirection: String?, file: String)] = [:]
        for row in try tx.query("""
            SELECT l.transaction_id, l.event_code, l.direction, l.gross_minor, l.currency, l.fee_minor, l.fee_direction, f.name
            FROM settlement_lines l JOIN settlement_files f ON f.id = l.file_id
            JOIN unnest($2::text[], $3::text[], $4::text[]) AS k(id, code, direction)
              ON l.transaction_id = k.id AND l.event_code = k.code AND l.direction = k.direction
            WHERE l.provider = $1
            """, [.text(provider.rawValue), .textArray(repeated.map(\.transactionID)), .textArray(repeated.map(\.eventCode)),
                  .textArray(repeated.map(\.direction.rawValue))]) {
            stored[try row.string("transaction_id") + "\u{0}" + row.string("event_code") + "\u{0}" + row.string("direction")] =
                (try row.int64("gross_minor"), try row.string("currency"), try row.optionalInt64("fee_minor"), try row.optionalString("fee_direction"),
                 try row.string("name"))
        }
        return repeated.compactMap { l in
            guard let s = stored[key(l)] else { return nil }
            let feeDirection = l.fee == nil ? nil : l.feeDirection?.rawValue
            guard s.gross != l.gross || s.currency != l.currency.code || s.fee != l.fee || (s.fee != nil && s.feeDirection != feeDirection) else { return nil }
            func amount(_ minor: Int64?, _ code: String) -> String {
                minor.map { Money.format(minorUnits: $0, exponent: Currency(code: code)?.exponent ?? 2) } ?? "none"
            }
            return SettlementRules.Judged(
                finding: Finding(kind: .settlementMismatch,
                                 expected: ["gross": amount(s.gross, s.currency), "currency": s.currency, "fee": amount(s.fee, s.currency)],
                                 actual: ["gross": amount(l.gross, l.currency.code), "currency": l.currency.code, "fee": amount(l.fee, l.currency.code)],
                                 detail: "line \(l.line) (\(l.transactionID) \(l.eventCode) \(l.direction.rawValue)) appears again with gross \(amount(l.gross, l.currency.code)) \(l.currency.code), fee \(amount(l.fee, l.currency.code)); \(s.file) has gross \(amount(s.gross, s.currency)) \(s.currency), fee \(amount(s.fee, s.currency)), the copy kept",
                                 amountAtRisk: max(SettlementRules.distance(s.gross, l.gross), SettlementRules.distance(s.fee ?? 0, l.fee ?? 0))),
                orderID: nil, transactionRef: duplicatePrefix + l.transactionID, currency: l.currency, line: l)
        }
    }

    /// The transaction_ref of a settlement_mismatch between two copies of one line: it stays until acknowledged
    /// (no later file can say which copy was right).
    static let duplicatePrefix = "copies:"

    /// The movements of `ids`, by id (a capture and a refund never share one; a reversal record may share its id
    /// with nothing else either).
    static func movements(_ ids: [String], provider: Provider, on tx: PostgresConnection) throws -> [String: [SettlementRules.Known]] {
        guard !ids.isEmpty else { return [:] }
        var out: [String: [SettlementRules.Known]] = [:]
        for row in try tx.query("""
            SELECT movement_id, kind, order_id, extract(epoch FROM occurred_at)::bigint AS at, currency, gross_minor, fee_minor, net_minor
            FROM movements WHERE provider = $1 AND movement_id = ANY($2)
            """, [.text(provider.rawValue), .textArray(ids)]) {
            let code = try row.string("currency")
            guard let currency = Currency(code: code), let kind = Movement.Kind(rawValue: try row.string("kind")) else {
                throw PostgresError.decoding("movements: \(code) / kind unreadable")
            }
            let m = Movement(id: try row.string("movement_id"), kind: kind, at: try row.optionalInt64("at"), currency: currency,
                             gross: try row.int64("gross_minor"), fee: try row.optionalInt64("fee_minor"), net: try row.optionalInt64("net_minor"))
            out[m.id, default: []].append(SettlementRules.Known(m, orderID: try row.string("order_id")))
        }
        return out
    }

    /// Judges lines against the movements they name (and a money-back line's parent, for its order).
    static func judge(_ lines: [SettlementLine], provider: Provider, on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        let relevant = lines.filter { $0.role != .other }
        guard !relevant.isEmpty else { return [] }
        let known = try movements(Array(Set(relevant.map(\.transactionID) + relevant.compactMap(\.referenceID))), provider: provider, on: tx)
        return relevant.flatMap { line in
            let matched = SettlementRules.movement(for: line, among: known[line.transactionID] ?? [])
            let parent = matched == nil ? line.referenceID.flatMap { known[$0]?.first { $0.movement.kind == .capture } } : nil
            return SettlementRules.judge(line, matched: matched, parent: parent)
        }
    }

    /// Opens settlement findings, or counts them again (one statement for them all); an acknowledged one with the
    /// same values stays acknowledged, one whose values changed is resolved and the finding opens anew — as a check's.
    /// A finding opened, or found with other values, detail or amount, takes new evidence (`evidence` of source
    /// `settlement`): the file and line that raised it, the row as read, and a copy of the answer that stated the money
    /// it was compared with; one found as it was keeps its evidence.
    static func record(_ judged: [SettlementRules.Judged], provider: Provider, on tx: PostgresConnection) throws {
        guard !judged.isEmpty else { return }
        // One finding per (order, transaction, kind): the last wins (an upsert may not touch a row twice).
        var byKey: [String: SettlementRules.Judged] = [:], order: [String] = []
        for j in judged {
            let key = (j.orderID ?? "") + "\u{0}" + j.transactionRef + "\u{0}" + j.finding.kind.rawValue
            if byKey.updateValue(j, forKey: key) == nil { order.append(key) }
        }
        let rows = order.map { byKey[$0]! }
        let evidence = try self.evidence(for: rows, provider: provider, on: tx)
        let json = FindingStore.json
        _ = try tx.query("""
            WITH f AS (
                SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[])
                    AS f(order_id, transaction_ref, kind, expected, actual, detail, amount, currency, evidence_id)),
            acknowledged AS (
                UPDATE discrepancies d SET last_seen = now(), occurrences = d.occurrences + 1, detail = f.detail, amount_at_risk_minor = f.amount,
                    evidence_id = coalesce(f.evidence_id, d.evidence_id)
                FROM f WHERE d.provider = $1 AND coalesce(d.order_id, '') = coalesce(f.order_id, '') AND d.transaction_ref = f.transaction_ref
                  AND d.kind = f.kind AND d.status = 'acknowledged' AND d.expected = f.expected::jsonb AND d.actual = f.actual::jsonb
                RETURNING d.order_id, d.transaction_ref, d.kind),
            changed AS (
                UPDATE discrepancies d SET status = 'resolved', resolved_at = now()
                FROM f WHERE d.provider = $1 AND coalesce(d.order_id, '') = coalesce(f.order_id, '') AND d.transaction_ref = f.transaction_ref
                  AND d.kind = f.kind AND d.status = 'acknowledged' AND NOT (d.expected = f.expected::jsonb AND d.actual = f.actual::jsonb)
                RETURNING d.id)
            INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor, currency, evidence_id)
            SELECT $1, f.order_id, f.transaction_ref, f.kind, f.expected::jsonb, f.actual::jsonb, f.detail, f.amount, f.currency, f.evidence_id FROM f
            WHERE NOT EXISTS (SELECT 1 FROM acknowledged a WHERE coalesce(a.order_id, '') = coalesce(f.order_id, '')
                                AND a.transaction_ref = f.transaction_ref AND a.kind = f.kind)
            ON CONFLICT (provider, coalesce(order_id, ''), transaction_ref, kind) WHERE status = 'open' DO UPDATE SET
                last_seen = now(), occurrences = discrepancies.occurrences + 1, expected = EXCLUDED.expected, actual = EXCLUDED.actual,
                detail = EXCLUDED.detail, amount_at_risk_minor = EXCLUDED.amount_at_risk_minor, currency = EXCLUDED.currency,
                evidence_id = coalesce(EXCLUDED.evidence_id, discrepancies.evidence_id)
            """, [.text(provider.rawValue), .nullableTextArray(rows.map(\.orderID)), .textArray(rows.map(\.transactionRef)),
                  .textArray(rows.map(\.finding.kind.rawValue)), .textArray(rows.map { json($0.finding.expected) }),
                  .textArray(rows.map { json($0.finding.actual) }), .textArray(rows.map(\.finding.detail)),
                  .int64Array(rows.map(\.finding.amountAtRisk)), .nullableTextArray(rows.map { $0.currency?.code }),
                  .nullableTextArray(evidence.map { $0.map(String.init) })])
    }

    /// The evidence of each row that opens or changes a finding (nil for one found as it is recorded): an `evidence`
    /// row of source `settlement`, the file, line and row that raised it (`settlement_evidence`), and for a finding
    /// about an order's money a copy of the answers of that order's newest check that kept them (the check that stated
    /// the money: one whose answer stated money that moved keeps it).
    static func evidence(for rows: [SettlementRules.Judged], provider: Provider, on tx: PostgresConnection) throws -> [Int64?] {
        let p = PostgresValue.text(provider.rawValue)
        // What is recorded now, to tell a finding found as it is from one opened or changed.
        var recorded: [String: OpenDiscrepancy] = [:]
        for row in try tx.query("""
            SELECT d.order_id, d.transaction_ref, d.kind, d.expected::text AS expected, d.actual::text AS actual, d.detail, d.amount_at_risk_minor,
                   d.evidence_id IS NULL AS bare
            FROM discrepancies d JOIN unnest($2::text[], $3::text[], $4::text[]) AS k(order_id, ref, kind)
              ON coalesce(d.order_id, '') = k.order_id AND d.transaction_ref = k.ref AND d.kind = k.kind
            WHERE d.provider = $1 AND d.status IN ('open', 'acknowledged')
            """, [p, .textArray(rows.map { $0.orderID ?? "" }), .textArray(rows.map(\.transactionRef)), .textArray(rows.map(\.finding.kind.rawValue))]) {
            let key = (try row.optionalString("order_id") ?? "") + "\u{0}" + (try row.string("transaction_ref")) + "\u{0}" + (try row.string("kind"))
            recorded[key] = OpenDiscrepancy(provider: provider.rawValue, orderID: try row.optionalString("order_id"),
                                            transactionRef: try row.string("transaction_ref"), kind: try row.string("kind"), acknowledged: false,
                                            expected: OpenDiscrepancy.strings(try row.string("expected")),
                                            actual: OpenDiscrepancy.strings(try row.string("actual")), bare: try row.bool("bare"),
                                            detail: try row.optionalString("detail"), amount: try row.optionalInt64("amount_at_risk_minor"))
        }
        let fresh = rows.indices.filter { i in
            let r = rows[i]
            guard let d = recorded[(r.orderID ?? "") + "\u{0}" + r.transactionRef + "\u{0}" + r.finding.kind.rawValue] else { return true }
            return d.bare || !(OpenDiscrepancy.same(d.expected, r.finding.expected) && OpenDiscrepancy.same(d.actual, r.finding.actual)
                               && d.detail == r.finding.detail && d.amount == r.finding.amountAtRisk)
        }
        var out = [Int64?](repeating: nil, count: rows.count)
        guard !fresh.isEmpty else { return out }
        let picked = fresh.map { rows[$0] }
        // Ids first (one per finding, in order), then the rows under them: RETURNING promises no order.
        let ids = try tx.query("SELECT nextval('evidence_id_seq') AS id FROM generate_series(1, $1::integer) ORDER BY 1", [.int64(Int64(picked.count))])
            .map { try $0.int64("id") }
        guard ids.count == picked.count else { throw PostgresError.decoding("evidence: \(ids.count) ids for \(picked.count) settlement findings") }
        _ = try tx.execute("""
            INSERT INTO evidence (id, provider, order_id, transaction_ref, checked_at, source, answer_hashes, decided)
            SELECT u.id, $1, u.order_id, u.ref, now(), 'settlement', ''::bytea, u.decided
            FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(id, order_id, ref, decided)
            """, [p, .int64Array(ids), .nullableTextArray(picked.map(\.orderID)), .textArray(picked.map(\.transactionRef)),
                  .textArray(fresh.map { recorded[(rows[$0].orderID ?? "") + "\u{0}" + rows[$0].transactionRef + "\u{0}" + rows[$0].finding.kind.rawValue] == nil ? "opened" : "changed" })])
        _ = try tx.execute("""
            INSERT INTO settlement_evidence (evidence_id, file_id, line, row_text)
            SELECT u.id, u.file_id::bigint, u.line::integer, u.row_text
            FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS u(id, file_id, line, row_text)
            """, [.int64Array(ids), .nullableTextArray(picked.map { $0.fileID.map(String.init) }),
                  .nullableTextArray(picked.map { $0.line.map { String($0.line) } }), .nullableTextArray(picked.map { $0.line?.rowText })])
        // The answers each order's money was compared with: those of its newest check that kept its answers.
        let withOrder = zip(ids, picked).filter { $0.1.orderID != nil }
        if !withOrder.isEmpty {
            _ = try tx.execute("""
                INSERT INTO evidence_answers (evidence_id, position, fetched_at, method, url, status, sha256, length, body, body_kept)
                SELECT u.id, a.position, a.fetched_at, a.method, a.url, a.status, a.sha256, a.length, a.body, a.body_kept
                FROM unnest($2::bigint[], $3::text[]) AS u(id, order_id)
                JOIN LATERAL (SELECT e.id FROM evidence e
                              WHERE e.provider = $1 AND e.order_id = u.order_id AND e.source <> 'settlement'
                                AND EXISTS (SELECT 1 FROM evidence_answers x WHERE x.evidence_id = e.id AND x.body_kept)
                              ORDER BY e.id DESC LIMIT 1) src ON true
                JOIN evidence_answers a ON a.evidence_id = src.id
                """, [p, .int64Array(withOrder.map(\.0)), .textArray(withOrder.map { $0.1.orderID! })])
            _ = try tx.execute("""
                UPDATE evidence e SET answer_hashes = coalesce((SELECT string_agg(a.sha256, ''::bytea ORDER BY a.position) FROM evidence_answers a
                                                                 WHERE a.evidence_id = e.id), ''::bytea)
                WHERE e.id = ANY($1)
                """, [.int64Array(withOrder.map(\.0))])
        }
        for (k, i) in fresh.enumerated() { out[i] = ids[k] }
        return out
    }

    /// What settlement says as a whole, now: each open settlement discrepancy judged again (resolved when its line or
    /// movement now agree, or the day's file came), captures and refunds past the deadline that no line shows
    /// (`settlement_missing`, from the first imported file's period on), files whose counts or totals do not add up
    /// and days with no file between the first and the last (`settlement_incomplete`).
    public static func evaluate(provider: Provider, now: Date, deadlineSeconds: Int64, on tx: PostgresConnection) throws -> Evaluated {
        var result = Evaluated()
        _ = try tx.execute("SELECT pg_advisory_xact_lock(hashtext('payrecon.settlement'))")
        let p = PostgresValue.text(provider.rawValue)
        let nowSeconds = Int64(now.timeIntervalSince1970)
        guard try tx.query("SELECT 1 FROM settlement_files WHERE provider = $1 LIMIT 1", [p]).first != nil else { return result }

        // The findings settlement should have open now (besides those new lines opened as they were stored).
        var wanted: [SettlementRules.Judged] = []
        // settlement_missing: movements past the deadline that no file of their own account lists, from that account's
        // first file's period on (an account no file was imported for is not judged; no account's files judge or
        // excuse another's movements; "no account" is an account of its own).
        for row in try tx.query("""
            WITH coverage AS (
                SELECT coalesce(account, '') AS account, min(coalesce(period_start, day::timestamptz)) AS start
                FROM settlement_files WHERE provider = $1 GROUP BY 1)
            SELECT movement_id, kind, order_id, extract(epoch FROM coalesce(occurred_at, first_seen))::bigint AS at, currency, gross_minor,
                   fee_minor, net_minor
            FROM movements m JOIN coverage c ON c.account = coalesce(m.account, '')
            WHERE m.provider = $1 AND m.kind IN ('capture', 'refund')
              AND coalesce(m.occurred_at, m.first_seen) >= coalesce(c.start, to_timestamp($2::bigint))
              AND coalesce(m.occurred_at, m.first_seen) < to_timestamp($2::bigint - $3::bigint)
              AND NOT EXISTS (SELECT 1 FROM settlement_lines l JOIN settlement_files f ON f.id = l.file_id
                              WHERE l.provider = m.provider AND l.transaction_id = m.movement_id
                                AND l.role = CASE m.kind WHEN 'capture' THEN 'payment' ELSE 'money_back' END
                                AND coalesce(f.account, '') = coalesce(m.account, ''))
            """, [p, .int64(nowSeconds), .int64(deadlineSeconds)]) {
            guard let currency = Currency(code: try row.string("currency")), let kind = Movement.Kind(rawValue: try row.string("kind")) else { continue }
            let m = Movement(id: try row.string("movement_id"), kind: kind, at: try row.optionalInt64("at"), currency: currency,
                             gross: try row.int64("gross_minor"), fee: try row.optionalInt64("fee_minor"), net: try row.optionalInt64("net_minor"))
            if let j = SettlementRules.missing(.init(m, orderID: try row.string("order_id")), now: nowSeconds, deadline: deadlineSeconds) { wanted.append(j) }
        }
        // settlement_incomplete: each file with problems (the newest file of a name stands for it), each day with no file.
        for row in try tx.query("""
            SELECT DISTINCT ON (coalesce(kind, name), coalesce(account, ''), coalesce(day::text, name)) id, name, problems
            FROM settlement_files WHERE provider = $1
            ORDER BY coalesce(kind, name), coalesce(account, ''), coalesce(day::text, name), id DESC
            """, [p]) {
            let problems = try row.string("problems")
            guard problems != "{}" else { continue }
            let list = try tx.query("SELECT unnest($1::text[]) AS p", [.text(problems)]).map { try $0.string("p") }
            let name = try row.string("name")
            wanted.append(SettlementRules.Judged(
                finding: Finding(kind: .settlementIncomplete, expected: [:], actual: ["file": name],
                                 detail: "settlement file \(name) does not add up: " + list.joined(separator: "; "), amountAtRisk: 0),
                orderID: nil, transactionRef: "file:" + name, currency: nil, fileID: try row.int64("id")))
        }
        // Days are judged per account and kind: a day with no STL between that account's first and last STL is missing
        // even when a TRR (or another account's file) covers it.
        for row in try tx.query("""
            SELECT s.account, s.kind, to_char(s.d, 'YYYY-MM-DD') AS day FROM (
                SELECT coalesce(account, '') AS account, coalesce(kind, '') AS kind,
                       generate_series(min(day), max(day), interval '1 day')::date AS d
                FROM settlement_files WHERE provider = $1 AND day IS NOT NULL GROUP BY 1, 2) s
            WHERE NOT EXISTS (SELECT 1 FROM settlement_files f WHERE f.provider = $1 AND f.day = s.d
                                AND coalesce(f.account, '') = s.account AND coalesce(f.kind, '') = s.kind)
            """, [p]) {
            let day = try row.string("day"), account = try row.string("account"), kind = try row.string("kind")
            let which = (kind.isEmpty ? "settlement file" : "\(kind) file") + (account.isEmpty ? "" : " of account \(account)")
            wanted.append(SettlementRules.Judged(
                finding: Finding(kind: .settlementIncomplete, expected: ["day": day, "kind": kind, "account": account], actual: [:],
                                 detail: "no \(which) for \(day), a day between the first and the last imported", amountAtRisk: 0),
                orderID: nil, transactionRef: Self.dayRef(day, kind: kind, account: account), currency: nil))
        }
        let settlementKinds = PostgresValue.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue))
        func key(_ orderID: String?, _ ref: String, _ kind: String) -> String { (orderID ?? "") + "\u{0}" + ref + "\u{0}" + kind }
        var existing = Set<String>()
        for row in try tx.query("""
            SELECT order_id, transaction_ref, kind FROM discrepancies
            WHERE provider = $1 AND status IN ('open', 'acknowledged') AND kind = ANY($2)
            """, [p, settlementKinds]) {
            existing.insert(key(try row.optionalString("order_id"), try row.string("transaction_ref"), try row.string("kind")))
        }
        for j in wanted where !existing.contains(key(j.orderID, j.transactionRef, j.finding.kind.rawValue)) {
            result.opened[j.finding.kind, default: 0] += 1
        }
        for chunk in stride(from: 0, to: wanted.count, by: 5_000) {
            try record(Array(wanted[chunk..<min(chunk + 5_000, wanted.count)]), provider: provider, on: tx)
        }
        // What no longer holds is resolved: a missing or incomplete finding not wanted now, and a line's finding whose
        // lines, judged again against what payrecon knows now, no longer raise it.
        let wantedKeys = Set(wanted.map { "\($0.finding.kind.rawValue)\u{0}\($0.transactionRef)" })
        var open: [(id: Int64, kind: String, ref: String)] = []
        for row in try tx.query("""
            SELECT id, kind, transaction_ref FROM discrepancies WHERE provider = $1 AND status IN ('open', 'acknowledged') AND kind = ANY($2)
            """, [p, settlementKinds]) {
            open.append((try row.int64("id"), try row.string("kind"), try row.string("transaction_ref")))
        }
        let lineKinds: Set = [DiscrepancyKind.unknownSettlement.rawValue, DiscrepancyKind.settlementMismatch.rawValue, DiscrepancyKind.feeMismatch.rawValue]
        // Two copies of a line that disagree stay until acknowledged.
        open.removeAll { $0.ref.hasPrefix(duplicatePrefix) }
        let lineRefs = Array(Set(open.filter { lineKinds.contains($0.kind) }.map(\.ref)))
        var stillHeld = Set<String>()
        for chunk in stride(from: 0, to: lineRefs.count, by: 5_000) {
            let again = try judge(try storedLines(transactionIDs: Array(lineRefs[chunk..<min(chunk + 5_000, lineRefs.count)]), provider: provider, on: tx),
                                  provider: provider, on: tx)
            for j in again { stillHeld.insert("\(j.finding.kind.rawValue)\u{0}\(j.transactionRef)") }
            try record(again, provider: provider, on: tx)
        }
        let gone = open.filter { o in
            let k = "\(o.kind)\u{0}\(o.ref)"
            return lineKinds.contains(o.kind) ? !stillHeld.contains(k) : !wantedKeys.contains(k)
        }.map(\.id)
        if !gone.isEmpty {
            result.resolved = try tx.execute("UPDATE discrepancies SET status = 'resolved', resolved_at = now() WHERE id = ANY($1)", [.int64Array(gone)])
        }
        return result
    }

    /// The transaction_ref of a day with no file: `day:2026-12-01`, with its kind and account where the files state them
    /// (`day:2026-12-01 STL ACCT-A`).
    static func dayRef(_ day: String, kind: String, account: String) -> String {
        "day:" + day + (kind.isEmpty ? "" : " " + kind) + (account.isEmpty ? "" : " " + account)
    }

    /// The stored lines of these transaction ids.
    static func storedLines(transactionIDs: [String], provider: Provider, on tx: PostgresConnection) throws -> [SettlementLine] {
        try tx.query("""
            SELECT transaction_id, event_code, direction, role, line, reference_id, reference_type, invoice_id, custom_field,
                   extract(epoch FROM initiated_at)::bigint AS initiated_at, extract(epoch FROM completed_at)::bigint AS completed_at,
                   currency, gross_minor, fee_minor, fee_direction, fee_currency, file_id
            FROM settlement_lines WHERE provider = $1 AND transaction_id = ANY($2)
            """, [.text(provider.rawValue), .textArray(transactionIDs)]).map { row in
            guard let direction = SettlementLine.Direction(rawValue: try row.string("direction")),
                  let role = SettlementLine.Role(rawValue: try row.string("role")),
                  let currency = Currency(code: try row.string("currency")) else {
                throw PostgresError.decoding("settlement_lines: a row does not read")
            }
            var l = SettlementLine(transactionID: try row.string("transaction_id"), eventCode: try row.string("event_code"), direction: direction,
                                   role: role, referenceID: try row.optionalString("reference_id"), referenceType: try row.optionalString("reference_type"),
                                   invoiceID: try row.optionalString("invoice_id"), customField: try row.optionalString("custom_field"),
                                   initiatedAt: try row.optionalInt64("initiated_at"), completedAt: try row.optionalInt64("completed_at"),
                                   currency: currency, gross: try row.int64("gross_minor"), line: Int(try row.int64("line")))
            l.fee = try row.optionalInt64("fee_minor")
            l.feeDirection = try row.optionalString("fee_direction").flatMap(SettlementLine.Direction.init(rawValue:))
            l.feeCurrency = try row.optionalString("fee_currency").flatMap { Currency(code: $0) }
            l.fileID = try row.int64("file_id")
            return l
        }
    }
}
