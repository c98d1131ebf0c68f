import Foundation
import Postgres
import Providers
import Reconciliation
import Store

/// `payrecon doctor`: checks a deployment before the first real delivery, moving no money. The database
/// (reachable, every migration in sql/ applied), then each provider with API credentials through its own checks
/// (`ProviderAPI.doctor`), handed what the database knows: its last stored delivery and its latest order's merchant.
public struct Doctor: Sendable {
    public struct Report: Sendable {
        public var checks: [DoctorCheck] = []
        /// The database could not be reached (or DATABASE_URL is not set): nothing payrecon does can work.
        public var fatal = false

        /// 0 every check passed; 1 a check failed; 2 a fatal error.
        public var exitCode: Int32 { fatal ? 2 : checks.contains { $0.status == .failed } ? 1 : 0 }

        public var summary: String {
            let count = { (s: DoctorCheck.Status) in self.checks.filter { $0.status == s }.count }
            var parts = ["\(count(.ok)) ok", "\(count(.failed)) failed"]
            if count(.skipped) > 0 { parts.append("\(count(.skipped)) skipped") }
            return "doctor: " + parts.joined(separator: ", ") + (fatal ? " (the database is unreachable)" : "")
        }
    }

    public static let databaseReachable = "database reachable"
    public static let databaseMigrated = "database migrated"

    let environment: Environment
    let databaseURL: String?
    let provider: Provider?

    /// - Parameters:
    ///   - databaseURL: `--database-url`, over DATABASE_URL.
    ///   - provider: only this provider's checks (the database's always run).
    public init(environment: Environment, databaseURL: String? = nil, provider: Provider? = nil) {
        self.environment = environment; self.databaseURL = databaseURL; self.provider = provider
    }

    /// Runs every check in order, handing each to `emit` as it completes. A configuration the providers cannot be
    /// built from (PAYRECON_HTTP_CLIENT, *_MAX_RPS) throws, as for every other command.
    public func run(_ emit: (DoctorCheck) -> Void = { _ in }) async throws(ConfigurationError) -> Report {
        var report = Report()
        func add(_ check: DoctorCheck) { report.checks.append(check); emit(check) }

        let providers = try ConfiguredProviders(
            environment: environment, transport: try WorkerContext.transport(environment, maxConcurrentRequests: 4))

        // The database: without it nothing payrecon does can work (fatal), but the providers are still checked.
        var records: Records = .unavailable("the database is unreachable (see \(Self.databaseReachable))")
        var connection: PostgresConnection?
        switch connect() {
        case .failure(let problem):
            add(.failed(Self.databaseReachable, problem.description))
            report.fatal = true
        case .success(let conn):
            connection = conn
            let version = (try? conn.query("SHOW server_version").first?.string("server_version")) ?? "?"
            add(.ok(Self.databaseReachable, "PostgreSQL \(version)"))
            let migrated = migrationCheck(conn)
            add(migrated)
            records = migrated.status == .ok ? .readable(conn) : .unavailable("the database is not migrated (see \(Self.databaseMigrated))")
        }
        defer { connection?.close() }
        return await checkProviders(providers, records: records, into: report, emit: emit)
    }

    // MARK: The database

    enum Records {
        case readable(PostgresConnection)
        case unavailable(String)
    }

    struct Problem: Error, CustomStringConvertible { var description: String }

    func connect() -> Result<PostgresConnection, Problem> {
        let url: String
        do { url = try environment.databaseURL(flag: databaseURL) } catch { return .failure(Problem(description: error.description)) }
        do { return .success(try PostgresConnection(conninfo: url)) } catch {
            let reason = String(describing: error).trimmingCharacters(in: .whitespacesAndNewlines)
            return .failure(
                Problem(
                    description: "cannot connect to PostgreSQL (\(reason)): check DATABASE_URL (or --database-url) and "
                        + "that the server is running and reachable from this host"))
        }
    }

    func migrationCheck(_ conn: PostgresConnection) -> DoctorCheck {
        guard let dir = Migrator.locateDirectory(environment: environment.values) else {
            return .failed(
                Self.databaseMigrated,
                "cannot find the sql/ migrations to compare with: set PAYRECON_SQL_DIR to the folder "
                    + "holding 0001_deliveries.sql")
        }
        let status: Migrator.Status
        let migrations: [Migrator.Migration]
        do {
            migrations = try Migrator.load(from: dir)
            status = try Migrator.status(migrations.map(\.version), on: conn)
        } catch {
            return .failed(Self.databaseMigrated, "cannot read the migrations: \(error)")
        }
        if !status.pending.isEmpty {
            let list =
                status.pending.count > 4 ? status.pending.prefix(3).joined(separator: ", ") + ", …" : status.pending.joined(separator: ", ")
            return .failed(
                Self.databaseMigrated,
                "\(status.pending.count) of \(migrations.count) migrations in \(dir.path) are not applied "
                    + "(\(list)): run payrecon migrate")
        }
        if !status.unknown.isEmpty {
            return .failed(
                Self.databaseMigrated,
                "the database has migrations this payrecon does not have (\(status.unknown.joined(separator: ", "))): "
                    + "it was migrated by a newer payrecon; run that version")
        }
        return .ok(Self.databaseMigrated, "all \(migrations.count) migrations in \(dir.path) are applied")
    }

    // MARK: The providers

    func checkProviders(
        _ providers: ConfiguredProviders, records: Records, into report: Report,
        emit: (DoctorCheck) -> Void
    ) async -> Report {
        var report = report
        func add(_ check: DoctorCheck) { report.checks.append(check); emit(check) }
        var configured = 0
        for definition in ProviderRegistry.definitions where provider == nil || provider == definition.provider {
            let name = definition.provider.rawValue
            guard let api = providers.apis[definition.provider], api.isConfigured else {
                let set = "set \(definition.apiVariables) (a secret may be given as NAME_FILE)"
                if provider != nil {
                    add(.failed("\(name) credentials", "not set: \(set)"))
                } else {
                    add(.skipped(name, "no API credentials: \(set) to check it"))
                }
                continue
            }
            configured += 1
            for check in await api.doctor(context(for: definition.provider, records)) { add(check) }
        }
        if provider == nil, configured == 0 {
            add(
                .failed(
                    "provider credentials",
                    "no provider has API credentials, so payrecon cannot re-fetch any order: set "
                        + ProviderRegistry.definitions.map(\.apiVariables).joined(separator: "; ")))
        }
        return report
    }

    func context(for provider: Provider, _ records: Records) -> DoctorContext {
        switch records {
        case .unavailable(let why):
            return DoctorContext(
                environment: environment, lastDelivery: .unavailable(why), lastUntrustedCertificate: .unavailable(why),
                latestMerchant: .unavailable(why))
        case .readable(let conn):
            let delivery: DoctorRecord<StoredEvent>
            do {
                delivery =
                    try DeliveryQueue.latest(provider: provider, on: conn)
                    .map { .found(StoredEvent(id: $0.id, headers: Headers($0.headers), body: $0.body)) } ?? .none
            } catch { delivery = .unavailable("cannot read the stored deliveries: \(error)") }
            let refused: DoctorRecord<DoctorRejection>
            do {
                refused =
                    try DeliveryStore.latestRejection(provider: provider, reason: RejectionCode.untrustedCertificate.rawValue, on: conn)
                    .map {
                        .found(DoctorRejection(id: $0.id, message: $0.message, headers: Headers($0.headers), receivedAt: $0.receivedAt))
                    } ?? .none
            } catch { refused = .unavailable("cannot read the rejected-delivery samples: \(error)") }
            let merchant: DoctorRecord<DoctorMerchant>
            do {
                merchant =
                    try OrderStore.latestMerchant(provider: provider, on: conn)
                    .map { .found(DoctorMerchant(merchant: $0.merchant, site: $0.site.isEmpty ? nil : $0.site)) } ?? .none
            } catch { merchant = .unavailable("cannot read the orders: \(error)") }
            return DoctorContext(
                environment: environment, lastDelivery: delivery, lastUntrustedCertificate: refused, latestMerchant: merchant)
        }
    }
}
