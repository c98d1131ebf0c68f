import Postgres
import Reconciliation

/// A discrepancy open or acknowledged when a group of checks is recorded, read under the checks' locks with the
/// group's other reads: what each check's plan opens, changes or resolves follows from these before anything is
/// written, so what its evidence keeps (the answers themselves only when it decided something) goes in the same round
/// trip as the writes. The rules are `FindingStore.upsertFinding`'s and the resolving statements', read the other way.
struct OpenDiscrepancy: Equatable {
    var provider: String
    var orderID: String?
    var transactionRef: String
    var kind: String
    var acknowledged: Bool
    /// What defines it (nil when it is not an object of strings: then no finding equals it).
    var expected: [String: String]?
    var actual: [String: String]?
    /// Recorded before evidence was kept: the next check that finds it as it is becomes its evidence.
    var bare: Bool

    /// The unknown_order discrepancies of the checks of transactions no order holds (an order's come with the orders
    /// read: `ofOrder`).
    static func read(_ checks: [FindingStore.Check]) -> PostgresStatement {
        PostgresStatement("""
            SELECT d.provider, d.order_id, d.transaction_ref, d.kind, d.status, d.expected::text AS expected, d.actual::text AS actual,
                   d.evidence_id IS NULL AS bare
            FROM discrepancies d JOIN unnest($1::text[], $2::text[]) AS k(provider, ref) ON d.provider = k.provider AND d.transaction_ref = k.ref
            WHERE d.order_id IS NULL AND d.status IN ('open', 'acknowledged') AND \(FindingStore.checkKinds("d.kind"))
            """, [.textArray(checks.map(\.provider.rawValue)), .textArray(checks.map(\.transactionRef))])
    }

    /// A subquery, for a row of `orders` aliased `alias`: its open and acknowledged discrepancies and the unknown_order
    /// ones of `refs` (a text[] expression), as JSON arrays `[order_id, transaction_ref, kind, acknowledged, expected,
    /// actual, bare]` (NULL when there are none: most orders). Each arm uses its partial index.
    static func ofOrder(_ alias: String, refs: String) -> String {
        """
        (SELECT json_agg(json_build_array(d.order_id, d.transaction_ref, d.kind, d.status = 'acknowledged', d.expected, d.actual,
                                          d.evidence_id IS NULL))::text
         FROM (SELECT * FROM discrepancies WHERE provider = \(alias).provider AND order_id = \(alias).order_id
                                               AND status IN ('open', 'acknowledged') AND \(FindingStore.checkKinds("kind"))
               UNION ALL
               SELECT * FROM discrepancies WHERE provider = \(alias).provider AND order_id IS NULL AND transaction_ref = ANY(\(refs))
                                               AND status IN ('open', 'acknowledged') AND \(FindingStore.checkKinds("kind"))) d)
        """
    }

    /// The rows `ofOrder` gave for one order of `provider`. A row that does not read is an error, never "nothing open"
    /// (that would keep a decision without its answers).
    static func decode(json: String, provider: String) throws -> [OpenDiscrepancy] {
        guard let rows = (try? JSONValue.parse(json))?.arrayValue else {
            throw PostgresError.decoding("open discrepancies of a \(provider) order do not read as a list: \(json.prefix(80))")
        }
        return try rows.map { row in
            guard let f = row.arrayValue, f.count == 7, let ref = f[1].stringValue, let kind = f[2].stringValue else {
                throw PostgresError.decoding("an open discrepancy of a \(provider) order does not read: \(row.serializedText.prefix(80))")
            }
            return OpenDiscrepancy(provider: provider, orderID: f[0].stringValue, transactionRef: ref, kind: kind,
                                   acknowledged: f[3] == .bool(true), expected: strings(f[4]), actual: strings(f[5]), bare: f[6] == .bool(true))
        }
    }

    static func decode(_ rows: PostgresRows) throws -> [OpenDiscrepancy] {
        try rows.map { row in
            OpenDiscrepancy(provider: try row.string("provider"), orderID: try row.optionalString("order_id"),
                            transactionRef: try row.string("transaction_ref"), kind: try row.string("kind"),
                            acknowledged: try row.string("status") == "acknowledged",
                            expected: strings(try row.string("expected")), actual: strings(try row.string("actual")), bare: try row.bool("bare"))
        }
    }

    static func strings(_ json: String) -> [String: String]? { (try? JSONValue.parse(json)).flatMap(strings) }

    /// An object of strings as a dictionary; nil for anything else.
    static func strings(_ value: JSONValue) -> [String: String]? {
        guard case .object(let members) = value else { return nil }
        var out: [String: String] = [:]
        for (k, v) in members {
            guard let s = v.stringValue else { return nil }
            out[k] = s
        }
        return out
    }

    /// Equal as jsonb compares them: byte for byte (Swift's `==` on strings holds "é" and "e\u{301}" equal; jsonb does not).
    static func same(_ stored: [String: String]?, _ found: [String: String]) -> Bool {
        guard let stored, stored.count == found.count else { return false }
        func bytes(_ d: [String: String]) -> [[UInt8]] { d.map { Array($0.key.utf8) + [0] + Array($0.value.utf8) }.sorted { $0.lexicographicallyPrecedes($1) } }
        return bytes(stored) == bytes(found)
    }

    /// What recording `plan` for `check` decides, in order: `opened`, `changed`, `adopted`, `resolved`, `planned`,
    /// `superseded`; empty when it only finds again what is open (or finds nothing, as before).
    static func decided(_ plan: Plan, check: FindingStore.Check, open: [OpenDiscrepancy], mayResolve: Bool) -> [String] {
        let provider = check.provider.rawValue
        let orderID = check.order?.orderID
        let own = open.filter { d in
            d.provider == provider && (orderID.map { d.orderID == $0 } ?? (d.orderID == nil && d.transactionRef == check.transactionRef))
        }
        var opened = false, changed = false, adopted = false
        for f in plan.findings {
            let same = own.filter { $0.kind == f.kind.rawValue && $0.transactionRef == check.transactionRef }
            // The same finding as an acknowledged one is counted there; a different one resolves it and goes on below.
            if same.contains(where: { $0.acknowledged && Self.same($0.expected, f.expected) && Self.same($0.actual, f.actual) }) { continue }
            if let row = same.first(where: { !$0.acknowledged }) {
                if Self.same(row.expected, f.expected) && Self.same(row.actual, f.actual) { adopted = adopted || row.bare } else { changed = true }
            } else {
                opened = true
            }
        }
        let kinds = Set(plan.findings.map(\.kind.rawValue))
        var resolved = false
        if orderID != nil {
            if mayResolve {
                resolved = own.contains { !kinds.contains($0.kind) || $0.transactionRef != check.transactionRef }
                    || open.contains { $0.provider == provider && $0.orderID == nil && check.transactionRefs.contains($0.transactionRef) }
            }
        } else {
            resolved = own.contains { !kinds.contains($0.kind) }
        }
        var decided: [String] = []
        if opened { decided.append("opened") }
        if changed { decided.append("changed") }
        if adopted { decided.append("adopted") }
        if resolved { decided.append("resolved") }
        if !plan.actions.isEmpty { decided.append("planned") }
        if !plan.supersede.isEmpty { decided.append("superseded") }
        return decided
    }
}
