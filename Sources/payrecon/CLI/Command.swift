import Foundation

/// A hand-written command table (swift-argument-parser can't be fetched here): each command declares its options,
/// `--help` is generated from them, and parsing errors are usage errors (exit 2) that say what to do.
struct Command: Sendable {
    var name: String                 // "orders import"
    var summary: String
    var arguments: [Argument] = []   // positionals, in order
    var options: [Option] = []
    var details: String = ""         // extra help text
    var run: @Sendable (ParsedArguments) async throws -> Int32

    struct Argument: Sendable {
        var name: String
        var help: String
        var optional = false
    }

    struct Option: Sendable {
        var name: String             // "--format"
        var value: String?           // "table|json"; nil for a flag
        var help: String
    }

    var usage: String {
        var parts = ["payrecon", name]
        if !options.isEmpty { parts.append("[options]") }
        for a in arguments { parts.append(a.optional ? "[\(a.name)]" : a.name) }
        return parts.joined(separator: " ")
    }

    var help: String {
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
    func parse(_ args: [String]) throws(UsageError) -> ParsedArguments {
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
        if parsed.positionals.count > arguments.count {
            throw UsageError("unexpected argument '\(parsed.positionals[arguments.count])'; usage: \(usage)")
        }
        return parsed
    }
}

struct ParsedArguments: Sendable {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []
    var helpRequested = false

    func value(_ name: String) -> String? { values[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// A value restricted to `allowed`.
    func choice(_ name: String, _ allowed: [String], default fallback: String) throws(UsageError) -> String {
        guard let v = values[name] else { return fallback }
        guard allowed.contains(v) else { throw UsageError("\(name) must be one of \(allowed.joined(separator: ", ")), not '\(v)'") }
        return v
    }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let v = values[name] else { return fallback }
        guard let n = Int(v), range.contains(n) else {
            throw UsageError("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(v)'")
        }
        return n
    }
}

/// A mistake in how the command was called: printed with a hint, exit 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ message: String) { description = message }
}

/// A fatal error the user can act on: printed, exit 2.
struct FatalError: Error, CustomStringConvertible {
    var description: String
    init(_ message: String) { description = message }
}

enum Exit {
    static let ok: Int32 = 0
    static let finding: Int32 = 1   // partial, a finding asked for, invalid signature, bad import rows
    static let usage: Int32 = 2     // usage or fatal error
}
