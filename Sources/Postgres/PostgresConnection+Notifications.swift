import CivilTime
import CLibPQ
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension PostgresConnection {
    /// Subscribes this session to `channel` (any name; quoted with PQescapeIdentifier). Kept across `reset()`.
    public func listen(_ channel: String) throws {
        try withHandle { conn in
            _ = try rows(from: PQexec(conn, "LISTEN " + escapeIdentifier(conn, channel)), conn)
            listenChannels.insert(channel)
        }
    }

    /// Ends a subscription made with ``listen(_:)``.
    public func unlisten(_ channel: String) throws {
        try withHandle { conn in
            _ = try rows(from: PQexec(conn, "UNLISTEN " + escapeIdentifier(conn, channel)), conn)
            listenChannels.remove(channel)
        }
    }

    /// Sends a notification (`pg_notify`); inside a transaction it is delivered at COMMIT.
    public func notify(channel: String, payload: String = "") throws {
        try query("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    /// Waits until at least one notification has arrived or `timeout` has passed, and returns what arrived
    /// (empty on timeout). Notifications that came in during earlier queries are returned at once.
    public func waitForNotifications(timeout: Duration) throws -> [PostgresNotification] {
        try withHandle { conn in
            let deadline = ContinuousClock.now + max(.zero, timeout)
            while true {
                guard PQconsumeInput(conn) == 1 else { throw error(from: nil, conn) }
                let arrived = drainNotifications(conn)
                if !arrived.isEmpty { return arrived }
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero else { return [] }
                let milliseconds = Int32(
                    clamping: remaining.components.seconds * 1000
                        + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
                var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
                if poll(&descriptor, 1, milliseconds) < 0, errno != EINTR {
                    throw PostgresError.connection("poll failed while waiting for notifications from \(target)")
                }
            }
        }
    }

    private func drainNotifications(_ conn: OpaquePointer) -> [PostgresNotification] {
        var arrived: [PostgresNotification] = []
        while let notification = PQnotifies(conn) {
            defer { PQfreemem(notification) }
            arrived.append(
                PostgresNotification(
                    channel: String(cString: notification.pointee.relname),
                    payload: notification.pointee.extra.map { String(cString: $0) } ?? "",
                    pid: notification.pointee.be_pid))
        }
        return arrived
    }
}
