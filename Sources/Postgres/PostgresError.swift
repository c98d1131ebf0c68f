/// Everything the Postgres layer throws.
///
/// Classify with ``isConnectionFailure`` (retry on a fresh connection, answer 503), ``isUniqueViolation`` (a duplicate)
/// and ``isSerializationFailure`` (retry the transaction). `description` is a message a user can act on and never
/// contains a password.
public enum PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Dialling failed, the connection broke, or no pooled connection became free in time.
    case connection(String)
    /// The server rejected a statement.
    case server(sqlState: String, message: String, detail: String?)
    /// A value could not be encoded as a parameter or a column could not be decoded as asked.
    case decoding(String)
    /// The API was used in a way libpq or the protocol does not allow, or the server answered something unexpected.
    case protocolViolation(String)
    /// A pipeline statement that was not executed because an earlier statement of the same pipeline failed.
    /// `failedIndex` is the position of that earlier statement.
    case pipelineAborted(failedIndex: Int?)

    /// The connection is unusable: discard it (the pool does) and retry on a new one.
    /// True for `.connection`, SQLSTATE class 08 (connection exception) and 57P01/57P02/57P03 (admin shutdown,
    /// crash shutdown, cannot connect now).
    public var isConnectionFailure: Bool {
        switch self {
        case .connection: return true
        case .server(let state, _, _):
            return state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
        default: return false
        }
    }

    /// SQLSTATE 23505: a unique or primary-key constraint rejected the row.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// SQLSTATE 40001 (serialization_failure) or 40P01 (deadlock_detected): the transaction may be retried as a whole.
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// The server's SQLSTATE, when the server reported one.
    public var sqlState: String? {
        if case .server(let state, _, _) = self { return state }
        return nil
    }

    public var description: String {
        switch self {
        case .connection(let message):
            return "PostgreSQL connection error: \(message)"
        case .server(let state, let message, let detail):
            var text = "PostgreSQL error \(state): \(message)"
            if let detail, !detail.isEmpty { text += " (\(detail))" }
            return text
        case .decoding(let message):
            return "PostgreSQL decoding error: \(message)"
        case .protocolViolation(let message):
            return "PostgreSQL usage error: \(message)"
        case .pipelineAborted(let failedIndex):
            if let failedIndex {
                return "PostgreSQL pipeline: not executed because statement \(failedIndex) of the pipeline failed"
            }
            return "PostgreSQL pipeline: not executed because an earlier statement of the pipeline failed"
        }
    }
}
