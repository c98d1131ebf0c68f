import Foundation
import Postgres
import Reconciliation
import TextFormats

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
    /// `column` is a kind a check raises and resolves: settlement's kinds are settlement's alone (a constant list from
    /// the code, never input).
    static func checkKinds(_ column: String) -> String { "\(column) NOT IN \(settlementKindList)" }
    /// Built once: statements of the worker's hot path interpolate it.
    static let settlementKindList = "(" + DiscrepancyKind.settlementKinds.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"

    /// Actions already emitted for an order (the planner's memory).
    public static func emitted(provider: Provider, orderID: String, on conn: PostgresConnection) throws -> [EmittedAction] {
        try conn.query(
            "SELECT \(unescaped: emittedColumns) FROM actions WHERE provider = \(.text(provider.rawValue)) AND order_id = \(.text(orderID)) ORDER BY id"
        )
        .compactMap(decodeEmitted)
    }

    /// The actions of one order, oldest first (also read under the order's lock by `record`).
    static let emittedColumns =
        "idempotency_key, action, status, amount_minor, in_doubt, transaction_ref, last_error, (sent_at IS NOT NULL) AS sent"

    /// One finding: an acknowledged discrepancy with the same kind, expected and actual values stays acknowledged
    /// (it is counted, not reopened); an acknowledged one whose values changed is resolved and the finding opens a
    /// new row; otherwise the open row is counted or a new one opened. `inserted` is true for a new row, false for
    /// a counted open one; no row at all means the acknowledged one was counted.
    static func upsertFinding(
        provider p: PostgresValue, orderID o: PostgresValue, transactionRef t: PostgresValue, kind k: PostgresValue,
        expected e: PostgresValue, actual a: PostgresValue, detail d: PostgresValue, amountAtRisk r: PostgresValue,
        currency c: PostgresValue, evidence v: PostgresValue
    ) -> SQL {
        """
        WITH acknowledged AS (
            UPDATE discrepancies SET last_seen = now(), occurrences = occurrences + 1, detail = \(d)::text, amount_at_risk_minor = \(r)::bigint
            WHERE provider = \(p) AND coalesce(order_id, '') = coalesce(\(o)::text, '') AND transaction_ref = \(t) AND kind = \(k)
              AND status = 'acknowledged' AND expected = \(e)::jsonb AND actual = \(a)::jsonb
            RETURNING id),
        changed AS (
            UPDATE discrepancies SET status = 'resolved', resolved_at = now()
            WHERE provider = \(p) AND coalesce(order_id, '') = coalesce(\(o)::text, '') AND transaction_ref = \(t) AND kind = \(k)
              AND status = 'acknowledged' AND NOT (expected = \(e)::jsonb AND actual = \(a)::jsonb)
            RETURNING id)
        INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor, currency, evidence_id)
        SELECT \(p)::text, \(o)::text, \(t)::text, \(k)::text, \(e)::jsonb, \(a)::jsonb, \(d)::text, \(r)::bigint, \(c)::text, \(v)::bigint
        WHERE NOT EXISTS (SELECT 1 FROM acknowledged)
        ON CONFLICT (provider, coalesce(order_id, ''), transaction_ref, kind) WHERE status = 'open' DO UPDATE SET
            last_seen = now(), occurrences = discrepancies.occurrences + 1, expected = EXCLUDED.expected,
            actual = EXCLUDED.actual, detail = EXCLUDED.detail, amount_at_risk_minor = EXCLUDED.amount_at_risk_minor,
            currency = EXCLUDED.currency,
            -- The evidence behind a discrepancy is the check that opened it or last changed what it says (its values, its
            -- detail or its amount: one recorded before evidence was kept takes the first check that finds it).
            evidence_id = CASE WHEN discrepancies.expected = EXCLUDED.expected AND discrepancies.actual = EXCLUDED.actual
                                    AND discrepancies.detail = EXCLUDED.detail
                                    AND discrepancies.amount_at_risk_minor = EXCLUDED.amount_at_risk_minor
                               THEN coalesce(discrepancies.evidence_id, EXCLUDED.evidence_id)
                               ELSE coalesce(EXCLUDED.evidence_id, discrepancies.evidence_id) END
        RETURNING (xmax = 0) AS inserted
        """
    }

    /// `payrecon discrepancies ack ID --note`: an open discrepancy leaves the open set and the money at risk; the
    /// note and the time are kept. Returns the row as acknowledged, or nil when there is no open discrepancy `id`
    /// (`status` then says what it is, if it exists).
    public static func acknowledge(
        id: Int64, note: String?, by: String? = nil, on conn: PostgresConnection
    ) throws -> (acknowledged: Bool, status: String?) {
        let rows = try conn.query(
            """
            UPDATE discrepancies SET status = 'acknowledged', acknowledged_at = now(), ack_note = \(note.map { .text($0) } ?? .null), acknowledged_by = \(by.map { .text($0) } ?? .null)
            WHERE id = \(.int64(id)) AND status = 'open' RETURNING id
            """)
        if !rows.isEmpty { return (true, "acknowledged") }
        let status = try conn.query("SELECT status FROM discrepancies WHERE id = \(.int64(id))").first?.string("status")
        return (false, status)
    }

    /// One check to record: what was fetched. Its plan is made from the order and actions as stored under the order's
    /// lock (`lockAndRead`), by the caller, and written by `write`.
    public struct Check: Sendable {
        public var provider: Provider
        /// nil: a transaction no order holds (`unknown_order`); its plan is made from no order and no actions.
        public var order: Order?
        public var transactionRef: String
        public var snapshot: Snapshot?
        public var fetchedAt: Date
        public var currency: String?
        public var transactionRefs: [String]
        /// `snapshot` as stored, encoded beforehand so no pooled connection waits on the encoder.
        public var snapshotJSON: String?
        /// How many links of the order the fetch was made with (nil: not compared). When the order has another
        /// number under its lock, a link was learned after the fetch (a sale another delivery named, a modification
        /// the executor recorded): the answer may not show it, so nothing is recorded and the caller checks again.
        public var linksSeen: Int?
        /// The answers the check used, kept as evidence (`EvidenceStore`); nil keeps none.
        public var evidence: CheckEvidence?
        /// Payments linked to the order that are not among its transactions (a subscription's sales): an
        /// `unknown_order` one of them raised before it was linked is resolved by the order's check, as its own
        /// transactions' are.
        public var linkedPayments: [String] = []

        public init(
            provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
            currency: String? = nil, transactionRefs: [String]? = nil, snapshotJSON: String? = nil
        ) {
            self.provider = provider; self.order = order; self.transactionRef = transactionRef; self.snapshot = snapshot
            self.fetchedAt = fetchedAt; self.currency = currency; self.transactionRefs = transactionRefs ?? [transactionRef]
            self.snapshotJSON = snapshotJSON
        }

        /// The advisory lock the check is recorded under: one per order (or per unknown transaction).
        public var lockKey: String { "\(provider.rawValue):\(order?.orderID ?? "?" + transactionRef)" }
        /// Every lock the check takes: its own, and for an order the unknown-transaction locks of its transactions,
        /// whose `unknown_order` rows it may resolve. Without those, two groups could each hold an `unknown_order`
        /// row the other's order check was resolving (one group's unknown check upserting r1 while its order check
        /// resolved r2, the other's the reverse): a cycle the hash-ordered advisory locks now prevent.
        public var lockKeys: [String] {
            guard order != nil else { return [lockKey] }
            return [lockKey] + (transactionRefs + linkedPayments).map { "\(provider.rawValue):?\($0)" }
        }
    }

    /// A group under its locks, read: the first round trip of recording a group (`Worker.PlannedCheck.record`), its
    /// transaction left open for `write`.
    public struct LockedGroup {
        let checks: [Check]
        var state: GroupState
        var priors: [GroupState.Prior?]
        /// What each check plans from, in the checks' order (nil: it records nothing: its order is gone, a link was
        /// learned since its fetch, or a newer check recorded already).
        public let inputs: [(order: Order?, emitted: [EmittedAction])?]
    }

    /// BEGIN, every check's locks (in hash order, so two groups never wait on each other in a cycle), then the orders
    /// as stored now, their actions and their stored snapshots, each one statement for the group. The transaction
    /// stays open: `write` commits it, and on any error the caller ends it with `rollBack`.
    public static func lockAndRead(_ checks: [Check], on conn: PostgresConnection) throws -> LockedGroup {
        try refuseSharedLocks(checks)
        let reads = GroupReads(checks)
        var state = try reads.decode(try conn.pipeline(reads.statements).map { try $0.get() })
        let priors = try checks.map { try state.prior(of: $0) }
        let inputs = zip(checks, priors).map { check, prior in
            prior.map { (order: $0.order, emitted: state.emitted[GroupState.key(check.provider, check.order?.orderID ?? "")] ?? []) }
        }
        return LockedGroup(checks: checks, state: state, priors: priors, inputs: inputs)
    }

    /// Writes each check's plan (nil for a check whose input was nil) and its evidence, then COMMIT: the second round
    /// trip. A profile of the sweep found PostgreSQL parsing and planning more than executing, so what every check
    /// writes (its snapshot, the resolving of what it no longer finds, its new aliases) is one statement for the
    /// group; what few checks write (findings, actions) stays a statement each.
    public static func write(
        _ locked: LockedGroup, plans: [Plan?], on conn: PostgresConnection
    ) throws -> [(outcome: CheckOutcome, plan: Plan)?] {
        precondition(plans.count == locked.checks.count, "one plan (or nil) per check")
        var writes = GroupWrites()
        var results: [(index: Int, plan: Plan)] = []
        var evidenceRows: [EvidenceStore.Row] = [], answers: [(evidenceID: Int64, answers: [EvidenceAnswer])] = []
        for (i, check) in locked.checks.enumerated() {
            guard let prior = locked.priors[i], let plan = plans[i] else { continue }
            try writes.add(
                plan, check: check, index: i, order: prior.order, linkedAliases: prior.linkedAliases, mayResolve: prior.mayResolve,
                evidenceID: prior.evidenceID)
            results.append((i, plan))
            if let evidenceID = prior.evidenceID {
                var decided = OpenDiscrepancy.decided(plan, check: check, open: locked.state.open, mayResolve: prior.mayResolve)
                if prior.moved { decided.append("moved") }
                if let row = Self.evidenceRow(
                    check, id: evidenceID, decided: decided.isEmpty ? nil : decided.joined(separator: " "), plan: plan)
                {
                    evidenceRows.append(row)
                    if !decided.isEmpty { answers.append((evidenceID, row.evidence.answers)) }
                }
            }
        }
        // The evidence rows go with the group's snapshot write (one statement: most groups are a check or two, and each
        // statement costs PostgreSQL its parse and plan), the answers of the checks that decided in one of their own.
        var statements = try writes.statements(evidence: evidenceRows.isEmpty ? nil : try EvidenceStore.insert(evidenceRows))
        statements.insert(contentsOf: try EvidenceStore.insertAnswers(answers), at: statements.count - 1)
        let written = try conn.pipeline(statements).map { try $0.get() }
        var out = [(outcome: CheckOutcome, plan: Plan)?](repeating: nil, count: locked.checks.count)
        let resolvedInGroup = try writes.resolvedByGroupStatements(written)
        for (i, plan) in results {
            var outcome = try writes.outcome(of: i, from: written)
            outcome.resolved += resolvedInGroup[i, default: 0]
            out[i] = (outcome, plan)
        }
        return out
    }

    /// Ends a group's transaction after a failure (a failed statement leaves it aborted, or it was never begun).
    public static func rollBack(on conn: PostgresConnection) {
        _ = try? conn.execute("ROLLBACK")
    }

    /// No two checks of a group may share a lock: not two of one order, nor an unknown transaction's and the order's now
    /// holding it (one would resolve what the other writes, and neither's evidence would say so).
    public static func refuseSharedLocks(_ checks: [Check]) throws {
        var taken = Set<String>()
        for check in checks {
            let keys = Set(check.lockKeys)
            guard taken.isDisjoint(with: keys) else {
                throw PostgresError.protocolViolation(
                    "two checks sharing a lock (one order, or an order and its transaction's unknown_order) in one transaction: record them one after the other"
                )
            }
            taken.formUnion(keys)
        }
    }

    /// The first round trip of a group: BEGIN, the locks, then what the checks plan from, each one statement for the group.
    struct GroupReads {
        var statements: [SQL]
        /// Where each read's result is (nil when it was not needed).
        var ordersAt: Int?, actionsAt: Int?, snapshotsAt: Int?, linkCountsAt: Int?, openAt: Int?, allocateAt: Int?

        init(_ checks: [Check]) {
            statements = [
                SQL("BEGIN"),
                // DISTINCT: two keys with one hash are one lock. The locks are taken after the sort (a volatile function
                // in the select list is evaluated after ORDER BY).
                SQL(
                    "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(\(.textArray(checks.flatMap(\.lockKeys)))::text[]) AS k) s ORDER BY h"
                )
            ]
            func add(_ statement: SQL) -> Int {
                statements.append(statement)
                return statements.count - 1
            }
            let known = checks.filter { $0.order != nil }
            if !known.isEmpty {
                let keys: SQL =
                    "unnest(\(.textArray(known.map(\.provider.rawValue)))::text[], \(.textArray(known.map { $0.order!.orderID }))::text[]) AS k(provider, order_id)"
                let join: SQL = "JOIN \(keys) ON t.provider = k.provider AND t.order_id = k.order_id"
                // Each order's row also takes the id of its check's evidence (nextval in the select list: one per row).
                ordersAt = add(
                    """
                    SELECT \(unescaped: OrderStore.selectColumns), nextval('evidence_id_seq') AS evidence_id
                    FROM orders o JOIN \(keys) ON o.provider = k.provider AND o.order_id = k.order_id
                    """)
                actionsAt = add("SELECT t.provider, t.order_id, \(unescaped: emittedColumns) FROM actions t \(join) ORDER BY t.id")
                // With the aliases already linked from it (a check that learns no new alias writes none), and whether the last
                // check left anything open (most find nothing: the resolving UPDATE is then not needed; sql/0013).
                snapshotsAt = add(
                    """
                    SELECT t.provider, t.order_id, fetched_at, snapshot->'aliases' AS aliases, open_findings, transaction_ref,
                           snapshot->'movements' AS movements FROM snapshots t \(join)
                    """)
                if known.contains(where: { $0.linksSeen != nil }) {
                    linkCountsAt = add(
                        "SELECT t.provider, t.order_id, count(*)::bigint AS n FROM transaction_links t \(join) GROUP BY t.provider, t.order_id"
                    )
                }
            }
            // What the checks keep as evidence depends on what each decides (opened, changed, resolved, planned): known before
            // the writes from the discrepancies open now (read under the checks' locks: each order's, and the unknown_order
            // ones of the transactions the checks name), so the evidence goes in the same round trip as the writes.
            // Transactions no order holds take their evidence ids here (the orders read gives the others').
            let evidenced = checks.filter { $0.evidence != nil }
            let unknownEvidenced = evidenced.filter { $0.order == nil }
            if !evidenced.isEmpty {
                openAt = add(
                    OpenDiscrepancy.read(
                        orders: evidenced.compactMap { c in c.order.map { (c.provider, $0.orderID) } },
                        refs: evidenced.flatMap { c in (c.order == nil ? [c.transactionRef] : c.transactionRefs).map { (c.provider, $0) } })
                )
            }
            if !unknownEvidenced.isEmpty { allocateAt = add(EvidenceStore.allocate(unknownEvidenced.count)) }
        }

        /// The results, read by name.
        func decode(_ read: [PostgresRows]) throws -> GroupState {
            var state = GroupState()
            func key(_ row: PostgresRow) throws -> String { GroupState.key(try row.provider("provider"), try row.string("order_id")) }
            func rows(_ at: Int?) -> [PostgresRow] { at.map { Array(read[$0]) } ?? [] }
            state.open = try openAt.map { try OpenDiscrepancy.decode(read[$0]) } ?? []
            for row in rows(ordersAt) {
                let o = try OrderStore.decode(row)
                state.orders[GroupState.key(o.provider, o.orderID)] = o
                state.orderEvidence[GroupState.key(o.provider, o.orderID)] = try row.int64("evidence_id")
            }
            for row in rows(actionsAt) {
                if let e = try decodeEmitted(row) { state.emitted[try key(row), default: []].append(e) }
            }
            for row in rows(snapshotsAt) { state.stored[try key(row)] = row }
            for row in rows(linkCountsAt) { state.linkCounts[try key(row)] = Int(try row.int64("n")) }
            state.unknownIDs = try allocateAt.map { try read[$0].map { try $0.int64("id") } } ?? []
            return state
        }
    }

    /// What the group's reads found, by order (`key`), under the checks' locks.
    struct GroupState {
        static func key(_ provider: Provider, _ orderID: String) -> String { provider.rawValue + "\u{0}" + orderID }
        var orders: [String: Order] = [:], emitted: [String: [EmittedAction]] = [:], stored: [String: PostgresRow] = [:]
        var linkCounts: [String: Int] = [:], orderEvidence: [String: Int64] = [:]
        var open: [OpenDiscrepancy] = []
        /// Evidence ids for the checks of transactions no order holds, taken in turn.
        var unknownIDs: [Int64] = []

        /// What one check plans from.
        struct Prior {
            var order: Order?
            var linkedAliases: Set<String> = []
            var mayResolve = true
            var evidenceID: Int64?
            /// The money its answer states changed (a capture, a refund, a fee): its answers are kept, since a settlement
            /// line may later be compared with them (fee_mismatch, settlement_mismatch show that answer).
            var moved = false
        }

        /// nil: the check records nothing (its order is gone, a link was learned since its fetch, or a newer check
        /// recorded already).
        mutating func prior(of check: Check) throws -> Prior? {
            var prior = Prior()
            guard let orderID = check.order?.orderID else {
                if check.evidence != nil, !unknownIDs.isEmpty { prior.evidenceID = unknownIDs.removeFirst() }
                return prior
            }
            let k = Self.key(check.provider, orderID)
            guard let order = orders[k] else { return nil }
            // A link learned since the fetch: the answer may not show what it names.
            if let seen = check.linksSeen, linkCounts[k, default: 0] != seen { return nil }
            if let row = stored[k] {
                if let at = try row.optionalDate("fetched_at"), at > check.fetchedAt { return nil }
                if let text = try row.optionalString("aliases") {
                    prior.linkedAliases = Set(((try? JSONValue.parse(text))?.arrayValue ?? []).compactMap(\.stringValue))
                }
                // Nothing left open last time, for the same transactions: nothing to resolve (a transaction newly
                // added to the order may have an unknown_order open, so a changed list resolves as before).
                prior.mayResolve = try row.bool("open_findings") || row.string("transaction_ref") != check.transactionRef
                if check.evidence != nil {
                    prior.moved = OpenDiscrepancy.moved(stored: try row.optionalString("movements"), now: check.snapshot?.movements ?? [])
                }
            } else {
                prior.moved = check.evidence != nil && !(check.snapshot?.movements ?? []).isEmpty
            }
            prior.order = order
            if check.evidence != nil { prior.evidenceID = orderEvidence[k] }
            return prior
        }
    }

    /// A check's evidence row: the decision is kept only when it decided something.
    static func evidenceRow(_ check: Check, id: Int64?, decided: String?, plan: Plan) -> EvidenceStore.Row? {
        guard let id, let evidence = check.evidence else { return nil }
        var decision: String?
        if decided != nil {
            decision = EvidenceStore.encode(
                DecisionRecord(
                    decision: plan.decision, findings: plan.findings.map(\.kind.rawValue),
                    planned: plan.actions.map(\.idempotencyKey), superseded: plan.supersede))
        }
        return EvidenceStore.Row(
            id: id, provider: check.provider, orderID: check.order?.orderID, transactionRef: check.transactionRef,
            checkedAt: check.fetchedAt, evidence: evidence, decided: decided, decision: decision)
    }

    static func decodeEmitted(_ row: PostgresRow) throws -> EmittedAction? {
        guard let kind = ActionKind(rawValue: try row.string("action")), let status = ActionStatus(rawValue: try row.string("status"))
        else { return nil }
        return EmittedAction(
            idempotencyKey: try row.string("idempotency_key"), kind: kind, status: status, amount: try row.int64("amount_minor"),
            inDoubt: try row.bool("in_doubt"), transactionRef: try row.optionalString("transaction_ref"),
            lastError: try row.optionalString("last_error"), sent: try row.bool("sent"))
    }

    /// The second round trip of a group: what every check writes as one statement each for the group (snapshots,
    /// resolving, aliases), what few checks write as a statement of their own, then COMMIT; and reading each check's
    /// outcome back from the results.
    struct GroupWrites {
        private var own: [SQL] = []
        /// Per check (by its index in the group): its own statements' positions, by what they count.
        private var findings: [Int: [Int]] = [:], resolves: [Int: [Int]] = [:], supersedes: [Int: [Int]] = [:], actions: [Int: [Int]] = [:]
        /// Rows of the group statements, each with the check it belongs to.
        private var snapshotRows:
            [(check: Int, provider: Provider, orderID: String, ref: String, json: String, fetchedAt: String, open: Bool)] = []
        private var resolveRows: [(check: Int, provider: Provider, orderID: String, kinds: String, ref: String)] = []
        private var unknownRows: [(check: Int, provider: Provider, ref: String)] = []
        private var aliasRows: [(provider: Provider, orderID: String, alias: String)] = []
        /// Positions of the group statements (nil when none was needed).
        private var resolveAt: Int?, unknownAt: Int?

        mutating func add(
            _ plan: Plan, check: Check, index: Int, order: Order?, linkedAliases: Set<String>, mayResolve: Bool,
            evidenceID: Int64? = nil
        ) throws {
            let evidence = evidenceID.map { PostgresValue.int64($0) } ?? .null
            addFindings(plan, check: check, index: index, order: order, mayResolve: mayResolve, evidence: evidence)
            guard let order else { return }
            addActions(plan, check: check, index: index, order: order, evidence: evidence)
            try addSnapshot(plan, check: check, index: index, order: order, linkedAliases: linkedAliases)
        }

        private mutating func append(_ statement: SQL, of index: Int, to list: WritableKeyPath<GroupWrites, [Int: [Int]]>) {
            self[keyPath: list][index, default: []].append(own.count)
            own.append(statement)
        }

        /// The check's findings, and the resolving of what it no longer finds.
        private mutating func addFindings(_ plan: Plan, check: Check, index: Int, order: Order?, mayResolve: Bool, evidence: PostgresValue)
        {
            let provider = check.provider, transactionRef = check.transactionRef
            let orderID = order?.orderID
            let currency = order?.amount.currency.code ?? check.snapshot?.currency.code ?? check.currency
            let p = PostgresValue.text(provider.rawValue)
            for f in plan.findings {
                append(
                    upsertFinding(
                        provider: p, orderID: orderID.map { .text($0) } ?? .null, transactionRef: .text(transactionRef),
                        kind: .text(f.kind.rawValue),
                        expected: .jsonb(json(f.expected)), actual: .jsonb(json(f.actual)), detail: .text(f.detail),
                        amountAtRisk: .int64(f.amountAtRisk),
                        currency: currency.map { .text($0) } ?? .null, evidence: evidence), of: index, to: \.findings)
            }
            // Whatever this check no longer finds is resolved (and what was found under the order's former list of
            // transactions: it is found again, above, under the current one).
            let kinds = plan.findings.map(\.kind.rawValue)
            if let orderID {
                // `mayResolve` is false only when the last check of these transactions left nothing open: under the order's
                // lock nothing opens for it meanwhile, and an unknown_order recorded for one of its transactions marks its
                // snapshot open (below), so the order's next check resolves it.
                if mayResolve {
                    resolveRows.append((index, provider, orderID, kinds.joined(separator: " "), transactionRef))
                    // An order now known resolves the unknown_order its transactions had raised.
                    for ref in check.transactionRefs + check.linkedPayments { unknownRows.append((index, provider, ref)) }
                }
            } else {
                append(
                    SQL(
                        """
                        UPDATE discrepancies SET status = 'resolved', resolved_at = now()
                        WHERE provider = \(p) AND order_id IS NULL AND transaction_ref = \(.text(transactionRef)) AND status IN ('open', 'acknowledged') AND NOT (kind = ANY(\(.textArray(kinds))))
                          AND \(unescaped: FindingStore.checkKinds("kind"))
                        """), of: index, to: \.resolves)
                if !plan.findings.isEmpty {
                    // An order that holds this transaction now (imported or linked meanwhile) must resolve the
                    // unknown_order on its next check, even if its last one left nothing open.
                    own.append(
                        SQL(
                            """
                            UPDATE snapshots SET open_findings = true
                            WHERE provider = \(p) AND NOT open_findings AND order_id IN (
                                SELECT order_id FROM orders WHERE provider = \(p) AND transaction_ref = \(.text(transactionRef))
                                UNION SELECT order_id FROM order_transactions WHERE provider = \(p) AND transaction_ref = \(.text(transactionRef))
                                UNION SELECT order_id FROM transaction_links WHERE provider = \(p) AND external_id = \(.text(transactionRef)) AND order_id IS NOT NULL
                                UNION SELECT o.order_id FROM transaction_links l JOIN orders o ON o.provider = l.provider
                                    AND o.transaction_ref = l.parent_external_id AND l.occurred_at >= o.period_start AND l.occurred_at < o.period_end
                                WHERE l.provider = \(p) AND l.external_id = \(.text(transactionRef)) AND l.order_id IS NULL)
                            """))
                }
            }
        }

        /// What the plan supersedes and emits.
        private mutating func addActions(_ plan: Plan, check: Check, index: Int, order: Order, evidence: PostgresValue) {
            let p = PostgresValue.text(check.provider.rawValue)
            // Supersede first: the action that replaces one of the same kind is then the only pending one.
            if !plan.supersede.isEmpty {
                append(
                    SQL(
                        """
                        UPDATE actions SET status = 'superseded', updated_at = now()
                        WHERE idempotency_key = ANY(\(.textArray(plan.supersede))) AND status = 'pending' AND NOT in_doubt
                          AND (lease_expires_at IS NULL OR lease_expires_at < now())
                        """), of: index, to: \.supersedes)
            }
            for a in plan.actions {
                // A superseded key the plan wants again is pending again: the same row, the plan's amount.
                append(
                    SQL(
                        """
                        INSERT INTO actions (provider, order_id, action, amount_minor, currency, target_minor, provider_target, idempotency_key,
                                             transaction_ref, evidence_id)
                        VALUES (\(p), \(.text(order.orderID)), \(.text(a.kind.rawValue)), \(.int64(a.amount)), \(.text(a.currency.code)), \(.int64(a.target)), \(a.providerTarget.map { .text($0) } ?? .null), \(.text(a.idempotencyKey)), \(a.transactionRef.map { .text($0) } ?? .null), \(evidence))
                        ON CONFLICT (idempotency_key) DO UPDATE SET status = 'pending', amount_minor = EXCLUDED.amount_minor,
                            currency = EXCLUDED.currency, provider_target = EXCLUDED.provider_target, last_error = NULL,
                            lease_expires_at = NULL, in_doubt = false, updated_at = now(), evidence_id = EXCLUDED.evidence_id
                        WHERE actions.status = 'superseded' AND actions.sent_at IS NULL
                        """), of: index, to: \.actions)
            }
        }

        /// The snapshot as fetched (or, when the transaction is gone, the stored one marked), and the new aliases.
        private mutating func addSnapshot(_ plan: Plan, check: Check, index: Int, order: Order, linkedAliases: Set<String>) throws {
            let provider = check.provider, transactionRef = check.transactionRef
            let p = PostgresValue.text(provider.rawValue)
            if let snapshot = check.snapshot {
                snapshotRows.append(
                    (
                        index, provider, order.orderID, transactionRef, check.snapshotJSON ?? encode(snapshot),
                        try PostgresValue.timestampText(check.fetchedAt), !plan.findings.isEmpty
                    ))
                // The stored snapshot's aliases were linked when it was stored (same transaction): only new ones are written.
                if !snapshot.aliases.isEmpty, !Set(snapshot.aliases).isSubset(of: linkedAliases) {
                    for alias in snapshot.aliases where !alias.isEmpty { aliasRows.append((provider, order.orderID, alias)) }
                }
            } else {
                // No snapshot this time (the transaction is gone): the stored row must not say no findings are open, and
                // it takes this check's time, so an older answer recorded later does not replace the newer
                // missing_at_provider (a snapshot never replaces a newer one, and neither does a check).
                own.append(
                    SQL(
                        """
                        UPDATE snapshots SET open_findings = open_findings OR \(.bool(!plan.findings.isEmpty))::boolean, fetched_at = greatest(fetched_at, \(.timestamptz(check.fetchedAt))::timestamptz)
                        WHERE provider = \(p) AND order_id = \(.text(order.orderID))
                        """))
            }
        }

        /// Every statement of the round trip, COMMIT last. `evidence` (an INSERT) is sent with the snapshots' statement,
        /// as a CTE of it, or alone when there is none.
        mutating func statements(evidence: SQL? = nil) throws -> [SQL] {
            var all = own
            if !resolveRows.isEmpty {
                resolveAt = all.count
                all.append(
                    SQL(
                        """
                        UPDATE discrepancies d SET status = 'resolved', resolved_at = now()
                        FROM unnest(\(.textArray(resolveRows.map(\.provider.rawValue)))::text[], \(.textArray(resolveRows.map(\.orderID)))::text[], \(.textArray(resolveRows.map(\.kinds)))::text[], \(.textArray(resolveRows.map(\.ref)))::text[], \(.int64Array(resolveRows.map { Int64($0.check) }))::bigint[]) AS c(provider, order_id, kinds, transaction_ref, n)
                        WHERE d.provider = c.provider AND d.order_id = c.order_id AND d.status IN ('open', 'acknowledged')
                          AND \(unescaped: FindingStore.checkKinds("d.kind"))
                          AND (NOT (d.kind = ANY(string_to_array(c.kinds, ' '))) OR d.transaction_ref <> c.transaction_ref)
                        RETURNING c.n
                        """))
            }
            if !unknownRows.isEmpty {
                unknownAt = all.count
                all.append(
                    SQL(
                        """
                        UPDATE discrepancies d SET status = 'resolved', resolved_at = now()
                        FROM unnest(\(.textArray(unknownRows.map(\.provider.rawValue)))::text[], \(.textArray(unknownRows.map(\.ref)))::text[], \(.int64Array(unknownRows.map { Int64($0.check) }))::bigint[]) AS c(provider, transaction_ref, n)
                        WHERE d.provider = c.provider AND d.order_id IS NULL AND d.transaction_ref = c.transaction_ref
                          AND d.status IN ('open', 'acknowledged') AND \(unescaped: FindingStore.checkKinds("d.kind"))
                        RETURNING c.n
                        """))
            }
            var evidence = evidence
            if !snapshotRows.isEmpty {
                // A snapshot never replaces a newer one.
                let cte: SQL = evidence.map { "WITH evidence_rows AS (\($0))\n" } ?? ""
                all.append(
                    cte + """
                        INSERT INTO snapshots (provider, order_id, transaction_ref, snapshot, fetched_at, open_findings)
                        SELECT provider, order_id, transaction_ref, snapshot::jsonb, fetched_at::timestamptz, open_findings::boolean
                        FROM unnest(\(.textArray(snapshotRows.map(\.provider.rawValue)))::text[], \(.textArray(snapshotRows.map(\.orderID)))::text[],
                                    \(.textArray(snapshotRows.map(\.ref)))::text[], \(.textArray(snapshotRows.map(\.json)))::text[],
                                    \(.textArray(snapshotRows.map(\.fetchedAt)))::text[], \(.textArray(snapshotRows.map { $0.open ? "true" : "false" }))::text[])
                             AS s(provider, order_id, transaction_ref, snapshot, fetched_at, open_findings)
                        ON CONFLICT (provider, order_id) DO UPDATE SET transaction_ref = EXCLUDED.transaction_ref,
                            snapshot = EXCLUDED.snapshot, fetched_at = EXCLUDED.fetched_at, open_findings = EXCLUDED.open_findings
                        WHERE snapshots.fetched_at <= EXCLUDED.fetched_at
                        """)
                evidence = nil
            }
            if let evidence { all.append(evidence) }
            if !aliasRows.isEmpty {
                all.append(
                    SQL(
                        """
                        INSERT INTO transaction_links (provider, external_id, order_id, kind, source)
                        SELECT provider, alias, order_id, 'alias', 'learned' FROM unnest(\(.textArray(aliasRows.map(\.provider.rawValue)))::text[], \(.textArray(aliasRows.map(\.orderID)))::text[], \(.textArray(aliasRows.map(\.alias)))::text[]) AS a(provider, order_id, alias)
                        ON CONFLICT DO NOTHING
                        """))
            }
            all.append(SQL("COMMIT"))
            return all
        }

        /// Rows the group's resolving statements resolved, per check (by its index in the group): one pass over them.
        func resolvedByGroupStatements(_ results: [PostgresRows]) throws -> [Int: Int] {
            var resolved: [Int: Int] = [:]
            for at in [resolveAt, unknownAt].compactMap({ $0 }) {
                for row in results[at] { resolved[Int(try row.int64("n")), default: 0] += 1 }
            }
            return resolved
        }

        /// What check `index` changed through its own statements, from the round trip's results.
        func outcome(of index: Int, from results: [PostgresRows]) throws -> CheckOutcome {
            var outcome = CheckOutcome()
            for i in findings[index] ?? [] {
                switch try results[i].first?.bool("inserted") {
                case true?: outcome.opened += 1
                case false?: outcome.stillOpen += 1
                case nil: outcome.acknowledged += 1  // no row: counted on the acknowledged row
                }
            }
            for i in resolves[index] ?? [] { outcome.resolved += results[i].affectedRows }
            for i in supersedes[index] ?? [] { outcome.superseded += results[i].affectedRows }
            for i in actions[index] ?? [] { outcome.actionsEmitted += results[i].affectedRows }
            return outcome
        }
    }

    /// A finding's expected or actual fields as a JSON object, its keys sorted (stored as jsonb). Written directly:
    /// `JSONSerialization` was an eighth of a million-line settlement import's CPU, for objects of a few strings.
    static func json(_ dict: [String: String]) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (i, member) in dict.sorted(by: { $0.key < $1.key }).enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            // jsonb refuses \u0000: a NUL is kept as U+FFFD, as PostgreSQL text keeps it.
            JSONValue.writeString(member.key.withoutNUL, into: &out)
            out.append(UInt8(ascii: ":"))
            JSONValue.writeString(member.value.withoutNUL, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// The snapshot as stored (`SnapshotJSON`). Callers encode it before taking a connection (`snapshotJSON`): a
    /// pooled connection should not wait on a check's CPU.
    public static func encode(_ snapshot: Snapshot) -> String { SnapshotJSON.encode(snapshot) }
}
