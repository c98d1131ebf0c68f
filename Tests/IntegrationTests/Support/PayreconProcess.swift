import PayreconTesting
import Foundation

/// Runs the built `payrecon` executable (.build/debug/payrecon under the package root) as users do.
enum PayreconProcess {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let binary = packageRoot.appendingPathComponent(".build/debug/payrecon")

    struct Result: Sendable {
        var exitCode: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `payrecon arguments…` with exactly `environment` (plus PATH), off Swift's cooperative pool.
    static func run(_ arguments: [String], environment: [String: String], timeoutSeconds: Double = 60) async throws -> Result {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw TestSetupError("\(binary.path) is missing: build the package first (swift build)")
        }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let process = Process()
                    process.executableURL = binary
                    process.arguments = arguments
                    var env = environment
                    env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
                    process.environment = env
                    let out = Pipe()
                    let errFile = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-\(UUID().uuidString).stderr")
                    FileManager.default.createFile(atPath: errFile.path, contents: nil)
                    let err = try FileHandle(forWritingTo: errFile)
                    process.standardOutput = out
                    process.standardError = err
                    process.standardInput = FileHandle.nullDevice
                    try process.run()
                    let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
                    DispatchQueue.global().asyncAfter(deadline: .now() + timeoutSeconds, execute: killer)
                    let data = out.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    killer.cancel()
                    try? err.close()
                    let errText = (try? String(contentsOf: errFile, encoding: .utf8)) ?? ""
                    try? FileManager.default.removeItem(at: errFile)
                    continuation.resume(returning: Result(exitCode: process.terminationStatus,
                                                          stdout: String(decoding: data, as: UTF8.self), stderr: errText))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
