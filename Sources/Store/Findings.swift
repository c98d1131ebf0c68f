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

    /// Plans and records one check under the order's lock, so checks of one order in any number of processes are
    /// serialized and each plans from what the one before it recorded.
    ///
    /// Two round trips in one transaction: (BEGIN, the per-order advisory lock, the order as stored now, its
    /// actions, when its stored snapshot was fetched), then `plan` — pure — on those, then (the findings, the
    /// supersessions, the actions, the snapshot, COMMIT). A snapshot fetched before the stored one is older news:
    /// nothing is recorded and nil is returned (the newer check planned already). With `order` nil the transaction
    /// is an unknown one (`unknown_order`), and `plan` gets nil and no actions.
    public static func record(provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
                              currency: String? = nil, transactionRefs: [String]? = nil, snapshotJSON: String? = nil, plan makePlan: (Order?, [EmittedAction]) -> Plan,
                              on conn: PostgresConnection) throws -> (outcome: CheckOutcome, plan: Plan)? {
        let orderID = order?.orderID
        let p = PostgresValue.text(provider.rawValue)
        var reads: [PostgresStatement] = [
            PostgresStatement("BEGIN"),
            PostgresStatement("SELECT pg_advisory_xact_lock(hashtext($1))", [.text("\(provider.rawValue):\(orderID ?? "?" + transactionRef)")]),
        ]
        if let orderID {
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
        do {
            let read = try conn.pipeline(reads).map { try $0.get() }
            var current: Order?
            var emitted: [EmittedAction] = []
            var linkedAliases: Set<String> = []
            var mayResolve = true
            if orderID != nil {
                guard let row = read[2].first else { _ = try conn.execute("ROLLBACK"); return nil }   // the order is gone
                current = try OrderStore.decode(row)
                emitted = try read[3].compactMap(decodeEmitted)
                if let stored = try read[4].first?.optionalDate("fetched_at"), stored > fetchedAt {
                    _ = try conn.execute("ROLLBACK")
                    return nil
                }
                if let row = read[4].first {
                    if let text = try row.optionalString("aliases") {
                        linkedAliases = Set(((try? JSONValue.parse(text))?.arrayValue ?? []).compactMap(\.stringValue))
                    }
                    // Nothing left open last time, for the same transactions: nothing to resolve (a transaction newly
                    // added to the order may have an unknown_order open, so a changed list resolves as before).
                    mayResolve = try row.bool("open_findings") || row.string("transaction_ref") != transactionRef
                }
            }
            let plan = makePlan(current, emitted)
            let outcome = try write(plan, provider: provider, order: current, transactionRef: transactionRef, snapshot: snapshot,
                                    fetchedAt: fetchedAt, currency: currency, transactionRefs: transactionRefs ?? [transactionRef],
                                    snapshotJSON: snapshotJSON, linkedAliases: linkedAliases, mayResolve: mayResolve, on: conn)
            return (outcome, plan)
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

    /// The second round trip of `record`: every write of the plan, then COMMIT.
    private static func write(_ plan: Plan, provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?,
                              fetchedAt: Date, currency: String?, transactionRefs: [String], snapshotJSON: String?,
                              linkedAliases: Set<String> = [], mayResolve: Bool = true,
                              on conn: PostgresConnection) throws -> CheckOutcome {
        let orderID = order?.orderID
        let currency = order?.amount.currency.code ?? snapshot?.currency.code ?? currency
        let p = PostgresValue.text(provider.rawValue)
        var statements: [PostgresStatement] = []
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
        var resolveStatements = 0
        if let orderID {
            // `mayResolve` is false only when the last check of these transactions left nothing open: under the order's
            // lock nothing opens for it meanwhile (an unknown_order another transaction opens after the read is resolved
            // by the order's next check).
            if mayResolve {
                resolveStatements = 2
                statements.append(PostgresStatement("""
                    UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                    WHERE provider = $1 AND order_id = $2 AND status IN ('open', 'acknowledged')
                      AND (NOT (kind = ANY($3)) OR transaction_ref <> $4)
                    """, [p, .text(orderID), kinds, .text(transactionRef)]))
                // An order now known resolves the unknown_order its transactions had raised.
                statements.append(PostgresStatement("""
                    UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                    WHERE provider = $1 AND order_id IS NULL AND transaction_ref = ANY($2) AND status IN ('open', 'acknowledged')
                    """, [p, .textArray(transactionRefs)]))
            }
        } else {
            resolveStatements = 1
            statements.append(PostgresStatement("""
                UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                WHERE provider = $1 AND order_id IS NULL AND transaction_ref = $2 AND status IN ('open', 'acknowledged') AND NOT (kind = ANY($3))
                """, [p, .text(transactionRef), kinds]))
        }
        var actionStatements = 0, supersedeStatements = 0
        if let order {
            // Supersede first: the action that replaces one of the same kind is then the only pending one.
            if !plan.supersede.isEmpty {
                statements.append(PostgresStatement("""
                    UPDATE actions SET status = 'superseded', updated_at = now()
                    WHERE idempotency_key = ANY($1) AND status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at < now())
                    """, [.textArray(plan.supersede)]))
                supersedeStatements = 1
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
                actionStatements += 1
            }
            if let snapshot {
                // A snapshot never replaces a newer one.
                statements.append(PostgresStatement("""
                    INSERT INTO snapshots (provider, order_id, transaction_ref, snapshot, fetched_at, open_findings)
                    VALUES ($1, $2, $3, $4::jsonb, $5, $6)
                    ON CONFLICT (provider, order_id) DO UPDATE SET transaction_ref = EXCLUDED.transaction_ref,
                        snapshot = EXCLUDED.snapshot, fetched_at = EXCLUDED.fetched_at, open_findings = EXCLUDED.open_findings
                    WHERE snapshots.fetched_at <= EXCLUDED.fetched_at
                    """, [p, .text(order.orderID), .text(transactionRef), .jsonb(try snapshotJSON ?? encode(snapshot)), .timestamptz(fetchedAt),
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
        statements.append(PostgresStatement("COMMIT"))

        let results = try conn.pipeline(statements).map { try $0.get() }
        var outcome = CheckOutcome()
        var i = 0
        for _ in plan.findings {
            switch try results[i].first?.bool("inserted") {
            case true?: outcome.opened += 1
            case false?: outcome.stillOpen += 1
            case nil: outcome.acknowledged += 1   // counted on the acknowledged row
            }
            i += 1
        }
        for _ in 0..<resolveStatements { outcome.resolved += results[i].affectedRows; i += 1 }
        for _ in 0..<supersedeStatements { outcome.superseded += results[i].affectedRows; i += 1 }
        for _ in 0..<actionStatements { outcome.actionsEmitted += results[i].affectedRows; i += 1 }
        return outcome
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
