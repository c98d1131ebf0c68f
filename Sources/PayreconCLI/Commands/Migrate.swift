import Foundation
import Providers
import Wiring
import Observability
import Postgres
import Store

let migrateCommand = Command(
    name: "migrate",
    summary: "Apply the SQL migrations in sql/ that are not applied yet.",
    options: [Options.databaseURL],
    details: "Each migration runs once, in its own transaction, and is recorded in schema_migrations. Set PAYRECON_SQL_DIR when the sql/ folder is not beside the checkout."
) { args in
    let env = Environment()
    let url = try env.databaseURL(flag: args.value(Options.databaseURL))
    guard let dir = Migrator.locateDirectory() else {
        throw FatalError("cannot find the sql/ migrations: set PAYRECON_SQL_DIR to the folder holding 0001_deliveries.sql")
    }
    let migrations = try Migrator.load(from: dir)
    let conn = try connect(url)
    let applied = try Migrator.migrate(migrations, on: conn)
    if applied.isEmpty { print("database is up to date (\(migrations.count) migrations)") }
    else { for v in applied { print("applied \(v)") } }
    return Exit.ok
}

/// Opens a connection, turning libpq's failure into an error that says what to check.
func connect(_ url: String) throws -> PostgresConnection {
    do { return try PostgresConnection(conninfo: url) } catch {
        throw FatalError("cannot connect to PostgreSQL: \(error). Check DATABASE_URL and that the server is running (scripts/demo starts a local one).")
    }
}
