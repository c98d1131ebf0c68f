import CMicroHTTPD
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// The whole-request deadline (PAYRECON_REQUEST_TIMEOUT). MHD's own timeout is per idle period: a sender that
// trickles one byte every few seconds resets it forever. So each connection gets a clock: started when the connection
// opens, restarted when a request on it completes (so every request on a keep-alive connection gets the full time,
// counted from the end of the previous answer), and a watchdog thread cuts off any connection whose clock has run
// past the deadline. Cutting is `shutdown(2)`, never `close(2)`: MHD still owns the descriptor and sees an ordinary
// disconnect on its own thread, and the descriptor stays open until MHD's NOTIFY_CLOSED has removed it from here, so
// the number is never one another thread has just opened.

/// Which connections have run past their deadline: a pure value, the clock handed in.
struct RequestDeadlines {
    struct Entry {
        var fd: Int32
        var since: UInt64  // monotonic ns
        var cut = false
    }
    let timeoutNanoseconds: UInt64
    private(set) var entries: [UInt: Entry] = [:]

    init(timeoutNanoseconds: UInt64) { self.timeoutNanoseconds = timeoutNanoseconds }

    mutating func opened(_ connection: UInt, fd: Int32, now: UInt64) { entries[connection] = Entry(fd: fd, since: now) }
    /// A request on the connection was answered (or abandoned): the next one gets the whole time again.
    mutating func requestCompleted(_ connection: UInt, now: UInt64) {
        guard entries[connection]?.cut == false else { return }
        entries[connection]?.since = now
    }
    mutating func closed(_ connection: UInt) { entries[connection] = nil }

    /// The descriptors to cut now; each is returned once.
    mutating func expire(now: UInt64) -> [Int32] {
        var due: [Int32] = []
        for (key, entry) in entries where !entry.cut && now >= entry.since &+ timeoutNanoseconds {
            entries[key]?.cut = true
            due.append(entry.fd)
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

    init(timeoutSeconds: Double, onCut: (@Sendable () -> Void)?) {
        state = Mutex(RequestDeadlines(timeoutNanoseconds: UInt64(max(0.001, timeoutSeconds) * 1e9)))
        // A tenth of the deadline, between 10 ms and 500 ms: the cut comes at most that late.
        tick = UInt32(min(500_000, max(10_000, timeoutSeconds * 100_000)))
        self.onCut = onCut
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func opened(_ connection: OpaquePointer) {
        let fd = payrecon_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        state.withLock { $0.opened(UInt(bitPattern: connection), fd: fd, now: Self.now()) }
    }
    func requestCompleted(_ connection: OpaquePointer) { state.withLock { $0.requestCompleted(UInt(bitPattern: connection), now: Self.now()) } }
    func closed(_ connection: OpaquePointer) { state.withLock { $0.closed(UInt(bitPattern: connection)) } }

    func start() {
        let thread = Thread { [self] in
            Thread.current.name = "http-deadlines"  // from the thread itself: Linux names only the running thread
            while !stopped.load(ordering: .acquiring) {
                usleep(tick)
                // Under the lock: NOTIFY_CLOSED (which precedes MHD's close) cannot run between reading a
                // descriptor and shutting it down.
                let cut = state.withLock { deadlines -> Int in
                    let due = deadlines.expire(now: Self.now())
                    for fd in due { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
                    return due.count
                }
                for _ in 0..<cut { onCut?() }
            }
        }
        self.thread = thread
        thread.start()
    }

    func stop() { stopped.store(true, ordering: .releasing) }
}
