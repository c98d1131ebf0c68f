import Observability
import Foundation
import Providers
import Reconciliation
import Reporting
import Store

private let explainAnswers = OptionKey<Int>(
    "--answers", "BYTES", "Quote at most BYTES of each answer in the table (default 4000; json gives them whole)."
) {
    (v: String) throws(UsageError) -> Int in
    guard let n = Int(v), (0...1_048_576).contains(n) else { throw UsageError("--answers \(v) is not a number of bytes from 0 to 1048576") }
    return n
}
private let explainOrder = OptionKey<String>("--order", "PROVIDER:ORDER_ID", "Explain an order instead of a discrepancy (pxp:ORD-1).")
private let explainFormat = Options.format(["table", "json"])

struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "explain",
        summary: "Show the evidence behind a discrepancy or an order: imports, deliveries, provider answers, rules, actions.",
        arguments: [.init(name: "ID", help: "The discrepancy id (discrepancies list, or the report's id column).", optional: true)],
        options: [explainOrder, explainFormat, explainAnswers, Options.databaseURL],
        details: """
            In time order: the order as stored (when, from which file, or the orders table, and its values then, with every
            version a later import or write replaced); each delivery that named it (id, event type, how it ended); each
            check (webhook, sweep, executor or command) with the SHA-256 of every provider answer it used, and the raw
            answers themselves where the check opened, changed or resolved a discrepancy or planned an action; the
            decision-table rows that fired with the A, C, R, V, D they saw; each action with every call made for it (when,
            the idempotency key as sent, what was sent, the provider's status and answer, the outcome).
            Evidence is kept as checks run and pruned after PAYRECON_RETAIN's evidence= (90d), except what an open
            discrepancy or a pending action points at. --format json gives whole answers (the table cuts them at 4,000 bytes).
            Exit 0; 2 when the id or order is unknown, or on a usage or database error.
            """
    )

    var subject: ExplainStore.Subject
    var format: String
    var answerBytes: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        switch (args.positionals.first, try args.value(explainOrder)) {
        case (nil, nil):
            throw UsageError("give a discrepancy ID or --order PROVIDER:ORDER_ID; usage: payrecon explain [ID] [--order PROVIDER:ORDER_ID]")
        case (_?, _?): throw UsageError("give a discrepancy ID or --order, not both")
        case (let id?, nil):
            subject = .discrepancy(try Options.id(id, of: "a discrepancy id"))
        case (nil, let key?):
            let (provider, orderID) = try Options.orderKey(key, what: "--order")
            subject = .order(provider, orderID)
        }
        format = try args.value(explainFormat) ?? "table"
        answerBytes = try args.value(explainAnswers) ?? Explanation.bodyPreviewBytes
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        let explanation: Explanation
        do {
            // The timeline shows the start of each answer: only that much is read.
            explanation = try ExplainStore.explain(subject, bodyLimit: format == "json" ? nil : answerBytes, on: conn)
        } catch let missing as ExplainStore.NotFound {
            throw FatalError(missing.description)
        }
        switch format {
        case "json": FileHandle.standardOutput.write(Data(explanation.json()))
        default: FileHandle.standardOutput.write(Data(TextTable.safeMultiline(explanation.table(bodyLimit: answerBytes)).utf8))
        }
        return Exit.ok
    }
}
