@testable import PayreconCLI
import Reconciliation
import Testing

/// Option parsing as `payrecon <command>` does it: typed keys, every bad input a usage error that says what to do.
@Suite struct OptionParsingTests {
    static func command(_ name: String) -> Command { CLI.commands.first { $0.name == name }! }

    @Test func typedValuesAreReadThroughTheirKeys() throws {
        let args = try Self.command("reconcile").parse(["--provider", "paypal", "--concurrency=32", "--all"])
        #expect(try args.value(Options.provider) == .paypal)
        #expect(try args.value(Options.concurrency, default: 16) == 32)
        #expect(args.flag(Options.all))
        #expect(try args.value(Options.databaseURL) == nil)
    }

    @Test func defaultsApplyWhenAnOptionIsAbsent() throws {
        let args = try Self.command("work").parse([])
        #expect(try args.value(Options.batch, default: 32) == 32)
        #expect(try args.value(Options.lease, default: 60) == 60)
        #expect(!args.flag(Options.once))
    }

    @Test func durationsAreReadInSeconds() throws {
        let args = try Self.command("work").parse(["--lease", "2m"])
        #expect(try args.value(Options.lease) == 120)
    }

    @Test(arguments: [
        ("reconcile", ["--provider", "stripe"], "--provider must be one of pxp, paypal, paypercut, not 'stripe'"),
        ("reconcile", ["--concurrency", "0"], "--concurrency must be a whole number from 1 to 1024, not '0'"),
        ("work", ["--lease", "soon"], "--lease soon is not a duration"),
        ("work", ["--batch", "x"], "--batch must be a whole number from 1 to 256, not 'x'"),
        ("report", ["--kind", "nope"], "--kind must be one of missing_at_provider"),
        ("actions list", ["--status", "done"], "--status must be one of pending, succeeded, failed, superseded"),
        ("events list", ["--status", "lost"], "--status must be one of pending, done, ignored, dead, not 'lost'"),
        ("work", ["--lease", "0s"], "--lease 0s is not a duration")  // a lease of nothing is refused
    ])
    func badValuesAreUsageErrorsNamingTheOption(command: String, arguments: [String], message: String) throws {
        let args = try Self.command(command).parse(arguments)
        // The value is checked when read: every command reads its options before touching anything.
        let error = command == "events list" ? readEventsStatus(args) : readAll(args, arguments[0])
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }

    @Test(arguments: [
        (["--colour"], "unknown option --colour for 'payrecon report'"),
        (["--output"], "--output needs a value (FILE)"),
        (["--fail-on-open=yes"], "--fail-on-open takes no value"),
        (["extra"], "unexpected argument 'extra'")
    ])
    func malformedCommandLinesAreUsageErrors(arguments: [String], message: String) {
        #expect(throws: UsageError.self) { try Self.command("report").parse(arguments) }
        do { _ = try Self.command("report").parse(arguments) } catch { #expect(error.description.contains(message), "\(error)") }
    }

    @Test func missingPositionalSaysTheUsage() {
        do { _ = try Self.command("verify").parse([]); Issue.record("no error") } catch {
            #expect(error.description == "missing PROVIDER; usage: payrecon verify [options] PROVIDER")
        }
    }

    @Test func everyCommandDeclaresEachOptionOnceAndDocumentsIt() {
        for c in CLI.commands {
            let names = c.options.map(\.name)
            #expect(Set(names).count == names.count, "\(c.name) declares an option twice: \(names)")
            for name in names { #expect(c.help.contains(name), "\(c.name) --help does not show \(name)") }
        }
    }

    func readEventsStatus(_ args: ParsedArguments) -> UsageError? {
        do throws(UsageError) { _ = try args.value(eventsStatus); return nil } catch { return error }
    }

    /// Reads the option the case is about, as its command does; the error, if any.
    func readAll(_ args: ParsedArguments, _ option: String) -> UsageError? {
        do throws(UsageError) {
            switch option {
            case "--provider": _ = try args.value(Options.provider)
            case "--concurrency": _ = try args.value(Options.concurrency)
            case "--lease": _ = try args.value(Options.lease)
            case "--batch": _ = try args.value(Options.batch)
            case "--kind": _ = try args.value(Options.kind)
            case "--status" where args.positionals.isEmpty:
                _ = try args.value(Options.actionStatus)
            default: Issue.record("no reader for \(option)")
            }
            return nil
        } catch { return error }
    }

    /// Every command that reaches the database takes --database-url (some did, some did not), and it wins over
    /// DATABASE_URL.
    @Test func everyCommandThatReachesTheDatabaseTakesDatabaseURL() throws {
        let offline: Set<String> = ["verify", "settlement verify", "console add-user"]
        for command in CLI.commands where !offline.contains(command.name) {
            let args = try command.parse(
                command.arguments.filter { !$0.optional }.map { _ in "1" } + ["--database-url", "postgresql://x@127.0.0.1:1/db"])
            #expect(try args.value(Options.databaseURL) == "postgresql://x@127.0.0.1:1/db", "\(command.name)")
            #expect(try args.environment().values["DATABASE_URL"] == "postgresql://x@127.0.0.1:1/db", "\(command.name)")
        }
    }
}
