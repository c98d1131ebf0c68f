import Foundation

/// Runs the built `payrecon` executable as users do: arguments, environment, captured stdout and stderr, exit code,
/// and a time limit. The one process runner of the test suites.
public enum PayreconProcess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        public var stdoutBytes: [UInt8]
        public var exitCode: Int32 { status }
    }

    /// The package root, from this file's path (Tests/PayreconTesting/PayreconProcess.swift).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    public static let binary = packageRoot.appendingPathComponent(".build/debug/payrecon")

    /// `payrecon arguments…` with exactly `environment` (plus PATH), off Swift's cooperative pool; `stdin` is what
    /// it reads on standard input (nothing: /dev/null).
    public static func run(
        _ arguments: [String], environment: [String: String], stdin: [UInt8]? = nil, timeoutSeconds: Double = 60
    ) async throws -> Result {
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let full = env
        return try await offload { try runBlocking(arguments, environment: full, stdin: stdin, timeoutSeconds: timeoutSeconds) }
    }

    /// `payrecon args…` with this process's environment, DATABASE_URL set to `databaseURL` (nil: unset), no
    /// NO_COLOR, plus `extra`; blocking, so only from a thread of its own (`launch` runs it so). Never from a test:
    /// Swift Testing runs synchronous tests on the cooperative pool too, and a test blocking one of its two threads
    /// while the payrecon it started calls paysim (served in this process, on that pool) starved every suite: a
    /// provider client test's server did not answer for 20 s, a nightly reconcile's OAuth token timed out.
    public static func run(_ arguments: [String], databaseURL: String?, environment extra: [String: String] = [:]) throws -> Result {
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = databaseURL
        env["NO_COLOR"] = nil
        for (k, v) in extra { env[k] = v }
        return try runBlocking(arguments, environment: env, timeoutSeconds: 120)
    }

    /// As `run(_:databaseURL:environment:)`, off Swift's cooperative pool: for async tests, which must not block one
    /// of its few threads (2 on these machines) while a process runs, starving every other suite's tasks.
    public static func launch(_ arguments: [String], databaseURL: String?, environment extra: [String: String] = [:]) async throws -> Result
    {
        try await offload { try run(arguments, databaseURL: databaseURL, environment: extra) }
    }

    /// Output goes to files, not pipes, so a chatty process never blocks on a full pipe; past `timeoutSeconds`
    /// the process is terminated.
    static func runBlocking(
        _ arguments: [String], environment: [String: String], stdin: [UInt8]? = nil, timeoutSeconds: Double
    ) throws -> Result {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw TestSetupError("\(binary.path) is missing: build the package first (swift build)")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-process-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout"), err = dir.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = packageRoot
        if let stdin {
            let input = dir.appendingPathComponent("stdin")
            try Data(stdin).write(to: input)
            process.standardInput = try FileHandle(forReadingFrom: input)
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        process.standardOutput = outHandle
        process.standardError = errHandle
        try process.run()
        let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeoutSeconds, execute: killer)
        process.waitUntilExit()
        killer.cancel()
        try outHandle.close(); try errHandle.close()
        let stdout = Array(try Data(contentsOf: out))
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self), stdoutBytes: stdout)
    }
}
