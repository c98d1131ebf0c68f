import Observability
import Foundation
import Providers
import Reconciliation
import Store
import Wiring
import Worker

private let backfillSince = OptionKey<Int64>("--since", "DURATION", "How far back to read (default 7d): 90s, 10m, 24h, 7d.") {
    (v: String) throws(UsageError) -> Int64 in try Options.duration(v, flag: "--since")
}
private let backfillFrom = OptionKey<Int64>("--from", "TIME", "Read from TIME (RFC 3339, e.g. 2026-11-01T00:00:00Z), with --to.") {
    (v: String) throws(UsageError) -> Int64 in
    guard let t = ISO8601.unixSeconds(from: v) else {
        throw UsageError("--from \(v.terminalSafe) is not a time: use RFC 3339, e.g. 2026-11-01T00:00:00Z")
    }
    return t
}
private let backfillTo = OptionKey<Int64>("--to", "TIME", "Read up to TIME (RFC 3339), with --from.") {
    (v: String) throws(UsageError) -> Int64 in
    guard let t = ISO8601.unixSeconds(from: v) else {
        throw UsageError("--to \(v.terminalSafe) is not a time: use RFC 3339, e.g. 2026-11-30T00:00:00Z")
    }
    return t
}
private let backfillDryRun = FlagKey(
    "--dry-run", "Read and match as a run would, and list what it would store or open, one line each; store nothing.")

struct BackfillCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "backfill",
        summary: "Read the provider's own records for what no webhook said: re-check their orders, find transactions no order holds.",
        options: [
            Options.provider.help("The provider to read (paypal: Transaction Search and the webhook events list)."), backfillSince,
            backfillFrom, backfillTo, backfillDryRun,
            Options.concurrency, Options.databaseURL
        ],
        details: """
            PayPal: Transaction Search (GET /v1/reporting/transactions) and the webhook events list
            (GET /v1/notifications/webhooks-events), in windows of a UTC day at most, every page, a window
            PayPal finds too large read in halves; windows end 3 hours before now (PayPal lists a transaction up to 3
            hours after it happens) and never past the answer's last_refreshed_datetime. Each transaction is matched to the
            order that holds it (the ids payrecon knows: captures, refunds, links, transaction refs) and that order
            is re-checked; one no order holds is looked up as a webhook naming it would be (unknown_order, once however
            often it is found). A window read to its end is recorded: a run reads only what no earlier run finished, so a
            second run finds nothing new and a run stopped mid-window reads that window again. PayPal lists some
            transactions late (an eCheck, a payment held for review), so every run reads again the windows of its last
            PAYRECON_BACKFILL_REREAD (default 3d) even if read before; of what they list, only a transaction no run
            handled yet, or listed with another status since, is handled. The app needs PayPal's
            Transaction Search permission (granting it can take hours): without it the command says so and exits 2.
            An event in PayPal's list that no delivery brought is stored as a delivery of it would have been and goes
            through payrecon work like any delivery (it is not counted as a redelivery of one that came).
            Paypercut: its payment and refund lists (GET /v2/payments, GET /v1/refunds) by date and last_key, as the key's
            own account and as each account payrecon's orders name (Paypercut-Account), up to an hour before now.
            PXP publishes no search API. Exit 0 when every window was read and every order checked, 1 when something is
            left for the next run or could not be checked (listed), 2 on a usage, permission or database error (a list
            refused does not stop the other: both are read, then the run exits 2).
            """
    )

    var provider: Provider
    /// --since, in seconds.
    var since: Int64?
    /// --from and --to, in unix seconds.
    var from: Int64?, to: Int64?
    var dryRun: Bool
    var concurrency: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        guard let provider = try args.value(Options.provider) else {
            throw UsageError(
                "--provider is required (\(ProviderRegistry.definitions.filter { $0.backfillReads != nil }.map(\.provider.rawValue).joined(separator: " or ")))"
            )
        }
        self.provider = provider
        since = try args.value(backfillSince)
        from = try args.value(backfillFrom)
        to = try args.value(backfillTo)
        dryRun = args.flag(backfillDryRun)
        concurrency = try args.value(Options.concurrency, default: 16)
        databaseURL = try args.value(Options.databaseURL)
    }

    func validate() throws(UsageError) {
        if (from == nil) != (to == nil) { throw UsageError("--from and --to go together") }
        if from != nil && since != nil { throw UsageError("use either --since or --from and --to, not both") }
        if let from, let to, to <= from { throw UsageError("--to must be after --from") }
        guard ProviderRegistry.definition(provider).backfillReads != nil else {
            throw UsageError(
                "\(provider.rawValue) publishes no transaction search payrecon reads: its transactions are checked as orders and webhooks name them"
            )
        }
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment(databaseURL: databaseURL)
        let now = Int64(Date().timeIntervalSince1970)
        let window = (from: from ?? now - (since ?? 7 * 86_400), to: to ?? now)
        let deliveriesKept: Int64
        do { deliveriesKept = try RetentionPolicy.parse(env["PAYRECON_RETAIN"]).deliveriesSeconds } catch { throw UsageError("\(error)") }
        let reread = try env.duration("PAYRECON_BACKFILL_REREAD", default: "3d")
        let context = try WorkerContext(env, poolSize: min(32, concurrency + 2), maxConcurrentRequests: concurrency, logger: logger)
        defer { context.pool.close() }
        let terminal = isatty(STDERR_FILENO) == 1
        let summary: Backfill.Summary
        do {
            summary = try await Backfill(pool: context.pool, checker: context.checker, concurrency: concurrency)
                .run(
                    .init(
                        provider: provider, from: window.from, to: window.to, dryRun: dryRun,
                        deliveriesKeptSeconds: deliveriesKept, rereadSeconds: reread), logger: context.logger
                ) { s in
                    guard terminal else { return }
                    FileHandle.standardError.write(
                        Data(
                            "\r\u{1B}[Kwindows \(s.windowsRead) read, \(s.windowsSkipped) done before  found \(s.found)  orders checked \(s.ordersChecked)  unknown \(s.unknown)  requests \(s.requests)  events \(s.eventsListed) listed, \(s.eventsStored) stored"
                                .utf8))
                }
        } catch let failure as Backfill.Failure {
            if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            switch failure {
            case .unsupported(let why): throw UsageError(why)
            case .refused(let why): throw FatalError(why)
            }
        }
        defer {
            // What the provider refused is said last, after what was read: exit 2.
            for why in summary.refused { FileHandle.standardError.write(Data("payrecon: \(why)\n".utf8)) }
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        printSummary(summary, reread: reread)
        if !summary.refused.isEmpty { return Exit.usage }
        return summary.problems.isEmpty && summary.notChecked.isEmpty ? Exit.ok : Exit.finding
    }
}

extension BackfillCommand {
    /// What the run read, checked and found (a dry run's plan one line each); the provider's words escaped.
    func printSummary(_ summary: Backfill.Summary, reread: Int64) {
        let dry = dryRun ? " (dry run: nothing stored, checked or recorded)" : ""
        let again =
            summary.windowsReread > 0
            ? " (\(summary.windowsReread) of them again: the last \(DurationParser.describe(reread)), where \(provider.rawValue) lists late)"
            : ""
        let checked =
            dryRun
            ? "\(summary.planned.count { if case .recheck = $0 { true } else { false } }) orders a run would re-check"
            : "\(summary.ordersChecked) orders re-checked"
        print(
            "backfill \(provider.rawValue) \(UnixTime.iso8601(summary.readFrom))–\(UnixTime.iso8601(summary.readTo))\(dry): \(summary.windowsRead) windows read\(again), \(summary.windowsSkipped) read before; \(summary.requests) list requests (\(summary.halved) windows halved); \(summary.found) transactions listed, \(summary.new) new or changed since a run handled them, \(checked), \(summary.unknown) no order holds, \(summary.notAnOrders) no order's (withdrawals, holds…)"
        )
        if summary.eventWindowsRead + summary.eventWindowsSkipped > 0 || summary.eventRequests > 0 || summary.eventsFrom != nil {
            let eventsAgain = summary.eventWindowsReread > 0 ? " (\(summary.eventWindowsReread) of them again)" : ""
            print(
                "  webhook events: \(summary.eventWindowsRead) windows read\(eventsAgain), \(summary.eventWindowsSkipped) read before; \(summary.eventRequests) requests; \(summary.eventsListed) events listed, \(summary.eventsStored) payrecon had not stored"
                    + (dryRun ? " (a run stores them for payrecon work)" : " (stored now for payrecon work)"))
        }
        // A dry run's list: what a run would store or open, one line each (ids and codes are the provider's: escaped).
        for planned in summary.planned { print("  would \(planned.description.terminalSafe)") }
        if let start = summary.eventsFrom, let why = summary.eventsFromWhy {
            print("  webhook events listed from \(UnixTime.iso8601(start)) only: \(why.terminalSafe)")
        }
        if let reach = summary.reach {
            print("  \(provider.rawValue)'s data reaches \(UnixTime.iso8601(reach)) for now: a later run reads on from there")
        }
        // Problems and items quote the provider's answers: one line each, as the terminal shows it.
        for problem in summary.problems { print("  \(problem.terminalSafe)") }
        for item in summary.notChecked { print("  not checked: \(item.terminalSafe)") }
    }
}
