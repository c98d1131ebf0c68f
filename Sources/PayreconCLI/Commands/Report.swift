import Observability
import Foundation
import Providers
import TextFormats
import Wiring
import Postgres
import Reconciliation
import Reporting
import Store

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "report",
        summary: "What is wrong, since when, and how much money is at risk.",
        options: [
            ReportOptions.formatKey, ReportOptions.viewKey, Options.output, ReportOptions.statusKey, Options.provider, Options.kind,
            Options.since.help(
                "Only discrepancies last seen within DURATION (90s, 10m, 24h, 7d): found again by a check that recent, whenever the order was made (reconcile --since picks orders instead)."
            ), Options.failOnOpen, Options.databaseURL
        ],
        details: """
            The summary (open count by kind, money at risk per currency, rejected deliveries in the last 24 h) counts open
            discrepancies matching --provider, --kind and --since, whatever --status lists. Money at risk counts each order once,
            at its largest open finding, per currency, in major units (two findings of one order are often one amount seen
            twice); --format csv and json give each open row's share of it as counted_at_risk.
            Kinds: \(DiscrepancyKind.allCases.map(\.rawValue).joined(separator: ", ")).
            --view fees shows, per provider, currency and day (UTC, or the account's settlement day once a settlement file
            of it is imported; when the provider says the money moved), what was
            captured, refunded and reversed, the fees the provider took less those it gave back, and the net, as the
            providers' answers state them (PayPal's seller_receivable_breakdown / seller_payable_breakdown, a v1 sale's
            transaction_fee, Paypercut's balance_transaction), over --since (default 30d) and --provider; exact sums.
            Table output is coloured on a terminal unless NO_COLOR is set. Exit 0, or 1 with --fail-on-open when a
            listed discrepancy is open; 2 on a usage or database error.
            """
    )

    var options: ReportOptions
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        options = try ReportOptions(args)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let url = try Environment(databaseURL: databaseURL).databaseURL()
        let conn = try connect(url)
        defer { conn.close() }
        let toTerminal = options.output == nil && isatty(STDOUT_FILENO) == 1
        let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
        if options.view == "fees" {
            let fees = try ReportOptions.loadFees(options, on: conn)
            let bytes: [UInt8] =
                switch options.format {
                case .table: Array(fees.table(colour: toTerminal && !noColor).utf8)
                case .json: fees.json()
                case .csv: Array(fees.csv().utf8)
                case .html: Array(fees.html().utf8)
                }
            try writeOutput(bytes, to: options.output)
            return Exit.ok
        }
        let report = try ReportOptions.load(options, on: conn)
        let bytes: [UInt8] =
            switch options.format {
            case .table: Array(report.table(colour: toTerminal && !noColor).utf8)
            case .json: report.json()
            case .csv: Array(report.csv().utf8)
            case .html: Array(report.html().utf8)
            }
        try writeOutput(bytes, to: options.output)
        return options.failOnOpen && report.listsOpen ? Exit.finding : Exit.ok
    }
}

/// `payrecon report`'s flags, validated before the database is touched.
struct ReportOptions {
    var format: ReportFormat
    /// `discrepancies` (default) or `fees`.
    var view: String
    /// `--since` as typed, and in seconds.
    var since: String?, sinceSeconds: Int64?
    var output: String?
    var filter: DiscrepancyFilter
    var filters: ReportFilters
    var failOnOpen: Bool

    static let formatKey = Options.format(ReportFormat.allCases.map(\.rawValue))
    static let viewKey = OptionKey<String>(
        "--view", "discrepancies|fees",
        "What to report (default discrepancies): fees shows captured, refunded, fees and net per provider, currency and day."
    ) { (v: String) throws(UsageError) -> String in
        guard v == "discrepancies" || v == "fees" else { throw UsageError("--view must be discrepancies or fees, not '\(v.terminalSafe)'") }
        return v
    }
    static let statusKey = Options.status(["open", "acknowledged", "resolved", "all"], help: "Which discrepancies to list (default open).")

    init(_ args: ParsedArguments) throws(UsageError) {
        format = ReportFormat(rawValue: try args.value(Self.formatKey, default: "table"))!
        output = try args.value(Options.output)
        let status = try args.value(Self.statusKey, default: "open")
        let provider = try args.value(Options.provider)
        let kind = try args.value(Options.kind)
        let since = try args.value(Options.since)
        let seconds = since.flatMap { try? DurationParser.parse($0) }
        filter = DiscrepancyFilter(status: status == "all" ? nil : status, provider: provider, kind: kind, lastSeenWithin: seconds)
        filters = ReportFilters(status: status, provider: provider, kind: kind, since: since)
        failOnOpen = args.flag(Options.failOnOpen)
        view = try args.value(Self.viewKey, default: "discrepancies")
        self.since = since
        sinceSeconds = seconds
        if view == "fees" {
            // What only the discrepancies view has would be silently ignored: say so instead.
            if try args.value(Self.statusKey) != nil { throw UsageError("--status lists discrepancies: it does not apply to --view fees") }
            if kind != nil { throw UsageError("--kind lists discrepancies: it does not apply to --view fees") }
            if failOnOpen { throw UsageError("--fail-on-open is about open discrepancies: it does not apply to --view fees") }
        }
    }

    /// The fees view: the days of `movements` within --since (default 30 days).
    static func loadFees(_ o: ReportOptions, on conn: PostgresConnection) throws -> FeesReport {
        let days = try FeeStore.days(provider: o.filter.provider, within: o.sinceSeconds ?? 30 * 86_400, on: conn).map {
            FeeDay(
                provider: $0.provider, currency: $0.currency, day: $0.day, captured: $0.captured, refunded: $0.refunded,
                reversed: $0.reversed, fees: $0.fees, net: $0.net, movements: $0.movements, withoutFee: $0.withoutFee)
        }
        return FeesReport(generatedAt: Date(), provider: o.filter.provider, since: o.since ?? "30d", days: days)
    }

    /// Reads what the report shows, in one read-only snapshot so the summary and the list agree.
    static func load(_ o: ReportOptions, on conn: PostgresConnection) throws -> Report {
        try conn.transaction(isolation: .repeatableRead) { tx in
            _ = try tx.execute("SET TRANSACTION READ ONLY")
            let rows = try ReportStore.discrepancies(o.filter, on: tx)
            // Each order's money once (the findings keep their own amounts in the list).
            let open = try ReportStore.openSummary(o.filter, on: tx)
            var summary = ReportSummary(open: open.byKind.values.reduce(0, +), byKind: open.byKind, amountAtRisk: open.atRisk)
            for (reason, count) in try ReportStore.rejectedByReason(within: 86_400, provider: o.filter.provider, on: tx) {
                summary.rejected24h[reason] = count
            }
            let days = try ReportStore.openByDay(o.filter, on: tx).map { DayCount(day: $0.day, kind: $0.kind, count: $0.count) }
            // The HTML carries the evidence of the first discrepancies it lists, each folded in a details element.
            var explanations: [Int64: Explanation] = [:]
            if o.format == .html {
                for d in rows.prefix(Report.explainedInHTML) {
                    explanations[d.id] = try ExplainStore.explain(.discrepancy(d.id), bodyLimit: Report.answerBytesInHTML, on: tx)
                }
            }
            return Report(
                generatedAt: Date(), filters: o.filters, summary: summary, openByDay: days,
                discrepancies: try rows.map(DiscrepancyRow.init(stored:)), explanations: explanations)
        }
    }
}

extension DiscrepancyRow {
    init(stored d: StoredDiscrepancy) throws {
        func object(_ text: String, _ column: String) throws -> JSONValue {
            do { return try JSONValue.parse(text) } catch {
                throw FatalError("discrepancy \(d.id): \(column) is not JSON (\(error))")
            }
        }
        guard let status = DiscrepancyStatus(rawValue: d.status) else { throw FatalError("discrepancy \(d.id) has status \(d.status)") }
        self.init(
            id: d.id, provider: d.provider, orderID: d.orderID, transactionRef: d.transactionRef, kind: d.kind,
            status: status, expected: try object(d.expected, "expected"), actual: try object(d.actual, "actual"),
            detail: d.detail, amountAtRisk: d.amountAtRiskMinor, currency: d.currency, firstSeen: d.firstSeen,
            lastSeen: d.lastSeen, occurrences: d.occurrences, resolvedAt: d.resolvedAt, acknowledgedAt: d.acknowledgedAt,
            ackNote: d.ackNote, acknowledgedBy: d.acknowledgedBy)
        evidenceID = d.evidenceID
    }
}

/// Writes `bytes` to stdout, or to `path` atomically (a temporary file beside it, renamed into place).
func writeOutput(_ bytes: [UInt8], to path: String?) throws {
    guard let path else {
        FileHandle.standardOutput.write(Data(bytes))
        return
    }
    do { try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
        throw FatalError("cannot write \(path): \(error.localizedDescription)")
    }
}
