import CLibPQ

extension PostgresConnection {
    /// Streams the rows of a query to `body` one at a time (libpq single-row mode): memory stays constant however
    /// many rows there are. `body` must not use this connection (it is busy); use another one for writes.
    ///
    /// If `body` throws, the query is cancelled on the server, the remaining rows are discarded and the error is
    /// rethrown (inside a transaction, the transaction is then aborted). A server error after some rows (say a
    /// division by zero at row 5000) is thrown after `body` has seen the rows before it.
    public func forEachRow(_ sql: SQL, _ body: (PostgresRow) throws -> Void) throws {
        try forEachRow(sql.text, sql.binds, body)
    }

    /// ``forEachRow(_:_:)-(SQL,_)`` with hand-numbered parameters: for tests only (`@_spi(Positional)`).
    @_spi(Positional)
    public func forEachRow(_ sql: String, _ params: [PostgresValue] = [], _ body: (PostgresRow) throws -> Void) throws {
        let buffers = try ParameterBuffers(params)
        try withHandle { conn in
            let sent = buffers.withPointers { count, types, values, lengths, formats in
                PQsendQueryParams(conn, sql, count, types, values, lengths, formats, 0)
            }
            guard sent == 1 else { throw error(from: nil, conn) }
            guard PQsetSingleRowMode(conn) == 1 else {
                while let result = PQgetResult(conn) { PQclear(result) }
                throw PostgresError.protocolViolation("libpq refused single-row mode")
            }
            var columns: PostgresColumns?
            var failure: Error?
            while let result = PQgetResult(conn) {
                defer { PQclear(result) }
                if failure != nil { continue }
                switch PQresultStatus(result) {
                case PGRES_SINGLE_TUPLE:
                    let columnSet = columns ?? PostgresColumns(result: result)
                    columns = columnSet
                    let cells = (0..<columnSet.names.count).map { PostgresRows.cell(result, 0, $0) }
                    do {
                        try body(PostgresRow(columnSet: columnSet, cells: cells[...]))
                    } catch {
                        failure = error
                        cancelRunningQuery(conn)
                    }
                case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                    break
                default:
                    failure = error(from: result, conn)
                }
            }
            if let failure { throw failure }
            guard PQstatus(conn) == CONNECTION_OK else { throw error(from: nil, conn) }
        }
    }

    /// Asks the server to stop the running statement (a separate short connection; libpq's thread-safe PQcancel).
    private func cancelRunningQuery(_ conn: OpaquePointer) {
        guard let cancel = PQgetCancel(conn) else { return }
        defer { PQfreeCancel(cancel) }
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, Int32(buffer.count))
    }
}
