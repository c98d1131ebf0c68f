import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The listening socket, bound by us rather than by MHD so a failure reports its real cause
/// ("address in use") and the bound port is known for port 0. MHD gets it via MHD_OPTION_LISTEN_SOCKET.
enum ListenSocket {
    static func open(host: String, port: UInt16) throws -> Int32 {
        let label = "\(host):\(port)"
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        let literal = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, literal, &address.sin_addr) == 1 else {
            throw HTTPServerError(message: "cannot listen on \(label): invalid IPv4 address")
        }

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(label, errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))

        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw failure(label, code)
        }
        guard listen(fd, SOMAXCONN) == 0 else {
            let code = errno
            close(fd)
            throw failure(label, code)
        }
        // Several MHD worker threads race to accept: the socket must not block.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    static func boundPort(_ fd: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return ok == 0 ? UInt16(bigEndian: address.sin_port) : 0
    }

    private static func failure(_ label: String, _ code: Int32) -> HTTPServerError {
        let reason: String
        switch code {
        case EADDRINUSE: reason = "address in use"
        case EADDRNOTAVAIL: reason = "address not available on this host"
        case EACCES: reason = "permission denied"
        default: reason = String(cString: strerror(code))
        }
        return HTTPServerError(message: "cannot listen on \(label): \(reason)")
    }

    /// Renders a peer address (IPv4 or IPv6) as text.
    static func describe(_ address: UnsafePointer<sockaddr>) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var addr = sin.pointee.sin_addr
                return inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count)).map { String(cString: $0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                var addr = sin6.pointee.sin6_addr
                return inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count)).map { String(cString: $0) }
            }
        default:
            return nil
        }
    }
}
