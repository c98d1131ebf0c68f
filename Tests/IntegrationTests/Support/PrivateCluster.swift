import PayreconTesting
import Foundation

/// A PostgreSQL cluster of the test's own (initdb in a temporary folder, its own port), so a test can stop and
/// start the server without disturbing the other tests. Run as the `postgres` user when the tests run as root,
/// since initdb refuses root. Needs PostgreSQL's binaries (PAYRECON_PG_BIN, else /usr/lib/postgresql/15/bin).
final class PrivateCluster: @unchecked Sendable {
    static let bin = ProcessInfo.processInfo.environment["PAYRECON_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
    let directory: String
    let port: Int
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    init() throws {
        port = 56000 + Int.random(in: 0..<2000)
        directory = "/tmp/payrecon-private-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0 { try Self.shell("chown postgres:postgres \(directory) && chmod 700 \(directory)") }
        try run("\(Self.bin)/initdb -D \(directory) -U postgres -A trust -E UTF8 --no-locale >/dev/null")
        let conf = "listen_addresses = '127.0.0.1'\nport = \(port)\nunix_socket_directories = '\(directory)'\nfsync = off\n"
        try run("printf %s \(Self.quote(conf)) >> \(directory)/postgresql.conf")
        try start()
    }

    func start() throws { try run("\(Self.bin)/pg_ctl -D \(directory) -l \(directory)/log -w -t 30 start >/dev/null") }
    /// `immediate`: as if the server crashed (no checkpoint, connections cut).
    func stop(immediate: Bool = true) throws { try run("\(Self.bin)/pg_ctl -D \(directory) -m \(immediate ? "immediate" : "fast") -w stop >/dev/null") }

    func destroy() {
        try? stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func run(_ command: String) throws {
        try Self.shell(getuid() == 0 ? "su postgres -s /bin/sh -c \(Self.quote(command))" : command)
    }

    /// `system(3)`, not Foundation's Process: the postmaster pg_ctl leaves behind inherits Process's
    /// termination-watching descriptors, and waitUntilExit then never returns.
    static func shell(_ command: String) throws {
        let status = system(command + " </dev/null")
        guard status == 0 else { throw TestSetupError("command failed (\(status)): \(command)") }
    }

    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
