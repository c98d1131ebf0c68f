import Postgres
import Reconciliation
import TextFormats

/// A discrepancy open or acknowledged when a group of checks is recorded, read under the checks' locks with the
/// group's other reads: what each check's plan opens, changes or resolves follows from these before anything is
/// written, so what its evidence keeps (the answers themselves only when it decided something) goes in the same round
/// trip as the writes. The rules are `FindingStore.upsertFinding`'s and the resolving statements', read the other way.
struct OpenDiscrepancy: Equatable {
    var provider: Provider
    var orderID: String?
    var transactionRef: String
    var kind: String
    var acknowledged: Bool
    /// What defines it (nil when it is not an object of strings: then no finding equals it).
    var expected: [String: String]?
    var actual: [String: String]?
    /// Recorded before evidence was kept: the next check that finds it as it is becomes its evidence.
    var bare: Bool
    /// What it says and the money it puts at risk, as last recorded: a check that finds it with another detail or
    /// amount changed it (its answers are kept, and become its evidence), so `explain` never shows a detail beside an
    /// older answer.
    var detail: String? = nil
    var amount: Int64? = nil

    /// The discrepancies open or acknowledged for a group of checks: each order's (`orders`: provider and order id) and the
    /// unknown_order ones of the transactions they name (`refs`: provider and transaction reference). One call of
    /// `open_discrepancies` (sql/0021), a function so that each server process plans the query once.
    static func read(orders: [(provider: Provider, orderID: String)], refs: [(provider: Provider, ref: String)]) -> SQL {
        SQL(
            "SELECT * FROM open_discrepancies(\(.textArray(orders.map(\.provider.rawValue)))::text[], \(.textArray(orders.map(\.orderID)))::text[], \(.textArray(refs.map(\.provider.rawValue)))::text[], \(.textArray(refs.map(\.ref)))::text[], \(.textArray(DiscrepancyKind.settlementKinds.map(\.rawValue)))::text[])"
        )
    }

    static func decode(_ rows: PostgresRows) throws -> [OpenDiscrepancy] {
        try rows.map { row in
            OpenDiscrepancy(
                provider: try row.provider("provider"), orderID: try row.optionalString("order_id"),
                transactionRef: try row.string("transaction_ref"), kind: try row.string("kind"),
                acknowledged: try row.string("status") == "acknowledged",
                expected: strings(try row.string("expected")), actual: strings(try row.string("actual")), bare: try row.bool("bare"),
                detail: try row.optionalString("detail"), amount: try row.optionalInt64("amount"))
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
        func bytes(_ d: [String: String]) -> [[UInt8]] {
            d.map { Array($0.key.utf8) + [0] + Array($0.value.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        }
        return bytes(stored) == bytes(found)
    }

    /// Whether it says what `finding` says: the same values (byte for byte, as jsonb compares them), detail and amount.
    /// A check or an import that finds it so changed nothing, and its evidence stays.
    func says(_ finding: Finding) -> Bool {
        Self.same(expected, finding.expected) && Self.same(actual, finding.actual) && detail == finding.detail
            && amount == finding.amountAtRisk
    }

    /// Whether the money an answer states (`now`) differs from what the stored snapshot held (`stored`: its
    /// `movements` as jsonb text; nil: none stored): any movement added, gone, or with another amount, fee, net, day or
    /// currency.
    static func moved(stored: String?, now: [Movement]) -> Bool {
        func text(_ v: Int64?) -> String { v.map { String($0) } ?? "-" }
        func key(
            id: String, kind: String, at: Int64?, currency: String, gross: Int64?, fee: Int64?, net: Int64?, received: Int64?,
            receivedIn: String?
        ) -> String {
            let parts: [String] = [id, kind, text(at), currency, text(gross), text(fee), text(net), text(received), receivedIn ?? "-"]
            return parts.joined(separator: "\u{0}")
        }
        let fresh = Set(
            now.map {
                key(
                    id: $0.id, kind: $0.kind.rawValue, at: $0.at, currency: $0.currency.code, gross: $0.gross, fee: $0.fee, net: $0.net,
                    received: $0.received, receivedIn: $0.receivedCurrency?.code)
            })
        guard let stored, let items = (try? JSONValue.parse(stored))?.arrayValue else { return !fresh.isEmpty }
        func int(_ v: JSONValue?) -> Int64? { v?.numberLiteral.flatMap { Int64($0) } }
        let old = Set(
            items.map { m in
                key(
                    id: m["id"]?.stringValue ?? "", kind: m["kind"]?.stringValue ?? "", at: int(m["at"]),
                    currency: m["currency"]?["code"]?.stringValue ?? "",
                    gross: int(m["gross"]), fee: int(m["fee"]), net: int(m["net"]), received: int(m["received"]),
                    receivedIn: m["receivedCurrency"]?["code"]?.stringValue)
            })
        return old != fresh
    }

    /// What recording `plan` for `check` decides, in order: `opened`, `changed`, `adopted`, `resolved`, `planned`,
    /// `superseded`; empty when it only finds again what is open (or finds nothing, as before).
    static func decided(_ plan: Plan, check: FindingStore.Check, open: [OpenDiscrepancy], mayResolve: Bool) -> [String] {
        let provider = check.provider
        let orderID = check.order?.orderID
        let own = open.filter { d in
            d.provider == provider && (orderID.map { d.orderID == $0 } ?? (d.orderID == nil && d.transactionRef == check.transactionRef))
        }
        var opened = false, changed = false, adopted = false
        for f in plan.findings {
            let same = own.filter { $0.kind == f.kind.rawValue && $0.transactionRef == check.transactionRef }
            // The same finding as an acknowledged one is counted there; a different one resolves it and goes on below.
            if same.contains(where: { $0.acknowledged && Self.same($0.expected, f.expected) && Self.same($0.actual, f.actual) }) {
                continue
            }
            if let row = same.first(where: { !$0.acknowledged }) {
                if row.says(f) {
                    adopted = adopted || row.bare
                } else {
                    changed = true
                }
            } else {
                opened = true
            }
        }
        let kinds = Set(plan.findings.map(\.kind.rawValue))
        var resolved = false
        if orderID != nil {
            if mayResolve {
                resolved =
                    own.contains { !kinds.contains($0.kind) || $0.transactionRef != check.transactionRef }
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
