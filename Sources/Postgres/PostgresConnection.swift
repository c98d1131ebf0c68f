import CLibPQ
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection. Blocking; use it from one thread at a time (the pool hands each caller its own), from any
/// thread, including threads a C library calls back on. Concurrent use is detected and refused with an error rather
/// than corrupting the libpq state.
///
/// Every session is set to UTF-8, ISO dates, hex bytea output and UTC, whatever the server's defaults are.
public final class PostgresConnection: @unchecked Sendable {
    /// Seconds libpq may spend dialling when the connection string sets no `connect_timeout`.
    public static let defaultConnectTimeout = 5

    var handle: OpaquePointer?
    let conninfo: String
    /// Where this connection goes, for messages (`host:port/dbname`, never the password).
    public let target: String
    /// LISTEN channels, issued again after `reset()`.
    var listenChannels: Set<String> = []
    var savepointCounter = 0
    /// The statements this session runs by name (off unless the pool turns it on).
    var prepared = PreparedStatements()
    private let busy = Atomic<Bool>(false)

    /// Dials PostgreSQL. `conninfo` is a URI (`postgresql://user@host:port/db?sslmode=disable`) or key=value pairs
    /// (`host=... dbname=...`). Without `connect_timeout`, ``defaultConnectTimeout`` applies.
    /// Throws `.connection` naming host, port, database and user, and libpq's reason; never the password.
    public init(conninfo: String) throws {
        self.conninfo = conninfo
        let handle = try Self.dial(conninfo)
        self.handle = handle
        target = Self.describeTarget(handle)
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Closes the connection. Later calls throw `.connection`.
    public func close() {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { busy.store(false, ordering: .releasing) }
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// Backend process id of the session (what `pg_backend_pid()` returns), 0 when closed.
    public var backendPID: Int32 {
        handle.map { PQbackendPID($0) } ?? 0
    }

    /// Whether libpq considers the connection up (it learns of a dead server only when it next reads).
    public var isOpen: Bool {
        handle.map { PQstatus($0) == CONNECTION_OK } ?? false
    }

    /// The value libpq uses for a connection option (`connect_timeout`, `host`...), nil when unset.
    func connectionOption(_ keyword: String) -> String? {
        guard let handle, let options = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let name = option.pointee.keyword {
            if String(cString: name) == keyword { return option.pointee.val.map { String(cString: $0) } }
            option += 1
        }
        return nil
    }

    // MARK: - Queries

    /// Runs one statement and returns its rows (text results; bytea decoded exactly).
    @discardableResult
    public func query(_ sql: SQL) throws -> PostgresRows {
        try query(sql.text, sql.binds)
    }

    /// Runs one statement and returns the rows it affected (inserted, updated, deleted...).
    @discardableResult
    public func execute(_ sql: SQL) throws -> Int {
        try query(sql.text, sql.binds).affectedRows
    }

    /// Runs one statement with hand-numbered `$1`... parameters: for tests and migrations only
    /// (`@_spi(Positional)`); everything else writes an interpolated ``SQL``.
    @_spi(Positional)
    @discardableResult
    public func query(_ sql: String, _ params: [PostgresValue] = []) throws -> PostgresRows {
        let buffers = try ParameterBuffers(params)
        return try withHandle { conn in
            if let (key, name) = try preparedName(conn, sql, buffers) {
                let idle = PQtransactionStatus(conn) == PQTRANS_IDLE
                do {
                    return try rows(
                        from: buffers.withPointers { count, _, values, lengths, formats in
                            PQexecPrepared(conn, name, count, values, lengths, formats, 0)
                        }, conn)
                } catch let failure as PostgresError where PreparedStatements.invalidates(failure) {
                    prepared.forget(key, after: failure)
                    // Raised before the statement did anything: outside a transaction it is simply run again,
                    // unnamed; inside one, the transaction is aborted and its caller decides.
                    guard idle else { throw failure }
                }
            }
            let result = buffers.withPointers { count, types, values, lengths, formats in
                PQexecParams(conn, sql, count, types, values, lengths, formats, 0)
            }
            return try rows(from: result, conn)
        }
    }

    /// ``execute(_:)-(SQL)`` with hand-numbered parameters: for tests and migrations only (`@_spi(Positional)`).
    @_spi(Positional)
    @discardableResult
    public func execute(_ sql: String, _ params: [PostgresValue] = []) throws -> Int {
        try query(sql, params).affectedRows
    }

    /// Runs SQL text that may hold several statements (a migration file), with no parameters, through the simple
    /// query protocol. Statements outside an explicit BEGIN/COMMIT each commit on their own.
    public func executeScript(_ sql: String) throws {
        try withHandle { conn in
            _ = try rows(from: PQexec(conn, sql), conn)
        }
    }

    /// Re-dials with the same parameters (PQreset), then restores the session settings and LISTEN channels. Use after a connection failure when you keep the connection object.
    /// Also reopens a connection that was closed.
    public func reset() throws {
        try withExclusiveAccess {
            let conn: OpaquePointer
            if let handle {
                PQreset(handle)
                prepared.forgetAll()
                guard PQstatus(handle) == CONNECTION_OK else {
                    throw PostgresError.connection(Self.connectFailureMessage(handle, conninfo))
                }
                try Self.configureSession(handle)
                conn = handle
            } else {
                conn = try Self.dial(conninfo)
                prepared.forgetAll()
                handle = conn
            }
            for channel in listenChannels.sorted() {
                _ = try rows(from: PQexec(conn, "LISTEN " + escapeIdentifier(conn, channel)), conn)
            }
        }
    }

    // MARK: - Internals shared by the extensions

    /// Runs `body` with the libpq handle, refusing concurrent or nested use of the connection.
    func withHandle<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try withExclusiveAccess {
            guard let handle else { throw PostgresError.connection("the connection to \(target) is closed") }
            return try body(handle)
        }
    }

    private func withExclusiveAccess<T>(_ body: () throws -> T) throws -> T {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            throw PostgresError.protocolViolation(
                "the connection is already in use (another thread, or a forEachRow body using its own connection); "
                    + "use one connection per thread, or a PostgresPool")
        }
        defer { busy.store(false, ordering: .releasing) }
        return try body()
    }

    /// Turns a PGresult into rows or an error, and clears it.
    func rows(from result: OpaquePointer?, _ conn: OpaquePointer) throws -> PostgresRows {
        guard let result else { throw error(from: nil, conn) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return PostgresRows(result: result)
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            abortCopy(conn, status)
            throw PostgresError.protocolViolation("COPY ... FROM STDIN / TO STDOUT is not supported by this layer")
        default:
            throw error(from: result, conn)
        }
    }

    /// The error a failed result (or a nil one) stands for. A broken connection is always `.connection`.
    func error(from result: OpaquePointer?, _ conn: OpaquePointer) -> PostgresError {
        func field(_ code: Unicode.Scalar) -> String? {
            guard let result, let value = PQresultErrorField(result, Int32(UInt8(ascii: code))) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C")
        let primary = field("M")
        let fallback = Self.clean(result.flatMap { PQresultErrorMessage($0) }).nonEmpty ?? Self.clean(PQerrorMessage(conn))
        if PQstatus(conn) != CONNECTION_OK {
            var message = primary ?? fallback.nonEmpty ?? "the server closed the connection"
            if let sqlState { message += " (SQLSTATE \(sqlState))" }
            return .connection("connection to \(target) lost: \(message)")
        }
        if let sqlState {
            return .server(sqlState: sqlState, message: primary ?? fallback, detail: field("D"))
        }
        return .protocolViolation(fallback.nonEmpty ?? "libpq reported a failure without a message")
    }

    /// Quotes a name with PQescapeIdentifier (encoding-aware).
    func escapeIdentifier(_ conn: OpaquePointer, _ name: String) throws -> String {
        guard !name.utf8.contains(0) else { throw PostgresError.decoding("identifier contains a NUL byte") }
        guard let escaped = PQescapeIdentifier(conn, name, name.utf8.count) else {
            throw PostgresError.decoding("cannot quote identifier: \(Self.clean(PQerrorMessage(conn)))")
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    /// Leaves COPY state so the connection stays usable.
    private func abortCopy(_ conn: OpaquePointer, _ status: ExecStatusType) {
        if status == PGRES_COPY_IN {
            _ = PQputCopyEnd(conn, "COPY FROM STDIN is not supported")
        } else {
            var buffer: UnsafeMutablePointer<CChar>?
            while PQgetCopyData(conn, &buffer, 0) >= 0 {
                if let buffer { PQfreemem(buffer) }
                buffer = nil
            }
        }
        while let next = PQgetResult(conn) { PQclear(next) }
    }

    /// True when an idle connection is still up: reads anything the server sent meanwhile (a terminated backend's
    /// FATAL message and EOF) without blocking. Used by the pool before handing a connection out.
    func isAliveWhenIdle() -> Bool {
        (try? withHandle { conn -> Bool in
            // A terminated backend leaves its FATAL message and then EOF: read until nothing is left (or EOF
            // breaks the connection). A few rounds suffice; an idle session receives little else.
            for _ in 0..<8 {
                guard PQstatus(conn) == CONNECTION_OK else { return false }
                var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 0) > 0 else { return true }
                if PQconsumeInput(conn) == 0 { return false }
            }
            return PQstatus(conn) == CONNECTION_OK
        }) ?? false
    }

    /// Brings a connection back to an idle session for reuse: rolls back an open transaction and drops LISTENs.
    /// False when it cannot be reused.
    func prepareForReuse() -> Bool {
        (try? withHandle { conn -> Bool in
            guard PQstatus(conn) == CONNECTION_OK, PQpipelineStatus(conn) == PQ_PIPELINE_OFF else { return false }
            switch PQtransactionStatus(conn) {
            case PQTRANS_IDLE: break
            case PQTRANS_INTRANS, PQTRANS_INERROR: _ = try rows(from: PQexec(conn, "ROLLBACK"), conn)
            default: return false
            }
            if !listenChannels.isEmpty {
                _ = try rows(from: PQexec(conn, "UNLISTEN *"), conn)
                listenChannels = []
                while let notification = PQnotifies(conn) { PQfreemem(notification) }
            }
            return PQtransactionStatus(conn) == PQTRANS_IDLE
        }) ?? false
    }

    // MARK: - Dialling

    /// TCP settings every connection starts from (a connection string may set its own): keepalive probes after 30 s
    /// idle, every 10 s, 3 of them; data unacknowledged for 60 s ends the connection (`tcp_user_timeout`, which never
    /// cuts a long query: the server acknowledges the query it computes). Ignored on a Unix-domain socket.
    static let tcpDefaults: [(String, String)] = [
        ("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "60000")
    ]

    static func dial(_ conninfo: String) throws -> OpaquePointer {
        // Keywords before the expanded "dbname" are defaults the connection string overrides. TCP keepalives and a
        // user timeout notice a network that drops packets within about a minute, where the kernel alone waits up to
        // a quarter of an hour: a query on a dead connection fails, the pool dials again, the probe says so.
        let keywords = ["connect_timeout", "fallback_application_name"] + tcpDefaults.map(\.0) + ["dbname"]
        let values = [String(defaultConnectTimeout), "payrecon"] + tcpDefaults.map(\.1) + [conninfo]
        let connection = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let connection else { throw PostgresError.connection("libpq could not allocate a connection") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = connectFailureMessage(connection, conninfo)
            PQfinish(connection)
            throw PostgresError.connection(message)
        }
        // libpq prints notices and warnings to stderr by default, which would break the JSON-lines log.
        // Errors that matter reach the caller as thrown errors; notices are dropped.
        _ = PQsetNoticeProcessor(connection, { _, _ in }, nil)
        do {
            try configureSession(connection)
        } catch {
            PQfinish(connection)
            throw error
        }
        return connection
    }

    static let sessionSetup =
        "SET client_encoding TO 'UTF8'; SET DateStyle TO 'ISO, MDY'; SET bytea_output TO 'hex'; SET TimeZone TO 'UTC'"

    static func configureSession(_ conn: OpaquePointer) throws {
        guard let result = PQexec(conn, sessionSetup) else {
            throw PostgresError.connection("session setup failed: \(clean(PQerrorMessage(conn)))")
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            throw PostgresError.connection("session setup failed: \(clean(PQresultErrorMessage(result)))")
        }
    }

    static func describeTarget(_ conn: OpaquePointer) -> String {
        func value(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
            pointer.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let host = value(PQhost(conn)) ?? "localhost"
        let port = value(PQport(conn)) ?? "5432"
        let database = value(PQdb(conn)) ?? "?"
        return "\(host):\(port)/\(database)"
    }

    static func connectFailureMessage(_ conn: OpaquePointer, _ conninfo: String) -> String {
        func value(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
            pointer.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        var parts: [String] = []
        if let host = value(PQhost(conn)) { parts.append("host=\(host)") }
        if let port = value(PQport(conn)) { parts.append("port=\(port)") }
        if let database = value(PQdb(conn)) { parts.append("dbname=\(database)") }
        if let user = value(PQuser(conn)) { parts.append("user=\(user)") }
        let reason = clean(PQerrorMessage(conn)).nonEmpty ?? "unknown reason"
        var secrets = ConnInfoSecrets.candidates(in: conninfo)
        if let password = value(PQpass(conn)) { secrets.append(password) }
        let message =
            parts.isEmpty
            ? "could not connect (check DATABASE_URL): \(reason)"
            : "could not connect to \(parts.joined(separator: " ")): \(reason)"
        return ConnInfoSecrets.redact(message, secrets: secrets)
    }

    /// libpq messages end in newlines and continue on tab-indented lines: make them one line.
    static func clean(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(cString: message)
            .split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
            .joined(separator: " ")
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// Calls `body` with a NULL-terminated array of C strings.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Parameters marshalled for libpq: values in malloc'd buffers (freed on deinit), with types, lengths and formats.
final class ParameterBuffers {
    let count: Int32
    private(set) var types: [UInt32] = []
    private var values: [UnsafePointer<CChar>?] = []
    private var lengths: [Int32] = []
    private var formats: [Int32] = []
    private var allocations: [UnsafeMutablePointer<CChar>] = []

    init(_ params: [PostgresValue]) throws {
        guard params.count <= 65_535 else {
            throw PostgresError.protocolViolation("\(params.count) parameters; PostgreSQL takes at most 65535 per statement")
        }
        count = Int32(params.count)
        for param in params {
            let encoded = try param.encoded()
            types.append(encoded.oid)
            formats.append(encoded.binary ? 1 : 0)
            guard let bytes = encoded.bytes else {
                values.append(nil)
                lengths.append(0)
                continue
            }
            guard bytes.count < Int(Int32.max) else {
                throw PostgresError.protocolViolation("a parameter of \(bytes.count) bytes is too large")
            }
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            allocations.append(buffer)
            bytes.withUnsafeBytes { source in
                UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress ?? UnsafeRawPointer(buffer), byteCount: bytes.count)
            }
            buffer[bytes.count] = 0
            values.append(UnsafePointer(buffer))
            lengths.append(Int32(bytes.count))
        }
    }

    deinit {
        allocations.forEach { $0.deallocate() }
    }

    func withPointers<R>(
        _ body: (Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) throws
            -> R
    ) rethrows -> R {
        try types.withUnsafeBufferPointer { types in
            try values.withUnsafeBufferPointer { values in
                try lengths.withUnsafeBufferPointer { lengths in
                    try formats.withUnsafeBufferPointer { formats in
                        try body(count, types.baseAddress, values.baseAddress, lengths.baseAddress, formats.baseAddress)
                    }
                }
            }
        }
    }
}

extension PostgresConnection {
    /// Whether this connection reaches PostgreSQL through a proxy or pooler (PgBouncer): the port libpq connected to
    /// is not the port the server says it listens on (`inet_server_port()`). nil when that cannot be told (a Unix
    /// socket, where the server reports no port). LISTEN through a transaction-mode pooler loses notifications, so the
    /// worker polls instead unless PAYRECON_LISTEN_DATABASE_URL gives a direct connection.
    /// A pooler also shows in the backend process id: PgBouncer answers the connection with a key of its own, so the id
    /// libpq was given is not the server's `pg_backend_pid()` (whatever ports either listens on).
    public func looksPooled() throws -> Bool? {
        let (connectedPort, givenPID) = try withHandle { conn in (PQport(conn).map { String(cString: $0) }, PQbackendPID(conn)) }
        guard let row = try query("SELECT inet_server_port()::text AS port, pg_backend_pid() AS pid").first else { return nil }
        if try row.int32("pid") != givenPID { return true }
        guard let serverPort = try row.optionalString("port"), let connectedPort, !connectedPort.isEmpty else { return nil }
        return serverPort != connectedPort
    }
}
