import Foundation
import HTTP
import Testing

/// The built `paysim` executable, run as users and scripts run it: a process that writes its port, answers, and
/// exits 0 on SIGTERM.
@Suite struct ExecutableTests {
    /// `<package root>/.build/debug/paysim`; this file is `<root>/Tests/PaysimCoreTests/ExecutableTests.swift`.
    static let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug/paysim").path

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: binary),
            "paysim is not built at .build/debug/paysim: run `swift build --product paysim` first"),
        .timeLimit(.minutes(1)))
    func startsAnswersAndStopsCleanlyOnSIGTERM() async throws {
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("paysim-port-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: portFile) }
        let stderrFile = FileManager.default.temporaryDirectory.appendingPathComponent("paysim-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: stderrFile) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["--listen", "127.0.0.1:0", "--port-file", portFile.path, "--threads", "1"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func log() -> String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

        // The port file appears once paysim listens (written atomically, so it is whole when it exists).
        var port: UInt16?
        let listenDeadline = Date().addingTimeInterval(20)
        while port == nil, process.isRunning, Date() < listenDeadline {
            port = (try? String(contentsOf: portFile, encoding: .utf8))
                .flatMap { UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let bound = try #require(port, "no port file within 20 s; paysim said: \(log())")

        let client = URLSessionHTTPClient(configuration: .init(timeout: .seconds(5)))
        // `Connection: close`: an idle keep-alive connection would hold the drain on SIGTERM until its timeout.
        let health = try await client.send(
            HTTPClientRequest(
                url: "http://127.0.0.1:\(bound)/healthz",
                headers: [("Connection", "close")]))
        #expect(health.status == 200)
        #expect(health.text == #"{"status":"ok"}"#)

        kill(process.processIdentifier, SIGTERM)
        let exitDeadline = Date().addingTimeInterval(15)
        while process.isRunning, Date() < exitDeadline { try await Task.sleep(for: .milliseconds(50)) }
        try #require(!process.isRunning, "paysim still running 15 s after SIGTERM; it said: \(log())")
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0, "paysim said: \(log())")
        // Its lines are the project's JSON log lines.
        #expect(log().contains(#""msg":"listening""#))
        #expect(log().contains(#""msg":"stopped""#))
    }
}
