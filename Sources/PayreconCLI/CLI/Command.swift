import Foundation
import Observability
import Providers

/// What a command is before its values, as swift-argument-parser's `CommandConfiguration` holds it: its name, its
/// help, and the arguments and options it takes (declared here, as there are no property wrappers to read them from).
public struct CommandConfiguration: Sendable {
    public var name: String  // "orders import"
    public var summary: String
    public var arguments: [Command.Argument]  // positionals, in order
    public var options: [Command.Option]
    public var details: String  // extra help text

    init(name: String, summary: String, arguments: [Command.Argument] = [], options: [any CommandOption] = [], details: String = "") {
        self.name = name; self.summary = summary; self.arguments = arguments; self.options = options.map(\.spec)
        self.details = details
    }
}

/// One command, in the shape of swift-argument-parser's `ParsableCommand` (which can't be fetched here): its values
/// are read from the command line by `init(parsing:)`, each option through its typed key, so a bad value is a usage
/// error before anything runs; `validate()` checks what must hold between them; `run(logger:)` does the work, with
/// the logger `main` made. `parse(_:)` is the whole path from words to a command, which the parse tests hold.
public protocol ParsableCommand: Sendable {
    static var configuration: CommandConfiguration { get }
    /// Reads every argument and option the command takes.
    init(parsing arguments: ParsedArguments) throws(UsageError)
    /// What must hold between the values (one option excludes another); the default accepts them.
    func validate() throws(UsageError)
    /// Runs the command; the exit code (`Exit`).
    func run(logger: Logger) async throws -> Int32
}

extension ParsableCommand {
    public func validate() throws(UsageError) {}

    /// The command `arguments` (everything after its name) make: parsed, read and validated, as `payrecon` runs it.
    public static func parse(_ arguments: [String]) throws(UsageError) -> Self {
        try made(from: Command(Self.self).commandLine(arguments))
    }

    /// The command what the parser found makes: read, then validated.
    static func made(from parsed: ParsedArguments) throws(UsageError) -> Self {
        let command = try Self(parsing: parsed)
        try command.validate()
        return command
    }
}

/// A command in the CLI's table: its configuration, with how to make and run it from what the parser found. `--help`
/// is generated from the configuration, and parsing errors are usage errors (exit 2) that say what to do.
public struct Command: Sendable {
    public let configuration: CommandConfiguration
    /// Makes the command from what the parser found: read and validated, not run.
    let make: @Sendable (ParsedArguments) throws(UsageError) -> any ParsableCommand

    public var name: String { configuration.name }
    public var summary: String { configuration.summary }
    public var arguments: [Argument] { configuration.arguments }
    public var options: [Option] { configuration.options }
    public var details: String { configuration.details }

    public struct Argument: Sendable {
        var name: String
        var help: String
        var optional = false
        /// The last argument may be given more than once (`FILE…`).
        var repeats = false
    }

    /// What `--help` shows of an option and what the parser accepts (built from an `OptionKey` or `FlagKey`).
    public struct Option: Sendable {
        public var name: String  // "--format"
        public var value: String?  // "table|json"; nil for a flag
        public var help: String
    }

    public init<C: ParsableCommand>(_ type: C.Type) {
        configuration = C.configuration
        make = { (parsed: ParsedArguments) throws(UsageError) -> any ParsableCommand in try C.made(from: parsed) }
    }

    /// The command `arguments` (everything after its name) make, as `payrecon` runs it: parsed, read and validated.
    public func command(_ arguments: [String]) throws(UsageError) -> any ParsableCommand { try make(commandLine(arguments)) }

    /// `arguments` parsed for a command to be made of them: `--help` makes none (its required arguments were not
    /// asked for; `CLI.run` prints the help instead).
    func commandLine(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        let parsed = try parse(arguments)
        guard !parsed.helpRequested else { throw UsageError.helpRequested(name) }
        return parsed
    }

    public var usage: String {
        var parts = ["payrecon", name]
        if !options.isEmpty { parts.append("[options]") }
        for a in arguments { parts.append((a.optional ? "[\(a.name)]" : a.name) + (a.repeats ? "…" : "")) }
        return parts.joined(separator: " ")
    }

    public var help: String {
        var out = "\(summary)\n\nUsage: \(usage)\n"
        if !arguments.isEmpty {
            out += "\nArguments:\n"
            for a in arguments { out += "  " + a.name.padding(toLength: 26, withPad: " ", startingAt: 0) + a.help + "\n" }
        }
        out += "\nOptions:\n"
        for o in options + [Option(name: "--help", value: nil, help: "Show this help.")] {
            let left = o.value.map { "\(o.name) \($0)" } ?? o.name
            out += "  " + left.padding(toLength: max(26, left.count + 2), withPad: " ", startingAt: 0) + o.help + "\n"
        }
        if !details.isEmpty { out += "\n" + details + "\n" }
        return out
    }

    /// Parses `args` (everything after the command name).
    public func parse(_ args: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var i = 0
        while i < args.count {
            let arg = args[i]
            if arg == "--help" || arg == "-h" { parsed.helpRequested = true; return parsed }
            if arg.hasPrefix("--") {
                var key = arg, inline: String?
                if let eq = arg.firstIndex(of: "=") { key = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...]) }
                guard let spec = options.first(where: { $0.name == key }) else {
                    throw UsageError("unknown option \(key) for 'payrecon \(name)'; see 'payrecon \(name) --help'")
                }
                if spec.value == nil {
                    guard inline == nil else { throw UsageError("\(key) takes no value") }
                    parsed.flags.insert(key)
                } else if let inline {
                    parsed.values[key] = inline
                } else {
                    guard i + 1 < args.count else { throw UsageError("\(key) needs a value (\(spec.value!))") }
                    i += 1
                    parsed.values[key] = args[i]
                }
            } else {
                parsed.positionals.append(arg)
            }
            i += 1
        }
        let required = arguments.filter { !$0.optional }.count
        if parsed.positionals.count < required {
            throw UsageError("missing \(arguments[parsed.positionals.count].name); usage: \(usage)")
        }
        if parsed.positionals.count > arguments.count, arguments.last?.repeats != true {
            throw UsageError("unexpected argument '\(parsed.positionals[arguments.count])'; usage: \(usage)")
        }
        return parsed
    }
}

/// What the parser found. Options are read through their typed keys (`args[Options.provider]`), so a misspelt
/// option is a compile error, not a silent nil.
public struct ParsedArguments: Sendable {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    public internal(set) var positionals: [String] = []
    public internal(set) var helpRequested = false

    /// The option's value, read and checked; nil when it was not given.
    public func value<Value>(_ key: OptionKey<Value>) throws(UsageError) -> Value? {
        guard let text = values[key.spec.name] else { return nil }
        return try key.read(text)
    }

    /// The option's value, or `fallback` when it was not given.
    public func value<Value>(_ key: OptionKey<Value>, default fallback: Value) throws(UsageError) -> Value {
        try value(key) ?? fallback
    }

    public func flag(_ key: FlagKey) -> Bool { flags.contains(key.spec.name) }
}

/// A mistake in how the command was called: printed with a hint, exit 2.
public struct UsageError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ message: String) { description = message }

    /// A command line that asks for the help is no command to make.
    static func helpRequested(_ name: String) -> UsageError { UsageError("--help asks for 'payrecon \(name)' help, not a command") }
}

/// A fatal error the user can act on: printed, exit 2.
public struct FatalError: Error, CustomStringConvertible {
    public var description: String
    public init(_ message: String) { description = message }
}

enum Exit {
    static let ok: Int32 = 0
    static let finding: Int32 = 1  // partial, a finding asked for, invalid signature, bad import rows
    static let usage: Int32 = 2  // usage or fatal error
}

extension Environment {
    /// The environment a command runs with: the process's (`values`), with `--database-url` (when the command takes
    /// it and it was given) in place of DATABASE_URL and DATABASE_URL_FILE, so every command that reaches the database
    /// takes the flag alike.
    init(databaseURL flag: String?, _ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(values)
        if let flag, !flag.isEmpty { self.values["DATABASE_URL"] = flag; self.values["DATABASE_URL_FILE"] = nil }
    }
}
