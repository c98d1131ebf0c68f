import Foundation
import Observability
import Providers
import Wiring
import Reconciliation
import Reporting
import Store

private let actionsFormat = Options.format(["table", "json"])
private let actionsLimit = Options.limit(default: 1000, max: 1_000_000).help("At most the newest N actions (default 1000).")

struct ActionsListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "actions list",
        summary: "List planned actions.",
        options: [Options.actionStatus, Options.provider, Options.order, actionsFormat, actionsLimit, Options.databaseURL],
        details: "Amounts are the operation's own amount in major units. When more actions match than --limit, a note on stderr says so."
    )

    var status: ActionStatus?
    var provider: Provider?
    var orderID: String?
    var format: String
    var limit: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        status = try args.value(Options.actionStatus)
        provider = try args.value(Options.provider)
        orderID = try args.value(Options.order)
        format = try args.value(actionsFormat, default: "table")
        limit = try args.value(actionsLimit, default: 1000)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        var found = try ActionStore.list(ActionFilter(status: status, provider: provider, orderID: orderID, limit: limit + 1), on: conn)
        if found.count > limit {
            found.removeFirst()
            CLI.printError("more than \(limit) actions match; showing the newest \(limit) (use --limit or filters)")
        }
        let rows = found.map { a in
            ActionRow(
                id: a.id, provider: a.provider, orderID: a.orderID, action: a.kind.rawValue, amount: a.amount.minorUnits,
                currency: a.amount.currency, status: a.status.rawValue, idempotencyKey: a.idempotencyKey, createdAt: a.createdAt,
                target: a.target, providerTarget: a.providerTarget, providerRef: a.providerRef, lastError: a.lastError,
                attempts: a.attempts)
        }
        let colour = isatty(STDOUT_FILENO) == 1 && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
        try writeOutput(format == "json" ? ActionList.json(rows) : Array(ActionList.table(rows, colour: colour).utf8), to: nil)
        return Exit.ok
    }
}
