import CMicroHTTPD
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server over libmicrohttpd: an internal thread pool polling with epoll (poll where epoll
/// is unavailable), per-connection timeouts and memory limits, and request suspension so a handler can
/// answer later from any thread without holding an MHD thread.
///
/// ```swift
/// let server = HTTPServer(configuration: .init(port: 0)) { request, responder in
///     responder.respond(.text("ok"))
/// }
/// try server.start()
/// print(server.port)
/// server.shutdown(drainTimeout: 10)
/// ```
///
/// The handler runs on an MHD thread: it must not block for long. Slow work (a database commit) should
/// hand the responder to another thread and return; the connection is suspended until `respond` is called.
public final class HTTPServer: @unchecked Sendable {
    /// Server settings.
    public struct Configuration: Sendable {
        /// IPv4 address to listen on (`"127.0.0.1"`, `"0.0.0.0"`; `"localhost"` means 127.0.0.1).
        public var host: String
        /// Port to listen on; 0 picks an ephemeral port (read it from `HTTPServer.port` after `start()`).
        public var port: UInt16
        /// MHD worker threads (each runs its own epoll loop).
        public var threads: Int
        /// Largest request body accepted; beyond it the handler gets `bodyTooLarge` and a prefix.
        public var maxBodyBytes: Int
        /// A connection idle this long (slow or stalled client) is closed. Suspended requests do not time out.
        public var connectionTimeoutSeconds: UInt32
        /// Most simultaneous connections (split across the threads); at the limit MHD stops accepting and
        /// newcomers wait in the kernel backlog until a connection closes.
        public var connectionLimit: Int
        /// Most simultaneous connections from one IP address (refused at once beyond it); 0: no per-IP limit.
        public var connectionLimitPerIP: Int
        /// Peers the per-IP limit does not apply to: proxies, each carrying many senders (`PAYRECON_TRUSTED_PROXIES`).
        public var connectionLimitPerIPExempt: [AddressRange] = []
        /// Most bytes of request bodies held at once, all connections together (`BodyBudget`); a request that would
        /// pass it reaches the handler with `bodyOverBudget`. nil: no budget beyond `maxBodyBytes` per request.
        public var maxBodyBuffer: Int? = nil
        /// Memory MHD may use per connection for the request line, headers and read buffer.
        public var memoryLimitPerConnection: Int
        /// Receives libmicrohttpd's own diagnostics (one line each); nil silences them.
        public var errorLog: (@Sendable (String) -> Void)?
        /// Longest a request may take, counted from when its connection opened or the previous request on it was
        /// answered, to its answer; a connection past it is cut off however steadily it trickles. nil: no limit
        /// beyond `connectionTimeoutSeconds` (which only bounds idle periods).
        public var requestTimeout: Duration?
        /// Called (on the deadline thread) for each connection cut off by `requestTimeout`.
        public var onRequestTimeout: (@Sendable () -> Void)?

        public init(
            host: String = "127.0.0.1",
            port: UInt16 = 8080,
            threads: Int = max(2, ProcessInfo.processInfo.activeProcessorCount),
            maxBodyBytes: Int = 1_048_576,
            connectionTimeoutSeconds: UInt32 = 30,
            connectionLimit: Int = 1000,
            connectionLimitPerIP: Int = 0,
            memoryLimitPerConnection: Int = 64 * 1024,
            errorLog: (@Sendable (String) -> Void)? = nil,
            requestTimeout: Duration? = nil,
            onRequestTimeout: (@Sendable () -> Void)? = nil
        ) {
            self.host = host
            self.port = port
            self.threads = threads
            self.maxBodyBytes = maxBodyBytes
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionLimit = connectionLimit
            self.connectionLimitPerIP = connectionLimitPerIP
            self.memoryLimitPerConnection = memoryLimitPerConnection
            self.errorLog = errorLog
            self.requestTimeout = requestTimeout
            self.onRequestTimeout = onRequestTimeout
        }
    }

    /// Handler signature: called on an MHD thread once the body is complete (or too large).
    public typealias Handler = @Sendable (HTTPRequest, HTTPResponder) -> Void

    public let configuration: Configuration
    private let core: ServerCore
    private let state = Mutex<RunState>(.idle)

    private enum RunState {
        case idle
        case running(daemon: DaemonHandle, listenFD: Int32, port: UInt16)
        case stopped
    }

    /// - Parameter handler: called for every request; must eventually call `responder.respond` exactly once
    ///   (a responder released without answering answers 500).
    public init(configuration: Configuration, handler: @escaping Handler) {
        self.configuration = configuration
        self.core = ServerCore(configuration: configuration, handler: handler)
    }

    /// A server whose handler is async: each request runs in its own `Task`, off the MHD threads.
    public convenience init(configuration: Configuration, asyncHandler: @escaping @Sendable (HTTPRequest) async -> HTTPResponse) {
        self.init(configuration: configuration) { request, responder in
            Task { responder.respond(await asyncHandler(request)) }
        }
    }

    deinit {
        if case .running = state.withLock({ $0 }) { shutdown(drainTimeout: 0) }
    }

    /// Bytes of request bodies held now (0 without a budget).
    public var bodyBufferBytes: Int { core.hasBudget ? core.budget.withLock { $0.held } : 0 }

    /// The port actually bound (useful with port 0); 0 before `start()`.
    public var port: UInt16 {
        state.withLock { if case .running(_, _, let port) = $0 { port } else { 0 } }
    }

    /// Binds the address and starts the MHD threads.
    /// - Throws: `HTTPServerError` such as "cannot listen on 127.0.0.1:8080: address in use".
    public func start() throws {
        try state.withLock { state in
            guard case .idle = state else { throw HTTPServerError(message: "server already started") }
            let fd = try ListenSocket.open(host: configuration.host, port: configuration.port)
            guard let daemon = core.startDaemon(listenFD: fd) else {
                // Not closed here: MHD_start_daemon closes a listening socket it was given on most of its failure
                // paths, and closing the number again could close a descriptor another thread has just opened.
                throw HTTPServerError(
                    message: "cannot listen on \(configuration.host):\(configuration.port): libmicrohttpd failed to start")
            }
            var port = payrecon_mhd_bind_port(daemon.raw)
            if port == 0 { port = ListenSocket.boundPort(fd) }
            state = .running(daemon: daemon, listenFD: fd, port: port)
        }
    }

    /// Stops accepting connections, waits up to `drainTimeout` seconds for in-flight requests (including
    /// ones waiting for a responder) to be answered, answers any still waiting with 503, and stops the
    /// threads. Blocks the calling thread; from async code use the `async` overload.
    public func shutdown(drainTimeout: Double) {
        let running: (DaemonHandle, Int32)? = state.withLock { state in
            guard case .running(let daemon, let fd, _) = state else { return nil }
            state = .stopped
            return (daemon, fd)
        }
        guard let (daemon, fd) = running else { return }

        // 1. Stop accepting. MHD hands the listening socket back but its threads may still poll it, so it is
        //    only closed after MHD_stop_daemon; shutdown(2) makes the kernel refuse new connections now.
        //    If MHD did not hand it back it still owns it and MHD_stop_daemon closes it: we must not close it too.
        let returned = MHD_quiesce_daemon(daemon.raw) == fd
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))

        // 2. Drain: wait for every started request to complete.
        let deadline = Date().addingTimeInterval(max(0, drainTimeout))
        while core.activeRequests > 0, Date() < deadline { usleep(5_000) }

        // 3. Force: answer whatever still waits (MHD_stop_daemon must not see a suspended connection),
        //    then give those answers a moment to go out.
        if core.activeRequests > 0 {
            core.forceAnswerAll()
            let grace = Date().addingTimeInterval(0.5)
            while core.activeRequests > 0, Date() < grace { usleep(5_000) }
        }

        // 4. Stop: closes remaining connections (NOTIFY_COMPLETED frees their contexts).
        MHD_stop_daemon(daemon.raw)
        if returned { close(fd) }
        core.daemonStopped()
    }

    /// `shutdown(drainTimeout:)` run on its own thread, so the cooperative pool stays free to run the
    /// responders the drain is waiting for.
    public func shutdown(drainTimeout: Double) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { [self] in
                shutdown(drainTimeout: drainTimeout)
                continuation.resume()
            }
            thread.name = "HTTPServer.shutdown"
            thread.start()
        }
    }
}

/// A server start failure, with a message fit for an operator.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var description: String { message }
}

/// An `MHD_Daemon *` that may cross threads (libmicrohttpd's calls on it are thread-safe).
struct DaemonHandle: @unchecked Sendable {
    let raw: OpaquePointer
}
