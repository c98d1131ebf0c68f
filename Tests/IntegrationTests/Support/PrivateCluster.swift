import PayreconTesting
import Foundation

/// A PostgreSQL cluster of the test's own (initdb in a temporary folder, its own port), so a test can stop and
/// start the server without disturbing the other tests. Run as the `postgres` user when the tests run as root,
/// since initdb refuses root. Needs PostgreSQL's binaries (PAYRECON_PG_BIN, else /usr/lib/postgresql/15/bin).
final class PrivateCluster: @unchecked Sendable {
    static let bin = ProcessInfo.processInfo.environment["PAYRECON_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
    let directory: String
    private(set) var port: Int
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    init() throws {
        port = 0
        directory = "/tmp/payrecon-private-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0 { try Self.shell("chown postgres:postgres \(directory) && chmod 700 \(directory)") }
        try run("\(Self.bin)/initdb -D \(directory) -U postgres -A trust -E UTF8 --no-locale >/dev/null")
        let conf = "listen_addresses = '127.0.0.1'\nunix_socket_directories = '\(directory)'\nfsync = off\n"
        try run("printf %s \(Self.quote(conf)) >> \(directory)/postgresql.conf")
        // A port the kernel has just found free. A port picked at random from 56000–58000 once collided (that is
        // Linux's ephemeral range, where the suite's own client connections live): a taken port is tried again.
        for attempt in 1...3 {
            port = try Self.freePort()
            do { try start(); return } catch  where attempt < 3 { continue }
        }
    }

    func start() throws { try run("\(Self.bin)/pg_ctl -D \(directory) -l \(directory)/log -o '-p \(port)' -w -t 30 start >/dev/null") }
    /// `immediate`: as if the server crashed (no checkpoint, connections cut).
    func stop(immediate: Bool = true) throws {
        try run("\(Self.bin)/pg_ctl -D \(directory) -m \(immediate ? "immediate" : "fast") -w stop >/dev/null")
    }

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

    /// Binds 127.0.0.1:0 and gives back the port the kernel chose (closed again: the server binds it next).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSetupError("socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestSetupError("bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
