import Foundation
import Postgres
import Reconciliation

/// What one check of one order changed in the database.
public struct CheckOutcome: Sendable, Equatable {
    public var opened = 0
    public var resolved = 0
    public var stillOpen = 0
    public var actionsEmitted = 0
    public var superseded = 0
    /// Findings that matched an acknowledged discrepancy (counted there, not reopened).
    public var acknowledged = 0
    public init() {}
}

/// Records a plan: discrepancies open/count/resolve, actions into the outbox, the latest snapshot. One transaction
/// per order, under a per-order advisory lock so a webhook and the sweep checking the same order don't interleave.
public enum FindingStore {
    /// Actions already emitted for an order (the planner's memory).
    public static func emitted(provider: Provider, orderID: String, on conn: PostgresConnection) throws -> [EmittedAction] {
        try conn.query(emittedSQL, [.text(provider.rawValue), .text(orderID)]).compactMap(decodeEmitted)
    }

    /// The actions of one order, oldest first (also read under the order's lock by `record`).
    static let emittedSQL = "SELECT idempotency_key, action, status, amount_minor FROM actions WHERE provider = $1 AND order_id = $2 ORDER BY id"

    /// One finding: an acknowledged discrepancy with the same kind, expected and actual values stays acknowledged
    /// (it is counted, not reopened); an acknowledged one whose values changed is resolved and the finding opens a
    /// new row; otherwise the open row is counted or a new one opened. `inserted` is true for a new row, false for
    /// a counted open one; no row at all means the acknowledged one was counted.
    static let upsertFinding = """
        WITH acknowledged AS (
            UPDATE discrepancies SET last_seen = now(), occurrences = occurrences + 1, detail = $7::text, amount_at_risk_minor = $8::bigint
            WHERE provider = $1 AND coalesce(order_id, '') = coalesce($2::text, '') AND transaction_ref = $3 AND kind = $4
              AND status = 'acknowledged' AND expected = $5::jsonb AND actual = $6::jsonb
            RETURNING id),
        changed AS (
            UPDATE discrepancies SET status = 'resolved', resolved_at = now()
            WHERE provider = $1 AND coalesce(order_id, '') = coalesce($2::text, '') AND transaction_ref = $3 AND kind = $4
              AND status = 'acknowledged' AND NOT (expected = $5::jsonb AND actual = $6::jsonb)
            RETURNING id)
        INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor, currency)
        SELECT $1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::jsonb, $7::text, $8::bigint, $9::text WHERE NOT EXISTS (SELECT 1 FROM acknowledged)
        ON CONFLICT (provider, coalesce(order_id, ''), transaction_ref, kind) WHERE status = 'open' DO UPDATE SET
            last_seen = now(), occurrences = discrepancies.occurrences + 1, expected = EXCLUDED.expected,
            actual = EXCLUDED.actual, detail = EXCLUDED.detail, amount_at_risk_minor = EXCLUDED.amount_at_risk_minor,
            currency = EXCLUDED.currency
        RETURNING (xmax = 0) AS inserted
        """

    /// `payrecon discrepancies ack ID --note`: an open discrepancy leaves the open set and the money at risk; the
    /// note and the time are kept. Returns the row as acknowledged, or nil when there is no open discrepancy `id`
    /// (`status` then says what it is, if it exists).
    public static func acknowledge(id: Int64, note: String?, on conn: PostgresConnection) throws -> (acknowledged: Bool, status: String?) {
        let rows = try conn.query("""
            UPDATE discrepancies SET status = 'acknowledged', acknowledged_at = now(), ack_note = $2
            WHERE id = $1 AND status = 'open' RETURNING id
            """, [.int64(id), note.map { .text($0) } ?? .null])
        if !rows.isEmpty { return (true, "acknowledged") }
        let status = try conn.query("SELECT status FROM discrepancies WHERE id = $1", [.int64(id)]).first?.string("status")
        return (false, status)
    }

    /// One check to record: what was fetched, and the pure planner to run on the order and its actions as stored
    /// under the order's lock.
    public struct Check: Sendable {
        public var provider: Provider
        /// nil: a transaction no order holds (`unknown_order`); `plan` then gets nil and no actions.
        public var order: Order?
        public var transactionRef: String
        public var snapshot: Snapshot?
        public var fetchedAt: Date
        public var currency: String?
        public var transactionRefs: [String]
        /// `snapshot` as stored, encoded beforehand so no pooled connection waits on the encoder.
        public var snapshotJSON: String?
        public var plan: @Sendable (Order?, [EmittedAction]) -> Plan

        public init(provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
                    currency: String? = nil, transactionRefs: [String]? = nil, snapshotJSON: String? = nil,
                    plan: @escaping @Sendable (Order?, [EmittedAction]) -> Plan) {
            self.provider = provider; self.order = order; self.transactionRef = transactionRef; self.snapshot = snapshot
            self.fetchedAt = fetchedAt; self.currency = currency; self.transactionRefs = transactionRefs ?? [transactionRef]
            self.snapshotJSON = snapshotJSON; self.plan = plan
        }

        /// The advisory lock the check is recorded under: one per order (or per unknown transaction).
        public var lockKey: String { "\(provider.rawValue):\(order?.orderID ?? "?" + transactionRef)" }
    }

    /// Plans and records one check under the order's lock (see `record(_:on:)`).
    public static func record(provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
                              currency: String? = nil, transactionRefs: [String]? = nil, snapshotJSON: String? = nil,
                              plan: @escaping @Sendable (Order?, [EmittedAction]) -> Plan,
                              on conn: PostgresConnection) throws -> (outcome: CheckOutcome, plan: Plan)? {
        try record([Check(provider: provider, order: order, transactionRef: transactionRef, snapshot: snapshot, fetchedAt: fetchedAt,
                          currency: currency, transactionRefs: transactionRefs, snapshotJSON: snapshotJSON, plan: plan)], on: conn)[0]
    }

    /// Plans and records checks, each under its order's lock, so checks of one order in any number of processes are
    /// serialized and each plans from what the one before it recorded. Many checks share one transaction and its
    /// two round trips (the sweep's and the worker's checks are grouped by `CheckRecorder`); no two may share a
    /// lock key, since the second would plan from reads taken before the first wrote.
    ///
    /// The round trips: (BEGIN, then per check in lock-key order — so two groups never wait on each other in a cycle
    /// — its advisory lock, the order as stored now, its actions, when its stored snapshot was fetched), then `plan`
    /// — pure — on those, then (every check's findings, supersessions, actions and snapshot, COMMIT). A snapshot
    /// fetched before the stored one is older news: that check records nothing and its result is nil (the newer
    /// check planned already), as when its order is gone. One failing statement rolls back the whole group.
    public static func record(_ checks: [Check], on conn: PostgresConnection) throws -> [(outcome: CheckOutcome, plan: Plan)?] {
        guard !checks.isEmpty else { return [] }
        guard Set(checks.map(\.lockKey)).count == checks.count else {
            throw PostgresError.protocolViolation("two checks of one order in one transaction: record them one after the other")
        }
        let order = checks.indices.sorted { checks[$0].lockKey < checks[$1].lockKey }
        var reads: [PostgresStatement] = [PostgresStatement("BEGIN")]
        var firstRead = [Int](repeating: 0, count: checks.count)
        for i in order {
            let check = checks[i]
            let p = PostgresValue.text(check.provider.rawValue)
            reads.append(PostgresStatement("SELECT pg_advisory_xact_lock(hashtext($1))", [.text(check.lockKey)]))
            firstRead[i] = reads.count
            if let orderID = check.order?.orderID {
                reads.append(PostgresStatement("SELECT \(OrderStore.selectColumns) FROM orders o WHERE o.provider = $1 AND o.order_id = $2", [p, .text(orderID)]))
                reads.append(PostgresStatement(emittedSQL, [p, .text(orderID)]))
                // With the aliases already linked from it (a check that learns no new alias writes none), and whether the last
                // check left anything open (most find nothing: the resolving UPDATEs, whose planning cost more than executing
                // all of the check's statements, per pg_stat_statements, are then not sent; sql/0013).
                reads.append(PostgresStatement("""
                    SELECT fetched_at, snapshot->'aliases' AS aliases, open_findings, transaction_ref FROM snapshots
                    WHERE provider = $1 AND order_id = $2
                    """, [p, .text(orderID)]))
            }
        }
        do {
            let read = try conn.pipeline(reads).map { try $0.get() }
            var statements: [PostgresStatement] = []
            var layouts: [WriteLayout?] = []
            var plans: [Plan?] = []
            for (i, check) in checks.enumerated() {
                var current: Order?
                var emitted: [EmittedAction] = []
                var linkedAliases: Set<String> = []
                var mayResolve = true
                if check.order != nil {
                    let at = firstRead[i]
                    // The order is gone, or a newer check recorded already: nothing to write for this one.
                    guard let row = read[at].first else { layouts.append(nil); plans.append(nil); continue }
                    if let stored = try read[at + 2].first?.optionalDate("fetched_at"), stored > check.fetchedAt {
                        layouts.append(nil); plans.append(nil); continue
                    }
                    current = try OrderStore.decode(row)
                    emitted = try read[at + 1].compactMap(decodeEmitted)
                    if let row = read[at + 2].first {
                        if let text = try row.optionalString("aliases") {
                            linkedAliases = Set(((try? JSONValue.parse(text))?.arrayValue ?? []).compactMap(\.stringValue))
                        }
                        // Nothing left open last time, for the same transactions: nothing to resolve (a transaction newly
                        // added to the order may have an unknown_order open, so a changed list resolves as before).
                        mayResolve = try row.bool("open_findings") || row.string("transaction_ref") != check.transactionRef
                    }
                }
                let plan = check.plan(current, emitted)
                plans.append(plan)
                layouts.append(try writes(plan, check: check, order: current, linkedAliases: linkedAliases, mayResolve: mayResolve,
                                          into: &statements))
            }
            statements.append(PostgresStatement("COMMIT"))
            let results = try conn.pipeline(statements).map { try $0.get() }
            var next = 0
            return try zip(layouts, plans).map { layout, plan in
                guard let layout, let plan else { return nil }
                defer { next += layout.count }
                return (try layout.outcome(results[next..<(next + layout.count)]), plan)
            }
        } catch {
            // A failed statement leaves the transaction aborted (or it was never begun): end it either way.
            _ = try? conn.execute("ROLLBACK")
            throw error
        }
    }

    static func decodeEmitted(_ row: PostgresRow) throws -> EmittedAction? {
        guard let kind = ActionKind(rawValue: try row.string("action")), let status = ActionStatus(rawValue: try row.string("status")) else { return nil }
        return EmittedAction(idempotencyKey: try row.string("idempotency_key"), kind: kind, status: status, amount: try row.int64("amount_minor"))
    }

    /// Where one check's writes sit among a group's statements, to read its outcome back.
    struct WriteLayout {
        var findings = 0, resolves = 0, supersedes = 0, actions = 0, others = 0
        var count: Int { findings + resolves + supersedes + actions + others }

        func outcome(_ results: ArraySlice<PostgresRows>) throws -> CheckOutcome {
            var outcome = CheckOutcome()
            var i = results.startIndex
            for _ in 0..<findings {
                switch try results[i].first?.bool("inserted") {
                case true?: outcome.opened += 1
                case false?: outcome.stillOpen += 1
                case nil: outcome.acknowledged += 1   // no row: counted on the acknowledged row
                }
                i += 1
            }
            for _ in 0..<resolves { outcome.resolved += results[i].affectedRows; i += 1 }
            for _ in 0..<supersedes { outcome.superseded += results[i].affectedRows; i += 1 }
            for _ in 0..<actions { outcome.actionsEmitted += results[i].affectedRows; i += 1 }
            return outcome
        }
    }

    /// The second round trip of `record`, one check's part: every write of its plan, appended to `statements`.
    private static func writes(_ plan: Plan, check: Check, order: Order?, linkedAliases: Set<String>, mayResolve: Bool,
                               into statements: inout [PostgresStatement]) throws -> WriteLayout {
        let provider = check.provider, transactionRef = check.transactionRef, snapshot = check.snapshot
        let orderID = order?.orderID
        let currency = order?.amount.currency.code ?? snapshot?.currency.code ?? check.currency
        let p = PostgresValue.text(provider.rawValue)
        let before = statements.count
        var layout = WriteLayout()
        for f in plan.findings {
            statements.append(PostgresStatement(upsertFinding, [
                p, orderID.map { .text($0) } ?? .null, .text(transactionRef), .text(f.kind.rawValue),
                .jsonb(json(f.expected)), .jsonb(json(f.actual)), .text(f.detail), .int64(f.amountAtRisk),
                currency.map { .text($0) } ?? .null,
            ]))
        }
        // Whatever this check no longer finds is resolved (and what was found under the order's former list of
        // transactions: it is found again, above, under the current one).
        let kinds = PostgresValue.textArray(plan.findings.map(\.kind.rawValue))
        layout.findings = plan.findings.count
        if let orderID {
            // `mayResolve` is false only when the last check of these transactions left nothing open: under the order's
            // lock nothing opens for it meanwhile (an unknown_order another transaction opens after the read is resolved
            // by the order's next check).
            if mayResolve {
                layout.resolves = 2
                statements.append(PostgresStatement("""
                    UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                    WHERE provider = $1 AND order_id = $2 AND status IN ('open', 'acknowledged')
                      AND (NOT (kind = ANY($3)) OR transaction_ref <> $4)
                    """, [p, .text(orderID), kinds, .text(transactionRef)]))
                // An order now known resolves the unknown_order its transactions had raised.
                statements.append(PostgresStatement("""
                    UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                    WHERE provider = $1 AND order_id IS NULL AND transaction_ref = ANY($2) AND status IN ('open', 'acknowledged')
                    """, [p, .textArray(check.transactionRefs)]))
            }
        } else {
            layout.resolves = 1
            statements.append(PostgresStatement("""
                UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                WHERE provider = $1 AND order_id IS NULL AND transaction_ref = $2 AND status IN ('open', 'acknowledged') AND NOT (kind = ANY($3))
                """, [p, .text(transactionRef), kinds]))
        }
        if let order {
            // Supersede first: the action that replaces one of the same kind is then the only pending one.
            if !plan.supersede.isEmpty {
                statements.append(PostgresStatement("""
                    UPDATE actions SET status = 'superseded', updated_at = now()
                    WHERE idempotency_key = ANY($1) AND status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at < now())
                    """, [.textArray(plan.supersede)]))
                layout.supersedes = 1
            }
            for a in plan.actions {
                // A superseded key the plan wants again is pending again: the same row, the plan's amount.
                statements.append(PostgresStatement("""
                    INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, provider_target, idempotency_key,
                                         transaction_ref)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                    ON CONFLICT (idempotency_key) DO UPDATE SET status = 'pending', amount_minor = EXCLUDED.amount_minor,
                        provider_target = EXCLUDED.provider_target, last_error = NULL, lease_expires_at = NULL, updated_at = now()
                    WHERE actions.status = 'superseded'
                    """, [p, .text(order.orderID), .text(a.kind.rawValue), .int64(a.amount), .text(a.currency.code),
                          .int64(a.target), a.providerTarget.map { .text($0) } ?? .null, .text(a.idempotencyKey),
                          a.transactionRef.map { .text($0) } ?? .null]))
                layout.actions += 1
            }
            if let snapshot {
                // A snapshot never replaces a newer one.
                statements.append(PostgresStatement("""
                    INSERT INTO snapshots (provider, order_id, transaction_ref, snapshot, fetched_at, open_findings)
                    VALUES ($1, $2, $3, $4::jsonb, $5, $6)
                    ON CONFLICT (provider, order_id) DO UPDATE SET transaction_ref = EXCLUDED.transaction_ref,
                        snapshot = EXCLUDED.snapshot, fetched_at = EXCLUDED.fetched_at, open_findings = EXCLUDED.open_findings
                    WHERE snapshots.fetched_at <= EXCLUDED.fetched_at
                    """, [p, .text(order.orderID), .text(transactionRef), .jsonb(try check.snapshotJSON ?? encode(snapshot)), .timestamptz(check.fetchedAt),
                          .bool(!plan.findings.isEmpty)]))
                // The stored snapshot's aliases were linked when it was stored (same transaction): only new ones are written.
                if !snapshot.aliases.isEmpty, !Set(snapshot.aliases).isSubset(of: linkedAliases) {
                    statements.append(TransactionLinkStore.recordAliases(snapshot.aliases, provider: provider, orderID: order.orderID))
                }
            } else if !plan.findings.isEmpty {
                // No snapshot this time (the transaction is gone) but findings open: the stored row must not say none.
                statements.append(PostgresStatement("UPDATE snapshots SET open_findings = true WHERE provider = $1 AND order_id = $2",
                                                    [p, .text(order.orderID)]))
            }
        }
        layout.others = statements.count - before - layout.findings - layout.resolves - layout.supersedes - layout.actions
        return layout
    }

    static func json(_ dict: [String: String]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The snapshot as stored (sorted keys). Callers encode it before taking a connection (`snapshotJSON`): the
    /// encoder is the costliest CPU step of a check, and a pooled connection should not wait on it.
    public static func encode(_ snapshot: Snapshot) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(snapshot), as: UTF8.self)
    }
}
