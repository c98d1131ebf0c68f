import CLibPQ

/// `COPY … FROM STDIN` in PostgreSQL's text format: the fastest way to hand the server many rows (a settlement file's
/// million lines). The body builds rows with ``CopyRows`` and sends them in chunks while it reads its input, so the
/// server parses one chunk while the client reads the next; nothing is held whole in memory.
extension PostgresConnection {
    /// Runs `sql` (a `COPY table (columns) FROM STDIN` statement), handing `body` a sender for rows in the text format.
    /// Returns the rows copied. If `body` throws, the COPY is ended with the error's text (the server discards what
    /// was sent, and the transaction, if any, is aborted) and the error is rethrown.
    @discardableResult
    public func copyIn(_ sql: String, _ body: (CopySender) throws -> Void) throws -> Int {
        try withHandle { conn in
            guard let started = PQexec(conn, sql) else { throw error(from: nil, conn) }
            guard PQresultStatus(started) == PGRES_COPY_IN else {
                _ = try rows(from: started, conn)  // an error, or a statement that is no COPY FROM STDIN
                throw PostgresError.protocolViolation("copyIn needs a COPY … FROM STDIN statement")
            }
            PQclear(started)
            var failure: Error?
            let sender = CopySender(conn: conn, connection: self)
            do { try body(sender) } catch { failure = error }
            sender.conn = nil
            let message = failure.map { "aborted by the client: \(String(describing: $0).prefix(200))" }
            guard PQputCopyEnd(conn, message) == 1 else { throw error(from: nil, conn) }
            // The COPY's own result, then nothing more (drained so the connection is usable again).
            var outcome: Result<Int, Error> = .success(0)
            while let result = PQgetResult(conn) {
                if case .success = outcome {
                    do { outcome = .success(try rows(from: result, conn).affectedRows) } catch { outcome = .failure(error) }
                } else {
                    PQclear(result)
                }
            }
            if let failure { throw failure }
            return try outcome.get()
        }
    }
}

/// Sends rows to a COPY in progress; valid only inside ``PostgresConnection/copyIn(_:_:)``'s body.
public final class CopySender {
    fileprivate var conn: OpaquePointer?
    private let connection: PostgresConnection
    fileprivate init(conn: OpaquePointer, connection: PostgresConnection) { self.conn = conn; self.connection = connection }

    /// Sends what `rows` holds and empties it (keeping its capacity).
    public func send(_ rows: inout CopyRows) throws {
        guard let conn else { throw PostgresError.protocolViolation("the COPY has ended: send rows inside copyIn's body") }
        guard !rows.bytes.isEmpty else { return }
        let sent = rows.bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(conn, $0.baseAddress, Int32($0.count)) }
        }
        rows.bytes.removeAll(keepingCapacity: true)
        guard sent == 1 else { throw connection.error(from: nil, conn) }
    }
}

/// Rows in COPY's text format: fields separated by tabs, rows by newlines, `\N` for NULL, and a backslash, tab,
/// newline or carriage return in a value escaped. A NUL byte cannot be in a text value: it is written as U+FFFD.
public struct CopyRows: Sendable {
    public internal(set) var bytes: [UInt8] = []
    private var fieldsInRow = 0

    public init(capacity: Int = 1 << 20) { bytes.reserveCapacity(capacity) }

    public mutating func text(_ value: String?) {
        separate()
        guard var text = value else { bytes += [0x5C, 0x4E]; return }
        text.withUTF8 { utf8 in
            // Most values need no escape: copied at once.
            guard utf8.contains(where: { $0 == 0x5C || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            for b in utf8 {
                switch b {
                case 0x5C: bytes += [0x5C, 0x5C]
                case 0x09: bytes += [0x5C, 0x74]
                case 0x0A: bytes += [0x5C, 0x6E]
                case 0x0D: bytes += [0x5C, 0x72]
                case 0x00: bytes += [0xEF, 0xBF, 0xBD]
                default: bytes.append(b)
                }
            }
        }
    }

    public mutating func int(_ value: Int64?) {
        separate()
        guard let value else { bytes += [0x5C, 0x4E]; return }
        if value == 0 { bytes.append(0x30); return }
        if value < 0 { bytes.append(0x2D) }
        // The digits written least significant first, then turned around in place.
        let start = bytes.count
        var v = value.magnitude
        while v > 0 { bytes.append(UInt8(v % 10) + 0x30); v /= 10 }
        bytes[start...].reverse()
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(value ? 0x74 : 0x66)
    }

    /// Ends the row.
    public mutating func end() {
        bytes.append(0x0A)
        fieldsInRow = 0
    }

    private mutating func separate() {
        if fieldsInRow > 0 { bytes.append(0x09) }
        fieldsInRow += 1
    }
}
