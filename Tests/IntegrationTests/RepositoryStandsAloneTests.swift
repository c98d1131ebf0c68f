import Foundation
import PayreconTesting
import Testing

/// The repo stands alone: what users and tests need lives in it. No tracked file points at the material payrecon was
/// specified from (outside the repo), and every relative link in the docs leads to a file that exists.
@Suite struct RepositoryStandsAloneTests {
    static let root = PayreconProcess.packageRoot

    static func trackedFiles() throws -> [String] {
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        git.arguments = ["git", "-C", root.path, "ls-files"]
        let out = Pipe()
        git.standardOutput = out
        try git.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        git.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    static func text(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: root.appendingPathComponent(path).path), !data.contains(0) else { return nil }
        return String(data: data, encoding: .utf8)
    }

    @Test func noFilePointsOutsideTheRepo() throws {
        let files = try Self.trackedFiles()
        #expect(files.count > 100, "git ls-files found the repo")
        var outside: [String] = []
        for file in files where file != "Tests/IntegrationTests/RepositoryStandsAloneTests.swift" {
            guard let text = Self.text(file) else { continue }
            for needle in ["../shared", "CONTRACT.md", "contract §", "Contract §"] where text.contains(needle) {
                outside.append("\(file): \(needle)")
            }
        }
        #expect(outside.isEmpty, "\(outside)")
    }

    @Test func everyRelativeLinkInTheDocsExists() throws {
        let link = try NSRegularExpression(pattern: #"\]\(([^)#\s]+)(#[^)]*)?\)"#)
        var broken: [String] = []
        for file in try Self.trackedFiles() where file.hasSuffix(".md") {
            guard let text = Self.text(file) else { continue }
            let dir = (file as NSString).deletingLastPathComponent
            for m in link.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let target = String(text[Range(m.range(at: 1), in: text)!])
                if target.contains("://") || target.hasPrefix("mailto:") { continue }
                let path = target.hasPrefix("/") ? String(target.dropFirst()) : (dir.isEmpty ? target : dir + "/" + target)
                if !FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path) {
                    broken.append("\(file): \(target)")
                }
            }
        }
        #expect(broken.isEmpty, "\(broken)")
    }
}
