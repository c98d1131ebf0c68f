import Foundation

/// A statement parameter. Each case is sent with its PostgreSQL type, so `$1` needs no cast, except `.text`, which is
/// sent untyped and takes the type the statement gives it (text, varchar, an enum, a uuid...).
public enum PostgresValue: Sendable, Hashable {
    case text(String)
    case int64(Int64)
    case int32(Int32)
    case bool(Bool)
    /// Sent in binary, so every byte sequence (NULs included) arrives unchanged.
    case bytea([UInt8])
    /// A JSON document as text; the server validates it.
    case jsonb(String)
    /// Sent as ISO 8601 in UTC with microseconds (PostgreSQL's precision); sub-microsecond parts are rounded.
    case timestamptz(Date)
    case textArray([String])
    /// A `text[]` whose elements may be NULL.
    case nullableTextArray([String?])
    /// A `bytea[]`, sent in binary (no escaping of the bytes).
    case byteaArray([[UInt8]])
    case int64Array([Int64])
    /// A span of time, sent as an `interval` of whole microseconds (PostgreSQL's precision; finer parts are rounded),
    /// in binary, which every PostgreSQL reads alike (before 15, the text "N microseconds" was refused past 2^31).
    case interval(Duration)
    case null
}

/// Type OIDs from pg_type.dat that this layer sends or names in messages.
enum PostgresOID {
    static let unknown: UInt32 = 0
    static let bool: UInt32 = 16
    static let bytea: UInt32 = 17
    static let int8: UInt32 = 20
    static let int2: UInt32 = 21
    static let int4: UInt32 = 23
    static let text: UInt32 = 25
    static let json: UInt32 = 114
    static let float4: UInt32 = 700
    static let float8: UInt32 = 701
    static let textArray: UInt32 = 1009
    static let byteaArray: UInt32 = 1001
    static let int8Array: UInt32 = 1016
    static let varchar: UInt32 = 1043
    static let date: UInt32 = 1082
    static let timestamp: UInt32 = 1114
    static let timestamptz: UInt32 = 1184
    static let interval: UInt32 = 1186
    static let numeric: UInt32 = 1700
    static let uuid: UInt32 = 2950
    static let jsonb: UInt32 = 3802

    static func name(_ oid: UInt32) -> String {
        switch oid {
        case bool: return "boolean"
        case bytea: return "bytea"
        case int8: return "bigint"
        case int2: return "smallint"
        case int4: return "integer"
        case text: return "text"
        case json: return "json"
        case float4: return "real"
        case float8: return "double precision"
        case textArray: return "text[]"
        case byteaArray: return "bytea[]"
        case int8Array: return "bigint[]"
        case varchar: return "varchar"
        case date: return "date"
        case timestamp: return "timestamp"
        case timestamptz: return "timestamptz"
        case interval: return "interval"
        case numeric: return "numeric"
        case uuid: return "uuid"
        case jsonb: return "jsonb"
        default: return "type oid \(oid)"
        }
    }
}

extension PostgresValue {
    /// The wire form: type OID, bytes (nil for NULL) and whether they are binary.
    struct Encoded {
        var oid: UInt32
        var bytes: [UInt8]?
        var binary: Bool
    }

    func encoded() throws -> Encoded {
        switch self {
        case .text(let value): return Encoded(oid: PostgresOID.unknown, bytes: try Self.textBytes(value, "text"), binary: false)
        case .int64(let value): return Encoded(oid: PostgresOID.int8, bytes: Array(String(value).utf8), binary: false)
        case .int32(let value): return Encoded(oid: PostgresOID.int4, bytes: Array(String(value).utf8), binary: false)
        case .bool(let value): return Encoded(oid: PostgresOID.bool, bytes: [value ? UInt8(ascii: "t") : UInt8(ascii: "f")], binary: false)
        case .bytea(let value): return Encoded(oid: PostgresOID.bytea, bytes: value, binary: true)
        case .jsonb(let value): return Encoded(oid: PostgresOID.jsonb, bytes: try Self.textBytes(value, "jsonb"), binary: false)
        case .timestamptz(let value):
            return Encoded(oid: PostgresOID.timestamptz, bytes: Array(try PostgresTimestamp.format(value).utf8), binary: false)
        case .textArray(let values): return try Self.textArrayLiteral(values)
        case .nullableTextArray(let values): return try Self.textArrayLiteral(values)
        case .byteaArray(let values):
            // The binary array form (array_send): ndim, has-nulls flag, element type, then per dimension its size and
            // lower bound, then each element as a length and its bytes.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(20 + values.reduce(0) { $0 + 4 + $1.count })
            func int32(_ v: Int32) { withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) } }
            guard values.allSatisfy({ $0.count <= Int(Int32.max) }), values.count <= Int(Int32.max) else {
                throw PostgresError.decoding("byteaArray parameter too large for PostgreSQL")
            }
            int32(values.isEmpty ? 0 : 1); int32(0); int32(Int32(bitPattern: PostgresOID.bytea))
            if !values.isEmpty { int32(Int32(values.count)); int32(1) }
            for value in values { int32(Int32(value.count)); bytes.append(contentsOf: value) }
            return Encoded(oid: PostgresOID.byteaArray, bytes: bytes, binary: true)
        case .int64Array(let values):
            let literal = "{" + values.map(String.init).joined(separator: ",") + "}"
            return Encoded(oid: PostgresOID.int8Array, bytes: Array(literal.utf8), binary: false)
        case .interval(let value):
            // Seconds and attoseconds to microseconds, rounded half away from zero; a span past ±292,000 years is refused.
            let (seconds, attoseconds) = value.components
            let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
            let fraction = (attoseconds + (attoseconds >= 0 ? 500_000_000_000 : -500_000_000_000)) / 1_000_000_000_000
            let (micros, carried) = whole.addingReportingOverflow(fraction)
            guard !overflow, !carried else { throw PostgresError.decoding("interval parameter \(value) is too long for PostgreSQL") }
            // interval_send's form: the time in microseconds (int64), then days and months (int32), big-endian.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16)
            withUnsafeBytes(of: micros.bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: Int32(0).bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: Int32(0).bigEndian) { bytes.append(contentsOf: $0) }
            return Encoded(oid: PostgresOID.interval, bytes: bytes, binary: true)
        case .null: return Encoded(oid: PostgresOID.unknown, bytes: nil, binary: false)
        }
    }

    /// `{"a","b",NULL}`: each element quoted (a NULL unquoted), `"` and `\` escaped. Built as bytes: a profile of the
    /// receiver found appending scalar by scalar to a String at 8% of its CPU (the headers of every delivery).
    private static func textArrayLiteral(_ values: [String?]) throws -> Encoded {
        var literal: [UInt8] = [UInt8(ascii: "{")]
        literal.reserveCapacity(2 + values.reduce(0) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            guard let value else { literal += Array("NULL".utf8); continue }
            literal.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == 0 {
                    throw PostgresError.decoding(
                        "textArray element parameter contains a NUL byte, which PostgreSQL text cannot store; use .bytea")
                }
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { literal.append(UInt8(ascii: "\\")) }
                literal.append(byte)
            }
            literal.append(UInt8(ascii: "\""))
        }
        literal.append(UInt8(ascii: "}"))
        return Encoded(oid: PostgresOID.textArray, bytes: literal, binary: false)
    }

    /// Text parameters travel as C strings: a NUL would silently cut the value, and PostgreSQL text cannot hold one.
    private static func textBytes(_ value: String, _ kind: String) throws -> [UInt8] {
        let bytes = Array(value.utf8)
        if bytes.contains(0) {
            throw PostgresError.decoding("\(kind) parameter contains a NUL byte, which PostgreSQL text cannot store; use .bytea")
        }
        return bytes
    }
}

/// A statement for ``PostgresConnection/pipeline(_:)``: SQL with parameters (sent unnamed: no prepared statement
/// outlives the call, so a transaction-mode pooler such as PgBouncer can hand the session to anyone in between).
public struct PostgresStatement: Sendable, Hashable {
    public let sql: String
    public let params: [PostgresValue]

    public init(_ sql: SQL) {
        self.sql = sql.text
        self.params = sql.binds
    }

    /// SQL with hand-numbered `$1`, `$2`... placeholders: for tests and migrations only (`@_spi(Positional)`);
    /// everything else writes an interpolated ``SQL``.
    @_spi(Positional)
    public init(_ sql: String, _ params: [PostgresValue] = []) {
        self.sql = sql
        self.params = params
    }
}

/// A NOTIFY received on a channel this connection listens to.
public struct PostgresNotification: Sendable, Hashable {
    public let channel: String
    public let payload: String
    /// Backend process id of the session that sent it.
    public let pid: Int32

    public init(channel: String, payload: String, pid: Int32) {
        self.channel = channel
        self.payload = payload
        self.pid = pid
    }
}
