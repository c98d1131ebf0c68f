import Foundation
import PayreconTesting
import HTTP
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension HTTPServer.Configuration {
    /// Ephemeral port, two threads, short timeouts.
    static func test(maxBodyBytes: Int = 1024 * 1024, timeout: UInt32 = 5) -> Self {
        HTTPServer.Configuration(port: 0, threads: 2, maxBodyBytes: maxBodyBytes, connectionTimeoutSeconds: timeout)
    }
}

/// Starts a server on an ephemeral port, runs `body` with it and its base URL, then shuts it down.
func withServer(
    _ configuration: HTTPServer.Configuration = .test(),
    drainTimeout: Double = 2,
    handler: @escaping HTTPServer.Handler,
    _ body: (HTTPServer, String) async throws -> Void
) async throws {
    let server = HTTPServer(configuration: configuration, handler: handler)
    try server.start()
    do {
        try await body(server, "http://127.0.0.1:\(server.port)")
    } catch {
        await server.shutdown(drainTimeout: drainTimeout)
        throw error
    }
    await server.shutdown(drainTimeout: drainTimeout)
}

/// A thread-safe box for values shared between handlers and the test.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { value.withLock { $0 } }
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
    @discardableResult
    func update<R: Sendable>(_ body: @Sendable (inout Value) -> R) -> R { value.withLock { body(&$0) } }
}

/// A port nothing listens on (bound then closed).
func unusedPort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            _ = bind(fd, pointer, length)
            return getsockname(fd, pointer, &length)
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
