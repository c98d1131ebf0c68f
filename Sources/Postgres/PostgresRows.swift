import CLibPQ
import Foundation

/// Names and types of a result's columns, shared by its rows.
final class PostgresColumns: Sendable {
    let names: [String]
    let types: [UInt32]
    let indexByName: [String: Int]

    init(names: [String], types: [UInt32]) {
        self.names = names
        self.types = types
        var index: [String: Int] = [:]
        for (position, name) in names.enumerated() where index[name] == nil { index[name] = position }
        indexByName = index
    }

    /// Reads the column description of a PGresult.
    convenience init(result: OpaquePointer) {
        let count = Int(PQnfields(result))
        var names: [String] = []
        var types: [UInt32] = []
        names.reserveCapacity(count)
        for column in 0..<count {
            names.append(PQfname(result, Int32(column)).map { String(cString: $0) } ?? "?column?")
            types.append(PQftype(result, Int32(column)))
        }
        self.init(names: names, types: types)
    }

    func index(of name: String) throws -> Int {
        guard let index = indexByName[name] else {
            let known = names.isEmpty ? "none" : names.joined(separator: ", ")
            throw PostgresError.decoding("no column named \"\(name)\" in the result (columns: \(known))")
        }
        return index
    }
}

/// The rows of a query result, copied out of libpq: a value type safe to keep and send across threads.
public struct PostgresRows: Sendable, RandomAccessCollection {
    let columnSet: PostgresColumns
    /// Row-major text values; nil is SQL NULL.
    let cells: [String?]
    /// Number of rows the statement returned.
    public let rowCount: Int
    /// Rows inserted, updated, deleted, selected... as the command tag says (0 when it says nothing).
    public let affectedRows: Int
    /// The command tag, e.g. `INSERT 0 1`, `SELECT 3`, `COMMIT` (or `ROLLBACK` when a COMMIT could not commit).
    public let commandTag: String

    /// Column names in order.
    public var columns: [String] { columnSet.names }

    public var startIndex: Int { 0 }
    public var endIndex: Int { rowCount }
    public subscript(position: Int) -> PostgresRow {
        let width = columnSet.names.count
        return PostgresRow(columnSet: columnSet, cells: cells[(position * width)..<((position + 1) * width)])
    }

    /// Copies a PGresult (which the caller still owns and clears).
    init(result: OpaquePointer) {
        columnSet = PostgresColumns(result: result)
        let rows = Int(PQntuples(result))
        let width = columnSet.names.count
        var cells: [String?] = []
        cells.reserveCapacity(rows * width)
        for row in 0..<rows {
            for column in 0..<width {
                cells.append(Self.cell(result, row, column))
            }
        }
        self.cells = cells
        rowCount = rows
        commandTag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        affectedRows = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
    }

    static func cell(_ result: OpaquePointer, _ row: Int, _ column: Int) -> String? {
        if PQgetisnull(result, Int32(row), Int32(column)) == 1 { return nil }
        guard let value = PQgetvalue(result, Int32(row), Int32(column)) else { return nil }
        return String(cString: value)
    }
}

/// One row. Decode columns by name; a non-optional accessor throws for NULL, an `optional…` one returns nil.
/// Every decoding error names the column and what was found.
public struct PostgresRow: Sendable {
    let columnSet: PostgresColumns
    let cells: ArraySlice<String?>

    /// Column names in order.
    public var columns: [String] { columnSet.names }

    /// Whether the column is SQL NULL.
    public func isNull(_ column: String) throws -> Bool {
        try raw(column).value == nil
    }

    public func int64(_ column: String) throws -> Int64 { try required(column, optionalInt64(column)) }
    public func optionalInt64(_ column: String) throws -> Int64? { try decode(column, "an int64") { Int64($0) } }

    public func int32(_ column: String) throws -> Int32 { try required(column, optionalInt32(column)) }
    public func optionalInt32(_ column: String) throws -> Int32? { try decode(column, "an int32") { Int32($0) } }

    /// Any column as PostgreSQL prints it (jsonb as JSON text, numeric as digits...).
    public func string(_ column: String) throws -> String { try required(column, optionalString(column)) }
    public func optionalString(_ column: String) throws -> String? { try raw(column).value }

    public func bool(_ column: String) throws -> Bool { try required(column, optionalBool(column)) }
    public func optionalBool(_ column: String) throws -> Bool? {
        try decode(column, "a boolean") { text in
            switch text {
            case "t", "true": return true
            case "f", "false": return false
            default: return nil
            }
        }
    }

    /// The exact bytes of a bytea column; for any other type, the UTF-8 bytes of its text.
    public func bytes(_ column: String) throws -> [UInt8] { try required(column, optionalBytes(column)) }
    public func optionalBytes(_ column: String) throws -> [UInt8]? {
        let (index, value) = try raw(column)
        guard let value else { return nil }
        guard columnSet.types[index] == PostgresOID.bytea else { return Array(value.utf8) }
        guard let bytes = Self.decodeBytea(value) else {
            throw mismatch(column, index, "bytea in hex or escape format", value)
        }
        return bytes
    }

    /// A timestamptz (any offset), a timestamp (taken as UTC) or a date (midnight UTC).
    public func date(_ column: String) throws -> Date { try required(column, optionalDate(column)) }
    public func optionalDate(_ column: String) throws -> Date? {
        try decode(column, "a timestamp") { PostgresTimestamp.parse($0) }
    }

    // MARK: - Helpers

    private func raw(_ column: String) throws -> (index: Int, value: String?) {
        let index = try columnSet.index(of: column)
        return (index, cells[cells.startIndex + index])
    }

    private func decode<T>(_ column: String, _ expected: String, _ parse: (String) -> T?) throws -> T? {
        let (index, value) = try raw(column)
        guard let value else { return nil }
        guard let decoded = parse(value) else { throw mismatch(column, index, expected, value) }
        return decoded
    }

    private func required<T>(_ column: String, _ value: T?) throws -> T {
        guard let value else {
            throw PostgresError.decoding("column \"\(column)\" is NULL; use the optional accessor if NULL is expected")
        }
        return value
    }

    private func mismatch(_ column: String, _ index: Int, _ expected: String, _ found: String) -> PostgresError {
        let shown = found.count > 60 ? String(found.prefix(60)) + "…" : found
        return .decoding("column \"\(column)\" (\(PostgresOID.name(columnSet.types[index]))): expected \(expected), found \"\(shown)\"")
    }

    /// Decodes bytea text output (hex, the default, or the legacy escape format) with libpq's `PQunescapeBytea`.
    static func decodeBytea(_ text: String) -> [UInt8]? {
        var cString = Array(text.utf8)
        cString.append(0)
        return cString.withUnsafeBufferPointer { input -> [UInt8]? in
            var length = 0
            guard let output = PQunescapeBytea(input.baseAddress, &length) else { return nil }
            defer { PQfreemem(output) }
            return Array(UnsafeBufferPointer(start: output, count: length))
        }
    }
}
