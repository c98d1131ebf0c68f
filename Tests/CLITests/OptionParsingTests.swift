@testable import PayreconCLI
import Providers
import Reconciliation
import Testing

/// The command `arguments` make, as `payrecon` parses them, handed to `check` (swift-argument-parser's `AssertParse`):
/// a usage error is a failure.
func AssertParse<C: ParsableCommand>(
    _ type: C.Type, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation, _ check: (C) throws -> Void
) rethrows {
    let command: C
    do { command = try C.parse(arguments) } catch {
        Issue.record("\(arguments) did not parse: \(error)", sourceLocation: sourceLocation)
        return
    }
    try check(command)
}

/// `arguments` are refused as `payrecon <name>` would refuse them: a usage error holding `message`.
func AssertParseError(
    _ name: String, _ arguments: [String], _ message: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let command = CLI.commands.first(where: { $0.name == name }) else {
        Issue.record("no command \(name)", sourceLocation: sourceLocation)
        return
    }
    do throws(UsageError) {
        let made = try command.command(arguments)
        Issue.record("\(name) \(arguments) parsed as \(made)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.description.contains(message), "\(error)", sourceLocation: sourceLocation)
    }
}

/// Parsing as `payrecon <command>` does it: each command a type whose values are read, typed and checked before it
/// runs, and every bad input a usage error that says what to do.
@Suite struct OptionParsingTests {
    @Test func typedValuesAreReadThroughTheirKeys() throws {
        AssertParse(ReconcileCommand.self, ["--provider", "paypal", "--concurrency=32", "--all"]) { r in
            #expect(r.provider == .paypal)
            #expect(r.concurrency == 32)
            #expect(r.all)
            #expect(r.since == nil)
            #expect(r.databaseURL == nil)
        }
        AssertParse(CheckCommand.self, ["paypal:ORD/1:a", "--format", "json"]) { c in
            #expect(c.provider == .paypal)
            #expect(c.orderID == "ORD/1:a")  // everything after the first colon
            #expect(c.format == "json")
        }
        AssertParse(ExplainCommand.self, ["--order", "pxp:ORD-1"]) { e in
            guard case .order(.pxp, "ORD-1") = e.subject else { Issue.record("\(e.subject)"); return }
            #expect(e.format == "table")
        }
        AssertParse(BackfillCommand.self, ["--provider", "paypal", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"]) { b in
            #expect(b.from == 1_793_491_200)
            #expect(b.to == 1_793_577_600)
            #expect(b.since == nil && !b.dryRun && b.concurrency == 16)
        }
        AssertParse(ActionsRetryCommand.self, ["42"]) { a in
            #expect(a.id == 42)
            #expect(!a.everyFailed)
        }
        AssertParse(SettlementImportCommand.self, ["a.csv", "b.csv"]) { s in
            #expect(s.paths == ["a.csv", "b.csv"])
            #expect(s.provider == .paypal)  // the provider that publishes them, by default
        }
        AssertParse(ConsoleAddUserCommand.self, ["ana", "--role", "operator", "--proxy-only"]) { u in
            #expect(u.name == "ana" && u.role == .operator && u.proxyOnly)
        }
    }

    /// The flags and the options that change what a command does, each read into the command.
    @Test func flagsAndOptionsReachTheCommand() {
        AssertParse(WorkCommand.self, ["--once", "--batch", "64", "--max-attempts", "3", "--api-listen", "127.0.0.1:9"]) { w in
            #expect(w.once && w.batch == 64 && w.maxAttempts == 3 && w.apiListen == "127.0.0.1:9")
        }
        AssertParse(ActionsRetryCommand.self, ["--failed"]) { a in #expect(a.everyFailed && a.id == nil) }
        AssertParse(EventsRetryCommand.self, ["--dead"]) { e in #expect(e.everyDead && e.id == nil) }
        AssertParse(EventsRetryCommand.self, ["12"]) { e in #expect(!e.everyDead && e.id == 12) }
        AssertParse(ReportCommand.self, ["--view", "fees", "--since", "7d", "--output", "fees.html", "--format", "html"]) { r in
            #expect(r.options.view == "fees" && r.options.sinceSeconds == 604_800 && r.options.since == "7d")
            #expect(r.options.output == "fees.html" && r.options.format == .html && !r.options.failOnOpen)
        }
        AssertParse(ReportCommand.self, ["--status", "all", "--provider", "pxp", "--kind", "amount_mismatch", "--fail-on-open"]) { r in
            #expect(r.options.filter.status == nil && r.options.filter.provider == .pxp && r.options.filter.kind == .amountMismatch)
            #expect(r.options.failOnOpen && r.options.view == "discrepancies")
        }
        AssertParse(DiscrepanciesAckCommand.self, ["5", "--by", "ana", "--note", "refunded by hand"]) { d in
            #expect(d.id == 5 && d.by == "ana" && d.note == "refunded by hand")
        }
        AssertParse(
            VerifyCommand.self, ["paypal", "--body", "b", "--headers", "h", "--webhook-id", "WH-1", "--cert", "c", "--at", "transmission"]
        ) {
            v in
            #expect(v.provider == .paypal && v.bodyPath == "b" && v.headersPath == "h" && v.webhookID == "WH-1" && v.certPath == "c")
            guard case .transmission = v.at else { Issue.record("\(v.at)"); return }
        }
        AssertParse(VerifyCommand.self, ["pxp", "--body", "b", "--headers", "h", "--key", "k", "--roots", "r"]) { v in
            #expect(v.key == "k" && v.rootsPath == "r")
            guard case .now = v.at else { Issue.record("\(v.at)"); return }
        }
        AssertParse(ExplainCommand.self, ["7", "--answers", "0", "--format", "json"]) { e in
            guard case .discrepancy(7) = e.subject else { Issue.record("\(e.subject)"); return }
            #expect(e.answerBytes == 0 && e.format == "json")
        }
        AssertParse(RejectionsShowCommand.self, ["3", "--export", "/tmp/sample"]) { r in
            #expect(r.id == 3 && r.exportDirectory == "/tmp/sample")
        }
        AssertParse(PruneCommand.self, ["--dry-run"]) { p in #expect(p.dryRun) }
        AssertParse(PruneCommand.self, []) { p in #expect(!p.dryRun) }
        AssertParse(OrdersImportCommand.self, ["-", "--strict"]) { o in #expect(o.path == "-" && o.strict) }
        AssertParse(DoctorCommand.self, ["--provider", "paypercut"]) { d in #expect(d.provider == .paypercut) }
        AssertParse(BackfillCommand.self, ["--provider", "paypercut", "--dry-run", "--concurrency", "4"]) { b in
            #expect(b.provider == .paypercut && b.dryRun && b.concurrency == 4)
        }
    }

    /// `--help` makes no command (its required arguments were never asked for); `payrecon` prints the help instead.
    @Test func helpMakesNoCommand() {
        AssertParseError("events show", ["--help"], "--help asks for 'payrecon events show' help")
        #expect(throws: UsageError.self) { try OrdersImportCommand.parse(["-h"]) }
    }

    @Test func defaultsApplyWhenAnOptionIsAbsent() {
        AssertParse(WorkCommand.self, []) { w in
            #expect(w.batch == 32)
            #expect(w.lease == .seconds(60))
            #expect(w.maxAttempts == 10)
            #expect(!w.once)
            #expect(w.metricsListen == nil && w.apiListen == nil)
        }
        AssertParse(ServeCommand.self, []) { s in #expect(s.threads == 4 && s.listen == nil && s.portFile == nil) }
        AssertParse(ActionsExecuteCommand.self, []) { a in #expect(a.lease == .seconds(120)) }
        AssertParse(DiscrepanciesListCommand.self, []) { d in #expect(d.status == "open" && d.limit == 100) }
        AssertParse(ActionsListCommand.self, []) { a in #expect(a.format == "table" && a.limit == 1000) }
    }

    @Test func durationsAreReadInSeconds() {
        AssertParse(WorkCommand.self, ["--lease", "2m"]) { w in #expect(w.lease == .seconds(120)) }
        AssertParse(ReconcileCommand.self, ["--since", "7d"]) { r in #expect(r.since == 604_800) }
        AssertParse(BackfillCommand.self, ["--provider", "paypal", "--since", "36h"]) { b in #expect(b.since == 129_600) }
    }

    /// A bad value is refused when the command is made, before it runs: nothing is touched.
    @Test(arguments: [
        ("reconcile", ["--provider", "stripe"], "--provider must be one of pxp, paypal, paypercut, not 'stripe'"),
        ("reconcile", ["--concurrency", "0"], "--concurrency must be a whole number from 1 to 1024, not '0'"),
        ("work", ["--lease", "soon"], "--lease soon is not a duration"),
        ("work", ["--batch", "x"], "--batch must be a whole number from 1 to 256, not 'x'"),
        ("work", ["--lease", "0s"], "--lease 0s is not a duration"),  // a lease of nothing is refused
        ("work", ["--lease", "2d"], "--lease 2d must be at most 1d"),
        ("report", ["--database-url", ""], "--database-url needs a value (URL)"),
        ("report", ["--provider", "\u{1B}[2Jpxp"], "not '\\u{1B}[2Jpxp'"),  // the user's text, escaped
        ("report", ["--kind", "nope"], "--kind must be one of missing_at_provider"),
        ("report", ["--format", "xml"], "--format must be one of table, json, csv, html, not 'xml'"),
        ("actions list", ["--status", "done"], "--status must be one of pending, succeeded, failed, superseded"),
        ("events list", ["--status", "lost"], "--status must be one of pending, done, ignored, dead, not 'lost'"),
        ("explain", ["1", "--answers", "-1"], "--answers -1 is not a number of bytes"),
        ("explain", ["x"], "ID must be a discrepancy id (a positive number), not 'x'"),
        ("explain", ["--order", "nocolon"], "--order takes PROVIDER:ORDER_ID (pxp:ORD-1), not 'nocolon'"),
        ("report", ["--since", "5"], "--since: "),
        ("check", ["ORD-1"], "the order takes PROVIDER:ORDER_ID (pxp:ORD-1), not 'ORD-1'"),
        ("check", ["stripe:ORD-1"], "the order: unknown provider 'stripe'"),
        ("discrepancies ack", ["0"], "ID must be a discrepancy id (a positive number), not '0'"),
        ("events show", ["x"], "ID must be a number, not 'x'"),
        ("actions retry", ["-3"], "ID must be an action id (a positive number), not '-3'"),
        ("backfill", ["--provider", "paypal", "--from", "yesterday", "--to", "today"], "--from yesterday is not a time"),
        ("backfill", [], "--provider is required"),
        ("verify", ["stripe", "--body", "b", "--headers", "h"], "PROVIDER must be pxp, paypal or paypercut, not 'stripe'"),
        ("verify", ["pxp", "--body", "b", "--headers", "h", "--at", "noon"], "--at must be 'transmission', 'now'"),
        ("console add-user", ["Ana Smith", "--role", "viewer"], "NAME must be 1 to 64 of a-z"),
        ("console add-user", ["ana", "--role", "admin"], "--role must be one of viewer, operator, not 'admin'")
    ])
    func badValuesAreUsageErrorsNamingTheOption(command: String, arguments: [String], message: String) {
        AssertParseError(command, arguments, message)
    }

    /// What holds between values (`validate()`): options that exclude or need each other, and what is required.
    @Test(arguments: [
        ("reconcile", ["--since", "24h", "--all"], "use either --since or --all, not both"),
        ("backfill", ["--provider", "paypal", "--from", "2026-11-01T00:00:00Z"], "--from and --to go together"),
        (
            "backfill", ["--provider", "paypal", "--since", "1d", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"],
            "use either --since or --from and --to, not both"
        ),
        (
            "backfill", ["--provider", "paypal", "--from", "2026-11-02T00:00:00Z", "--to", "2026-11-01T00:00:00Z"],
            "--to must be after --from"
        ),
        ("actions retry", [], "give an action ID or --failed"),
        ("actions retry", ["7", "--failed"], "give either ID or --failed, not both"),
        ("events retry", [], "give a delivery ID or --dead"),
        ("events retry", ["7", "--dead"], "give either ID or --dead, not both"),
        ("explain", [], "give a discrepancy ID or --order PROVIDER:ORDER_ID"),
        ("explain", ["7", "--order", "pxp:ORD-1"], "give a discrepancy ID or --order, not both"),
        ("report", ["--view", "fees", "--kind", "amount_mismatch"], "--kind lists discrepancies: it does not apply to --view fees"),
        ("report", ["--view", "fees", "--fail-on-open"], "--fail-on-open is about open discrepancies"),
        ("verify", ["pxp", "--headers", "h"], "--body FILE is required"),
        ("verify", ["pxp", "--body", "b"], "--headers FILE is required"),
        ("settlement import", ["--provider", "pxp", "a.csv"], "pxp publishes no settlement files payrecon reads"),
        ("settlement verify", ["--provider", "paypercut", "a.csv"], "paypercut publishes no settlement files payrecon reads"),
        ("console add-user", ["ana"], "--role is required: viewer or operator"),
        ("report", ["--view", "fees", "--status", "open"], "--status lists discrepancies: it does not apply to --view fees"),
        (
            "backfill", ["--provider", "paypal", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-01T00:00:00Z"],
            "--to must be after --from"
        ),
        ("backfill", ["--provider", "pxp"], "pxp publishes no transaction search payrecon reads"),
        ("actions retry", ["abc", "--failed"], "give either ID or --failed, not both"),
        ("events retry", ["abc", "--dead"], "give either ID or --dead, not both")
    ])
    func valuesThatDoNotGoTogetherAreUsageErrors(command: String, arguments: [String], message: String) {
        AssertParseError(command, arguments, message)
    }

    @Test(arguments: [
        (["--colour"], "unknown option --colour for 'payrecon report'"),
        (["--output"], "--output needs a value (FILE)"),
        (["--fail-on-open=yes"], "--fail-on-open takes no value"),
        (["extra"], "unexpected argument 'extra'")
    ])
    func malformedCommandLinesAreUsageErrors(arguments: [String], message: String) {
        AssertParseError("report", arguments, message)
    }

    @Test func missingPositionalSaysTheUsage() {
        AssertParseError("verify", [], "missing PROVIDER; usage: payrecon verify [options] PROVIDER")
    }

    @Test func everyCommandDeclaresEachOptionOnceAndDocumentsIt() {
        for c in CLI.commands {
            let names = c.options.map(\.name)
            #expect(Set(names).count == names.count, "\(c.name) declares an option twice: \(names)")
            for name in names { #expect(c.help.contains(name), "\(c.name) --help does not show \(name)") }
        }
    }

    /// A command line each command accepts (a new command must add one here).
    static let acceptedLines: [String: [String]] = [
        "serve": [], "work": [], "reconcile": [], "backfill": ["--provider", "paypal"], "report": [],
        "orders import": ["orders.csv"], "settlement import": ["stl.csv"], "settlement verify": ["stl.csv"],
        "actions list": [], "actions execute": [], "actions retry": ["1"], "events list": [], "events show": ["1"],
        "events retry": ["1"], "rejections list": [], "rejections show": ["1"], "discrepancies list": [],
        "discrepancies show": ["1"], "discrepancies ack": ["1"], "explain": ["1"], "check": ["pxp:ORD-1"], "prune": [],
        "verify": ["pxp", "--body", "b", "--headers", "h"], "migrate": [], "doctor": [], "console": [],
        "console add-user": ["ana", "--role", "viewer"]
    ]

    /// Every command that reaches the database takes --database-url (some once did not), and the command made keeps
    /// it: the value its run hands to `Environment(databaseURL:)`, which puts it in place of DATABASE_URL.
    @Test func everyCommandThatReachesTheDatabaseKeepsDatabaseURL() throws {
        let offline: Set<String> = ["verify", "settlement verify", "console add-user"]
        let url = "postgresql://x@127.0.0.1:1/db"
        #expect(Set(Self.acceptedLines.keys) == Set(CLI.commands.map(\.name)))
        for command in CLI.commands {
            let line = try #require(Self.acceptedLines[command.name])
            let made = try command.command(line + (offline.contains(command.name) ? [] : ["--database-url", url]))
            let kept = Mirror(reflecting: made).children.first { $0.label == "databaseURL" }
            if offline.contains(command.name) {
                #expect(kept == nil, "\(command.name) reaches no database, yet keeps a database URL")
            } else {
                #expect(kept?.value as? String == url, "\(command.name)")
            }
        }
        let process = ["DATABASE_URL": "postgresql://env@127.0.0.1:2/db", "DATABASE_URL_FILE": "/run/secrets/url", "PXP_KEY": "k"]
        #expect(Environment(databaseURL: url, process).values == ["DATABASE_URL": url, "PXP_KEY": "k"])
        #expect(Environment(databaseURL: "", process).values == process)
        #expect(Environment(databaseURL: nil, process).values == process)
    }
}
