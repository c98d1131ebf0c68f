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

    /// Imports one file in one transaction: the file row; its lines streamed with COPY into a staging table as the file
    /// is read (the server stores one chunk while the reader parses the next: nothing of the file is held in memory);
    /// then, set-based, the lines no earlier file had stored, and only the lines that do not agree with the movement
    /// they name read back and judged (`SettlementRules`); then the evaluation of what settlement says as a whole.
    /// `read` streams the file's lines (and throws to reject it: nothing is kept).
    public static func importFile(
        provider: Provider, name: String, sha256: [UInt8], now: Date, deadlineSeconds: Int64,
        read: (_ each: ([SettlementLine]) throws -> Void) throws -> SettlementReportSummary,
        on conn: PostgresConnection
    ) throws -> Imported {
        // READ COMMITTED whatever the server's default: an import that waited for the lock below must see the lines the
        // one before it committed (its anti-join leaves them out).
        try conn.transaction(isolation: .readCommitted) { tx in
            // One import at a time: lines are identified across files, and the evaluation reads them all.
            _ = try tx.execute("SELECT pg_advisory_xact_lock(hashtext('payrecon.settlement'))")
            let p = PostgresValue.text(provider.rawValue)
            if let existing = try tx.query(
                "SELECT id, kind, account, to_char(day, 'YYYY-MM-DD') AS day, body_rows, problems::text AS problems FROM settlement_files WHERE provider = \(p) AND sha256 = \(.bytea(sha256))"
            ).first {
                let summary = SettlementReportSummary(
                    kind: try existing.optionalString("kind"), account: try existing.optionalString("account"),
                    day: try existing.optionalString("day"), bodyRows: Int(try existing.int64("body_rows")))
                return Imported(
                    fileID: try existing.int64("id"), alreadyImported: true, summary: summary, lines: summary.bodyRows, newLines: 0,
                    findings: [:])
            }
            guard
                let fileID = try tx.query(
                    "INSERT INTO settlement_files (provider, sha256, name, body_rows) VALUES (\(p), \(.bytea(sha256)), \(.text(name)), 0) RETURNING id"
                ).first.map({ try $0.int64("id") })
            else {
                throw PostgresError.decoding("settlement_files: no id returned")
            }
            // The import's sorts (a million lines' identities) in memory, not spilled to disk.
            _ = try tx.execute("SET LOCAL work_mem = '64MB'")
            // JIT compiling each of the import's few large statements cost more than it saved (0.19 s of the 2 s join).
            _ = try tx.execute("SET LOCAL jit = off")
            let staged = try stage(read, on: tx)
            let summary = staged.summary
            let newLines = try storeStaged(staged, fileID: fileID, provider: provider, on: tx)
            var judged = try judge(try disagreeing(fileID: fileID, provider: provider, on: tx), provider: provider, on: tx)
            // Every line stored was new: no copy of a line already kept to compare.
            if newLines < staged.lines { judged += try conflicts(fileID: fileID, provider: provider, on: tx) }
            try record(judged, provider: provider, on: tx)
            var findings: [DiscrepancyKind: Int] = [:]
            for j in judged { findings[j.finding.kind, default: 0] += 1 }

            let (account, accountNote) = try describeFile(fileID, staged: staged, newLines: newLines, provider: provider, on: tx)
            _ = try tx.execute("DROP TABLE settlement_stage")
            let evaluated = try evaluate(provider: provider, now: now, deadlineSeconds: deadlineSeconds, on: tx)
            for (kind, n) in evaluated.opened { findings[kind, default: 0] += n }
            return Imported(
                fileID: fileID, alreadyImported: false, summary: summary, lines: staged.read, newLines: newLines, pending: staged.pending,
                denied: staged.denied, accountRows: staged.accountRows, account: account, accountNote: accountNote, findings: findings)
        }
    }

    /// The staged file's account rows, kept with it, and its lines no earlier file brought (each line is kept once, by
    /// the first file to bring it); returns how many lines were new.
    static func storeStaged(_ staged: Staged, fileID: Int64, provider: Provider, on tx: PostgresConnection) throws -> Int {
        let p = PostgresValue.text(provider.rawValue)
        // Account rows are the account's own, kept with the file; lines are kept once, by the first file to bring them.
        // Lines an earlier file stored are left out by an anti-join rather than ON CONFLICT DO NOTHING, whose
        // speculative insertion of each row cost a third of the insert (3.5 of 9.8 s at a million lines): only an
        // import writes settlement_lines, and imports take turns (the advisory lock above), so no other transaction
        // can store a line between the check and the insert. Were one to, the primary key refuses the import whole.
        if staged.accountRows > 0 {
            _ = try tx.execute(
                """
                INSERT INTO settlement_account_rows (file_id, line, event_code, direction, initiated_at, completed_at, currency, gross_minor,
                                                     fee_minor, fee_direction, fee_currency)
                SELECT \(.int64(fileID)), line, event_code, direction, to_timestamp(initiated_at), to_timestamp(completed_at), currency, gross, fee,
                       CASE WHEN fee IS NULL THEN NULL ELSE fee_direction END, CASE WHEN fee IS NULL THEN NULL ELSE fee_currency END
                FROM settlement_stage WHERE account_row
                """)
        }
        return try tx.execute(
            """
            INSERT INTO settlement_lines (provider, transaction_id, event_code, direction, role, file_id, line, reference_id, reference_type,
                                          invoice_id, custom_field, initiated_at, completed_at, currency, gross_minor, fee_minor,
                                          fee_direction, fee_currency)
            SELECT DISTINCT ON (transaction_id, event_code, direction)
                   \(p), transaction_id, event_code, direction, role, \(.int64(fileID)), line, reference_id, reference_type, invoice_id, custom_field,
                   to_timestamp(initiated_at), to_timestamp(completed_at), currency, gross, fee,
                   CASE WHEN fee IS NULL THEN NULL ELSE fee_direction END, CASE WHEN fee IS NULL THEN NULL ELSE fee_currency END
            FROM settlement_stage s WHERE NOT account_row
              AND NOT EXISTS (SELECT 1 FROM settlement_lines l WHERE l.provider = \(p) AND l.transaction_id = s.transaction_id
                              AND l.event_code = s.event_code AND l.direction = s.direction)
            ORDER BY transaction_id, event_code, direction, line
            """)
    }

    /// The file's account (its header's, else the one payee its captures share, else none) and what it counts, written
    /// on its row; returns the account and what to say when the header names one the captures were not paid to.
    static func describeFile(
        _ fileID: Int64, staged: Staged, newLines: Int, provider: Provider, on tx: PostgresConnection
    ) throws
        -> (account: String?, note: String?)
    {
        let summary = staged.summary
        let payees = try self.payees(headerless: summary.account == nil, provider: provider, on: tx)
        let account = summary.account ?? (payees.count == 1 ? payees.first : nil)
        var accountNote: String?
        if let stated = summary.account, !payees.isEmpty, !payees.contains(stated) {
            accountNote =
                "its header names account \(stated), but the captures it lists were paid to \(payees.sorted().joined(separator: ", ")): "
                + "they are not judged by this file (check that the header's account is the payee's merchant id)"
        }
        _ = try tx.execute(
            """
            UPDATE settlement_files SET kind = \(summary.kind.map { .text($0) } ?? .null), account = \(account.map { .text($0) } ?? .null), day = \(summary.day.map { .text($0) } ?? .null)::date, period_start = to_timestamp(\(summary.periodStart.map { .int64($0) } ?? .null)::bigint),
                period_end = to_timestamp(\(summary.periodEnd.map { .int64($0) } ?? .null)::bigint), body_rows = \(.int64(Int64(summary.bodyRows))), lines_new = \(.int64(Int64(newLines))), problems = \(.textArray(summary.problems)), account_rows = \(.int64(Int64(staged.accountRows))),
                pending_rows = \(.int64(Int64(staged.pending))), denied_rows = \(.int64(Int64(staged.denied))), utc_offset = \(summary.utcOffset.map { .int64(Int64($0)) } ?? .null)
            WHERE id = \(.int64(fileID))
            """)
        return (account, accountNote)
    }

    /// What staging a file counted: rows read, lines staged (money that moved, with a Transaction ID), account rows,
    /// and rows not kept (pending, denied).
    struct Staged {
        var summary: SettlementReportSummary
        var read = 0, lines = 0, accountRows = 0, pending = 0, denied = 0
    }

    /// The columns of `settlement_stage`, in COPY order.
    static let stageColumns = """
        line, account_row, transaction_id, event_code, direction, role, reference_id, reference_type, invoice_id, custom_field,
        initiated_at, completed_at, currency, gross, fee, fee_direction, fee_currency, row_text
        """

    /// Reads the file into a temporary table with COPY, as it is read. A row that moved no money is not staged: a
    /// pending one waits for the later file that lists it completed, a denied one moved nothing.
    static func stage(
        _ read: (_ each: ([SettlementLine]) throws -> Void) throws -> SettlementReportSummary,
        on tx: PostgresConnection
    ) throws -> Staged {
        _ = try tx.execute(
            """
            CREATE TEMPORARY TABLE settlement_stage (
                line integer NOT NULL, account_row boolean NOT NULL, transaction_id text NOT NULL, event_code text NOT NULL,
                direction text NOT NULL, role text NOT NULL, reference_id text, reference_type text, invoice_id text, custom_field text,
                initiated_at bigint, completed_at bigint, currency text NOT NULL, gross bigint NOT NULL, fee bigint, fee_direction text,
                fee_currency text, row_text text) ON COMMIT DROP
            """)
        var staged = Staged(summary: SettlementReportSummary())
        var rows = CopyRows()
        try tx.copyIn("COPY settlement_stage (\(stageColumns)) FROM STDIN") { sender in
            staged.summary = try read { batch in
                staged.read += batch.count
                for line in batch {
                    switch line.status {
                    case .pending: staged.pending += 1; continue
                    case .denied: staged.denied += 1; continue
                    case .completed, .reversed: break
                    }
                    if line.isAccountRow { staged.accountRows += 1 } else { staged.lines += 1 }
                    rows.int(Int64(line.line)); rows.bool(line.isAccountRow); rows.text(line.transactionID); rows.text(line.eventCode)
                    rows.text(line.direction.rawValue); rows.text(line.role.rawValue); rows.text(line.referenceID);
                    rows.text(line.referenceType)
                    rows.text(line.invoiceID); rows.text(line.customField); rows.int(line.initiatedAt); rows.int(line.completedAt)
                    rows.text(line.currency.code); rows.int(line.gross); rows.int(line.fee); rows.text(line.feeDirection?.rawValue)
                    rows.text(line.feeCurrency?.code); rows.text(line.row)
                    rows.end()
                }
                try sender.send(&rows)
            }
        }
        // What the planner knows of a table it never saw decides the joins below.
        _ = try tx.execute("ANALYZE settlement_stage")
        return staged
    }

    /// The file's new lines that do not agree with the movement they name, read back to be judged: a line with no
    /// movement, or whose currency, gross, direction or fee (where the API stated one) differ. The condition is
    /// `SettlementRules.judge`'s, read the other way, and only ever lets through more than judge raises (a line it
    /// lets through is judged in full); `SettlementTests.theImportRaisesExactlyWhatTheRulesRaiseLineByLine` holds the
    /// two to each other line by line.
    static func disagreeing(fileID: Int64, provider: Provider, on tx: PostgresConnection) throws -> [SettlementLine] {
        // With the row each was read from (staged), for its evidence: joined once the few are found.
        try tx.query(
            """
            SELECT d.*, s.row_text FROM (
            SELECT DISTINCT l.transaction_id, l.event_code, l.direction, l.role, l.line, l.reference_id, l.reference_type, l.invoice_id,
                   l.custom_field, extract(epoch FROM l.initiated_at)::bigint AS initiated_at, extract(epoch FROM l.completed_at)::bigint AS completed_at,
                   l.currency, l.gross_minor, l.fee_minor, l.fee_direction, l.fee_currency, l.file_id
            FROM settlement_lines l
            LEFT JOIN movements m ON m.provider = l.provider AND m.movement_id = l.transaction_id AND (m.kind = 'capture') = (l.role = 'payment')
            WHERE l.provider = \(.text(provider.rawValue)) AND l.file_id = \(.int64(fileID)) AND l.role <> 'other'
              AND NOT coalesce(m.movement_id IS NOT NULL
                  AND l.currency = m.currency AND l.gross_minor = m.gross_minor
                  AND l.direction = CASE WHEN m.kind = 'capture' THEN 'CR' ELSE 'DR' END
                  AND (m.fee_minor IS NULL OR coalesce(l.fee_currency, l.currency) <> m.currency
                       OR (CASE WHEN m.kind = 'capture' THEN 1 ELSE -1 END)
                          * coalesce(CASE WHEN l.fee_direction = 'CR' THEN -l.fee_minor ELSE l.fee_minor END, 0) = m.fee_minor), false)
            ) d LEFT JOIN settlement_stage s ON s.line = d.line AND NOT s.account_row
            ORDER BY d.line
            """
        ).map { row in
            var line = try decodeLine(row)
            line.row = try row.optionalString("row_text")
            return line
        }
    }

    /// The accounts the file's captures were paid to, as payrecon's movements hold them: of every capture when the
    /// header names no account (the file's account is then the one they share), else of its first 1,000 (to say when
    /// the header names another).
    static func payees(headerless: Bool, provider: Provider, on tx: PostgresConnection) throws -> Set<String> {
        Set(
            try tx.query(
                """
                SELECT DISTINCT m.account FROM (SELECT transaction_id FROM settlement_stage WHERE role = 'payment' AND NOT account_row
                                                ORDER BY line LIMIT \(headerless ? .null : .int64(1_000))) s
                JOIN movements m ON m.provider = \(.text(provider.rawValue)) AND m.movement_id = s.transaction_id AND m.kind = 'capture'
                WHERE m.account IS NOT NULL
                """
            ).map { try $0.string("account") })
    }

    /// The staged lines that were not new (another file, or an earlier row of this one, brought them first) and
    /// differ from the copy kept: the same line with another amount, currency or fee is a settlement_mismatch naming
    /// both, since one of the two is wrong and which one was kept must not decide it silently.
    static func conflicts(fileID: Int64, provider: Provider, on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        let rows = try tx.query(
            """
            SELECT s.line, s.transaction_id, s.event_code, s.direction, s.currency, s.gross, s.fee, s.fee_direction, s.row_text,
                   l.gross_minor AS kept_gross, l.currency AS kept_currency, l.fee_minor AS kept_fee, l.fee_direction AS kept_fee_direction,
                   f.name AS kept_file
            FROM settlement_stage s
            JOIN settlement_lines l ON l.provider = \(.text(provider.rawValue)) AND l.transaction_id = s.transaction_id AND l.event_code = s.event_code
                                   AND l.direction = s.direction
            JOIN settlement_files f ON f.id = l.file_id
            WHERE NOT s.account_row AND NOT (l.file_id = \(.int64(fileID)) AND l.line = s.line)
              AND (l.gross_minor <> s.gross OR l.currency <> s.currency OR l.fee_minor IS DISTINCT FROM s.fee
                   OR (l.fee_minor IS NOT NULL AND l.fee_direction IS DISTINCT FROM s.fee_direction))
            ORDER BY s.line
            """)
        return try rows.map { row in
            func amount(_ minor: Int64?, _ code: String) -> String {
                minor.map { Money.format(minorUnits: $0, exponent: Currency(code: code)?.exponent ?? 2) } ?? "none"
            }
            let id = try row.string("transaction_id"), code = try row.string("event_code"), direction = try row.string("direction")
            let lineNumber = try row.int64("line"), currency = try row.string("currency"), gross = try row.int64("gross"),
                fee = try row.optionalInt64("fee")
            let keptCurrency = try row.string("kept_currency"), keptGross = try row.int64("kept_gross"),
                keptFee = try row.optionalInt64("kept_fee")
            let keptFile = try row.string("kept_file")
            guard let c = Currency(code: currency), let d = SettlementLine.Direction(rawValue: direction) else {
                throw PostgresError.decoding("settlement_stage: line \(lineNumber) does not read")
            }
            var line = SettlementLine(
                transactionID: id, eventCode: code, direction: d, role: .other, currency: c, gross: gross, line: Int(lineNumber))
            line.fileID = fileID
            line.row = try row.optionalString("row_text")
            return SettlementRules.Judged(
                finding: Finding(
                    kind: .settlementMismatch,
                    expected: ["gross": amount(keptGross, keptCurrency), "currency": keptCurrency, "fee": amount(keptFee, keptCurrency)],
                    actual: ["gross": amount(gross, currency), "currency": currency, "fee": amount(fee, currency)],
                    detail:
                        "line \(lineNumber) (\(id) \(code) \(direction)) appears again with gross \(amount(gross, currency)) \(currency), fee \(amount(fee, currency)); \(keptFile) has gross \(amount(keptGross, keptCurrency)) \(keptCurrency), fee \(amount(keptFee, keptCurrency)), the copy kept",
                    amountAtRisk: max(SettlementRules.distance(keptGross, gross), SettlementRules.distance(keptFee ?? 0, fee ?? 0))),
                orderID: nil, transactionRef: duplicatePrefix + id, currency: c, line: line)
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
        for row in try tx.query(
            """
            SELECT movement_id, kind, order_id, extract(epoch FROM occurred_at)::bigint AS at, currency, gross_minor, fee_minor, net_minor
            FROM movements WHERE provider = \(.text(provider.rawValue)) AND movement_id = ANY(\(.textArray(ids))) ORDER BY movement_id, kind
            """)
        {
            let code = try row.string("currency")
            guard let currency = Currency(code: code), let kind = Movement.Kind(rawValue: try row.string("kind")) else {
                throw PostgresError.decoding("movements: \(code) / kind unreadable")
            }
            let m = Movement(
                id: try row.string("movement_id"), kind: kind, at: try row.optionalInt64("at"), currency: currency,
                gross: try row.int64("gross_minor"), fee: try row.optionalInt64("fee_minor"), net: try row.optionalInt64("net_minor"))
            out[m.id, default: []].append(SettlementRules.Known(m, orderID: try row.string("order_id")))
        }
        return out
    }

    /// Judges lines against the movements they name (and a money-back line's parent, for its order).
    static func judge(_ lines: [SettlementLine], provider: Provider, on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        let relevant = lines.filter { $0.role != .other }
        guard !relevant.isEmpty else { return [] }
        let known = try movements(
            Array(Set(relevant.map(\.transactionID) + relevant.compactMap(\.referenceID))), provider: provider, on: tx)
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
        _ = try tx.query(
            """
            WITH f AS (
                SELECT * FROM unnest(\(.nullableTextArray(rows.map(\.orderID)))::text[], \(.textArray(rows.map(\.transactionRef)))::text[], \(.textArray(rows.map(\.finding.kind.rawValue)))::text[], \(.textArray(rows.map { json($0.finding.expected) }))::text[], \(.textArray(rows.map { json($0.finding.actual) }))::text[], \(.textArray(rows.map(\.finding.detail)))::text[], \(.int64Array(rows.map(\.finding.amountAtRisk)))::bigint[], \(.nullableTextArray(rows.map { $0.currency?.code }))::text[], \(.nullableTextArray(evidence.map { $0.map(String.init) }))::bigint[])
                    AS f(order_id, transaction_ref, kind, expected, actual, detail, amount, currency, evidence_id)),
            acknowledged AS (
                UPDATE discrepancies d SET last_seen = now(), occurrences = d.occurrences + 1, detail = f.detail, amount_at_risk_minor = f.amount,
                    evidence_id = coalesce(f.evidence_id, d.evidence_id)
                FROM f WHERE d.provider = \(.text(provider.rawValue)) AND coalesce(d.order_id, '') = coalesce(f.order_id, '') AND d.transaction_ref = f.transaction_ref
                  AND d.kind = f.kind AND d.status = 'acknowledged' AND d.expected = f.expected::jsonb AND d.actual = f.actual::jsonb
                RETURNING d.order_id, d.transaction_ref, d.kind),
            changed AS (
                UPDATE discrepancies d SET status = 'resolved', resolved_at = now()
                FROM f WHERE d.provider = \(.text(provider.rawValue)) AND coalesce(d.order_id, '') = coalesce(f.order_id, '') AND d.transaction_ref = f.transaction_ref
                  AND d.kind = f.kind AND d.status = 'acknowledged' AND NOT (d.expected = f.expected::jsonb AND d.actual = f.actual::jsonb)
                RETURNING d.id)
            INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor, currency, evidence_id)
            SELECT \(.text(provider.rawValue)), f.order_id, f.transaction_ref, f.kind, f.expected::jsonb, f.actual::jsonb, f.detail, f.amount, f.currency, f.evidence_id FROM f
            WHERE NOT EXISTS (SELECT 1 FROM acknowledged a WHERE coalesce(a.order_id, '') = coalesce(f.order_id, '')
                                AND a.transaction_ref = f.transaction_ref AND a.kind = f.kind)
            ON CONFLICT (provider, coalesce(order_id, ''), transaction_ref, kind) WHERE status = 'open' DO UPDATE SET
                last_seen = now(), occurrences = discrepancies.occurrences + 1, expected = EXCLUDED.expected, actual = EXCLUDED.actual,
                detail = EXCLUDED.detail, amount_at_risk_minor = EXCLUDED.amount_at_risk_minor, currency = EXCLUDED.currency,
                evidence_id = coalesce(EXCLUDED.evidence_id, discrepancies.evidence_id)
            """)
    }

    /// The evidence of each row that opens or changes a finding (nil for one found as it is recorded): an `evidence`
    /// row of source `settlement`, the file, line and row that raised it (`settlement_evidence`), and for a finding
    /// about an order's money a copy of the answers of that order's newest check that kept them (the check that stated
    /// the money: one whose answer stated money that moved keeps it).
    static func evidence(for rows: [SettlementRules.Judged], provider: Provider, on tx: PostgresConnection) throws -> [Int64?] {
        let p = PostgresValue.text(provider.rawValue)
        // What is recorded now, to tell a finding found as it is from one opened or changed.
        let recorded = try recordedFindings(for: rows, provider: provider, p: p, on: tx)
        let fresh = rows.indices.filter { i in
            let r = rows[i]
            guard let d = recorded[(r.orderID ?? "") + "\u{0}" + r.transactionRef + "\u{0}" + r.finding.kind.rawValue] else { return true }
            return d.bare || !d.says(r.finding)
        }
        var out = [Int64?](repeating: nil, count: rows.count)
        guard !fresh.isEmpty else { return out }
        let picked = fresh.map { rows[$0] }
        // Ids first (one per finding, in order), then the rows under them: RETURNING promises no order.
        let ids = try tx.query(
            "SELECT nextval('evidence_id_seq') AS id FROM generate_series(1, \(.int64(Int64(picked.count)))::integer) ORDER BY 1"
        )
        .map { try $0.int64("id") }
        guard ids.count == picked.count else {
            throw PostgresError.decoding("evidence: \(ids.count) ids for \(picked.count) settlement findings")
        }
        _ = try tx.execute(
            """
            INSERT INTO evidence (id, provider, order_id, transaction_ref, checked_at, source, answer_hashes, decided)
            SELECT u.id, \(p), u.order_id, u.ref, now(), 'settlement', ''::bytea, u.decided
            FROM unnest(\(.int64Array(ids))::bigint[], \(.nullableTextArray(picked.map(\.orderID)))::text[], \(.textArray(picked.map(\.transactionRef)))::text[], \(.textArray(fresh.map { recorded[(rows[$0].orderID ?? "") + "\u{0}" + rows[$0].transactionRef + "\u{0}" + rows[$0].finding.kind.rawValue] == nil ? "opened" : "changed" }))::text[]) AS u(id, order_id, ref, decided)
            """)
        _ = try tx.execute(
            """
            INSERT INTO settlement_evidence (evidence_id, file_id, line, row_text)
            SELECT u.id, u.file_id::bigint, u.line::integer, u.row_text
            FROM unnest(\(.int64Array(ids))::bigint[], \(.nullableTextArray(picked.map { $0.fileID.map(String.init) }))::text[], \(.nullableTextArray(picked.map { $0.line.map { String($0.line) } }))::text[], \(.nullableTextArray(picked.map { $0.line?.row }))::text[]) AS u(id, file_id, line, row_text)
            """)
        try copyComparedAnswers(ids: ids, picked: picked, p: p, on: tx)
        for (k, i) in fresh.enumerated() { out[i] = ids[k] }
        return out
    }

    /// The open and acknowledged findings recorded now for `rows`, by (order, transaction, kind).
    private static func recordedFindings(
        for rows: [SettlementRules.Judged], provider: Provider, p: PostgresValue, on tx: PostgresConnection
    ) throws -> [String: OpenDiscrepancy] {
        var recorded: [String: OpenDiscrepancy] = [:]
        for row in try tx.query(
            """
            SELECT d.order_id, d.transaction_ref, d.kind, d.expected::text AS expected, d.actual::text AS actual, d.detail, d.amount_at_risk_minor,
                   d.evidence_id IS NULL AS bare
            FROM discrepancies d JOIN unnest(\(.textArray(rows.map { $0.orderID ?? "" }))::text[], \(.textArray(rows.map(\.transactionRef)))::text[], \(.textArray(rows.map(\.finding.kind.rawValue)))::text[]) AS k(order_id, ref, kind)
              ON coalesce(d.order_id, '') = k.order_id AND d.transaction_ref = k.ref AND d.kind = k.kind
            WHERE d.provider = \(p) AND d.status IN ('open', 'acknowledged')
            """)
        {
            let key =
                (try row.optionalString("order_id") ?? "") + "\u{0}" + (try row.string("transaction_ref")) + "\u{0}"
                + (try row.string("kind"))
            recorded[key] = OpenDiscrepancy(
                provider: provider, orderID: try row.optionalString("order_id"),
                transactionRef: try row.string("transaction_ref"), kind: try row.string("kind"), acknowledged: false,
                expected: OpenDiscrepancy.strings(try row.string("expected")),
                actual: OpenDiscrepancy.strings(try row.string("actual")), bare: try row.bool("bare"),
                detail: try row.optionalString("detail"), amount: try row.optionalInt64("amount_at_risk_minor"))
        }
        return recorded
    }

    /// Copies into each new evidence about an order the answers its money was compared with, and their hashes.
    private static func copyComparedAnswers(
        ids: [Int64], picked: [SettlementRules.Judged], p: PostgresValue, on tx: PostgresConnection
    ) throws {
        // The answers each order's money was compared with: those of its newest check that kept its answers.
        let withOrder = zip(ids, picked).filter { $0.1.orderID != nil }
        if !withOrder.isEmpty {
            _ = try tx.execute(
                """
                INSERT INTO evidence_answers (evidence_id, position, fetched_at, method, url, status, sha256, length, body, body_kept)
                SELECT u.id, a.position, a.fetched_at, a.method, a.url, a.status, a.sha256, a.length, a.body, a.body_kept
                FROM unnest(\(.int64Array(withOrder.map(\.0)))::bigint[], \(.textArray(withOrder.map { $0.1.orderID! }))::text[]) AS u(id, order_id)
                JOIN LATERAL (SELECT e.id FROM evidence e
                              WHERE e.provider = \(p) AND e.order_id = u.order_id AND e.source <> 'settlement'
                                AND EXISTS (SELECT 1 FROM evidence_answers x WHERE x.evidence_id = e.id AND x.body_kept)
                              ORDER BY e.id DESC LIMIT 1) src ON true
                JOIN evidence_answers a ON a.evidence_id = src.id
                """)
            _ = try tx.execute(
                """
                UPDATE evidence e SET answer_hashes = coalesce((SELECT string_agg(a.sha256, ''::bytea ORDER BY a.position) FROM evidence_answers a
                                                                 WHERE a.evidence_id = e.id), ''::bytea)
                WHERE e.id = ANY(\(.int64Array(withOrder.map(\.0))))
                """)
        }
    }

    /// What settlement says as a whole, now: each open settlement discrepancy judged again (resolved when its line or
    /// movement now agree, or the day's file came), captures and refunds past the deadline that no line shows
    /// (`settlement_missing`, from the first imported file's period on), files whose counts or totals do not add up
    /// and days with no file between the first and the last (`settlement_incomplete`).
    public static func evaluate(provider: Provider, now: Date, deadlineSeconds: Int64, on tx: PostgresConnection) throws -> Evaluated {
        var result = Evaluated()
        _ = try tx.execute("SELECT pg_advisory_xact_lock(hashtext('payrecon.settlement'))")
        let p = PostgresValue.text(provider.rawValue)
        guard try tx.query("SELECT 1 FROM settlement_files WHERE provider = \(p) LIMIT 1").first != nil else { return result }
        // The findings settlement should have open now (besides those new lines opened as they were stored).
        let wanted =
            try missingMovements(provider: provider, now: Int64(now.timeIntervalSince1970), deadlineSeconds: deadlineSeconds, on: tx)
            + (try filesNotAddingUp(provider: provider, on: tx)) + (try daysWithoutAFile(provider: provider, on: tx))
        let settlementKinds = PostgresValue.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue))
        func key(_ orderID: String?, _ ref: String, _ kind: String) -> String { (orderID ?? "") + "\u{0}" + ref + "\u{0}" + kind }
        var existing = Set<String>()
        for row in try tx.query(
            """
            SELECT order_id, transaction_ref, kind FROM discrepancies
            WHERE provider = \(p) AND status IN ('open', 'acknowledged') AND kind = ANY(\(settlementKinds))
            """)
        {
            existing.insert(key(try row.optionalString("order_id"), try row.string("transaction_ref"), try row.string("kind")))
        }
        for j in wanted where !existing.contains(key(j.orderID, j.transactionRef, j.finding.kind.rawValue)) {
            result.opened[j.finding.kind, default: 0] += 1
        }
        for chunk in stride(from: 0, to: wanted.count, by: 5_000) {
            try record(Array(wanted[chunk..<min(chunk + 5_000, wanted.count)]), provider: provider, on: tx)
        }
        result.resolved = try resolveWhatNoLongerHolds(wanted: wanted, provider: provider, on: tx)
        return result
    }

    /// settlement_missing: the movements past the deadline that no line shows.
    static func missingMovements(
        provider: Provider, now nowSeconds: Int64, deadlineSeconds: Int64, on tx: PostgresConnection
    ) throws
        -> [SettlementRules.Judged]
    {
        let p = PostgresValue.text(provider.rawValue)
        var wanted: [SettlementRules.Judged] = []
        // Movements past the deadline that no file of their own account lists, from that account's
        // first file's period on: an account no file was imported for is not judged, and one account's files neither
        // judge nor excuse another's movements. Where an account is not known the rule is the file-wide one: a
        // movement of no known account (a v1 sale's answer names no payee) is judged from the first file of any
        // account, and a file of no known account (an export with no header) lists for every account.
        for row in try tx.query(
            """
            WITH coverage AS (
                SELECT account, min(coalesce(period_start, day::timestamptz)) AS start
                FROM settlement_files WHERE provider = \(p) AND account IS NOT NULL GROUP BY 1
                UNION ALL
                SELECT NULL, min(coalesce(period_start, day::timestamptz)) FROM settlement_files WHERE provider = \(p))
            SELECT movement_id, kind, order_id, extract(epoch FROM coalesce(occurred_at, first_seen))::bigint AS at, currency, gross_minor,
                   fee_minor, net_minor
            FROM movements m JOIN coverage c ON c.account IS NOT DISTINCT FROM m.account
            WHERE m.provider = \(p) AND m.kind IN ('capture', 'refund')
              AND coalesce(m.occurred_at, m.first_seen) >= coalesce(c.start, to_timestamp(\(.int64(nowSeconds))::bigint))
              AND coalesce(m.occurred_at, m.first_seen) < to_timestamp(\(.int64(nowSeconds))::bigint - \(.int64(deadlineSeconds))::bigint)
              AND NOT EXISTS (SELECT 1 FROM settlement_lines l JOIN settlement_files f ON f.id = l.file_id
                              WHERE l.provider = m.provider AND l.transaction_id = m.movement_id
                                AND l.role = CASE m.kind WHEN 'capture' THEN 'payment' ELSE 'money_back' END
                                AND (f.account IS NULL OR m.account IS NULL OR f.account = m.account))
            """)
        {
            guard let currency = Currency(code: try row.string("currency")), let kind = Movement.Kind(rawValue: try row.string("kind"))
            else { continue }
            let m = Movement(
                id: try row.string("movement_id"), kind: kind, at: try row.optionalInt64("at"), currency: currency,
                gross: try row.int64("gross_minor"), fee: try row.optionalInt64("fee_minor"), net: try row.optionalInt64("net_minor"))
            if let j = SettlementRules.missing(.init(m, orderID: try row.string("order_id")), now: nowSeconds, deadline: deadlineSeconds) {
                wanted.append(j)
            }
        }
        return wanted
    }

    /// settlement_incomplete: each file with problems (the newest file of a name stands for it).
    static func filesNotAddingUp(provider: Provider, on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        let p = PostgresValue.text(provider.rawValue)
        var wanted: [SettlementRules.Judged] = []
        for row in try tx.query(
            """
            SELECT DISTINCT ON (coalesce(kind, name), coalesce(account, ''), coalesce(day::text, name)) id, name, problems
            FROM settlement_files WHERE provider = \(p)
            ORDER BY coalesce(kind, name), coalesce(account, ''), coalesce(day::text, name), id DESC
            """)
        {
            let problems = try row.string("problems")
            guard problems != "{}" else { continue }
            let list = try tx.query("SELECT unnest(\(.text(problems))::text[]) AS p").map { try $0.string("p") }
            let name = try row.string("name")
            wanted.append(
                SettlementRules.Judged(
                    finding: Finding(
                        kind: .settlementIncomplete, expected: [:], actual: ["file": name],
                        detail: "settlement file \(name) does not add up: " + list.joined(separator: "; "), amountAtRisk: 0),
                    orderID: nil, transactionRef: "file:" + name, currency: nil, fileID: try row.int64("id")))
        }
        return wanted
    }

    /// settlement_incomplete: each day with no file between the first and the last imported.
    static func daysWithoutAFile(provider: Provider, on tx: PostgresConnection) throws -> [SettlementRules.Judged] {
        let p = PostgresValue.text(provider.rawValue)
        var wanted: [SettlementRules.Judged] = []
        // Days are judged per account and kind: a day with no STL between that account's first and last STL is missing
        // even when a TRR (or another account's file) covers it. A file of no known account covers its day for every
        // account; its own series is judged only while no file names an account (its account follows from the
        // captures it lists, which a quiet day may not have).
        for row in try tx.query(
            """
            SELECT s.account, s.kind, to_char(s.d, 'YYYY-MM-DD') AS day FROM (
                SELECT coalesce(account, '') AS account, coalesce(kind, '') AS kind,
                       generate_series(min(day), max(day), interval '1 day')::date AS d
                FROM settlement_files
                WHERE provider = \(p) AND day IS NOT NULL
                  AND (account IS NOT NULL OR NOT EXISTS (SELECT 1 FROM settlement_files a WHERE a.provider = \(p) AND a.account IS NOT NULL))
                GROUP BY 1, 2) s
            WHERE NOT EXISTS (SELECT 1 FROM settlement_files f WHERE f.provider = \(p) AND f.day = s.d AND coalesce(f.kind, '') = s.kind
                                AND (coalesce(f.account, '') = s.account OR f.account IS NULL))
            """)
        {
            let day = try row.string("day"), account = try row.string("account"), kind = try row.string("kind")
            let which = (kind.isEmpty ? "settlement file" : "\(kind) file") + (account.isEmpty ? "" : " of account \(account)")
            wanted.append(
                SettlementRules.Judged(
                    finding: Finding(
                        kind: .settlementIncomplete, expected: ["day": day, "kind": kind, "account": account], actual: [:],
                        detail: "no \(which) for \(day), a day between the first and the last imported", amountAtRisk: 0),
                    orderID: nil, transactionRef: Self.dayRef(day, kind: kind, account: account), currency: nil))
        }
        return wanted
    }

    /// Resolves the open settlement findings no longer `wanted`, and those of lines that, judged again against what
    /// payrecon knows now, no longer raise them; returns how many.
    static func resolveWhatNoLongerHolds(wanted: [SettlementRules.Judged], provider: Provider, on tx: PostgresConnection) throws -> Int {
        let p = PostgresValue.text(provider.rawValue)
        let settlementKinds = PostgresValue.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue))
        // What no longer holds is resolved: a missing or incomplete finding not wanted now, and a line's finding whose
        // lines, judged again against what payrecon knows now, no longer raise it.
        let wantedKeys = Set(wanted.map { "\($0.finding.kind.rawValue)\u{0}\($0.transactionRef)" })
        var open: [(id: Int64, kind: String, ref: String)] = []
        for row in try tx.query(
            """
            SELECT id, kind, transaction_ref FROM discrepancies WHERE provider = \(p) AND status IN ('open', 'acknowledged') AND kind = ANY(\(settlementKinds))
            """)
        {
            open.append((try row.int64("id"), try row.string("kind"), try row.string("transaction_ref")))
        }
        let lineKinds: Set = [
            DiscrepancyKind.unknownSettlement.rawValue, DiscrepancyKind.settlementMismatch.rawValue, DiscrepancyKind.feeMismatch.rawValue
        ]
        // Two copies of a line that disagree stay until acknowledged.
        open.removeAll { $0.ref.hasPrefix(duplicatePrefix) }
        let lineRefs = Array(Set(open.filter { lineKinds.contains($0.kind) }.map(\.ref)))
        var stillHeld = Set<String>()
        for chunk in stride(from: 0, to: lineRefs.count, by: 5_000) {
            let again = try judge(
                try storedLines(transactionIDs: Array(lineRefs[chunk..<min(chunk + 5_000, lineRefs.count)]), provider: provider, on: tx),
                provider: provider, on: tx)
            for j in again { stillHeld.insert("\(j.finding.kind.rawValue)\u{0}\(j.transactionRef)") }
            try record(again, provider: provider, on: tx)
        }
        let gone = open.filter { o in
            let k = "\(o.kind)\u{0}\(o.ref)"
            return lineKinds.contains(o.kind) ? !stillHeld.contains(k) : !wantedKeys.contains(k)
        }.map(\.id)
        guard !gone.isEmpty else { return 0 }
        return try tx.execute("UPDATE discrepancies SET status = 'resolved', resolved_at = now() WHERE id = ANY(\(.int64Array(gone)))")
    }

    /// The transaction_ref of a day with no file: `day:2026-12-01`, with its kind and account where the files state them
    /// (`day:2026-12-01 STL ACCT-A`).
    static func dayRef(_ day: String, kind: String, account: String) -> String {
        "day:" + day + (kind.isEmpty ? "" : " " + kind) + (account.isEmpty ? "" : " " + account)
    }

    /// The stored lines of these transaction ids.
    static func storedLines(transactionIDs: [String], provider: Provider, on tx: PostgresConnection) throws -> [SettlementLine] {
        try tx.query(
            """
            SELECT transaction_id, event_code, direction, role, line, reference_id, reference_type, invoice_id, custom_field,
                   extract(epoch FROM initiated_at)::bigint AS initiated_at, extract(epoch FROM completed_at)::bigint AS completed_at,
                   currency, gross_minor, fee_minor, fee_direction, fee_currency, file_id
            FROM settlement_lines WHERE provider = \(.text(provider.rawValue)) AND transaction_id = ANY(\(.textArray(transactionIDs)))
            """
        ).map(decodeLine)
    }

    /// A `settlement_lines` row as a line.
    static func decodeLine(_ row: PostgresRow) throws -> SettlementLine {
        guard let direction = SettlementLine.Direction(rawValue: try row.string("direction")),
            let role = SettlementLine.Role(rawValue: try row.string("role")),
            let currency = Currency(code: try row.string("currency"))
        else {
            throw PostgresError.decoding("settlement_lines: a row does not read")
        }
        var l = SettlementLine(
            transactionID: try row.string("transaction_id"), eventCode: try row.string("event_code"), direction: direction,
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
