import CLibPQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension PostgresConnection {
    /// Sends every statement, then one Sync, and reads all results: one round trip for the lot (libpq pipeline mode).
    ///
    /// Typical use is a group commit: `BEGIN`, N inserts, `COMMIT`. Without an explicit BEGIN the statements still
    /// form one implicit transaction (up to the Sync), so they commit or fail together.
    ///
    /// Returns one result per statement, in order. When a statement fails, its result is its server error and every
    /// later one is `.pipelineAborted` (not executed); nothing of the implicit or explicit transaction is committed,
    /// and a transaction the pipeline opened is rolled back, so the connection is idle and usable afterwards.
    /// Throws only for problems that concern the whole call: the connection breaks (`.connection`), a parameter
    /// cannot be encoded.
    public func pipeline(_ statements: [PostgresStatement]) throws -> [Result<PostgresRows, PostgresError>] {
        guard !statements.isEmpty else { return [] }
        let buffers = try statements.map { try ParameterBuffers($0.params) }
        return try withHandle { conn in
            let startedIdle = PQtransactionStatus(conn) == PQTRANS_IDLE
            // Statements due to be prepared are prepared first, one round trip each, once per session. Only from an
            // idle session: there a statement that cannot be prepared changes nothing, and is sent unnamed so its
            // error comes back in its place.
            let named: [(PreparedStatements.Key, String)?] = zip(statements, buffers).map { statement, parameters in
                startedIdle ? (try? preparedName(conn, statement.sql, parameters)) ?? nil : nil
            }
            guard PQenterPipelineMode(conn) == 1 else {
                throw PostgresError.protocolViolation("cannot enter pipeline mode: \(Self.clean(PQerrorMessage(conn)))")
            }
            let results: [Result<PostgresRows, PostgresError>]
            do {
                try sendPipeline(conn, statements, buffers, named.map { $0?.1 })
                results = try readPipeline(conn, count: statements.count)
            } catch {
                // Failing mid-way leaves the protocol state unknown (statements sent without a Sync, results unread):
                // close the connection rather than guess. Usually it is already broken.
                let wasBroken = PQstatus(conn) != CONNECTION_OK
                PQfinish(conn)
                handle = nil
                if wasBroken { throw error }
                throw PostgresError.connection("pipeline failed mid-way, connection to \(target) closed: \(error)")
            }
            if PQexitPipelineMode(conn) != 1 {
                while let result = PQgetResult(conn) { PQclear(result) }
                guard PQexitPipelineMode(conn) == 1 else {
                    throw PostgresError.protocolViolation("cannot leave pipeline mode: \(Self.clean(PQerrorMessage(conn)))")
                }
            }
            for (result, name) in zip(results, named) {
                guard case .failure(let failure) = result, let (key, _) = name, PreparedStatements.invalidates(failure) else { continue }
                if failure.sqlState == "26000" { prepared.forgetAll() } else { prepared.forget(key) }
            }
            // A failed BEGIN...COMMIT leaves the session in an aborted transaction: end it.
            if startedIdle, PQtransactionStatus(conn) == PQTRANS_INERROR {
                _ = try rows(from: PQexec(conn, "ROLLBACK"), conn)
            }
            return results
        }
    }

    /// Queues the statements and a Sync, then flushes in non-blocking mode while reading what the server already
    /// answers, so neither side can block on a full socket buffer however long the pipeline is.
    private func sendPipeline(_ conn: OpaquePointer, _ statements: [PostgresStatement], _ buffers: [ParameterBuffers],
                              _ names: [String?]) throws {
        guard PQsetnonblocking(conn, 1) == 0 else { throw error(from: nil, conn) }
        defer { _ = PQsetnonblocking(conn, 0) }
        for ((statement, parameters), name) in zip(zip(statements, buffers), names) {
            let sent: Int32 = parameters.withPointers { count, types, values, lengths, formats in
                if let name { return PQsendQueryPrepared(conn, name, count, values, lengths, formats, 0) }
                return PQsendQueryParams(conn, statement.sql, count, types, values, lengths, formats, 0)
            }
            guard sent == 1 else { throw error(from: nil, conn) }
        }
        guard PQpipelineSync(conn) == 1 else { throw error(from: nil, conn) }
        while true {
            let flushed = PQflush(conn)
            if flushed == 0 { return }
            guard flushed > 0 else { throw error(from: nil, conn) }
            var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN | POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, 30_000)
            if ready < 0, errno != EINTR { throw PostgresError.connection("poll failed on the connection to \(target)") }
            if ready > 0, descriptor.revents & Int16(POLLIN) != 0, PQconsumeInput(conn) == 0 {
                throw error(from: nil, conn)
            }
        }
    }

    /// Reads results up to the Sync: each statement yields one result followed by a NULL separator.
    private func readPipeline(_ conn: OpaquePointer, count: Int) throws -> [Result<PostgresRows, PostgresError>] {
        var results: [Result<PostgresRows, PostgresError>] = []
        results.reserveCapacity(count)
        var current: Result<PostgresRows, PostgresError>?
        var firstFailure: Int?
        var consecutiveNulls = 0
        reading: while true {
            guard let result = PQgetResult(conn) else {
                guard PQstatus(conn) == CONNECTION_OK else { throw error(from: nil, conn) }
                if let finished = current {
                    results.append(finished)
                    current = nil
                }
                consecutiveNulls += 1
                if consecutiveNulls > 2 {
                    throw PostgresError.protocolViolation("pipeline ended without a Sync after \(results.count) of \(count) results")
                }
                continue
            }
            consecutiveNulls = 0
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_PIPELINE_SYNC:
                break reading
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                current = .success(PostgresRows(result: result))
            case PGRES_PIPELINE_ABORTED:
                current = .failure(.pipelineAborted(failedIndex: firstFailure))
            default:
                let failure = error(from: result, conn)
                if case .connection = failure { throw failure }
                if firstFailure == nil { firstFailure = results.count }
                current = .failure(failure)
            }
        }
        if let finished = current { results.append(finished) }
        guard results.count <= count else {
            throw PostgresError.protocolViolation("pipeline returned \(results.count) results for \(count) statements")
        }
        while results.count < count { results.append(.failure(.pipelineAborted(failedIndex: firstFailure))) }
        return results
    }
}
