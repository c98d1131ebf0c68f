import Foundation

/// A `payrecon` process left running (serve, work), its stderr captured; stopped with SIGTERM.
public final class Background: @unchecked Sendable {
    public let process = Process()
    public let errors: URL

    public init(_ arguments: [String], environment: [String: String]) throws {
        errors = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-bg-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.executableURL = PayreconProcess.binary
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
    }

    public func stderr() -> String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    public func stop() {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
    }

    deinit { stop(); try? FileManager.default.removeItem(at: errors) }

    /// Waits up to `seconds` for the process to write its port to `portFile` (`--port-file`); nil if it never did.
    public func port(from portFile: String, seconds: Double = 10) async -> UInt16? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, process.isRunning {
            let text = ((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if let port = UInt16(text) { return port }
            try? await Task.sleep(for: .milliseconds(25))
        }
        return nil
    }
}
