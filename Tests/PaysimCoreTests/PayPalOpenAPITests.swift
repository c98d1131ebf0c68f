import Foundation
import Testing

/// paysim speaks as PayPal does: every PayPal answer it gives (each route, state and error it has) validates against
/// PayPal's own OpenAPI documents (Tests/Fixtures/paypal-openapi), with no property they do not define. The check is
/// scripts/lib/validate-paysim-paypal.py (Python's openapi-schema-validator, which scripts/test installs), run here
/// against the built paysim so that `scripts/test` covers it.
@Suite struct PayPalOpenAPITests {
    /// `<package root>`; this file is `<root>/Tests/PaysimCoreTests/PayPalOpenAPITests.swift`.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let script = root.appendingPathComponent("scripts/lib/validate-paysim-paypal.py").path

    /// The first python3 on PATH (then the usual places): the script's interpreter, as scripts/test finds it.
    static let python3: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let dirs = path.split(separator: ":").map(String.init) + ["/usr/local/bin", "/usr/bin", "/bin"]
        return dirs.map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    @Test(
        .enabled(if: python3 != nil, "python3 is not installed: scripts/test installs it (and openapi-schema-validator)"),
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: ExecutableTests.binary),
            "paysim is not built at .build/debug/paysim: run `swift build --product paysim` first"),
        .timeLimit(.minutes(2)))
    func everyPayPalAnswerValidatesAgainstPayPalsOpenAPIDocuments() async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("paysim-openapi-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.python3))
        process.arguments = [Self.script, "--paysim", ExecutableTests.binary]
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        // Awaited, not waited for: a blocked thread would be one of the cooperative pool's two.
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        try handle.close()
        let text = try String(contentsOf: output, encoding: .utf8)
        let failures = text.split(separator: "\n").filter { $0.hasPrefix("FAIL") || $0.hasPrefix("       - ") }

        #expect(status == 0, "validate-paysim-paypal.py exited \(status):\n\(failures.isEmpty ? text : failures.joined(separator: "\n"))")
        // The last line counts them: answers there were, and none failed.
        let last = text.split(separator: "\n").last.map(String.init) ?? ""
        let counts = last.split(separator: " ").compactMap { Int($0) }
        #expect(last.hasSuffix("PayPal answers validated, 0 failed"), "last line: \(last)")
        #expect((counts.first ?? 0) > 100, "too few PayPal answers were checked: \(last)")
    }
}
