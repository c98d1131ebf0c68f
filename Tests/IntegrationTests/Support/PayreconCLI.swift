import PayreconTesting
import Foundation

/// Runs the built `payrecon` executable as a user would: arguments, environment, captured stdout/stderr, exit code.
enum PayreconCLI {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var stdoutBytes: [UInt8]
    }

    /// The package root, from this file's path (Tests/IntegrationTests/Support/PayreconCLI.swift).
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `.build/debug/payrecon`; built with `swift build --product payrecon` when missing (`swift test` normally builds it).
    static func executable() throws -> URL {
        let binary = packageRoot.appendingPathComponent(".build/debug/payrecon")
        if !FileManager.default.isExecutableFile(atPath: binary.path) {
            let build = try run(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--product", "payrecon"],
                                environment: ProcessInfo.processInfo.environment, directory: packageRoot)
            guard build.status == 0, FileManager.default.isExecutableFile(atPath: binary.path) else {
                throw TestSetupError("swift build --product payrecon failed: \(build.stderr)")
            }
        }
        return binary
    }

    /// Runs `payrecon args...` with DATABASE_URL set to `databaseURL` (nil: unset) plus `environment`.
    static func run(_ args: [String], databaseURL: String?, environment extra: [String: String] = [:]) throws -> Result {
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = databaseURL
        env["NO_COLOR"] = nil
        for (k, v) in extra { env[k] = v }
        return try run(try executable(), args, environment: env, directory: packageRoot)
    }

    private static func run(_ executable: URL, _ args: [String], environment: [String: String], directory: URL) throws -> Result {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-cli-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout"), err = dir.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
        let process = Process()
        process.executableURL = executable
        process.arguments = args
        process.environment = environment
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = outHandle
        process.standardError = errHandle
        try process.run()
        process.waitUntilExit()
        try outHandle.close(); try errHandle.close()
        let stdout = Array(try Data(contentsOf: out))
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self), stdoutBytes: stdout)
    }
}
