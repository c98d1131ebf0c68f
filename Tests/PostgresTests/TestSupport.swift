@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

/// The test database: DATABASE_URL, else this helper's database on the shared cluster.
let databaseURL =
    ProcessInfo.processInfo.environment["DATABASE_URL"]
    ?? "postgresql://postgres@127.0.0.1:54329/h_postgres"

func connect() throws -> PostgresConnection {
    try PostgresConnection(conninfo: databaseURL)
}

/// A lower-case identifier no other test (or concurrent helper) uses.
func uniqueName(_ prefix: String) -> String {
    prefix + "_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
}

struct TestFailure: Error, Equatable {
    let message: String
}

/// Runs `body`, expecting it to throw a PostgresError; records an issue and returns nil otherwise.
func postgresError(
    _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) -> PostgresError? {
    do {
        try body()
        Issue.record("expected a PostgresError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("expected a PostgresError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Async variant.
func postgresError(
    _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> PostgresError? {
    do {
        try await body()
        Issue.record("expected a PostgresError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("expected a PostgresError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Terminates a backend from a separate connection and waits until it is gone.
func terminateBackend(_ pid: Int32) throws {
    let admin = try connect()
    defer { admin.close() }
    let rows = try admin.query("SELECT pg_terminate_backend($1, 5000) AS done", [.int32(pid)])
    #expect(try rows[0].bool("done"))
}

/// Resident set size of this process in bytes (Linux).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
