import Console
import Crypto
import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Store
import Wiring

private let roleOption = OptionKey<ConsoleRole>("--role", "viewer|operator", "What the user may do: viewer reads; operator also acts.") {
    (v: String) throws(UsageError) -> ConsoleRole in try Options.oneOf(ConsoleRole.self, v, "--role")
}

private let consoleListen = OptionKey<String>(
    "--listen", "HOST:PORT", "Where the console listens (default PAYRECON_CONSOLE_LISTEN, else 127.0.0.1:8090).")

struct ConsoleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "console",
        summary: "Serve the operator's web console: the overview, discrepancies, orders, actions, deliveries, rejections, settlement.",
        options: [consoleListen, Options.portFile, Options.databaseURL],
        details: """
            People sign in with the names and passwords of PAYRECON_CONSOLE_USERS_FILE (see `payrecon console add-user`;
            SIGHUP reads it again); a viewer reads, an operator also acknowledges discrepancies, retries dead deliveries,
            and retries failed actions (re-planned from a fresh fetch, as `payrecon actions retry` does: this needs the
            provider API variables the worker has; without them the console says so and retries no action). Sessions are kept in the database
            (cookies HttpOnly, SameSite=Strict, Secure per PAYRECON_CONSOLE_SECURE_COOKIE) and end after 30 minutes
            unused, 12 hours at most, or when the person's password or role changes; every write carries the session's
            CSRF token, is refused from another site, and is recorded with who, when and from where (behind
            PAYRECON_TRUSTED_PROXIES, the forwarded address). Behind a proxy that authenticates (oauth2-proxy, nginx
            auth_request), PAYRECON_CONSOLE_USER_HEADER names the header (X-Forwarded-User) that names the person: believed
            from PAYRECON_TRUSTED_PROXIES only, with PAYRECON_CONSOLE_PROXY_SECRET (which the proxy sends as
            X-Payrecon-Proxy-Secret, and without which no proxy is believed), for a person the users file lists (their role
            comes from there). The overview refreshes by itself; figures read in the last PAYRECON_CONSOLE_FIGURES_MAX_AGE
            (5s) serve every page.
            Sign-in attempts are limited per name from one address (5) and per address (20) in 15 minutes. The console is a process of its own, never on the
            webhook listener; put it behind the TLS proxy (deploy/nginx) to reach it from elsewhere. The database must be
            migrated (`payrecon migrate`). Runs until SIGTERM or SIGINT.
            """
    )

    /// --listen (else PAYRECON_CONSOLE_LISTEN).
    var listen: String?
    var portFile: String?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        listen = try args.value(consoleListen)
        portFile = try args.value(Options.portFile)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment(databaseURL: databaseURL)
        let (host, port) = try env.consoleAddress(flag: listen)
        guard let path = env["PAYRECON_CONSOLE_USERS_FILE"], !path.isEmpty else {
            throw ConfigurationError("set PAYRECON_CONSOLE_USERS_FILE to the users file (make it with `payrecon console add-user`)")
        }
        let users = try ConsoleUsersFile.load(path)
        var configuration = try consoleConfiguration(env, host: host, port: port, users: users)
        try ConsoleUsersFile.refuseNoOneCanSignIn(users, path, userHeader: configuration.userHeader, logger: logger)
        // Six: an overview reads on three at once, and the refresh may read while a page does; the rest serve the other pages.
        let pool = PostgresPool(
            conninfo: try env.databaseURL(), size: 6, acquireTimeout: .seconds(5), prepareStatements: try env.preparesStatements())
        defer { pool.close() }
        try Self.refuseMissingMigrations(pool)
        // With the provider API variables the worker has, an operator may retry a failed action here: the same executor
        // as `payrecon actions retry` re-plans it from a fresh fetch. Without them the console reads and acknowledges.
        // A provider variable the console cannot use costs it the retry of actions, not its start (it reads without them).
        let providers = actionRetrier(env, logger: logger)
        defer { providers?.pool.close() }
        if let providers, providers.gateway.anyConfigured {
            configuration.retryAction = { id, attempts in await providers.executor.retry(id: id, expectedAttempts: attempts) }
        }
        // The overview refreshes when a delivery is stored or a console writes (LISTEN, on a direct connection), and every
        // 10 seconds either way.
        configuration.listenURL = WorkerContext.listenURL(
            env, databaseURL: try env.databaseURL(), polling: "the console's overview refreshes every 10 seconds", logger: logger)
        let console = ConsoleServer(configuration: configuration, pool: pool, logger: logger)
        let bound: UInt16
        do { bound = try console.start() } catch { throw FatalError("\(error)") }
        if let file = portFile { try? "\(bound)\n".write(toFile: file, atomically: true, encoding: .utf8) }
        let userHeader = configuration.userHeader
        // SIGHUP: the users file is read again (a person removed, or given another role or password, is signed out).
        Signals.onHangup {
            do {
                let again = try ConsoleUsersFile.load(path)
                try ConsoleUsersFile.refuseNoOneCanSignIn(again, path, userHeader: userHeader, logger: logger)
                console.replaceUsers(again)
            } catch { logger.warning("console users not re-read; the ones in use stay", ["error": String(describing: error)]) }
            // The provider API secrets too, as `work` reads them again.
            if let providers, providers.gateway.anyConfigured {
                do { try providers.reloadProviders(Environment()) } catch {
                    logger.warning("provider API secrets not re-read; the ones in use stay", ["error": String(describing: error)])
                }
            }
        }
        let signal = await Signals.waitForTermination()
        logger.info("console stopping", ["signal": signal])
        console.stop()
        return Exit.ok
    }
}

/// The console's settings from the environment, checked before anything is opened: a proxy's user header is believed
/// only from named proxies.
private func consoleConfiguration(
    _ env: Environment, host: String, port: UInt16, users: ConsoleUsers
) throws -> ConsoleServer.Configuration {
    var configuration = ConsoleServer.Configuration(host: host, port: port, users: users)
    configuration.trustedProxies = try env.trustedProxies()
    // A proxy is believed (its X-Forwarded-For, its user header) only with its secret: every process on its host, and
    // an SSH tunnel to it, connects from its address too.
    if !configuration.trustedProxies.isEmpty {
        guard let secret = try env.secret("PAYRECON_CONSOLE_PROXY_SECRET"), secret.utf8.count >= 32 else {
            throw ConfigurationError(
                "behind PAYRECON_TRUSTED_PROXIES the console needs PAYRECON_CONSOLE_PROXY_SECRET (or _FILE), at least 32 characters, "
                    + "which the proxy sends as X-Payrecon-Proxy-Secret (make one with: openssl rand -hex 32): every process on the "
                    + "proxy's host connects from its address too")
        }
        configuration.proxySecret = Array(secret.utf8)
    }
    if let header = env["PAYRECON_CONSOLE_USER_HEADER"]?.trimmingCharacters(in: .whitespaces), !header.isEmpty {
        guard header.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }), header.allSatisfy(\.isASCII) else {
            throw ConfigurationError(
                "PAYRECON_CONSOLE_USER_HEADER must be a header name (letters, digits, '-'), not '\(header.terminalSafe)'")
        }
        guard !configuration.trustedProxies.isEmpty else {
            throw ConfigurationError(
                "PAYRECON_CONSOLE_USER_HEADER is believed only from the proxies of PAYRECON_TRUSTED_PROXIES: set that to the "
                    + "authenticating proxy's address (e.g. 127.0.0.1/32), and PAYRECON_CONSOLE_PROXY_SECRET")
        }
        configuration.userHeader = header.lowercased()
    }
    // 0s (or 0): every overview reads the figures (a duration is otherwise at least a second).
    let maxAge = env["PAYRECON_CONSOLE_FIGURES_MAX_AGE"]?.trimmingCharacters(in: .whitespaces)
    configuration.figuresMaxAge =
        maxAge == "0" || maxAge == "0s" ? .zero : .seconds(try env.duration("PAYRECON_CONSOLE_FIGURES_MAX_AGE", default: "5s"))
    configuration.allowedHosts = (env["PAYRECON_CONSOLE_HOSTS"] ?? "").split(separator: ",").map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
    }.filter { !$0.isEmpty }
    switch try env.choice("PAYRECON_CONSOLE_SECURE_COOKIE", ["auto", "on", "off"], default: "auto") {
    case "on": configuration.secureCookies = true
    case "off": configuration.secureCookies = false
    // Behind a TLS proxy (it is trusted for X-Forwarded-For) the browser speaks HTTPS even when the console is on loopback.
    default: configuration.secureCookies = !ConsoleServer.Configuration.isLoopback(host) || !configuration.trustedProxies.isEmpty
    }
    return configuration
}

extension ConsoleCommand {
    /// The console reads and writes what this build's migrations made: refused on a database that lacks one.
    static func refuseMissingMigrations(_ pool: PostgresPool) throws {
        let status: Migrator.Status
        do { status = try pool.withConnection { try Migrator.status(Migrator.shippedVersions, on: $0) } } catch {
            throw ConfigurationError("cannot reach the database (\(error)): check DATABASE_URL")
        }
        guard status.pending.isEmpty else {
            throw ConfigurationError(
                "the database lacks \(status.pending.count) migration(s) (first \(status.pending[0])): run `payrecon migrate`")
        }
    }

    /// What retries a failed action (the worker's providers), or nil when the provider API settings cannot be used.
    func actionRetrier(_ env: Environment, logger: Logger) -> WorkerContext? {
        do {
            return try WorkerContext(env, poolSize: 2, maxConcurrentRequests: 8, warnWithoutCredentials: false, logger: logger)
        } catch {
            logger.warning(
                "console: the provider API settings cannot be used, so it cannot retry actions", ["error": String(describing: error)])
            return nil
        }
    }
}

private let proxyOnlyFlag = FlagKey(
    "--proxy-only", "No password: they sign in only through the authenticating proxy (PAYRECON_CONSOLE_USER_HEADER).")

/// The shortest password `add-user` takes: the hash slows guessing, but a short password is still found.
let minimumConsolePassword = 12

struct ConsoleAddUserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "console add-user",
        summary: "Add a person who may sign in to the console, or change their password or role.",
        arguments: [.init(name: "NAME", help: "Their sign-in name: 1 to 64 of a-z, 0-9, '.', '_', '@', '-'.")],
        options: [roleOption, proxyOnlyFlag],
        details: """
            The users file is PAYRECON_CONSOLE_USERS_FILE (created with mode 0600 if it does not exist; rewritten whole,
            atomically). The password is read from standard input, never from an argument: typed twice, without echo, at
            a terminal; else the first line (printf '%s\\n' "$PASSWORD" | payrecon console add-user ana --role operator).
            It must be at least \(minimumConsolePassword) characters and is kept as a scrypt hash (N=2^15, r=8, p=1).
            With --proxy-only no password is read or kept: the person signs in only as the authenticating proxy names
            them (PAYRECON_CONSOLE_USER_HEADER), never with a password, and a password they had is removed.
            A name already in the file gets the new password and role in place. Exit 0 when written, 2 on a usage error.
            """
    )

    var name: String
    var role: ConsoleRole
    /// --proxy-only: no password; they sign in only through the authenticating proxy.
    var proxyOnly: Bool

    init(parsing args: ParsedArguments) throws(UsageError) {
        name = args.positionals[0]
        guard ConsoleUsers.isValidName(name) else {
            throw UsageError("NAME must be 1 to 64 of a-z, 0-9, '.', '_', '@', '-', not '\(name.terminalSafe)'")
        }
        guard let role = try args.value(roleOption) else { throw UsageError("--role is required: viewer or operator") }
        self.role = role
        proxyOnly = args.flag(proxyOnlyFlag)
    }

    func run(logger: Logger) async throws -> Int32 {
        guard let path = Environment()["PAYRECON_CONSOLE_USERS_FILE"], !path.isEmpty else {
            throw ConfigurationError("set PAYRECON_CONSOLE_USERS_FILE to the users file's path (it is created if missing)")
        }
        var hash: String?
        if !proxyOnly {
            let password = try readNewPassword(for: name)
            do { hash = try PasswordHash.make(Array(password.utf8)) } catch {
                throw ConfigurationError("could not hash the password: \(error)")
            }
        }
        let existed = try ConsoleUsersFile.locked(path) {
            var users = try ConsoleUsersFile.read(path) ?? ConsoleUsers()
            let existed = users.user(named: name) != nil
            users.put(ConsoleUser(name: name, role: role, passwordHash: hash))
            try ConsoleUsersFile.write(users, to: path)
            return existed
        }
        print("\(existed ? "changed" : "added") \(name) (\(role.rawValue)\(hash == nil ? ", through the proxy only" : "")) in \(path)")
        return Exit.ok
    }
}

/// A new password from standard input: twice without echo at a terminal, else the first line.
func readNewPassword(for name: String) throws -> String {
    let password: String
    if isatty(STDIN_FILENO) == 1 {
        let first = try readWithoutEcho("Password for \(name): ")
        guard try readWithoutEcho("Again: ") == first else { throw UsageError("the two passwords differ; nothing was written") }
        password = first
    } else {
        guard let line = readLine(strippingNewline: true) else {
            throw UsageError("no password on standard input: type it at a terminal, or pipe it as the first line")
        }
        password = line.hasSuffix("\r") ? String(line.dropLast()) : line
    }
    guard password.count >= minimumConsolePassword else {
        throw UsageError("the password must be at least \(minimumConsolePassword) characters; nothing was written")
    }
    return password
}

/// One line from the terminal with echo off (restored whatever happens).
/// The terminal's settings while a password is typed without echo, for the signal handler to put back.
nonisolated(unsafe) private var terminalBeforePassword = termios()

/// The signals that end `add-user` at its password prompt: each puts echo back first.
private let promptSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

/// A signal while echo is off: echo back on, then die of the signal as if unhandled, so a calling shell sees it
/// (tcsetattr, signal and raise are safe in a signal handler).
private func restoreEchoAndDie(_ received: Int32) {
    tcsetattr(STDIN_FILENO, TCSANOW, &terminalBeforePassword)
    signal(received, SIG_DFL)
    raise(received)
}

/// Reads a line at the terminal with echo off, and puts echo back however it ends.
func readWithoutEcho(_ prompt: String) throws -> String {
    FileHandle.standardError.write(Data(prompt.utf8))
    var saved = termios()
    guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw UsageError("cannot read the terminal's settings") }
    terminalBeforePassword = saved
    let previous = promptSignals.map { signal($0, restoreEchoAndDie) }
    var quiet = saved
    quiet.c_lflag &= ~tcflag_t(ECHO)
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
    defer {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
        for (number, handler) in zip(promptSignals, previous) { signal(number, handler) }
        FileHandle.standardError.write(Data("\n".utf8))
    }
    guard let line = readLine(strippingNewline: true) else { throw UsageError("no password typed") }
    return line
}

/// Reading and writing the users file: read whole and judged before anything is written; written to a temporary
/// file beside it (mode 0600) and renamed over it, so a reader never sees half a file.
enum ConsoleUsersFile {
    /// The users file as the console takes it, at start and on SIGHUP: read whole, naming someone, every hash
    /// readable, and the file loose to no one else.
    static func load(_ path: String) throws -> ConsoleUsers {
        guard let users = try read(path), !users.users.isEmpty else {
            throw ConfigurationError("\(path) names no one: add a user with `payrecon console add-user NAME --role operator`")
        }
        try refuseUnreadableHashes(users, path)
        try refuseLooseFile(path)
        return users
    }

    /// A hash that cannot be read (or costs more than a sign-in may) would let that person never sign in, and answer
    /// faster than a real check: the console refuses to start on one.
    static func refuseUnreadableHashes(_ users: ConsoleUsers, _ path: String) throws {
        if let bad = users.users.first(where: { $0.passwordHash.map { !PasswordHash.isReadable($0) } ?? false }) {
            throw ConfigurationError(
                "\(path): \(bad.name)'s password hash cannot be read; set it again with `payrecon console add-user \(bad.name)`")
        }
    }

    /// People with no password sign in only through the proxy's header: without one, a file of only such people lets
    /// no one in (refused), and a file with some warns that they cannot sign in.
    static func refuseNoOneCanSignIn(_ users: ConsoleUsers, _ path: String, userHeader: String?, logger: Logger) throws {
        guard userHeader == nil, let proxied = users.users.first(where: { $0.passwordHash == nil }) else { return }
        guard users.users.contains(where: { $0.passwordHash != nil }) else {
            throw ConfigurationError(
                "\(path): everyone in it signs in only through the proxy, and PAYRECON_CONSOLE_USER_HEADER is not set: "
                    + "set it (with PAYRECON_TRUSTED_PROXIES and PAYRECON_CONSOLE_PROXY_SECRET), or give someone a password "
                    + "with `payrecon console add-user NAME --role operator`")
        }
        logger.warning(
            "console: a person in the users file has no password and PAYRECON_CONSOLE_USER_HEADER is not set: they cannot sign in",
            ["user": proxied.name])
    }

    /// Whoever can write the file, or swap it in its directory, can make themselves an operator; whoever can read it
    /// can guess its passwords offline: the console refuses a file others may write or anyone may read, and one in a
    /// directory anyone may write without the sticky bit.
    static func refuseLooseFile(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        let mode = String(info.st_mode & 0o777, radix: 8)
        guard info.st_mode & 0o022 == 0 else {
            throw ConfigurationError(
                "\(path) can be written by others (mode \(mode)), and whoever can write it can make themselves an operator: "
                    + "chmod 600 \(path)")
        }
        guard info.st_mode & 0o004 == 0 else {
            throw ConfigurationError("\(path) can be read by anyone (mode \(mode)), its password hashes with it: chmod 600 \(path)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        var folder = stat()
        if stat(directory.isEmpty ? "." : directory, &folder) == 0, folder.st_mode & 0o002 != 0, folder.st_mode & 0o1000 == 0 {
            throw ConfigurationError(
                "\(path) is in a directory anyone may write (\(directory)), where the file can be swapped: keep it in one only its "
                    + "owner writes (/etc/payrecon)")
        }
    }

    /// nil when the file does not exist yet.
    static func read(_ path: String) throws -> ConsoleUsers? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("cannot read \(path): check its permissions")
        }
        guard data.count <= 1 << 20 else { throw ConfigurationError("\(path) is over 1 MiB: is it the users file?") }
        do { return try ConsoleUsers.parse(String(decoding: data, as: UTF8.self)) } catch {
            throw ConfigurationError("\(path) \(error); correct it, then run this again")
        }
    }

    /// Runs `body` holding an exclusive lock on `path.lock`: two `add-user` at once each see the other's change.
    static func locked<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let fd = open(path + ".lock", O_RDWR | O_CREAT, 0o600)
        guard fd >= 0 else { throw ConfigurationError("cannot create \(path).lock: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard flock(fd, LOCK_EX) == 0 else { throw ConfigurationError("cannot lock \(path).lock: \(String(cString: strerror(errno)))") }
        return try body()
    }

    /// Written beside the file and renamed over it, with the old file's owner (a root `add-user` keeps the file the
    /// console's user reads) and mode 0600; the directory is synced so the rename survives a crash.
    static func write(_ users: ConsoleUsers, to path: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        let bytes = Array(users.text.utf8)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw ConfigurationError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var old = stat()
        if stat(path, &old) == 0, fchown(fd, old.st_uid, old.st_gid) != 0 {
            let why = String(cString: strerror(errno))
            close(fd); unlink(temporary)
            throw ConfigurationError("cannot give the new \(path) its owner (\(why)): run add-user as the file's owner or as root")
        }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fchmod(fd, 0o600) == 0 && fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            throw ConfigurationError("cannot write \(path): \(why)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        let dirfd = open(directory.isEmpty ? "." : directory, O_RDONLY)
        if dirfd >= 0 { _ = fsync(dirfd); close(dirfd) }
    }
}
