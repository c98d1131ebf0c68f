// swift-tools-version:6.0
// payrecon: webhook ingestion and payment reconciliation on PostgreSQL.
// Only the toolchain and Debian's C libraries (libpq, libmicrohttpd, libcrypto, zlib, libcurl); no outside Swift packages.
import PackageDescription

let package = Package(
    name: "payrecon",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "payrecon", targets: ["payrecon"]),
        .executable(name: "paysim", targets: ["paysim"])
    ],
    targets: [
        // C libraries from Debian, module maps only.
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ"),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .systemLibrary(name: "CMalloc", path: "Sources/CMalloc"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl"),

        // Logging (JSON lines) and Prometheus metrics: the one thing every room shares.
        .target(name: "Observability"),
        // libpq wrapper: connection, pool, query, transaction, pipeline, notify.
        .target(name: "Postgres", dependencies: ["CLibPQ", "CivilTime", "Observability"]),
        // Civil-date arithmetic (days ↔ year, month, day) and a Duration in seconds for what takes a number: one copy for all.
        .target(name: "CivilTime"),
        // HTTP server over libmicrohttpd and the clients for provider APIs (URLSession, libcurl).
        .target(name: "HTTP", dependencies: ["CMicroHTTPD", "CCurl", "CivilTime", "Observability"]),
        // libcrypto and zlib as the rest use them: SHA-256, HMAC, constant-time compare, Base64, CRC32, X.509 chains.
        .target(name: "Crypto", dependencies: ["COpenSSL", "CZlib"]),
        // JSON and CSV read exactly: numbers kept as the literal text they were sent as, CSV over chunked bytes, bounded.
        .target(name: "TextFormats"),
        // Pure domain: money, orders, snapshots, checks, the action planner. No I/O.
        .target(name: "Reconciliation", dependencies: ["CivilTime", "TextFormats"]),
        // One folder per provider: webhook verifier, event parser, API client, mapping.
        .target(name: "Providers", dependencies: ["Reconciliation", "TextFormats", "HTTP", "Observability", "Crypto"]),
        // SQL for deliveries, orders, snapshots, discrepancies, actions, runs.
        .target(name: "Store", dependencies: ["Postgres", "Reconciliation", "TextFormats", "Observability"]),
        // The webhook endpoint: verification, group commit, answers, metrics.
        .target(name: "Receiver", dependencies: ["HTTP", "Store", "Providers", "Crypto", "Postgres", "Observability", "CivilTime"]),
        // Queue claiming, the reconcile sweep, the action executor.
        .target(
            name: "Worker", dependencies: ["Store", "Providers", "Reconciliation", "TextFormats", "Postgres", "Observability", "CivilTime"]),
        // `payrecon report` and `actions list` renderers: value types in, text out (table, JSON, CSV, HTML). No I/O.
        .target(name: "Reporting", dependencies: ["Reconciliation", "TextFormats"]),
        // `payrecon console`: the operator's web console (sign-in, sessions, the overview, discrepancies and their ack).
        .target(
            name: "Console",
            dependencies: [
                "Crypto", "Store", "Reporting", "Reconciliation", "TextFormats", "Postgres", "HTTP", "Observability", "CivilTime"
            ]),
        // What the commands wire together (registry, worker context, endpoints), as a library so tests reach it.
        .target(
            name: "Wiring",
            dependencies: [
                "Receiver", "Worker", "Store", "Providers", "Crypto", "Reconciliation", "Reporting", "Postgres", "HTTP", "Observability",
                "CivilTime"
            ]),
        // The commands, their options and --help, as a library: the executable only calls `CLI.run`.
        .target(
            name: "PayreconCLI",
            dependencies: [
                "Wiring", "Console", "Receiver", "Worker", "Store", "Providers", "Crypto", "Reconciliation", "Reporting", "Postgres",
                "HTTP", "Observability"
            ]),
        .executableTarget(name: "payrecon", dependencies: ["PayreconCLI", "CMalloc"]),
        .executableTarget(
            name: "paysim", dependencies: ["PaysimCore", "HTTP", "Providers", "Crypto", "Reconciliation", "Observability", "COpenSSL"]),
        // scripts/bench-http-client: requests/s and CPU per request of each provider transport against paysim.
        .executableTarget(name: "httpbench", dependencies: ["HTTP", "Providers"]),
        // paysim's logic as a library so it can be unit-tested (an executable target cannot be imported by tests).
        .target(name: "PaysimCore", dependencies: ["HTTP", "Providers", "Crypto", "Reconciliation", "Observability", "COpenSSL", "CZlib"]),

        // Unit tests: no database, run in seconds.
        // The planner's tests run each provider's real capability rules (Providers), as the worker does.
        .testTarget(name: "ReconciliationTests", dependencies: ["Reconciliation", "Providers"]),
        .testTarget(
            name: "ProvidersTests", dependencies: ["Providers", "Crypto", "Reconciliation", "HTTP", "PaysimCore", "PayreconTesting"],
            resources: [.copy("Fixtures")]),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP", "PayreconTesting"]),
        // Option parsing and --help of every command: no database.
        .testTarget(name: "CLITests", dependencies: ["PayreconCLI", "Reconciliation"]),
        // The worker's pure logic (delivery attempt decisions): no database.
        .testTarget(name: "WorkerTests", dependencies: ["Worker", "Providers"]),
        // The money invariant over generated provider answers and orders: the real mappings, planner and ActionAttempt,
        // no database (scripts/money-invariants runs it longer).
        .testTarget(name: "MoneyInvariantTests", dependencies: ["Worker", "Providers", "Reconciliation"]),
        .testTarget(
            name: "PaysimCoreTests", dependencies: ["PaysimCore", "Providers", "Crypto", "HTTP", "Reconciliation", "COpenSSL", "CZlib"]),
        .testTarget(name: "ReportingTests", dependencies: ["Reporting", "Reconciliation"]),
        // The console's users file, passwords and sign-in limits: no database.
        .testTarget(name: "ConsoleTests", dependencies: ["Console", "Crypto", "Reporting"]),
        // Integration tests: a live PostgreSQL (DATABASE_URL), paysim and the built executables.
        .testTarget(name: "PostgresTests", dependencies: ["Postgres"]),
        // What every integration suite shares: blocking work off the cooperative pool, `eventually`.
        .target(
            name: "PayreconTesting", dependencies: ["Observability", "Receiver", "Store", "Reconciliation"], path: "Tests/PayreconTesting"),
        // The receiver in-process over in-memory storage: no database.
        .testTarget(
            name: "ReceiverTests", dependencies: ["Receiver", "Providers", "HTTP", "Reconciliation", "Observability", "PayreconTesting"]),
        // The idle worker's transaction rate, read from pg_stat_database: a target of its own so that no other suite's
        // NOTIFY traffic reaches its LISTEN connection while it counts (scripts/test runs one target at a time).
        .testTarget(name: "PgBouncerTests", dependencies: ["Postgres", "Store", "PaysimCore", "HTTP", "Reconciliation", "PayreconTesting"]),
        .testTarget(
            name: "IdleWorkerTests", dependencies: ["Worker", "Store", "Postgres", "Providers", "Observability", "PayreconTesting"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "PayreconTesting", "Receiver", "Worker", "Store", "Providers", "Crypto", "Console", "Postgres", "HTTP",
                "Reconciliation", "Reporting", "Observability", "PaysimCore", "Wiring"
            ])
    ]
)
