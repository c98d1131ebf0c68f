/// Quotes `name` as an SQL identifier (`"` doubled, wrapped in `"`), for the few places a name cannot be a parameter
/// (LISTEN, table names in tests and migrations). Throws for a name with a NUL byte, which PostgreSQL cannot hold.
/// Same result as libpq's `PQescapeIdentifier` for UTF-8 text, without needing a connection.
public func quoteIdentifier(_ name: String) throws -> String {
    guard !name.utf8.contains(0) else {
        throw PostgresError.decoding("identifier contains a NUL byte")
    }
    var quoted = "\""
    for character in name.unicodeScalars {
        if character == "\"" { quoted += "\"\"" } else { quoted.unicodeScalars.append(character) }
    }
    return quoted + "\""
}
