import Foundation
import Providers
import Wiring
import Store

private let ackNote = OptionKey<String>("--note", "TEXT", "Why it is acknowledged (kept and shown in the report).")

let discrepanciesAckCommand = Command(
    name: "discrepancies ack",
    summary: "Acknowledge an open discrepancy: it leaves the open set and the money at risk.",
    arguments: [.init(name: "ID", help: "The discrepancy id (the report's id column).")],
    options: [ackNote, Options.databaseURL],
    details: """
        The note and the time are kept and shown in every report format (--status acknowledged lists them). A later
        check that finds the same kind with the same expected and actual values keeps it acknowledged (counting the
        occurrence); a different finding of that kind opens a new discrepancy. Exit 0 when acknowledged, 1 when ID is
        not an open discrepancy, 2 on a usage or database error.
        """
) { args in
    guard let id = Int64(args.positionals[0]), id > 0 else { throw UsageError("ID must be a discrepancy id (a positive number), not '\(args.positionals[0])'") }
    let note = try args.value(ackNote)
    let conn = try connect(try Environment().databaseURL(flag: args.value(Options.databaseURL)))
    defer { conn.close() }
    let result = try FindingStore.acknowledge(id: id, note: note, on: conn)
    guard result.acknowledged else {
        switch result.status {
        case nil: CLI.printError("no discrepancy \(id): see 'payrecon report --status all' for ids")
        case "acknowledged"?: CLI.printError("discrepancy \(id) is already acknowledged")
        case let status?: CLI.printError("discrepancy \(id) is \(status), not open: only an open discrepancy can be acknowledged")
        }
        return Exit.finding
    }
    print("acknowledged discrepancy \(id)" + (note.map { ": \($0)" } ?? ""))
    return Exit.ok
}
