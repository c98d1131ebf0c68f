import CivilTime
import CMicroHTTPD
import Foundation
import Observability
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// The whole-request deadline (PAYRECON_REQUEST_TIMEOUT: "from its first byte to its answer"). MHD's own timeout is
// per idle period: a sender that trickles one byte every few seconds resets it forever. So each connection gets a
// clock: started when the connection opens (the first request's first byte is on its way), and on a keep-alive
// connection restarted when the next request's line has arrived (MHD's URI log callback, the first sign of it:
// MHD reports no earlier byte, so a request line trickled while the connection waited counts against that wait,
// itself bounded by the deadline — a keep-alive request takes at most twice the deadline from its first byte).
// A watchdog thread cuts off any connection whose clock has run past the deadline. A keep-alive connection idle
// that long since its last answer is cut too (so the next request line cannot be trickled either), but that is no
// request timing out and is not counted as one. Cutting is `shutdown(2)`, never `close(2)`: MHD still owns the
// descriptor and sees an ordinary disconnect on its own thread, and the descriptor stays open until MHD's
// NOTIFY_CLOSED has removed it from here, so the number is never one another thread has just opened.

/// Which connections have run past their deadline: a pure value, the clock handed in.
struct RequestDeadlines {
    struct Entry {
        var fd: Int32
        var since: UInt64  // monotonic ns
        /// A request is under way: the first since the connection opened, or one whose line has arrived since the
        /// last answer. False while a keep-alive connection waits for its next request.
        var inRequest = true
        var cut = false
    }
    /// A connection to cut, and whether a request on it timed out (false: it sat idle after an answer).
    struct Cut: Equatable {
        var fd: Int32
        var requestTimedOut: Bool
    }
    let timeoutNanoseconds: UInt64
    private(set) var entries: [UInt: Entry] = [:]

    init(timeoutNanoseconds: UInt64) { self.timeoutNanoseconds = timeoutNanoseconds }

    mutating func opened(_ connection: UInt, fd: Int32, now: UInt64) { entries[connection] = Entry(fd: fd, since: now) }
    /// A request's line has arrived. On a connection that was waiting after an answer, its clock starts now.
    mutating func requestStarted(_ connection: UInt, now: UInt64) {
        guard let entry = entries[connection], !entry.cut, !entry.inRequest else { return }
        entries[connection]?.since = now
        entries[connection]?.inRequest = true
    }
    /// A request on the connection was answered (or abandoned): the wait for the next one starts.
    mutating func requestCompleted(_ connection: UInt, now: UInt64) {
        guard entries[connection]?.cut == false else { return }
        entries[connection]?.since = now
        entries[connection]?.inRequest = false
    }
    mutating func closed(_ connection: UInt) { entries[connection] = nil }

    /// The connections to cut now; each is returned once.
    mutating func expire(now: UInt64) -> [Cut] {
        var due: [Cut] = []
        for (key, entry) in entries where !entry.cut && now >= entry.since &+ timeoutNanoseconds {
            entries[key]?.cut = true
            due.append(Cut(fd: entry.fd, requestTimedOut: entry.inRequest))
        }
        return due
    }
}

/// Runs `RequestDeadlines` for one server: MHD threads report connections, a thread of its own cuts the late ones.
final class DeadlineWatchdog: @unchecked Sendable {
    private let state: Mutex<RequestDeadlines>
    private let stopped = Atomic<Bool>(false)
    private let tick: UInt32  // µs
    private let onCut: (@Sendable () -> Void)?
    private var thread: Thread?

    init(timeout: Duration, onCut: (@Sendable () -> Void)?) {
        let seconds = timeout.inSeconds
        state = Mutex(RequestDeadlines(timeoutNanoseconds: UInt64(max(0.001, seconds) * 1e9)))
        // A tenth of the deadline, between 10 ms and 500 ms: the cut comes at most that late.
        tick = UInt32(min(500_000, max(10_000, seconds * 100_000)))
        self.onCut = onCut
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func opened(_ connection: OpaquePointer) {
        let fd = payrecon_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        state.withLock { $0.opened(UInt(bitPattern: connection), fd: fd, now: Self.now()) }
    }
    func requestStarted(_ connection: OpaquePointer) { state.withLock { $0.requestStarted(UInt(bitPattern: connection), now: Self.now()) } }
    func requestCompleted(_ connection: OpaquePointer) {
        state.withLock { $0.requestCompleted(UInt(bitPattern: connection), now: Self.now()) }
    }
    func closed(_ connection: OpaquePointer) { state.withLock { $0.closed(UInt(bitPattern: connection)) } }

    func start() {
        let thread = Thread { [self] in
            ThreadName.set("http-deadlines")
            while !stopped.load(ordering: .acquiring) {
                usleep(tick)
                // Under the lock: NOTIFY_CLOSED (which precedes MHD's close) cannot run between reading a
                // descriptor and shutting it down.
                let cut = state.withLock { deadlines -> Int in
                    let due = deadlines.expire(now: Self.now())
                    for connection in due { _ = Glibc.shutdown(connection.fd, Int32(SHUT_RDWR)) }
                    return due.count { $0.requestTimedOut }
                }
                for _ in 0..<cut { onCut?() }
            }
        }
        self.thread = thread
        thread.start()
    }

    func stop() { stopped.store(true, ordering: .releasing) }
}
