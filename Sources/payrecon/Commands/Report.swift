import Foundation
import Providers
import Wiring
import Postgres
import Reconciliation
import Reporting
import Store

let reportCommand = Command(
    name: "report",
    summary: "What is wrong, since when, and how much money is at risk.",
    options: [
        .init(name: "--format", value: "table|json|csv|html", help: "Output format (default table)."),
        .init(name: "--output", value: "FILE", help: "Write to FILE (atomically) instead of stdout."),
        .init(name: "--status", value: "open|resolved|all", help: "Which discrepancies to list (default open)."),
        .init(name: "--provider", value: "P", help: "Only pxp, paypal or paypercut."),
        .init(name: "--kind", value: "K", help: "Only this discrepancy kind (e.g. amount_mismatch)."),
        .init(name: "--since", value: "DURATION", help: "Only those last seen within DURATION (90s, 10m, 24h, 7d)."),
        .init(name: "--fail-on-open", value: nil, help: "Exit 1 when a listed discrepancy is open (after printing)."),
        .init(name: "--database-url", value: "URL", help: "Override DATABASE_URL."),
    ],
    details: """
        The summary (open count by kind, money at risk per currency, rejected deliveries in the last 24 h) counts open
        discrepancies matching --provider, --kind and --since, whatever --status lists. Money at risk is the sum of the
        open discrepancies' amounts at risk, per currency, in major units.
        Kinds: \(DiscrepancyKind.allCases.map(\.rawValue).joined(separator: ", ")).
        Table output is coloured on a terminal unless NO_COLOR is set. Exit 0, or 1 with --fail-on-open when a
        listed discrepancy is open; 2 on a usage or database error.
        """
) { args in
    let options = try ReportOptions(args)
    let url = try Environment().databaseURL(flag: args.value("--database-url"))
    let conn = try connect(url)
    defer { conn.close() }
    let report = try ReportOptions.load(options, on: conn)

    let toTerminal = options.output == nil && isatty(STDOUT_FILENO) == 1
    let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    let bytes: [UInt8] = switch options.format {
    case .table: Array(report.table(colour: toTerminal && !noColor).utf8)
    case .json: report.json()
    case .csv: Array(report.csv().utf8)
    case .html: Array(report.html().utf8)
    }
    try writeOutput(bytes, to: options.output)
    return options.failOnOpen && report.listsOpen ? Exit.finding : Exit.ok
}

/// `payrecon report`'s flags, validated before the database is touched.
struct ReportOptions {
    var format: ReportFormat
    var output: String?
    var filter: DiscrepancyFilter
    var filters: ReportFilters
    var failOnOpen: Bool

    init(_ args: ParsedArguments) throws(UsageError) {
        format = ReportFormat(rawValue: try args.choice("--format", ReportFormat.allCases.map(\.rawValue), default: "table"))!
        if let path = args.value("--output"), path.isEmpty { throw UsageError("--output needs a file name") }
        output = args.value("--output")
        let status = try args.choice("--status", ["open", "resolved", "all"], default: "open")
        let provider = try args.value("--provider").map { (p: String) throws(UsageError) -> String in
            guard Provider(rawValue: p) != nil else {
                throw UsageError("--provider must be one of \(Provider.allCases.map(\.rawValue).joined(separator: ", ")), not '\(p)'")
            }
            return p
        }
        let kind = try args.value("--kind").map { (k: String) throws(UsageError) -> DiscrepancyKind in
            guard let kind = DiscrepancyKind(rawValue: k) else {
                throw UsageError("--kind must be one of \(DiscrepancyKind.allCases.map(\.rawValue).joined(separator: ", ")), not '\(k)'")
            }
            return kind
        }
        let since = args.value("--since")
        var seconds: Int64?
        if let since {
            do { seconds = try DurationParser.parse(since) } catch { throw UsageError("--since: \(error)") }
        }
        filter = DiscrepancyFilter(status: status == "all" ? nil : status, provider: provider, kind: kind, lastSeenWithin: seconds)
        filters = ReportFilters(status: status, provider: provider, kind: kind, since: since)
        failOnOpen = args.flag("--fail-on-open")
    }

    /// Reads what the report shows, in one read-only snapshot so the summary and the list agree.
    static func load(_ o: ReportOptions, on conn: PostgresConnection) throws -> Report {
        try conn.transaction(isolation: .repeatableRead) { tx in
            _ = try tx.execute("SET TRANSACTION READ ONLY")
            let rows = try ReportStore.discrepancies(o.filter, on: tx)
            var summary = ReportSummary()
            for total in try ReportStore.openTotals(o.filter, on: tx) {
                summary.open += total.count
                summary.byKind[total.kind, default: 0] += total.count
                if let currency = total.currency, total.amountAtRiskMinor != 0 {
                    let (sum, overflow) = summary.amountAtRisk[currency, default: 0].addingReportingOverflow(total.amountAtRiskMinor)
                    guard !overflow else { throw FatalError("money at risk in \(currency.code) does not fit in 64 bits") }
                    summary.amountAtRisk[currency] = sum
                }
            }
            for (reason, count) in try ReportStore.rejectedByReason(within: 86_400, provider: o.filter.provider, on: tx) {
                summary.rejected24h[reason] = count
            }
            let days = try ReportStore.openByDay(o.filter, on: tx).map { DayCount(day: $0.day, kind: $0.kind, count: $0.count) }
            return Report(generatedAt: Date(), filters: o.filters, summary: summary, openByDay: days,
                          discrepancies: try rows.map(DiscrepancyRow.init(stored:)))
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
        self.init(id: d.id, provider: d.provider, orderID: d.orderID, transactionRef: d.transactionRef, kind: d.kind,
                  status: status, expected: try object(d.expected, "expected"), actual: try object(d.actual, "actual"),
                  detail: d.detail, amountAtRisk: d.amountAtRiskMinor, currency: d.currency, firstSeen: d.firstSeen,
                  lastSeen: d.lastSeen, occurrences: d.occurrences, resolvedAt: d.resolvedAt)
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
