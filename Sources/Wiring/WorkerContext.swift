import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Worker

/// What `work`, `reconcile` and `actions execute` share: the database, every registered provider's API, the checker
/// and the executor, all from the environment.
public struct WorkerContext: Sendable {
    public let url: String
    public let pool: PostgresPool
    public let gateway: ProviderGateway
    public let checker: OrderChecker
    public let executor: ActionExecutor
    public let executeActions: Bool
    /// PAYRECON_IN_DOUBT_GRACE (default 2m): how long after a call whose outcome is unknown the provider's "not
    /// found" is trusted.
    public let inDoubtGrace: Duration
    /// The root logger the worker, sweep and executor add their context to.
    public let logger: Logger
    /// The transport the provider APIs share (connections) and their rate limiters, kept when they are rebuilt.
    let transport: any ProviderTransport
    let limiters = RateLimiters()

    /// `warnWithoutCredentials`: say at start that no provider can be asked (the console, which only retries with
    /// them, says so on its own page instead).
    public init(
        _ env: Environment, poolSize: Int = 8, maxConcurrentRequests: Int = 64, warnWithoutCredentials: Bool = true, logger: Logger
    ) throws(ConfigurationError) {
        self.logger = logger
        url = try env.databaseURL()
        transport = try Self.transport(env, maxConcurrentRequests: maxConcurrentRequests)
        gateway = ProviderGateway(try ConfiguredProviders(environment: env, transport: transport, limiters: limiters))
        pool = PostgresPool(conninfo: url, size: poolSize, acquireTimeout: .seconds(30), prepareStatements: try env.preparesStatements())
        let windows: PendingWindows
        do { windows = try PendingWindows.parse(env["PAYRECON_PENDING_MAX"] ?? "24h") } catch {
            throw ConfigurationError(error.description)
        }
        checker = OrderChecker(pool: pool, gateway: gateway, pendingWindows: windows)
        inDoubtGrace = .seconds(try env.duration("PAYRECON_IN_DOUBT_GRACE", default: "2m"))
        executor = ActionExecutor(pool: pool, gateway: gateway, checker: checker, inDoubtGrace: inDoubtGrace, logger: logger)
        executeActions = try env.choice("PAYRECON_ACTIONS", ["emit", "execute"], default: "emit") == "execute"
        if !gateway.anyConfigured && warnWithoutCredentials {
            let variables = ProviderRegistry.definitions.map(\.apiVariables).joined(separator: "; ")
            logger.warning("no provider API credentials set: orders cannot be re-fetched", ["set": variables])
        }
    }

    /// Builds the provider APIs again from `env` (SIGHUP: secrets given as files are read again) over the same
    /// transport and rate limiters, and puts them in place for the checker and the executor.
    public func reloadProviders(_ env: Environment) throws(ConfigurationError) {
        gateway.reload(try ConfiguredProviders(environment: env, transport: transport, limiters: limiters))
        logger.info("provider API secrets re-read")
    }

    /// Refuses to go on against a database that cannot be reached or was not migrated, so `work --once`, `actions
    /// execute` and `actions retry` exit 2 saying what to do instead of 0 having done nothing (a cron job would
    /// report success). The migrations are those this build ships (compiled in), whatever sql/ folder is at hand.
    public func requireReadyDatabase(_ env: Environment) throws(ConfigurationError) {
        let conn: PostgresConnection
        do { conn = try PostgresConnection(conninfo: url) } catch {
            throw ConfigurationError("cannot reach the database (\(error)): check DATABASE_URL and that PostgreSQL is up")
        }
        defer { conn.close() }
        let status: Migrator.Status
        do { status = try Migrator.status(Migrator.shippedVersions, on: conn) } catch {
            throw ConfigurationError("cannot read the database's migrations (\(error)): check DATABASE_URL")
        }
        guard status.pending.isEmpty else {
            throw ConfigurationError(
                "the database is not migrated (\(status.pending.count) pending, first \(status.pending[0])): "
                    + "run `payrecon migrate` first")
        }
    }

    /// Where the worker LISTENs for new deliveries: PAYRECON_LISTEN_DATABASE_URL when set, else
    /// DATABASE_URL unless that reaches PostgreSQL through a pooler (PgBouncer in transaction mode loses
    /// notifications), in which case nil: the worker polls, and says so at start.
    /// `polling` says what happens instead, in the warning (the console's overview refreshes on a timer).
    public func listenURL(_ env: Environment) -> String? { Self.listenURL(env, databaseURL: url, logger: logger) }

    /// Where a process whose database is `databaseURL` LISTENs (see `listenURL(_:)`).
    public static func listenURL(
        _ env: Environment, databaseURL url: String, polling: String = "the worker polls for deliveries", logger: Logger
    ) -> String? {
        if let direct = try? env.secret("PAYRECON_LISTEN_DATABASE_URL"), !direct.isEmpty {
            // A LISTEN URL at the pooler by mistake: transaction-mode PgBouncer drops the LISTEN with the transaction,
            // so the worker would wait for notifications that never come. Say so, and poll.
            if Self.looksPooled(direct) == true {
                logger.warning(
                    "PAYRECON_LISTEN_DATABASE_URL reaches PostgreSQL through a pooler, which loses LISTEN: point it at PostgreSQL itself (its own host and port)",
                    ["until_then": polling])
                return nil
            }
            return direct
        }
        let pooled = Self.looksPooled(url)
        if pooled == true {
            logger.warning(
                "DATABASE_URL reaches PostgreSQL through a pooler and PAYRECON_LISTEN_DATABASE_URL is not set", ["meanwhile": polling])
            return nil
        }
        return url
    }

    /// Whether `url` reaches PostgreSQL through a pooler (nil: cannot tell, e.g. unreachable).
    static func looksPooled(_ url: String) -> Bool? {
        guard let probe = try? PostgresConnection(conninfo: url) else { return nil }
        defer { probe.close() }
        return (try? probe.looksPooled()) ?? nil
    }

    /// The HTTP client provider calls go through: libcurl (`CurlHTTPClient`, one curl_multi loop thread) by
    /// default; `PAYRECON_HTTP_CLIENT=urlsession` selects FoundationNetworking's URLSession (`URLSessionHTTPClient`) instead,
    /// with the same limits (30 s timeout, `maxConcurrentRequests` in flight and per host). Measured with
    /// scripts/bench-http-client (20 ms latency, concurrency 64): curl used about 2.4× less CPU per authenticated
    /// PXP GET and 13× less per bare GET, and reached 0.95 of concurrency ÷ latency where URLSession reached 0.74–0.80.
    public static func transport(_ env: Environment, maxConcurrentRequests: Int) throws(ConfigurationError) -> any ProviderTransport {
        let limits = URLSessionHTTPClient.Configuration(
            timeout: .seconds(30), maxConcurrentRequests: maxConcurrentRequests,
            maxConnectionsPerHost: maxConcurrentRequests)
        switch try env.choice("PAYRECON_HTTP_CLIENT", ["curl", "urlsession"], default: "curl") {
        case "urlsession": return HTTPClientTransport(client: URLSessionHTTPClient(configuration: limits))
        default: return HTTPClientTransport(client: CurlHTTPClient(configuration: limits))
        }
    }
}

extension Environment {
    public func databaseURL(flag: String? = nil) throws(ConfigurationError) -> String {
        if let flag, !flag.isEmpty { return flag }
        guard let url = try secret("DATABASE_URL") else {
            throw ConfigurationError(
                "DATABASE_URL is not set: set it to a libpq connection string "
                    + "(e.g. postgresql://user@localhost:5432/payrecon), or run scripts/demo, which starts a local database")
        }
        return url
    }

    /// PAYRECON_PREPARED_STATEMENTS (`on`, the default, or `off`): whether a session that reaches PostgreSQL itself
    /// prepares the statements it runs often. A session through a pooler never does, whatever this says.
    public func preparesStatements() throws(ConfigurationError) -> Bool {
        try choice("PAYRECON_PREPARED_STATEMENTS", ["on", "off"], default: "on") == "on"
    }

    /// `host:port` for the receiver.
    public func listenAddress(flag: String?) throws(ConfigurationError) -> (host: String, port: UInt16) {
        try Self.address(flag ?? self["PAYRECON_LISTEN"] ?? "127.0.0.1:8080", variable: "PAYRECON_LISTEN")!
    }

    /// `host:port` for `payrecon console` (`--listen`, else PAYRECON_CONSOLE_LISTEN, else 127.0.0.1:8090).
    public func consoleAddress(flag: String?) throws(ConfigurationError) -> (host: String, port: UInt16) {
        if let flag { return try Self.address(flag, variable: "--listen")! }
        return try Self.address(self["PAYRECON_CONSOLE_LISTEN"] ?? "127.0.0.1:8090", variable: "PAYRECON_CONSOLE_LISTEN")!
    }

    /// `host:port` for the worker's own `/metrics` (`--metrics-listen`, else PAYRECON_WORK_METRICS_LISTEN); nil: none.
    public func workMetricsAddress(flag: String?) throws(ConfigurationError) -> (host: String, port: UInt16)? {
        if let flag { return try Self.address(flag, variable: "--metrics-listen") }
        guard let text = self["PAYRECON_WORK_METRICS_LISTEN"] else { return nil }
        return try Self.address(text, variable: "PAYRECON_WORK_METRICS_LISTEN")
    }

    /// `host:port` for the worker's verdict API (`--api-listen`, else PAYRECON_API_LISTEN); nil: none.
    public func apiAddress(flag: String?) throws(ConfigurationError) -> (host: String, port: UInt16)? {
        if let flag { return try Self.address(flag, variable: "--api-listen") }
        guard let text = self["PAYRECON_API_LISTEN"] else { return nil }
        return try Self.address(text, variable: "PAYRECON_API_LISTEN")
    }

    /// `host:port` where `serve` answers /metrics, /readyz and /healthz instead of the webhook listener
    /// (`--metrics-listen`, else PAYRECON_METRICS_LISTEN); nil: on the webhook listener.
    public func serveMetricsAddress(flag: String?) throws(ConfigurationError) -> (host: String, port: UInt16)? {
        if let flag { return try Self.address(flag, variable: "--metrics-listen") }
        guard let text = self["PAYRECON_METRICS_LISTEN"] else { return nil }
        return try Self.address(text, variable: "PAYRECON_METRICS_LISTEN")
    }

    /// PAYRECON_TRUSTED_PROXIES: addresses or CIDR blocks of the proxies in front of `serve`.
    public func trustedProxies() throws(ConfigurationError) -> [AddressRange] {
        guard let text = self["PAYRECON_TRUSTED_PROXIES"] else { return [] }
        do { return try AddressRange.list(text) } catch {
            throw ConfigurationError(
                "PAYRECON_TRUSTED_PROXIES=\(text): \(error); list the proxies in front of serve, e.g. 127.0.0.1 or 10.0.0.0/8,fd00::/8")
        }
    }

    static func address(_ text: String, variable: String) throws(ConfigurationError) -> (host: String, port: UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw ConfigurationError(
                "\(variable)\(variable.hasPrefix("--") ? " " : "=")\(text) must be host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }
}
