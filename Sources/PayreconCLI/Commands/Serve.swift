import Foundation
import HTTP
import Observability
import Postgres
import Providers
import Receiver
import Reconciliation
import Store
import Wiring

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "serve",
        summary: "Receive webhooks: verify, store durably, answer 2xx only after commit.",
        options: [
            Options.listen, Options.threads, Options.portFile, serveMetricsListen, Options.databaseURL
        ],
        details: """
            Endpoints: POST /webhooks/pxp, /webhooks/paypal, /webhooks/paypercut; GET /healthz, /readyz, /metrics
            (on --metrics-listen / PAYRECON_METRICS_LISTEN when set, and then not on the webhook listener).
            A provider's endpoint is enabled when its secret is set: PXP_WEBHOOK_KEY, PAYPAL_WEBHOOK_ID,
            PAYPERCUT_WEBHOOK_SECRET. Behind a TLS proxy, name it in PAYRECON_TRUSTED_PROXIES (docs/OPERATIONS.md:
            Behind a TLS proxy). SIGHUP re-reads the webhook secrets given as files (NAME_FILE) without dropping a delivery.
            serve does not migrate: it refuses to start on a database that lacks migrations (run payrecon migrate
            first), and /readyz is 503 migrations_pending while one is missing. SIGTERM or Ctrl-C drains in-flight
            deliveries and exits 0.
            """
    )

    /// --listen: where webhooks are received (else PAYRECON_LISTEN).
    var listen: String?
    var threads: Int
    var portFile: String?
    /// --metrics-listen (else PAYRECON_METRICS_LISTEN).
    var metricsListen: String?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        listen = try args.value(Options.listen)
        threads = try args.value(Options.threads, default: 4)
        portFile = try args.value(Options.portFile)
        metricsListen = try args.value(serveMetricsListen)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        // SIGHUP re-reads secrets once serving; until then it is ignored, never the default (which ends the process).
        signal(SIGHUP, SIG_IGN)
        let env = Environment(databaseURL: databaseURL)
        let url = try env.databaseURL()
        let configuration = try receiverConfiguration(env, logger: logger)
        let webhooks = try configuredWebhooks(env, logger: logger)
        let pool = PostgresPool(conninfo: url, size: 8, acquireTimeout: .seconds(5), prepareStatements: try env.preparesStatements())
        let expected = try refuseMissingMigrations(pool, logger: logger)
        let receiver = Receiver(
            configuration: configuration,
            webhooks: webhooks, pool: pool, expectedMigrations: expected, logger: logger)
        ProcessMetrics.register(version: CLI.version)
        PoolMetrics.register(pool)
        // payrecon_database_up, and one line when the database goes out of reach and one when it is back.
        let probe = try DatabaseProbe(pool: pool, process: "serve", environment: env, logger: logger).start()
        defer { probe.cancel() }
        let bound: UInt16
        do { bound = try receiver.start() } catch { throw FatalError("\(error)") }
        if let file = portFile { try? "\(bound)\n".write(toFile: file, atomically: true, encoding: .utf8) }
        // SIGHUP: the webhook secrets given as files (NAME_FILE) are read again and take over at once; a secret that
        // cannot be read keeps the ones in use, and says why.
        Signals.onHangup {
            do { receiver.replaceWebhooks(try configuredWebhooks(Environment(), logger: logger)) } catch {
                logger.error("SIGHUP: the webhook secrets were not re-read; the ones in use stay", ["error": String(describing: error)])
            }
        }
        let signal = await Signals.waitForTermination()
        logger.info("draining", ["signal": signal])
        receiver.shutdown()
        pool.close()
        return Exit.ok
    }
}

extension ServeCommand {
    /// The receiver's limits and addresses, from the flags and PAYRECON_*: each refused with what to set instead.
    func receiverConfiguration(_ env: Environment, logger: Logger) throws -> Receiver.Configuration {
        let (host, port) = try env.listenAddress(flag: listen)
        let maxBody = try env.int("PAYRECON_MAX_BODY_BYTES", default: 1_048_576, range: 1...(64 << 20))
        let maxConnections = try env.int("PAYRECON_MAX_CONNECTIONS", default: 1000, range: 1...1_000_000)
        let commitTimeout: Int64
        do { commitTimeout = try DurationParser.parse(env["PAYRECON_COMMIT_TIMEOUT"] ?? "5s") } catch {
            throw ConfigurationError("PAYRECON_COMMIT_TIMEOUT=\(env["PAYRECON_COMMIT_TIMEOUT"] ?? ""): \(error); use e.g. 5s")
        }
        let requestTimeout: Int64
        do { requestTimeout = try DurationParser.parse(env["PAYRECON_REQUEST_TIMEOUT"] ?? "30s") } catch {
            throw ConfigurationError("PAYRECON_REQUEST_TIMEOUT=\(env["PAYRECON_REQUEST_TIMEOUT"] ?? ""): \(error); use e.g. 30s")
        }
        if requestTimeout <= commitTimeout {
            logger.warning(
                "PAYRECON_REQUEST_TIMEOUT is not longer than PAYRECON_COMMIT_TIMEOUT: a slow commit's connection is cut before its 503",
                ["request_timeout_s": requestTimeout, "commit_timeout_s": commitTimeout])
        }
        let maxPerIP = try env.int("PAYRECON_MAX_CONNECTIONS_PER_IP", default: 256, range: 1...1_000_000)
        // Each connection takes a descriptor: at the process's limit the receiver stops accepting without an error of its
        // own, so a limit below what PAYRECON_MAX_CONNECTIONS needs is said at start.
        var descriptors = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &descriptors) == 0, descriptors.rlim_cur < rlim_t(maxConnections + 128) {
            logger.warning(
                "the file-descriptor limit is below what PAYRECON_MAX_CONNECTIONS needs: connections past it are not accepted; raise it (LimitNOFILE in the unit, ulimit -n) or lower PAYRECON_MAX_CONNECTIONS",
                ["limit": Int(descriptors.rlim_cur), "needed": maxConnections + 128])
        }
        let maxBodyBuffer = try env.int("PAYRECON_MAX_BODY_BUFFER", default: Receiver.defaultMaxBodyBuffer, range: (1 << 20)...(1 << 40))
        // Bytes past each body's first 64 KiB may use what the reserve leaves: the largest body must fit in an empty buffer.
        if !BodyBudget(limit: maxBodyBuffer, connections: maxConnections).fits(maxBody) {
            throw ConfigurationError(
                "PAYRECON_MAX_BODY_BUFFER=\(maxBodyBuffer) cannot hold one body of PAYRECON_MAX_BODY_BYTES=\(maxBody) "
                    + "(a quarter of it, or 64 KiB per connection, is kept for the first 64 KiB of every body): no delivery of the largest "
                    + "size could ever be accepted; raise PAYRECON_MAX_BODY_BUFFER to at least \(max(maxBody * 4 / 3 + 65_536, maxBody + 65_536))"
            )
        }
        let trustedProxies = try env.trustedProxies()
        let metricsAddress = try env.serveMetricsAddress(flag: metricsListen)
        return .init(
            host: host, port: port, maxBodyBytes: maxBody, threads: threads,
            maxConnections: maxConnections, maxConnectionsPerIP: maxPerIP,
            commitTimeout: .seconds(commitTimeout),
            requestTimeout: .seconds(requestTimeout), trustedProxies: trustedProxies,
            maxBodyBuffer: maxBodyBuffer, metricsHost: metricsAddress?.host,
            metricsPort: metricsAddress?.port ?? 0)
    }

    /// The migrations this build needs (compiled in: no sql/ folder, old or missing, decides readiness), refused when
    /// the database lacks one.
    func refuseMissingMigrations(_ pool: PostgresPool, logger: Logger) throws -> [String] {
        let expected = Migrator.shippedVersions
        // serve does not migrate: it refuses to start on a database that lacks migrations (run `payrecon migrate` first,
        // as the owner: payrecon-migrate.service, which starting serve's unit starts first; serve's own role cannot). Unreachable at start is not fatal: deliveries get 503 until it is.
        // The migrations this build needs are compiled in: no sql/ folder, old or missing, decides readiness.
        if let reason = pool.probe() {
            // libpq's words: a misspelt database name reads differently from a server that is down.
            logger.warning("database not reachable at start; deliveries get 503 until it is", ["error": reason])
        } else if !expected.isEmpty {
            let status: Migrator.Status
            do { status = try pool.withConnection { try Migrator.status(expected, on: $0) } } catch {
                throw ConfigurationError("cannot read the database's migrations (\(error)): check DATABASE_URL")
            }
            guard status.pending.isEmpty else {
                throw ConfigurationError(
                    "the database lacks \(status.pending.count) migration(s) (first \(status.pending[0])): run `payrecon migrate` "
                        + "before serve, as the role that owns the tables (serve never migrates; systemd's payrecon-migrate.service does it before serve starts)"
                )
            }
        }
        return expected
    }
}

private let serveMetricsListen = OptionKey<String>(
    "--metrics-listen", "HOST:PORT",
    "Answer /metrics, /readyz and /healthz here, not on the webhook listener (default PAYRECON_METRICS_LISTEN; the webhook listener).")
