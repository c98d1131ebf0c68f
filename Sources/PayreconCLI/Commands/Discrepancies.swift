import Observability
import Foundation
import Providers
import Wiring
import Reconciliation
import Reporting
import Store

private let ackNote = OptionKey<String>("--note", "TEXT", "Why it is acknowledged (kept and shown in the report).")
private let ackBy = OptionKey<String>(
    "--by", "NAME", "Who acknowledges it (kept and shown in the report; default: the OS user running the command).")
private let listStatus = Options.status(
    ["open", "acknowledged", "resolved", "all"], help: "Only discrepancies in this status (default open).")
private let listLimit = Options.limit(default: 100, max: 100_000)

struct DiscrepanciesAckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "discrepancies ack",
        summary: "Acknowledge an open discrepancy: it leaves the open set and the money at risk.",
        arguments: [.init(name: "ID", help: "The discrepancy id (the report's id column).")],
        options: [ackNote, ackBy, Options.databaseURL],
        details: """
            The note, who acknowledged it (--by, else the OS user) and the time are kept and shown in every report format (--status acknowledged lists them). A later
            check that finds the same kind with the same expected and actual values keeps it acknowledged (counting the
            occurrence); a different finding of that kind opens a new discrepancy. Exit 0 when acknowledged, 1 when ID is
            not an open discrepancy, 2 on a usage or database error.
            """
    )

    var id: Int64
    var note: String?
    /// Who acknowledges it: --by, else the OS user.
    var by: String?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        id = try Options.id(args.positionals[0], of: "a discrepancy id")
        note = try args.value(ackNote)
        by = try args.value(ackBy) ?? operatingSystemUser()
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        let result = try FindingStore.acknowledge(id: id, note: note, by: by, on: conn)
        guard result.acknowledged else {
            switch result.status {
            case nil: CLI.printError("no discrepancy \(id): see 'payrecon report --status all' for ids")
            case "acknowledged"?: CLI.printError("discrepancy \(id) is already acknowledged")
            case let status?: CLI.printError("discrepancy \(id) is \(status), not open: only an open discrepancy can be acknowledged")
            }
            return Exit.finding
        }
        print("acknowledged discrepancy \(id)" + (by.map { " as \($0)" } ?? "") + (note.map { ": \($0)" } ?? ""))
        return Exit.ok
    }
}

/// The user running the command (under sudo the one who ran sudo, SUDO_USER; else USER; else the password database),
/// for `ack`'s default --by.
func operatingSystemUser() -> String? {
    let env = ProcessInfo.processInfo.environment
    if let user = env["SUDO_USER"], !user.isEmpty { return user }
    if let user = env["USER"], !user.isEmpty { return user }
    guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return nil }
    return String(cString: name)
}

/// "25.00 USD", or "-" without a currency.
func moneyAtRisk(_ d: StoredDiscrepancy) -> String {
    d.currency.map { Money(minorUnits: d.amountAtRiskMinor, currency: $0).formatted + " " + $0.code } ?? "-"
}

struct DiscrepanciesListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "discrepancies list",
        summary: "List discrepancies (open by default), oldest first: id, order, kind, money at risk, since when.",
        options: [listStatus, Options.provider, Options.kind, listLimit, Options.databaseURL]
    )

    var status: String
    var provider: Provider?
    var kind: DiscrepancyKind?
    var limit: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        status = try args.value(listStatus) ?? "open"
        provider = try args.value(Options.provider)
        kind = try args.value(Options.kind)
        limit = try args.value(listLimit, default: 100)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        let rows = try ReportStore.discrepancies(
            DiscrepancyFilter(status: status == "all" ? nil : status, provider: provider, kind: kind), on: conn)
        printTable(
            [
                .init("ID", .right), .init("PROVIDER"), .init("ORDER"), .init("KIND"), .init("STATUS"), .init("AT RISK", .right),
                .init("FIRST SEEN"), .init("LAST SEEN"), .init("SEEN", .right)
            ],
            rows.prefix(limit).map { d in
                [
                    String(d.id), d.provider.rawValue, d.orderID ?? "-", d.kind.rawValue, d.status, moneyAtRisk(d), timestamp(d.firstSeen),
                    timestamp(d.lastSeen), String(d.occurrences)
                ]
            })
        if rows.isEmpty { print("no \(status == "all" ? "" : status + " ")discrepancies") }
        return Exit.ok
    }
}

struct DiscrepanciesShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "discrepancies show",
        summary: "Show one discrepancy: what was expected, what the provider answered, since when, who acknowledged it.",
        arguments: [.init(name: "ID", help: "The discrepancy id (discrepancies list, or the report's id column).")],
        options: [Options.databaseURL]
    )

    var id: Int64
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        id = try Options.id(args.positionals[0], of: "a discrepancy id")
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        guard let d = try ReportStore.discrepancy(id: id, on: conn) else {
            throw FatalError("no discrepancy \(id): payrecon discrepancies list --status all shows the ids")
        }
        let safe = TextTable.safe
        let atRisk = moneyAtRisk(d)
        print(
            """
            discrepancy \(d.id)
              provider      \(d.provider)
              order         \(safe(d.orderID ?? "-"))
              transaction   \(safe(d.transactionRef))
              kind          \(d.kind.rawValue)
              status        \(d.status)
              money at risk \(atRisk)
              expected      \(safe(d.expected))
              actual        \(safe(d.actual))
              detail        \(safe(d.detail))
              first seen    \(timestamp(d.firstSeen))
              last seen     \(timestamp(d.lastSeen)) (seen \(d.occurrences) time\(d.occurrences == 1 ? "" : "s"))
            """)
        if let at = d.resolvedAt { print("  resolved      \(timestamp(at))") }
        if let at = d.acknowledgedAt {
            print(
                "  acknowledged  \(timestamp(at))\(d.acknowledgedBy.map { " by " + safe($0) } ?? "")\(d.ackNote.map { ": " + safe($0) } ?? "")"
            )
        }
        return Exit.ok
    }
}
