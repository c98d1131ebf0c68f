import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP client for what URLSessionHTTPClient cannot send (garbage, half requests, hand-made chunking).
public final class RawSocket: Sendable {
    public let fd: Int32

    /// Connects to 127.0.0.1:port; throws the errno on failure.
    ///
    /// The socket is only stored once connected: a class whose stored properties are all set runs its deinit
    /// when its init throws, so closing a failed socket here *and* in deinit closed the same number twice. Between
    /// the two closes a parallel test's server could accept a connection on that number, and libmicrohttpd then
    /// aborted ("Failed to remove FD from epoll set") when it cleaned up a connection whose socket we had closed.
    public init(port: UInt16) throws {
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

    public func send(_ text: String) { send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// One read within `timeout`: the bytes that came (empty when the peer closed), or nil when none came in time.
    public func receive(timeout: Double) -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? Array(buffer[0..<count]) : []
    }

    /// Reads until the peer closes or `timeout` passes. Returns the bytes and whether the peer closed.
    public func readUntilClosed(timeout: Double) -> (text: String, closed: Bool) {
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

    /// Sends `text` a byte at a time, `interval` apart (blocking: run it through `offload`); returns when the peer closes or `limit`
    /// passes, with whether the peer closed and how long it took.
    public func trickle(_ text: String, interval: Double, limit: Double) -> (closed: Bool, seconds: Double) {
        let started = Date()
        for byte in Array(text.utf8) {
            if Date().timeIntervalSince(started) > limit { return (false, limit) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 0) > 0 {
                var scratch = [UInt8](repeating: 0, count: 4096)
                if recv(fd, &scratch, scratch.count, 0) <= 0 { return (true, Date().timeIntervalSince(started)) }
            }
            var one = byte
            if Glibc.send(fd, &one, 1, Int32(MSG_NOSIGNAL)) <= 0 { return (true, Date().timeIntervalSince(started)) }
            usleep(UInt32(interval * 1_000_000))
        }
        let (_, closed) = readUntilClosed(timeout: max(0, limit - Date().timeIntervalSince(started)))
        return (closed, Date().timeIntervalSince(started))
    }

}
