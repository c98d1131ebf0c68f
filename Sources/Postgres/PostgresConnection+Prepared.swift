import CLibPQ

extension PostgresConnection {
    /// Registers a named prepared statement on this connection and prepares it on the server. Parameter types are
    /// inferred from the SQL (cast, e.g. `$1::bytea`, where they are ambiguous). Preparing the same name with the same
    /// SQL again does nothing; with different SQL it replaces the statement. After `reset()` statements are prepared
    /// again on first use.
    public func prepare(name: String, sql: String) throws {
        try withHandle { conn in
            if preparedStatements[name] == sql, preparedInSession.contains(name) { return }
            if preparedInSession.contains(name) {
                _ = try rows(from: PQexec(conn, "DEALLOCATE " + escapeIdentifier(conn, name)), conn)
                preparedInSession.remove(name)
            }
            preparedStatements[name] = sql
            do {
                try ensurePrepared(conn, name)
            } catch {
                preparedStatements[name] = nil
                throw error
            }
        }
    }

    /// Runs a statement registered with ``prepare(name:sql:)``.
    @discardableResult
    public func queryPrepared(name: String, params: [PostgresValue] = []) throws -> PostgresRows {
        let buffers = try ParameterBuffers(params)
        return try withHandle { conn in
            try ensurePrepared(conn, name)
            let result = buffers.withPointers { count, _, values, lengths, formats in
                PQexecPrepared(conn, name, count, values, lengths, formats, 0)
            }
            return try rows(from: result, conn)
        }
    }

    /// Names registered with ``prepare(name:sql:)``.
    public var preparedStatementNames: [String] { preparedStatements.keys.sorted() }

    /// Prepares `name` in the current server session if it is not there yet.
    func ensurePrepared(_ conn: OpaquePointer, _ name: String) throws {
        guard let sql = preparedStatements[name] else {
            throw PostgresError.protocolViolation("no statement prepared as \"\(name)\" on this connection; call prepare(name:sql:) first")
        }
        if preparedInSession.contains(name) { return }
        _ = try rows(from: PQprepare(conn, name, sql, 0, nil), conn)
        preparedInSession.insert(name)
    }
}
