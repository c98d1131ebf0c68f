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


/// A raw TCP client for what HTTPClient cannot send (garbage, half requests, hand-made chunking).
final class RawSocket {
    let fd: Int32

    /// Connects to 127.0.0.1:port; throws the errno on failure.
    ///
    /// The socket is only stored once connected: a class whose stored properties are all set runs its deinit
    /// when its init throws, so closing a failed socket here *and* in deinit closed the same number twice. Between
    /// the two closes a parallel test's server could accept a connection on that number, and libmicrohttpd then
    /// aborted ("Failed to remove FD from epoll set") when it cleaned up a connection whose socket we had closed.
    init(port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// Reads until the peer closes or `timeout` passes. Returns the bytes and whether the peer closed.
    func readUntilClosed(timeout: Double) -> (text: String, closed: Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&pfd, 1, remaining) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }  // EOF or reset
            received.append(contentsOf: buffer[0..<count])
        }
        return (String(decoding: received, as: UTF8.self), false)
    }
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
