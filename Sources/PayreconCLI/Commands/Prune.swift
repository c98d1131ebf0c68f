import Observability
import Foundation
import Providers
import Wiring
import Store

private let dryRunFlag = FlagKey("--dry-run", "Print what would be removed; remove nothing.")

struct PruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "prune",
        summary: "Delete finished deliveries, rejected-delivery samples, closed runs and checks' evidence older than PAYRECON_RETAIN.",
        options: [dryRunFlag, Options.databaseURL],
        details: """
            PAYRECON_RETAIN: deliveries=90d,rejected=7d,runs=90d,evidence=90d (any subset; those are the defaults). Deliveries that are
            done or ignored go once processed longer ago than their retention; rejected-delivery samples once received;
            runs once finished; the transmission ids that guard PayPal bodies with the deliveries; certificates kept for
            verifying webhooks once past their notAfter; the evidence of checks and replaced order versions after `evidence=` (90d), except evidence an
            open or acknowledged discrepancy, a pending action (or a failed one whose outcome is unknown) or an action's call
            points at. Dead and pending deliveries, orders, discrepancies and actions are never pruned. Rows go
            in batches of 5,000, each its own short transaction, so the receiver and the worker are never held up.
            deploy/payrecon-prune.timer runs it daily.
            """
    )

    var dryRun: Bool
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        dryRun = args.flag(dryRunFlag)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment()
        let policy: RetentionPolicy
        do throws(RetentionPolicy.ParseError) { policy = try RetentionPolicy.parse(env["PAYRECON_RETAIN"]) } catch {
            throw ConfigurationError(error.description)
        }
        let conn = try connect(try env.databaseURL(flag: databaseURL))
        defer { conn.close() }
        let removed = try PruneStore.prune(policy, dryRun: dryRun, on: conn)
        let verb = dryRun ? "would remove" : "removed"
        print(
            "\(verb) \(removed.deliveries) finished deliveries, \(removed.rejected) rejected-delivery samples, \(removed.runs) closed runs, "
                + "\(removed.rejectionCounts) hourly rejection counts, \(removed.transmissions) transmission ids, "
                + "\(removed.webhookMaterial) expired webhook certificates, \(removed.evidence) checks' evidence, \(removed.orderVersions) replaced order versions"
        )
        return Exit.ok
    }
}
