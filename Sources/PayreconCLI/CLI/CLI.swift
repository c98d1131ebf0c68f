import Foundation
import Observability

public enum CLI {
    public static let version = "0.1.0"

    /// Every command: the whole surface.
    public static let commands: [Command] = [
        Command(ServeCommand.self), Command(WorkCommand.self), Command(ReconcileCommand.self), Command(BackfillCommand.self),
        Command(ReportCommand.self), Command(OrdersImportCommand.self), Command(SettlementImportCommand.self),
        Command(SettlementVerifyCommand.self), Command(ActionsListCommand.self), Command(ActionsExecuteCommand.self),
        Command(ActionsRetryCommand.self), Command(EventsListCommand.self), Command(EventsShowCommand.self),
        Command(EventsRetryCommand.self), Command(RejectionsListCommand.self), Command(RejectionsShowCommand.self),
        Command(DiscrepanciesListCommand.self), Command(DiscrepanciesShowCommand.self), Command(DiscrepanciesAckCommand.self),
        Command(ExplainCommand.self), Command(CheckCommand.self), Command(PruneCommand.self), Command(VerifyCommand.self),
        Command(MigrateCommand.self), Command(DoctorCommand.self), Command(ConsoleCommand.self), Command(ConsoleAddUserCommand.self)
    ]

    static func overview(_ commands: [Command]) -> String {
        var out = """
            payrecon \(version): webhook ingestion and payment reconciliation for PXP, PayPal and Paypercut.

            Usage: payrecon <command> [options]

            Commands:

            """
        for c in commands { out += "  " + c.name.padding(toLength: 21, withPad: " ", startingAt: 0) + c.summary + "\n" }
        out += """

            Configuration comes from the environment (DATABASE_URL, PAYRECON_*, PXP_*, PAYPAL_*, PAYPERCUT_*);
            see README.md. 'payrecon <command> --help' describes each command.
            Exit codes: 0 ok, 1 partial or a finding asked for, 2 usage or fatal error.

            """
        return out
    }

    /// Finds the command (one or two words), parses its options and runs it; returns the exit code.
    public static func run(_ args: [String], commands: [Command] = CLI.commands) async -> Int32 {
        guard let first = args.first, first != "--help", first != "-h", first != "help" else {
            print(overview(commands), terminator: "")
            return args.isEmpty ? Exit.usage : Exit.ok
        }
        if first == "--version" { print("payrecon \(version)"); return Exit.ok }
        // The CLI sets the level; every room logs through the logger it is handed.
        if let problem = Log.configure(levelName: ProcessInfo.processInfo.environment["PAYRECON_LOG_LEVEL"]) {
            printError(problem)
            return Exit.usage
        }
        var match: (Command, Int)?
        if args.count >= 2, let c = commands.first(where: { $0.name == "\(args[0]) \(args[1])" }) {
            match = (c, 2)
        } else if let c = commands.first(where: { $0.name == first }) {
            match = (c, 1)
        }
        guard let (command, consumed) = match else {
            let group = commands.filter { $0.name.hasPrefix(first + " ") }
            if !group.isEmpty {
                if args.count == 1 || args.dropFirst().first.map({ $0 == "--help" || $0 == "-h" }) == true {
                    print("Subcommands of '\(first)':\n" + group.map { "  payrecon \($0.name)  \($0.summary)" }.joined(separator: "\n"))
                    return args.count == 1 ? Exit.usage : Exit.ok
                }
                printError("unknown command 'payrecon \(first) \(args[1])'; one of: \(group.map(\.name).joined(separator: ", "))")
                return Exit.usage
            }
            printError("unknown command '\(first)'; run 'payrecon --help' for the list")
            return Exit.usage
        }
        do {
            let parsed = try command.parse(Array(args.dropFirst(consumed)))
            if parsed.helpRequested { print(command.help, terminator: ""); return Exit.ok }
            // The process's one logger (its level set above), handed down to every room the command builds.
            return try await command.make(parsed).run(logger: Logger())
        } catch let error as UsageError {
            printError(error.description)
            return Exit.usage
        } catch let error as FatalError {
            printError(error.description)
            return Exit.usage
        } catch {
            printError(String(describing: error))
            return Exit.usage
        }
    }

    /// One line on stderr, its control characters shown escaped: a message may quote the user's own words (an
    /// option, an argument) or a server's.
    static func printError(_ message: String) {
        FileHandle.standardError.write(Data("payrecon: \(message.terminalSafe)\n".utf8))
    }
}
