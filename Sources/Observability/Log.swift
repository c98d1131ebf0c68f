import Foundation
import Synchronization

/// JSON-lines logging on stderr. Static messages, data in metadata (`delivery_id`, `provider`, `order_id`,
/// `request_id`); never a secret or a full body.
public enum Log {
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var description: String { ["debug", "info", "warning", "error"][rawValue] }
    }

    private static let state = Mutex<(level: Level, sink: (@Sendable (String) -> Void)?)>(
        (level: ProcessInfo.processInfo.environment["PAYRECON_LOG_LEVEL"].flatMap(Level.init(name:)) ?? .info, sink: nil))

    /// The lowest level written.
    public static var level: Level {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    /// Redirects lines (tests). `nil` restores stderr.
    public static func setSink(_ sink: (@Sendable (String) -> Void)?) { state.withLock { $0.sink = sink } }

    public static func debug(_ message: StaticString, _ metadata: [String: any Sendable] = [:]) { write(.debug, message, metadata) }
    public static func info(_ message: StaticString, _ metadata: [String: any Sendable] = [:]) { write(.info, message, metadata) }
    public static func warning(_ message: StaticString, _ metadata: [String: any Sendable] = [:]) { write(.warning, message, metadata) }
    public static func error(_ message: StaticString, _ metadata: [String: any Sendable] = [:]) { write(.error, message, metadata) }

    static func write(
        _ level: Level, _ message: StaticString, _ metadata: [String: any Sendable],
        sink override: (@Sendable (String) -> Void)? = nil
    ) {
        let (min, global) = state.withLock { ($0.level, $0.sink) }
        let sink = override ?? global
        guard level >= min else { return }
        var line = "{\"ts\":\"\(timestamp())\",\"level\":\"\(level)\",\"msg\":" + jsonString(message.description)
        for key in metadata.keys.sorted() {
            line += "," + jsonString(key) + ":" + jsonValue(metadata[key]!)
        }
        line += "}"
        if let sink { sink(line) } else { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    static func timestamp() -> String {
        var tv = timeval(); gettimeofday(&tv, nil)
        var t = time_t(tv.tv_sec); var tmv = tm(); gmtime_r(&t, &tmv)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
            tmv.tm_hour, tmv.tm_min, tmv.tm_sec, Int(tv.tv_usec / 1000))
    }

    static func jsonValue(_ value: any Sendable) -> String {
        switch value {
        case let v as Int: return String(v)
        case let v as Int64: return String(v)
        case let v as Int32: return String(v)
        case let v as UInt16: return String(v)
        case let v as Bool: return v ? "true" : "false"
        case let v as String: return jsonString(v)
        default: return jsonString(String(describing: value))
        }
    }

    /// A JSON string literal (RFC 8259 escaping).
    public static func jsonString(_ s: String) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            // Below 0x20 as JSON requires; DEL, C1 (CSI, OSC…), the line separators and bidi overrides too, so a
            // stranger's bytes quoted in a log line cannot drive the terminal of whoever tails it.
            case _
            where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
                || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value):
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension Log.Level {
    init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }
}

/// A logger that carries its context: each room adds what it knows (the receiver `request_id`, the worker
/// `delivery_id` and `provider`, the checker and executor `order_id` and `idempotency_key`) and hands the result
/// down, so every line says which request, delivery or order it is about. Lines go through `Log` (level, sink).
public struct Logger: Sendable {
    public private(set) var metadata: [String: any Sendable]
    /// Where this logger's lines go (a test's capture); nil: `Log`'s sink, stderr by default.
    let sink: (@Sendable (String) -> Void)?

    public init(_ metadata: [String: any Sendable] = [:], sink: (@Sendable (String) -> Void)? = nil) {
        self.metadata = metadata; self.sink = sink
    }

    /// This logger with more context (a key given again replaces the old value).
    public func with(_ extra: [String: any Sendable]) -> Logger {
        Logger(metadata.merging(extra) { _, new in new }, sink: sink)
    }

    public func debug(_ message: StaticString, _ extra: [String: any Sendable] = [:]) { write(.debug, message, extra) }
    public func info(_ message: StaticString, _ extra: [String: any Sendable] = [:]) { write(.info, message, extra) }
    public func warning(_ message: StaticString, _ extra: [String: any Sendable] = [:]) { write(.warning, message, extra) }
    public func error(_ message: StaticString, _ extra: [String: any Sendable] = [:]) { write(.error, message, extra) }

    private func write(_ level: Log.Level, _ message: StaticString, _ extra: [String: any Sendable]) {
        guard level >= Log.level else { return }
        Log.write(level, message, extra.isEmpty ? metadata : metadata.merging(extra) { _, new in new }, sink: sink)
    }
}

extension Log {
    /// Sets the level from `PAYRECON_LOG_LEVEL` (the CLI calls it at start); an unknown name is reported, not ignored.
    public static func configure(levelName: String?) -> String? {
        guard let name = levelName, !name.isEmpty else { return nil }
        guard let parsed = Level(name: name) else { return "PAYRECON_LOG_LEVEL=\(name) must be debug, info, warning or error" }
        level = parsed
        return nil
    }
}
