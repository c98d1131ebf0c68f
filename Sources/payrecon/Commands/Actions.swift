import Foundation
import Providers
import Wiring
import Reconciliation
import Reporting
import Store

let actionsListCommand = Command(
    name: "actions list",
    summary: "List planned actions.",
    options: [
        .init(name: "--status", value: "pending|succeeded|failed|superseded", help: "Only actions in this state."),
        .init(name: "--provider", value: "P", help: "Only pxp, paypal or paypercut."),
        .init(name: "--order", value: "ID", help: "Only the actions of this order."),
        .init(name: "--format", value: "table|json", help: "Output format (default table)."),
        .init(name: "--limit", value: "N", help: "At most the newest N actions (default 1000)."),
        .init(name: "--database-url", value: "URL", help: "Override DATABASE_URL."),
    ],
    details: "Amounts are the operation's own amount in major units. When more actions match than --limit, a note on stderr says so."
) { args in
    let status = try args.value("--status").map { (s: String) throws(UsageError) -> ActionStatus in
        guard let status = ActionStatus(rawValue: s) else {
            throw UsageError("--status must be one of \(ActionStatus.allCases.map(\.rawValue).joined(separator: ", ")), not '\(s)'")
        }
        return status
    }
    let provider = try args.value("--provider").map { (p: String) throws(UsageError) -> Provider in
        guard let provider = Provider(rawValue: p) else {
            throw UsageError("--provider must be one of \(Provider.allCases.map(\.rawValue).joined(separator: ", ")), not '\(p)'")
        }
        return provider
    }
    let format = try args.choice("--format", ["table", "json"], default: "table")
    let limit = try args.int("--limit", default: 1000, range: 1...1_000_000)
    let url = try Environment().databaseURL(flag: args.value("--database-url"))
    let conn = try connect(url)
    defer { conn.close() }
    var found = try ActionStore.list(ActionFilter(status: status, provider: provider, orderID: args.value("--order"), limit: limit + 1), on: conn)
    if found.count > limit {
        found.removeFirst()
        CLI.printError("more than \(limit) actions match; showing the newest \(limit) (use --limit or filters)")
    }
    let rows = found.map { a in
        ActionRow(id: a.id, provider: a.provider.rawValue, orderID: a.orderID, action: a.kind.rawValue, amount: a.amount.minorUnits,
                  currency: a.amount.currency, status: a.status.rawValue, idempotencyKey: a.idempotencyKey, createdAt: a.createdAt,
                  target: a.target, providerTarget: a.providerTarget, providerRef: a.providerRef, lastError: a.lastError,
                  attempts: a.attempts)
    }
    let colour = isatty(STDOUT_FILENO) == 1 && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    try writeOutput(format == "json" ? ActionList.json(rows) : Array(ActionList.table(rows, colour: colour).utf8), to: nil)
    return Exit.ok
}
