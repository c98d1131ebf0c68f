import CLibPQ

/// The statements one session has parsed and runs by name (the extended protocol's named statements), so the server
/// neither parses, analyses nor, once it settles on a generic plan, plans them again on every call. On a check's hot
/// path most of PostgreSQL's time went to parsing and planning the same few statements (`docs/PERFORMANCE.md`).
///
/// - Only a statement seen twice is prepared, and at most ``limit`` per session: SQL built for one call never takes a
///   slot, and a session's memory for plans stays bounded.
/// - Only plannable statements (SELECT, INSERT, UPDATE, DELETE, WITH, VALUES); BEGIN, SET and the like gain nothing.
/// - Off unless the pool turns it on, which it does only for a session that reaches PostgreSQL itself: behind a
///   transaction-mode pooler (PgBouncer before 1.21) the next statement may run on another server session, which does
///   not hold the name.
/// - The key is the SQL and its parameter types: a statement's types are fixed when it is prepared.
struct PreparedStatements {
    struct Key: Hashable {
        let sql: String
        let types: [UInt32]
    }

    enum Lookup: Equatable {
        /// Run it by this name.
        case prepared(String)
        /// Prepare it under this name first.
        case prepare(String)
        /// Run it unnamed, parsed for this call only.
        case unnamed
    }

    static let limit = 256
    /// Statements seen once are remembered up to this many; past it the record starts again.
    static let seenLimit = 4096

    /// A session that had this many names go stale stops preparing (a statement the server keeps refusing to reuse
    /// would otherwise be prepared again and again).
    static let forgetLimit = 32

    var enabled = false
    private(set) var names: [Key: String] = [:]
    private var seen: Set<Key> = []
    private var counter = 0
    /// Names of this session's own (`payrecon_<prefix>_<n>`): never one another session's, were they ever to meet.
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
    /// Names forgotten but still held by the server: deallocated when the session is next idle.
    private(set) var stale: [String] = []
    private var forgotten = 0

    init(enabled: Bool = false) { self.enabled = enabled }

    /// What to do with `key` now.
    mutating func lookup(_ key: Key) -> Lookup {
        guard enabled, Self.isPlannable(key.sql) else { return .unnamed }
        if let name = names[key] { return .prepared(name) }
        guard names.count < Self.limit, seen.contains(key) else {
            if seen.count >= Self.seenLimit { seen.removeAll(keepingCapacity: true) }
            seen.insert(key)
            return .unnamed
        }
        counter += 1
        return .prepare("payrecon_\(prefix)_\(counter)")
    }

    /// `key` was prepared as `name` on the server.
    mutating func remember(_ key: Key, as name: String) {
        names[key] = name
        seen.remove(key)
    }

    /// What running `key` by name failed with: when the server no longer holds it usefully (`invalidates`), the name
    /// is forgotten, or every name when the server holds none (26000 after a `DISCARD ALL`).
    mutating func forget(_ key: Key, after failure: PostgresError) {
        guard Self.invalidates(failure) else { return }
        if failure.sqlState == "26000" { forgetAll() } else { forget(key) }
    }

    /// The server no longer holds `key` usefully (its cached plan cannot serve a changed table): prepared again, under
    /// a new name, when next seen twice. The old name is deallocated when the session is next idle.
    mutating func forget(_ key: Key) {
        guard let name = names.removeValue(forKey: key) else { return }
        stale.append(name)
        forgotten += 1
        if forgotten >= Self.forgetLimit { enabled = false }
    }

    /// The session was reset or the server forgot every name (`DISCARD ALL`): nothing of it is held any more.
    mutating func forgetAll() {
        names.removeAll()
        seen.removeAll()
        stale.removeAll()
    }

    /// The stale names were deallocated.
    mutating func deallocated() { stale.removeAll() }

    /// Whether `error`, from running a prepared statement, means the name must be forgotten: the server could not
    /// reuse its plan ("cached plan must not change result type", 0A000) or does not know the name (26000).
    /// Either is raised before the statement does anything.
    static func invalidates(_ error: PostgresError) -> Bool {
        guard case .server(let state, let message, _) = error else { return false }
        return state == "26000" || (state == "0A000" && message.hasPrefix("cached plan"))
    }

    /// Whether PostgreSQL plans `sql` (a query or a data-changing statement), read from its first keyword after any
    /// white space and `--` comments.
    static func isPlannable(_ sql: String) -> Bool {
        var bytes = sql.utf8[...]
        while true {
            while let first = bytes.first, first == 0x20 || first == 0x0A || first == 0x09 || first == 0x0D { bytes = bytes.dropFirst() }
            guard bytes.starts(with: "--".utf8) else { break }
            bytes = bytes.drop(while: { $0 != 0x0A })
        }
        let word = String(decoding: bytes.prefix(while: { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }), as: UTF8.self).uppercased()
        return ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES"].contains(word)
    }
}

extension PostgresConnection {
    /// The name to run `sql` by on this session, preparing it first when it is due (see ``PreparedStatements``); nil:
    /// run it unnamed. A statement that cannot be prepared throws the server's error, the one running it would give.
    func preparedName(_ conn: OpaquePointer, _ sql: String, _ buffers: ParameterBuffers) throws -> (PreparedStatements.Key, String)? {
        guard prepared.enabled else { return nil }
        // Names gone stale are deallocated while nothing is under way (an error then changes nothing).
        if !prepared.stale.isEmpty, PQtransactionStatus(conn) == PQTRANS_IDLE {
            for name in prepared.stale { PQclear(PQexec(conn, "DEALLOCATE " + name)) }
            prepared.deallocated()
        }
        let key = PreparedStatements.Key(sql: sql, types: buffers.types)
        switch prepared.lookup(key) {
        case .unnamed: return nil
        case .prepared(let name): return (key, name)
        case .prepare(let name):
            let result = buffers.withPointers { count, types, _, _, _ in PQprepare(conn, name, sql, count, types) }
            _ = try rows(from: result, conn)
            prepared.remember(key, as: name)
            return (key, name)
        }
    }

    /// Whether this session prepares the statements it runs often (set by ``PostgresPool`` for a session that reaches
    /// PostgreSQL itself).
    public var preparesStatements: Bool {
        get { prepared.enabled }
        set {
            prepared.enabled = newValue
            if !newValue { prepared.forgetAll() }
        }
    }

    /// The statements this session holds prepared (for tests and diagnostics).
    var preparedCount: Int { prepared.names.count }
}
