import Foundation
import Postgres
import Reconciliation

/// `PAYRECON_RETAIN`: how long `payrecon prune` keeps finished deliveries (done, ignored), rejected-delivery samples,
/// closed runs, and the evidence of checks. `deliveries=90d,rejected=7d,runs=90d,evidence=90d`, any subset (the rest keep
/// their defaults).
public struct RetentionPolicy: Sendable, Equatable {
    public var deliveriesSeconds: Int64 = 90 * 86_400
    public var rejectedSeconds: Int64 = 7 * 86_400
    public var runsSeconds: Int64 = 90 * 86_400
    public var evidenceSeconds: Int64 = 90 * 86_400

    public init() {}

    public struct ParseError: Error, CustomStringConvertible, Sendable { public var description: String }

    public static func parse(_ text: String?) throws(ParseError) -> RetentionPolicy {
        var policy = RetentionPolicy()
        guard let text, !text.trimmingCharacters(in: .whitespaces).isEmpty else { return policy }
        var seen = Set<String>()
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = entry.trimmingCharacters(in: .whitespaces)
            let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pieces.count == 2 else {
                throw ParseError(
                    description:
                        "PAYRECON_RETAIN entry '\(part)' is not name=duration (e.g. deliveries=90d,rejected=7d,runs=90d,evidence=90d)")
            }
            let seconds: Int64
            do { seconds = try DurationParser.parse(pieces[1]) } catch {
                throw ParseError(description: "PAYRECON_RETAIN \(pieces[0])=\(pieces[1]): \(error); use 90s, 10m, 24h or 7d")
            }
            guard seen.insert(pieces[0]).inserted else { throw ParseError(description: "PAYRECON_RETAIN names \(pieces[0]) twice") }
            switch pieces[0] {
            case "deliveries": policy.deliveriesSeconds = seconds
            case "rejected": policy.rejectedSeconds = seconds
            case "runs": policy.runsSeconds = seconds
            case "evidence": policy.evidenceSeconds = seconds
            default: throw ParseError(description: "PAYRECON_RETAIN names '\(pieces[0])': it keeps deliveries, rejected, runs and evidence")
            }
        }
        return policy
    }
}

/// `payrecon prune`: deletes what the retention policy no longer keeps, in batches of `batchSize` rows, each its
/// own short transaction (no long lock: the receiver and the worker go on). Dead and pending deliveries, orders,
/// discrepancies and actions are never touched.
public enum PruneStore {
    public struct Removed: Sendable, Equatable {
        public var deliveries = 0, rejected = 0, rejectionCounts = 0, runs = 0, transmissions = 0, webhookMaterial = 0, evidence = 0,
            orderVersions = 0
        public init() {}
    }

    /// What would go (`dryRun`) or went.
    public static func prune(_ policy: RetentionPolicy, dryRun: Bool, batchSize: Int = 5000, on conn: PostgresConnection) throws -> Removed
    {
        var removed = Removed()
        // `before(s)`: older than `s` seconds.
        func before(_ seconds: Int64) -> SQL { "now() - make_interval(secs => \(.int64(seconds))::bigint)" }
        let targets: [(table: String, condition: SQL, count: WritableKeyPath<Removed, Int>)] = [
            ("deliveries", "status IN ('done', 'ignored') AND processed_at < \(before(policy.deliveriesSeconds))", \.deliveries),
            ("rejected_deliveries", "received_at < \(before(policy.rejectedSeconds))", \.rejected),
            ("rejection_counts", "hour < \(before(policy.rejectedSeconds))", \.rejectionCounts),
            ("runs", "finished_at IS NOT NULL AND finished_at < \(before(policy.runsSeconds))", \.runs),
            // A transmission id guards its body only while a redelivery could be fresh (the signature tolerance is
            // minutes); kept as long as finished deliveries.
            ("transmissions", "received_at < \(before(policy.deliveriesSeconds))", \.transmissions),
            // Certificates past their notAfter verify nothing.
            ("webhook_material", "keep_until < \(before(0))", \.webhookMaterial),
            // The evidence of checks (its answers go with it), except what an open or acknowledged discrepancy, a pending
            // action or a call made for an action points at: what is still being acted on keeps its reason.
            (
                "evidence",
                """
                checked_at < \(before(policy.evidenceSeconds))
                AND NOT EXISTS (SELECT 1 FROM discrepancies d WHERE d.evidence_id = evidence.id AND d.status IN ('open', 'acknowledged'))
                AND NOT EXISTS (SELECT 1 FROM actions a WHERE a.evidence_id = evidence.id
                                AND (a.status = 'pending' OR (a.status = 'failed' AND a.in_doubt)))
                AND NOT EXISTS (SELECT 1 FROM action_calls c WHERE c.evidence_id = evidence.id)
                """, \.evidence
            ),
            // Versions of orders replaced longer ago (the order itself, as it is now, is never pruned).
            ("order_versions", "replaced_at < \(before(policy.evidenceSeconds))", \.orderVersions)
        ]
        for target in targets {
            if dryRun {
                let n = try conn.query("SELECT count(*) AS n FROM \(unescaped: target.table) WHERE \(target.condition)")
                removed[keyPath: target.count] = Int(try n.first?.int64("n") ?? 0)
                continue
            }
            // Which orders a delivery named goes with the delivery (no foreign key: the worker records the pairs on its hot
            // path, where a key check would lock the delivery's row).
            let alsoPairs =
                target.table == "deliveries"
                ? ", pairs AS (DELETE FROM delivery_orders WHERE delivery_id IN (SELECT id FROM gone))" : ""
            while true {
                let n = Int(
                    try conn.query(
                        """
                        WITH gone AS (DELETE FROM \(unescaped: target.table) WHERE ctid IN (
                            SELECT ctid FROM \(unescaped: target.table) WHERE \(target.condition) LIMIT \(.int64(Int64(batchSize))) FOR UPDATE SKIP LOCKED)
                            RETURNING \(unescaped: alsoPairs.isEmpty ? "1" : "id")) \(unescaped: alsoPairs)
                        SELECT count(*) AS n FROM gone
                        """
                    ).first?.int64("n") ?? 0)
                removed[keyPath: target.count] += n
                if n < batchSize { break }
            }
        }
        return removed
    }
}
