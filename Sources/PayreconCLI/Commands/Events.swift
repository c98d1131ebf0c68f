import Observability
import Foundation
import Providers
import Wiring
import Postgres
import Reporting
import Store

/// `events list --status`: the delivery statuses (public so tests read the command's own key).
public let eventsStatus = Options.status(["pending", "done", "ignored", "dead"], help: "Only deliveries in this status.")
private let eventsLimit = Options.limit(default: 50, max: 100_000)

struct EventsListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "events list",
        summary: "List stored deliveries, newest first.",
        options: [eventsStatus, eventsLimit, Options.databaseURL]
    )

    var status: String?
    var limit: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        status = try args.value(eventsStatus)
        limit = try args.value(eventsLimit, default: 50)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        let rows = try DeliveryQueue.list(status: status, limit: limit, on: conn)
        // The report's table: aligned, and control characters from webhook bodies or provider errors shown escaped.
        printTable(
            [
                .init("ID"), .init("PROVIDER"), .init("STATUS"), .init("ATTEMPTS", .right), .init("RECEIVED"), .init("EVENT"),
                .init("OUTCOME")
            ],
            rows.map { d in
                [
                    String(d.id), d.provider.rawValue, d.status, String(d.attempts), timestamp(d.receivedAt),
                    d.eventType ?? "-", String(Self.shownOutcome(d).prefix(100))
                ]
            })
        return Exit.ok
    }
}

struct EventsShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "events show",
        summary: "Show one stored delivery: status, attempts, headers and body.",
        arguments: [.init(name: "ID", help: "The delivery id (event_id in the receiver's answer).")],
        options: [Options.databaseURL]
    )

    var id: Int64
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        id = try Options.id(args.positionals[0])
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        guard let d = try DeliveryQueue.find(id: id, on: conn) else {
            throw FatalError("no delivery \(id): payrecon events list shows the ids")
        }
        // Everything here came from a sender or a provider: control characters (ESC sequences, CR) are shown escaped,
        // so a stored delivery cannot rewrite the operator's terminal.
        let safe = TextTable.safe
        print(
            """
            delivery \(d.id)
              provider      \(d.provider.rawValue)
              dedupe key    \(safe(d.dedupeKey))
              event type    \(safe(d.eventType ?? "-"))
              received      \(timestamp(d.receivedAt))
              status        \(d.status)
              attempts      \(d.attempts)
              next attempt  \(d.status == "pending" ? timestamp(d.nextAttemptAt) : "-")
              redeliveries  \(d.redeliveries)
              processed     \(d.processedAt.map(timestamp) ?? "-")
              outcome       \(safe(d.outcome ?? "-"))
              last error    \(safe(d.lastError ?? "-"))
            headers:
            """)
        for (name, value) in d.headers {
            // Signatures authenticate this delivery only; still, keep them out of terminals and tickets.
            let redacted =
                name.lowercased().contains("signature") || name.lowercased().contains("transmission-sig") ? "<\(value.count) chars>" : value
            print("  \(safe(name)): \(safe(redacted))")
        }
        print("body (\(d.body.count) bytes):")
        // Line by line behind a gutter, so a pretty-printed body keeps its lines, every other control character is
        // escaped, and none of its lines can pass for one of payrecon's.
        print(String(decoding: d.body.prefix(64 * 1024), as: UTF8.self).terminalSafeLines())
        return Exit.ok
    }
}

struct EventsRetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "events retry",
        summary: "Make a delivery due again now, with a fresh attempt budget: a dead or done one, or a pending one waiting for its retry.",
        arguments: [
            .init(name: "ID", help: "The delivery id (dead, done, or pending in backoff; not one a worker holds now).", optional: true)
        ],
        options: [Options.dead, Options.databaseURL]
    )

    /// The delivery given by its id, or nil with `--dead`.
    var id: Int64?
    var everyDead: Bool
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        everyDead = args.flag(Options.dead)
        if everyDead && !args.positionals.isEmpty { throw UsageError("give either ID or --dead, not both") }
        id = try args.positionals.first.map { (text: String) throws(UsageError) -> Int64 in try Options.id(text) }
        databaseURL = try args.value(Options.databaseURL)
    }

    func validate() throws(UsageError) {
        if everyDead && id != nil { throw UsageError("give either ID or --dead, not both") }
        if !everyDead && id == nil { throw UsageError("give a delivery ID or --dead") }
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        guard let id else {
            let n = try DeliveryQueue.retry(id: nil, on: conn)
            print("\(n) dead deliveries are due again")
            return Exit.ok
        }
        let n = try DeliveryQueue.retry(id: id, on: conn)
        if n == 0 {
            if try DeliveryQueue.find(id: id, on: conn) != nil {
                print("delivery \(id) is being processed by a worker right now; it needs no retry")
                return Exit.finding
            }
            throw FatalError("no delivery \(id): payrecon events list --status dead shows the ones to retry")
        }
        print("delivery \(id) is due again")
        return Exit.ok
    }
}

/// `2026-11-29 16:12:27Z` (UTC).
func timestamp(_ date: Date) -> String {
    Timestamp.iso8601(date).replacingOccurrences(of: "T", with: " ")
}

/// A list command's table on stdout: aligned, plain (no colour), control characters from outside shown escaped.
func printTable(_ columns: [TextTable.Column], _ rows: [[String]]) {
    var table = TextTable(columns)
    table.indent = ""
    for row in rows { table.append(row) }
    print(table.render(colour: false), terminator: "")
}

extension EventsListCommand {
    /// What `events list` shows of a delivery: how it ended when it did (done, ignored), else what is failing now —
    /// a delivery retried after an earlier success showed that old success while it failed again.
    static func shownOutcome(_ d: QueuedDelivery) -> String {
        switch d.status {
        case "done", "ignored": return d.outcome ?? d.lastError ?? ""
        default:
            if let error = d.lastError { return "failing: " + error }
            return d.status == "pending" && d.attempts == 0 ? "not processed yet" : (d.outcome.map { "earlier: " + $0 } ?? "")
        }
    }
}
