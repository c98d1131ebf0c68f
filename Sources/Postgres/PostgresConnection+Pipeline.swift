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
    public func pipeline(_ statements: [SQL]) throws -> [Result<PostgresRows, PostgresError>] {
        try pipeline(statements.map(PostgresStatement.init))
    }

    /// ``pipeline(_:)-([SQL])`` for statements already rendered.
    public func pipeline(_ statements: [PostgresStatement]) throws -> [Result<PostgresRows, PostgresError>] {
        guard !statements.isEmpty else { return [] }
        let buffers = try statements.map { try ParameterBuffers($0.params) }
        return try withHandle { conn in
            let startedIdle = PQtransactionStatus(conn) == PQTRANS_IDLE
            // A statement due to be prepared is prepared inside the pipeline, just before it runs: after what comes before
            // it (a BEGIN and its SET LOCAL timeouts cover its parse), and at no extra round trip.
            var plan: [PipelineSend] = []
            var parsedHere: [PreparedStatements.Key: String] = [:]  // one Parse for a statement the pipeline sends twice
            for (statement, parameters) in zip(statements, buffers) {
                var send = PipelineSend(statement.sql, parameters, prepared: &prepared)
                if send.prepareFirst, let key = send.key {
                    if let name = parsedHere[key] { send.name = name; send.prepareFirst = false } else { parsedHere[key] = send.name }
                }
                plan.append(send)
            }
            guard PQenterPipelineMode(conn) == 1 else {
                throw PostgresError.protocolViolation("cannot enter pipeline mode: \(Self.clean(PQerrorMessage(conn)))")
            }
            let raw: [Result<PostgresRows, PostgresError>]
            do {
                try sendPipeline(conn, statements, buffers, plan)
                raw = try readPipeline(conn, count: plan.reduce(0) { $0 + $1.results })
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
            let results = settle(raw, plan)
            // A failed BEGIN...COMMIT leaves the session in an aborted transaction: end it.
            if startedIdle, PQtransactionStatus(conn) == PQTRANS_INERROR {
                _ = try rows(from: PQexec(conn, "ROLLBACK"), conn)
            }
            return results
        }
    }

    /// How one statement of a pipeline is sent: unnamed, by a name this session holds, or prepared first.
    struct PipelineSend {
        var key: PreparedStatements.Key?
        var name: String?
        var prepareFirst = false
        /// Results it yields: its own, and its Parse's when it is prepared first.
        var results: Int { prepareFirst ? 2 : 1 }

        init(_ sql: String, _ parameters: ParameterBuffers, prepared: inout PreparedStatements) {
            guard prepared.enabled else { return }
            let key = PreparedStatements.Key(sql: sql, types: parameters.types)
            switch prepared.lookup(key) {
            case .unnamed: return
            case .prepared(let name): self.key = key; self.name = name
            case .prepare(let name): self.key = key; self.name = name; prepareFirst = true
            }
        }
    }

    /// One result per statement from the results of every send: a Parse that failed stands for its statement (which
    /// the pipeline then did not run), an abort names the statement that failed. The names whose Parse succeeded are
    /// kept; those the server could no longer use are forgotten.
    private func settle(_ raw: [Result<PostgresRows, PostgresError>], _ plan: [PipelineSend]) -> [Result<PostgresRows, PostgresError>] {
        var statementOfSend: [Int] = []
        for (i, send) in plan.enumerated() { statementOfSend += Array(repeating: i, count: send.results) }
        func renumbered(_ r: Result<PostgresRows, PostgresError>) -> Result<PostgresRows, PostgresError> {
            guard case .failure(.pipelineAborted(let at?)) = r, at < statementOfSend.count else { return r }
            return .failure(.pipelineAborted(failedIndex: statementOfSend[at]))
        }
        var out: [Result<PostgresRows, PostgresError>] = []
        var at = 0
        for send in plan {
            var result = renumbered(raw[at + send.results - 1])
            if send.prepareFirst {
                switch raw[at] {
                case .success: if let key = send.key, let name = send.name { prepared.remember(key, as: name) }
                case .failure(.pipelineAborted): break
                case .failure(let parse): result = .failure(parse)
                }
            }
            if case .failure(let failure) = result, let key = send.key { prepared.forget(key, after: failure) }
            out.append(result)
            at += send.results
        }
        return out
    }

    /// Queues the statements and a Sync, then flushes in non-blocking mode while reading what the server already
    /// answers, so neither side can block on a full socket buffer however long the pipeline is.
    private func sendPipeline(
        _ conn: OpaquePointer, _ statements: [PostgresStatement], _ buffers: [ParameterBuffers],
        _ plan: [PipelineSend]
    ) throws {
        guard PQsetnonblocking(conn, 1) == 0 else { throw error(from: nil, conn) }
        defer { _ = PQsetnonblocking(conn, 0) }
        for ((statement, parameters), send) in zip(zip(statements, buffers), plan) {
            let sent: Int32 = parameters.withPointers { count, types, values, lengths, formats in
                guard let name = send.name else { return PQsendQueryParams(conn, statement.sql, count, types, values, lengths, formats, 0) }
                if send.prepareFirst, PQsendPrepare(conn, name, statement.sql, count, types) != 1 { return 0 }
                return PQsendQueryPrepared(conn, name, count, values, lengths, formats, 0)
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
