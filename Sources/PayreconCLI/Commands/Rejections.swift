import Observability
import Foundation
import Providers
import Reconciliation
import Reporting
import Store
import Wiring

private let rejectionsReason = OptionKey<String>("--reason", "R", "Only this rejection reason (invalid_signature, stale_timestamp, …).")
private let rejectionsLimit = Options.limit(default: 50, max: 100_000)
private let exportOption = OptionKey<String>(
    "--export", "DIR",
    "Write the sample's body and headers where `payrecon verify` reads them (DIR/body, DIR/headers.json).")

struct RejectionsListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "rejections list",
        summary: "List the kept samples of rejected deliveries, newest first.",
        options: [Options.provider, rejectionsReason, rejectionsLimit, Options.databaseURL],
        details: """
            Every rejected delivery is counted (rejection_counts, per provider, reason, source and hour); the first 20 of
            each provider and reason an hour, at most 100 a day, are kept as samples: 8 KiB of headers and of the body.
            Anyone can send them: nothing here is authenticated.
            """
    )

    var provider: Provider?
    var reason: String?
    var limit: Int
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        provider = try args.value(Options.provider)
        reason = try args.value(rejectionsReason)
        limit = try args.value(rejectionsLimit, default: 50)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        let rows = try RejectionSamples.list(provider: provider, reason: reason, limit: limit, on: conn)
        printTable(
            [.init("ID"), .init("PROVIDER"), .init("REASON"), .init("SOURCE"), .init("RECEIVED"), .init("BYTES", .right), .init("MESSAGE")],
            rows.map { r in
                [
                    String(r.id), r.provider.rawValue, r.reason, r.source ?? "-", timestamp(r.receivedAt), String(r.bodyBytes),
                    String(r.message.prefix(100))
                ]
            })
        return Exit.ok
    }
}

struct RejectionsShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "rejections show",
        summary: "Show one rejected-delivery sample; --export writes what `payrecon verify` reads.",
        arguments: [.init(name: "ID", help: "The sample's id (rejections list).")],
        options: [exportOption, Options.databaseURL],
        details: """
            With --export DIR, DIR/body holds the kept body and DIR/headers.json the kept headers as a JSON object, and the
            command prints the `payrecon verify` line that checks them offline at their own time. A body longer than the
            8 KiB kept cannot verify (its signature covers all of it): the command says so.
            """
    )

    var id: Int64
    /// Where --export writes the sample for `payrecon verify`.
    var exportDirectory: String?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        id = try Options.id(args.positionals[0])
        exportDirectory = try args.value(exportOption)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let conn = try connect(try Environment(databaseURL: databaseURL).databaseURL())
        defer { conn.close() }
        guard let r = try RejectionSamples.find(id: id, on: conn) else {
            throw FatalError(
                "no rejected-delivery sample \(id): `payrecon rejections list` shows the kept ones (samples older than "
                    + "PAYRECON_RETAIN's rejected= are pruned)")
        }
        let safe = TextTable.safe
        let cut = Int64(r.bodyPrefix.count) < r.bodyBytes
        print(
            """
            rejected delivery \(r.id) (unauthenticated: anyone could have sent it)
              provider   \(r.provider)
              reason     \(r.reason)
              message    \(safe(r.message))
              source     \(safe(r.source ?? "-"))
              received   \(timestamp(r.receivedAt))
              body       \(r.bodyBytes) bytes\(cut ? ", the first \(r.bodyPrefix.count) kept" : "")
            headers:
            """)
        for (name, value) in r.headers { print("  \(safe(name)): \(safe(value))") }
        print("body:")
        // A stranger's bytes: behind a gutter, each line escaped (none can pass for a line of payrecon's).
        print(String(decoding: r.bodyPrefix, as: UTF8.self).terminalSafeLines())
        guard let directory = exportDirectory else { return Exit.ok }
        let dir = URL(fileURLWithPath: directory)
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try Data(r.bodyPrefix).write(to: dir.appendingPathComponent("body"))
            try Data(r.headersJSON).write(to: dir.appendingPathComponent("headers.json"))
        } catch {
            throw FatalError("cannot write the sample to \(directory): \(error.localizedDescription); pick a directory you can write")
        }
        let provider = r.provider.rawValue
        print(
            """

            exported to \(dir.path)/body and \(dir.path)/headers.json; check it with (PayPal's certificate is fetched from its
            PAYPAL-CERT-URL unless you add --cert FILE):
              payrecon verify \(provider) --body \(dir.path)/body --headers \(dir.path)/headers.json --at transmission
            """)
        if cut { print("note: the body was cut at \(r.bodyPrefix.count) of \(r.bodyBytes) bytes, so its signature cannot verify") }
        return Exit.ok
    }
}
