import Crypto
import Foundation
import HTTP
import Observability
import Postgres
import Reconciliation
import Reporting
import Store
import Synchronization

/// `payrecon console`: the operator's web console, a process of its own over the same database, never on the webhook
/// listener. Every page but sign-in needs a session (a cookie naming a row of `console_sessions`); every write needs
/// the session's CSRF token and an operator, and is recorded in `console_audit`.
public final class ConsoleServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: UInt16
        public var users: ConsoleUsers
        /// A session unused this long is over.
        public var idleSeconds: Int64 = 30 * 60
        /// Cookies carry `Secure` (sent over HTTPS only) unless the console listens on loopback, where a browser on
        /// the same machine speaks plain HTTP to it.
        public var secureCookies: Bool

        public init(host: String, port: UInt16, users: ConsoleUsers) {
            self.host = host; self.port = port; self.users = users
            secureCookies = !(host == "127.0.0.1" || host == "localhost" || host == "::1")
        }
    }

    static let cookieName = "payrecon_console"
    let configuration: Configuration
    let pool: PostgresPool
    let logger: Logger
    let limiter = Mutex(SignInLimiter())
    /// At most two passwords checked at once (scrypt takes 32 MiB and a tenth of a second each).
    let verifications = AsyncSemaphore(permits: 2)
    let started = ContinuousClock.now
    private let server = Mutex<HTTPServer?>(nil)

    public init(configuration: Configuration, pool: PostgresPool, logger: Logger) {
        self.configuration = configuration; self.pool = pool; self.logger = logger
    }

    /// Starts listening; returns the port.
    public func start() throws -> UInt16 {
        let http = HTTPServer(
            configuration: .init(
                host: configuration.host, port: configuration.port, threads: 2, maxBodyBytes: 16 * 1024, connectionTimeoutSeconds: 30,
                connectionLimit: 256, connectionLimitPerIP: 32, requestTimeoutSeconds: 30),
            asyncHandler: { [self] request in await respond(to: request) })
        try http.start()
        server.withLock { $0 = http }
        logger.info("console listening", ["address": "\(configuration.host):\(http.port)", "users": configuration.users.users.count])
        return http.port
    }

    public func stop() {
        let http = server.withLock { s -> HTTPServer? in
            defer { s = nil }; return s
        }
        http?.shutdown(drainTimeout: 5)
    }

    /// Every answer carries the headers of a private page: no cache, no framing, no script, nothing from elsewhere.
    func respond(to request: HTTPRequest) async -> HTTPResponse {
        var response = await route(request)
        response.headers += [
            (
                "Content-Security-Policy",
                "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
            ),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY")
        ]
        if !response.headers.contains(where: { $0.0 == "Cache-Control" }) { response.headers.append(("Cache-Control", "no-store")) }
        return response
    }

    func route(_ request: HTTPRequest) async -> HTTPResponse {
        switch (request.method, request.path) {
        case ("GET", "/console.css"):
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "text/css; charset=utf-8"), ("Cache-Control", "private, max-age=300")],
                body: Array(ConsolePages.css.utf8))
        case ("GET", "/login"):
            return Self.html(200, ConsolePages.signIn(error: nil))
        case ("POST", "/login"):
            return await signIn(request)
        default:
            break
        }
        let session: ConsoleSession?
        do { session = try await currentSession(request) } catch {
            logger.warning("console: the database is out of reach", ["error": String(describing: error)])
            return Self.html(
                503, ConsolePages.page(title: "Unavailable", session: nil, body: "<p>The database is out of reach; try again.</p>"))
        }
        guard let session else {
            // No page without a session. The way back is always the overview: no `next=` to redirect anywhere else.
            return request.method == "GET" ? Self.redirect("/login") : Self.html(403, ConsolePages.signIn(error: "Sign in first."))
        }
        if request.method == "POST" {
            guard let refusal = Self.refusedWrite(request, session: session) else { return await write(request, session: session) }
            return refusal
        }
        guard request.method == "GET" else { return HTTPResponse(status: 405, headers: [("Allow", "GET, POST")]) }
        do { return try await page(request, session: session) } catch {
            logger.warning("console: a page failed", ["path": request.path, "error": String(describing: error)])
            return Self.html(
                500, ConsolePages.page(title: "Error", session: session, body: "<p>The page could not be read; try again.</p>"))
        }
    }

    /// A POST without the session's CSRF token is refused, whoever sends it (sign-out included).
    static func refusedWrite(_ request: HTTPRequest, session: ConsoleSession) -> HTTPResponse? {
        let sent = FormBody.parse(request.body)["csrf"] ?? ""
        guard constantTimeEquals(Array(sent.utf8), Array(session.csrfToken.utf8)) else {
            return html(
                403,
                ConsolePages.page(
                    title: "Refused", session: session,
                    body: "<p class=\"error\">The form's token is missing or stale: reload the page and try again.</p>"))
        }
        return nil
    }

    // MARK: - Sessions

    func currentSession(_ request: HTTPRequest) async throws -> ConsoleSession? {
        guard let token = FormBody.cookie(Self.cookieName, in: request.headers["cookie"]), token.utf8.count == 64 else { return nil }
        let hash = SHA256.hash(Array(token.utf8))
        let idle = configuration.idleSeconds
        let session = try await pool.run { try ConsoleStore.session(tokenSHA256: hash, idleSeconds: idle, on: $0) }
        // The users file decides: a session of a user since removed or given another role is over.
        guard let session, configuration.users.user(named: session.userName)?.role.rawValue == session.role else { return nil }
        return session
    }

    func signIn(_ request: HTTPRequest) async -> HTTPResponse {
        let form = FormBody.parse(request.body)
        let name = form["name"] ?? "", password = form["password"] ?? ""
        let address = request.remoteAddress ?? "?"
        let now = ContinuousClock.now - started
        if case .wait(let wait) = limiter.withLock({ $0.check(name: name, address: address, now: now) }) {
            let minutes = max(1, Int(wait.components.seconds + 59) / 60)
            return Self.html(
                429, ConsolePages.signIn(error: "Too many failed sign-ins: try again in \(minutes) minute\(minutes == 1 ? "" : "s")."),
                headers: [("Retry-After", String(wait.components.seconds + 1))])
        }
        let user = configuration.users.user(named: name)
        // An unknown name costs the same scrypt as a known one, so the time taken does not say which names exist.
        let stored = user?.passwordHash ?? Self.decoyHash
        do { try await verifications.acquire() } catch { return Self.html(503, ConsolePages.signIn(error: "Try again.")) }
        let matches = PasswordHash.verify(Array(password.utf8), against: stored)
        verifications.release()
        guard let user, matches else {
            limiter.withLock { $0.failed(name: name, address: address, now: now) }
            logger.info(
                "console sign-in refused", ["user": ConsoleUsers.isValidName(name) ? name : "(not a valid name)", "address": address])
            return Self.html(401, ConsolePages.signIn(error: "Wrong name or password."))
        }
        limiter.withLock { $0.succeeded(name: name) }
        let token = Hex.encode(Self.randomBytes(32)), csrf = Hex.encode(Self.randomBytes(32))
        let session = ConsoleSession(userName: user.name, role: user.role.rawValue, csrfToken: csrf)
        do {
            try await pool.run { conn in
                try ConsoleStore.createSession(tokenSHA256: SHA256.hash(Array(token.utf8)), session: session, address: address, on: conn)
                try ConsoleStore.audit(user: user.name, address: address, action: "sign in", target: nil, detail: nil, on: conn)
            }
        } catch {
            return Self.html(503, ConsolePages.signIn(error: "The database is out of reach; try again."))
        }
        logger.info("console sign-in", ["user": user.name, "role": user.role.rawValue, "address": address])
        var cookie = "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(configuration.idleSeconds * 16)"
        if configuration.secureCookies { cookie += "; Secure" }
        return Self.redirect("/", headers: [("Set-Cookie", cookie)])
    }

    /// A hash no password matches, verified for an unknown name (same parameters as `make`'s).
    static let decoyHash = (try? PasswordHash.make(randomBytes(24))) ?? ""

    static func randomBytes(_ n: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<n).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    // MARK: - Pages and writes

    func page(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        switch parts.count {
        case 0:
            let (summary, actions) = try await pool.run { conn in
                try (ConsoleQueries.summary(on: conn), ConsoleStore.actionCounts(on: conn))
            }
            return Self.html(200, ConsolePages.overview(summary, actions: actions, session: session))
        case 1 where parts[0] == "discrepancies":
            return try await discrepancyList(request, session: session)
        case 2 where parts[0] == "discrepancies":
            guard let id = Int64(parts[1]), id > 0 else { return Self.html(404, ConsolePages.notFound(session: session)) }
            return try await discrepancyPage(id, session: session)
        default:
            return Self.html(404, ConsolePages.notFound(session: session))
        }
    }

    func discrepancyList(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let q = request.query
        let status = q["status"].flatMap { ["open", "acknowledged", "resolved"].contains($0) ? $0 : nil }
        let filter = DiscrepancyFilter(
            status: q["status"] == "all" ? nil : (status ?? "open"), provider: q["provider"].flatMap(Provider.init(rawValue:)),
            kind: q["kind"].flatMap(DiscrepancyKind.init(rawValue:)))
        let search = q["q"].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        let before = q["before"].flatMap(Int64.init)
        let pageSize = 50
        let rows = try await pool.run {
            try ConsoleStore.discrepancyPage(filter, search: search, before: before, limit: pageSize + 1, on: $0)
        }
        let next = rows.count > pageSize ? rows[pageSize - 1].id : nil
        return Self.html(
            200, ConsolePages.discrepancies(Array(rows.prefix(pageSize)), filter: filter, search: search, next: next, session: session))
    }

    func discrepancyPage(_ id: Int64, session: ConsoleSession, error: String? = nil) async throws -> HTTPResponse {
        let found = try await pool.run { conn -> (StoredDiscrepancy, Explanation, [ConsoleAuditEntry])? in
            guard let d = try ReportStore.discrepancy(id: id, on: conn) else { return nil }
            return (d, try ExplainStore.explain(.discrepancy(id), on: conn), try ConsoleStore.audit(of: "discrepancy \(id)", on: conn))
        }
        guard let (d, explanation, audit) = found else { return Self.html(404, ConsolePages.notFound(session: session)) }
        let timeline = TextTable.safeMultiline(explanation.table())
        return Self.html(
            error == nil ? 200 : 409, ConsolePages.discrepancy(d, timeline: timeline, audit: audit, session: session, error: error))
    }

    func write(_ request: HTTPRequest, session: ConsoleSession) async -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        if parts == ["logout"] { return await signOut(request, session: session) }
        guard parts.count == 3, parts[0] == "discrepancies", parts[2] == "ack", let id = Int64(parts[1]), id > 0 else {
            return Self.html(404, ConsolePages.notFound(session: session))
        }
        guard session.role == ConsoleRole.operator.rawValue else {
            return Self.html(
                403,
                ConsolePages.page(
                    title: "Refused", session: session, body: "<p class=\"error\">A viewer reads; only an operator acknowledges.</p>"))
        }
        let note = FormBody.parse(request.body)["note"].map { String($0.prefix(500)) }.flatMap { $0.isEmpty ? nil : $0 }
        let address = request.remoteAddress
        do {
            let result = try await pool.run {
                try ConsoleStore.acknowledge(id: id, note: note, user: session.userName, address: address, on: $0)
            }
            guard result.acknowledged else {
                let why =
                    result.status.map { "It is \($0), not open: only an open discrepancy can be acknowledged." }
                    ?? "There is no such discrepancy."
                return try await discrepancyPage(id, session: session, error: why)
            }
            logger.info("console: discrepancy acknowledged", ["user": session.userName, "discrepancy_id": id])
            return Self.redirect("/discrepancies/\(id)")
        } catch {
            return Self.html(
                503, ConsolePages.page(title: "Unavailable", session: session, body: "<p>The database is out of reach; try again.</p>"))
        }
    }

    func signOut(_ request: HTTPRequest, session: ConsoleSession) async -> HTTPResponse {
        if let token = FormBody.cookie(Self.cookieName, in: request.headers["cookie"]) {
            let address = request.remoteAddress
            _ = try? await pool.run { conn in
                try ConsoleStore.endSession(tokenSHA256: SHA256.hash(Array(token.utf8)), on: conn)
                try ConsoleStore.audit(user: session.userName, address: address, action: "sign out", target: nil, detail: nil, on: conn)
            }
        }
        return Self.redirect("/login", headers: [("Set-Cookie", "\(Self.cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")])
    }

    static func html(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// A redirect within the console only (a fixed path, never one taken from the request).
    static func redirect(_ path: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: 303, headers: [("Location", path)] + headers)
    }
}

/// The overview's figures, read as `payrecon report` reads them (so the two agree).
enum ConsoleQueries {
    static func summary(on conn: PostgresConnection) throws -> ReportSummary {
        let filter = DiscrepancyFilter()
        var summary = ReportSummary()
        try conn.transaction(isolation: .repeatableRead) { tx in
            for total in try ReportStore.openTotals(filter, on: tx) {
                summary.open += total.count
                summary.byKind[total.kind, default: 0] += total.count
            }
            for (currency, minor) in try ReportStore.openAtRisk(filter, on: tx) where minor != 0 {
                summary.amountAtRisk[currency] = minor
            }
        }
        return summary
    }
}
