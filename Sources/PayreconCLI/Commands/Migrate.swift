import Foundation
import Providers
import Wiring
import Observability
import Postgres
import Reconciliation
import Store

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "migrate",
        summary: "Apply the SQL migrations in sql/ that are not applied yet.",
        options: [Options.databaseURL],
        details: """
            Each migration runs once, in its own transaction, and is recorded in schema_migrations. It waits at most 1 s for
            each table lock (lock_timeout), so receivers' commits queued behind it wait at most that long; behind a long
            query it is tried again after 1, 2, 4 and 8 s, then migrate fails: run it again when the query has ended. Set PAYRECON_SQL_DIR when the sql/ folder is neither beside the checkout nor installed
            beside the binary (PREFIX/share/payrecon/sql). A folder without the migrations is an error.
            With PAYRECON_SERVE_ROLE set, the role serve connects as is then given only what serve does (store deliveries,
            count rejections, keep PayPal's certificates, read which migrations are applied), every run: create it first
            (CREATE ROLE payrecon_serve LOGIN PASSWORD '…'), and run migrate as the role that owns the tables.
            """
    )

    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) { databaseURL = try args.value(Options.databaseURL) }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment()
        let url = try env.databaseURL(flag: databaseURL)
        guard let dir = Migrator.locateDirectory() else {
            throw FatalError("cannot find the sql/ migrations: set PAYRECON_SQL_DIR to the folder holding 0001_deliveries.sql")
        }
        let migrations: [Migrator.Migration]
        do { migrations = try Migrator.load(from: dir) } catch { throw FatalError("cannot read the migrations: \(error)") }
        let conn = try connect(url)
        let applied: [String]
        do { applied = try Migrator.migrate(migrations, on: conn) } catch let error as PostgresError where error.sqlState == "55P03" {
            throw FatalError(
                "a migration could not get a table lock within 1 s, five times over 15 s (\(error)): another session holds it. "
                    + "Nothing of that migration was applied. Run payrecon migrate again when the long query has ended")
        } catch let failed as Migrator.Failed {
            throw FatalError(failed.description + ". Fix what PostgreSQL names, then run payrecon migrate again")
        }
        if applied.isEmpty {
            print("database is up to date (\(migrations.count) migrations)")
        } else {
            for v in applied { print("applied \(v)") }
        }
        if let role = env["PAYRECON_SERVE_ROLE"] {
            do { try ServeRole.apply(to: role, on: conn) } catch let error as ServeRole.Refused { throw FatalError(error.description) }
            print("serve's role \(role.terminalSafe) may store deliveries and count rejections, and nothing more")
        }
        return Exit.ok
    }
}

/// Opens a connection, turning libpq's failure into an error that says what to check.
func connect(_ url: String) throws -> PostgresConnection {
    do { return try PostgresConnection(conninfo: url) } catch {
        throw FatalError(
            "cannot connect to PostgreSQL: \(error). Check DATABASE_URL and that the server is running (scripts/demo starts a local one).")
    }
}
