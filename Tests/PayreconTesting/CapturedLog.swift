import Foundation
import Observability
import Synchronization

/// A logger whose lines a test reads back (parsed JSON objects), instead of stderr.
public final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])
    public init() {}

    public var logger: Logger { Logger(sink: { [self] line in self.append(line) }) }

    private func append(_ line: String) { lines.withLock { $0.append(line) } }

    /// Every line with message `msg`, as JSON objects.
    public func entries(_ msg: String) -> [[String: Any]] {
        lines.withLock { $0 }.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object["msg"] as? String == msg ? object : nil
        }
    }
}
