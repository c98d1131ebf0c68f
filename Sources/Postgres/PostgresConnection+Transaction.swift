import CLibPQ

/// Isolation level for ``PostgresConnection/transaction(isolation:_:)``.
public enum PostgresIsolation: String, Sendable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

extension PostgresConnection {
    /// Runs `body` in a transaction: BEGIN, then COMMIT when it returns, ROLLBACK when it throws (the error is
    /// rethrown). Called inside another transaction it uses a savepoint instead, so nesting works.
    ///
    /// If a statement failed inside the body and the body caught the error, PostgreSQL turns COMMIT into a rollback;
    /// that is reported by throwing, never silently ignored. Retry on ``PostgresError/isSerializationFailure``.
    @discardableResult
    public func transaction<T>(isolation: PostgresIsolation? = nil, _ body: (PostgresConnection) throws -> T) throws -> T {
        switch try currentTransactionStatus() {
        case PQTRANS_INTRANS:
            return try savepoint(body)
        case PQTRANS_INERROR:
            throw PostgresError.protocolViolation("the current transaction is aborted; roll it back before starting another")
        default:
            break
        }
        try execute(isolation.map { "BEGIN ISOLATION LEVEL \($0.rawValue)" } ?? "BEGIN")
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackQuietly("ROLLBACK")
            throw error
        }
        let commit: PostgresRows
        do {
            commit = try query("COMMIT")
        } catch {
            rollbackQuietly("ROLLBACK")
            throw error
        }
        if commit.commandTag == "ROLLBACK" {
            throw PostgresError.protocolViolation(
                "COMMIT rolled back: a statement in the transaction failed and its error was caught inside the body")
        }
        return value
    }

    private func savepoint<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        savepointCounter += 1
        let name = "payrecon_savepoint_\(savepointCounter)"
        try execute("SAVEPOINT \(name)")
        do {
            let value = try body(self)
            try execute("RELEASE SAVEPOINT \(name)")
            return value
        } catch {
            rollbackQuietly("ROLLBACK TO SAVEPOINT \(name)")
            throw error
        }
    }

    private func currentTransactionStatus() throws -> PGTransactionStatusType {
        try withHandle { PQtransactionStatus($0) }
    }

    /// Best effort: the original error matters more than a failed rollback (a broken connection rolls back anyway).
    private func rollbackQuietly(_ sql: String) {
        _ = try? withHandle { conn in
            if PQstatus(conn) == CONNECTION_OK, PQtransactionStatus(conn) != PQTRANS_IDLE {
                PQclear(PQexec(conn, sql))
            }
        }
    }

    /// Whether a transaction is open on this connection (BEGIN without COMMIT/ROLLBACK yet).
    public var inTransaction: Bool {
        (try? withHandle { PQtransactionStatus($0) != PQTRANS_IDLE }) ?? false
    }
}
