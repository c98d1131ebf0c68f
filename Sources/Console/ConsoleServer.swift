import Crypto
import Foundation
import HTTP
import Observability
import Postgres
import Reconciliation
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
        public var idle: Duration = .seconds(30 * 60)
        /// A session this old is over, however much it is used: a stolen cookie does not live forever.
        public var maxAge: Duration = .seconds(12 * 3600)
        /// The session cookie is `Secure` and `__Host-` prefixed, so a browser sends it over HTTPS only and no other
        /// site can plant one: on by default unless the console listens on loopback (a browser on the same host, or an
        /// SSH tunnel, speaks plain HTTP to it, and Chromium keeps no Secure cookie from plain HTTP). Behind a TLS proxy
        /// on loopback, turn it on (`PAYRECON_CONSOLE_SECURE_COOKIE=on`, which `payrecon console` also does when
        /// PAYRECON_TRUSTED_PROXIES is set).
        public var secureCookies: Bool
        /// Proxies whose `X-Forwarded-For` names the client (`PAYRECON_TRUSTED_PROXIES`): behind nginx every request
        /// comes from 127.0.0.1, and the sign-in limits and the audit trail need the person's own address.
        public var trustedProxies: [AddressRange] = []
        /// Host names answered besides the loopback ones when the console is on loopback with no proxy
        /// (`PAYRECON_CONSOLE_HOSTS`, lower case).
        public var allowedHosts: [String] = []
        /// A header naming the signed-in person, set by an authenticating proxy (oauth2-proxy's `X-Forwarded-User`,
        /// nginx's auth_request): honoured only on requests whose peer is one of `trustedProxies`, for a person the
        /// users file lists (their role comes from there). nil: people sign in with their passwords only.
        public var userHeader: String? = nil
        /// What the proxy sends in `X-Payrecon-Proxy-Secret` on every request (`PAYRECON_CONSOLE_PROXY_SECRET`):
        /// `X-Forwarded-For` and the user header are believed only with it, since every process on the proxy's host
        /// (and an SSH tunnel to it) connects from the proxy's address too. nil: no proxy is believed.
        public var proxySecret: [UInt8]? = nil
        /// Where the overview's refresh LISTENs (a direct connection: a pooler loses LISTEN); nil: on a timer only.
        public var listenURL: String? = nil
        /// How often the overview's figures are read with nothing notified.
        public var refreshInterval: Duration = .seconds(10)
        /// How old the overview's figures may be when a page asks (`PAYRECON_CONSOLE_FIGURES_MAX_AGE`): figures read
        /// this recently (for another page, or by the refresh) are shown again, with the time they were read. Zero:
        /// each overview reads them.
        public var figuresMaxAge: Duration = .seconds(5)
        /// Re-plans a failed action from a fresh fetch (`payrecon actions retry`'s executor), given the action and the
        /// attempt the operator looked at (an action tried again since is refused); nil when the console has no
        /// provider API credentials, and then it cannot retry an action.
        public var retryAction: (@Sendable (_ id: Int64, _ attempts: Int) async -> ActionRetryResult)? = nil

        public init(host: String, port: UInt16, users: ConsoleUsers) {
            self.host = host; self.port = port; self.users = users
            secureCookies = !Self.isLoopback(host)
        }

        public static func isLoopback(_ host: String) -> Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }

        var cookieName: String { secureCookies ? "__Host-payrecon_console" : "payrecon_console" }
    }

    let configuration: Configuration
    let pool: PostgresPool
    let logger: Logger
    /// The users file as last read (at start, and again on SIGHUP: `replaceUsers`).
    private let users: Mutex<ConsoleUsers>
    let limiter = Mutex(SignInLimiter())
    /// Passwords are checked one at a time on a thread of their own (scrypt takes 32 MiB and a tenth of a second),
    /// never on Swift's cooperative pool, whose two threads serve every page; past `maxWaitingSignIns` a sign-in is 503.
    static let hashing = DispatchQueue(label: "payrecon.console.scrypt")
    let waitingSignIns = Atomic<Int>(0)
    static let maxWaitingSignIns = 8
    let started = ContinuousClock.now
    private let server = Mutex<HTTPServer?>(nil)
    /// The overview's stamp, and the pages waiting for it to move.
    let live = ConsoleLive()
    private let watcher = Mutex<ConsoleWatcher?>(nil)

    public init(configuration: Configuration, pool: PostgresPool, logger: Logger) {
        self.configuration = configuration; self.pool = pool; self.logger = logger
        users = Mutex(configuration.users)
    }

    /// Puts a users file read again in place (SIGHUP): a session whose person is gone, or has another role or another
    /// password, is over at its next request.
    public func replaceUsers(_ new: ConsoleUsers) {
        users.withLock { $0 = new }
        logger.info("console users re-read", ["users": new.users.count])
    }

    /// Starts listening; returns the port.
    public func start() throws -> UInt16 {
        var http = HTTPServer.Configuration(
            host: configuration.host, port: configuration.port, threads: 2, maxBodyBytes: 16 * 1024, connectionTimeoutSeconds: 30,
            connectionLimit: 256, connectionLimitPerIP: 32, requestTimeout: .seconds(30))
        // Behind the proxy every person's connection comes from its address: the per-address limit is the proxy's to keep.
        http.connectionLimitPerIPExempt = configuration.trustedProxies
        let server = HTTPServer(
            configuration: http,
            asyncHandler: { [self] request in await respond(to: request) })
        try server.start()
        self.server.withLock { $0 = server }
        let watching = ConsoleWatcher(
            live: live, listenURL: configuration.listenURL, interval: configuration.refreshInterval, logger: logger
        ) { [self] in try await overviewFigures(maxAge: .zero) }
        watching.start()
        watcher.withLock { $0 = watching }
        logger.info("console listening", ["address": "\(configuration.host):\(server.port)", "users": users.withLock { $0.users.count }])
        return server.port
    }

    public func stop() {
        let http = server.withLock { s -> HTTPServer? in
            defer { s = nil }; return s
        }
        live.releaseAll()
        http?.shutdown(drainTimeout: 5)
        watcher.withLock { w -> ConsoleWatcher? in
            defer { w = nil }; return w
        }?.stop()
    }

    /// Every answer carries the headers of a private page: no cache, no framing, no script, nothing from elsewhere.
    func respond(to request: HTTPRequest) async -> HTTPResponse {
        var response = await route(request)
        response.headers += [
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
                    + "frame-ancestors 'none'; base-uri 'none'"
            ),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY")
        ]
        if !response.headers.contains(where: { $0.0 == "Cache-Control" }) { response.headers.append(("Cache-Control", "no-store")) }
        return response
    }

    func route(_ request: HTTPRequest) async -> HTTPResponse {
        if let answer = await publicAnswer(request) { return answer }
        switch await signedIn(request) {
        case .answer(let answer): return answer
        case .session(let session, let setCookie): return await signedAnswer(request, session: session, setCookie: setCookie)
        }
    }

    /// What is answered before any session: a host not answered, the styles and script, sign-in, and the POSTs refused
    /// whoever sends them. nil: the request needs a session.
    func publicAnswer(_ request: HTTPRequest) async -> HTTPResponse? {
        guard hostAllowed(request) else {
            return Self.html(
                421,
                ConsolePages.page(
                    title: "Not this host", session: nil,
                    body: "<p class=\"error\">The console answers on loopback names only: open it at http://127.0.0.1 or "
                        + "http://localhost, or list this name in PAYRECON_CONSOLE_HOSTS.</p>"))
        }
        switch (request.method, request.path) {
        case ("GET", "/console.css"):
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "text/css; charset=utf-8"), ("Cache-Control", "private, max-age=300")],
                body: Array(ConsolePages.css.utf8))
        case ("GET", "/console.js"):
            return HTTPResponse(
                status: 200,
                headers: [("Content-Type", "text/javascript; charset=utf-8"), ("Cache-Control", "private, max-age=300")],
                body: Array(ConsolePages.script.utf8))
        case ("GET", "/login"):
            return Self.html(200, ConsolePages.signIn(error: nil))
        case ("POST", _) where Self.crossSite(request):
            // A form another site's page sends through a signed-in browser (or a login CSRF): refused before anything.
            return Self.html(
                403, ConsolePages.page(title: "Refused", session: nil, body: "<p class=\"error\">A form from another site.</p>"))
        case ("POST", _) where request.bodyTooLarge:
            return Self.html(
                413, ConsolePages.page(title: "Too large", session: nil, body: "<p class=\"error\">The form is too large.</p>"))
        case ("POST", "/login"):
            return await signIn(request)
        default:
            return nil
        }
    }

    enum SignedIn {
        /// The session, and the cookie to set when the proxy just opened it.
        case session(ConsoleSession, setCookie: [(String, String)])
        /// No session to answer with: sign in, or the database is out of reach.
        case answer(HTTPResponse)
    }

    /// The request's session: its cookie's, or one the proxy opens; else what to answer.
    func signedIn(_ request: HTTPRequest) async -> SignedIn {
        var session: ConsoleSession?
        var setCookie: [(String, String)] = []
        do {
            session = try await currentSession(request)
            switch try await proxiedSession(request, current: session) {
            case .none: break
            case .signedIn(let proxied, let cookie): (session, setCookie) = (proxied, [("Set-Cookie", cookie)])
            case .refused(let answer): return .answer(answer)
            }
        } catch {
            logger.warning("console: the database is out of reach", ["error": String(describing: error)])
            return .answer(
                Self.html(
                    503, ConsolePages.page(title: "Unavailable", session: nil, body: "<p>The database is out of reach; try again.</p>")))
        }
        guard let session else {
            // The overview's refresh stops (the page stays as it was, and says how old it is).
            if request.path == "/live" {
                return .answer(HTTPResponse(status: 401, headers: [("Content-Type", "text/plain")], body: Array("sign in\n".utf8)))
            }
            // No page without a session. The way back is always the overview: no `next=` to redirect anywhere else.
            return .answer(
                request.method == "GET" ? Self.redirect("/login") : Self.html(403, ConsolePages.signIn(error: "Sign in first.")))
        }
        return .session(session, setCookie: setCookie)
    }

    /// A signed-in request: a write (with its CSRF token) or a page.
    func signedAnswer(_ request: HTTPRequest, session: ConsoleSession, setCookie: [(String, String)]) async -> HTTPResponse {
        var answer: HTTPResponse
        if request.method == "POST" {
            if let refusal = Self.refusedWrite(request, session: session) {
                answer = refusal
            } else {
                answer = await write(request, session: session)
            }
        } else if request.method == "GET" {
            do { answer = try await page(request, session: session) } catch {
                logger.warning("console: a page failed", ["path": request.path, "error": String(describing: error)])
                answer = Self.html(
                    500, ConsolePages.page(title: "Error", session: session, body: "<p>The page could not be read; try again.</p>"))
            }
        } else {
            return HTTPResponse(status: 405, headers: [("Allow", "GET, POST")])
        }
        answer.headers += setCookie
        return answer
    }

    /// What the browser says of where a POST comes from (`Sec-Fetch-Site`, `Origin`): another site is refused, beside
    /// the CSRF token. A client that says nothing (a script, curl) is judged by the token alone.
    static func crossSite(_ request: HTTPRequest) -> Bool {
        // A browser that sends Sec-Fetch-Site says it outright.
        if let site = request.headers["sec-fetch-site"] { return site != "same-origin" && site != "none" }
        // Otherwise the Origin, unless it is "null" (what a browser sends under `Referrer-Policy: no-referrer`, as
        // every console page is), which says nothing either way.
        guard let origin = request.headers["origin"], origin != "null" else { return false }
        guard let host = request.headers["host"] else { return true }
        return origin != "http://" + host && origin != "https://" + host
    }

    /// On loopback with no proxy (a browser on the host, an SSH tunnel) only loopback names and `allowedHosts` are
    /// answered: a web page that rebinds its own name to 127.0.0.1 reaches the console under that name, and is refused.
    /// Behind a trusted proxy the proxy chooses which names reach the console.
    func hostAllowed(_ request: HTTPRequest) -> Bool {
        guard Configuration.isLoopback(configuration.host), !fromProxy(request) else { return true }
        guard let header = request.headers["host"] else { return false }
        // The name without its port: "127.0.0.1:8090" → "127.0.0.1", "[::1]:8090" → "[::1]".
        let name = header.hasPrefix("[") ? String(header.prefix { $0 != "]" }) + "]" : String(header.prefix { $0 != ":" })
        return ["127.0.0.1", "localhost", "[::1]", configuration.host].contains(name.lowercased())
            || configuration.allowedHosts.contains(name.lowercased())
    }

    /// The person's address: the peer, or the last `X-Forwarded-For` hop when the request came through the proxy.
    func clientAddress(_ request: HTTPRequest) -> String {
        guard fromProxy(request) else { return request.remoteAddress ?? "?" }
        return SenderAddress.resolve(
            peer: request.remoteAddress, forwardedFor: request.headers.values(for: "X-Forwarded-For"),
            trustedProxies: configuration.trustedProxies) ?? "?"
    }

    /// Whether the request came through the trusted proxy: from its address, and with its secret, sent once. The
    /// address alone says nothing: every process on the proxy's host (an SSH tunnel too) connects from it, and a
    /// page could set X-Forwarded-For to sign in under addresses of its choosing past the sign-in limits.
    func fromProxy(_ request: HTTPRequest) -> Bool {
        guard let secret = configuration.proxySecret, let peer = request.remoteAddress,
            configuration.trustedProxies.contains(where: { $0.contains(peer) })
        else { return false }
        let sent = request.headers.values(for: "x-payrecon-proxy-secret")
        return sent.count == 1 && constantTimeEquals(Array(sent[0].utf8), secret)
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
        guard let token = FormBody.cookie(configuration.cookieName, in: request.headers["cookie"]), token.utf8.count == 64 else {
            return nil
        }
        let hash = SHA256.hash(Array(token.utf8))
        let (idle, maxAge) = (configuration.idle, configuration.maxAge)
        // The overview's refresh (its long poll, and the figures it fetches) is not a person using the session.
        let touch = request.path != "/live" && request.headers["x-payrecon-refresh"] == nil
        let session = try await pool.run {
            try ConsoleStore.session(tokenSHA256: hash, idle: idle, maxAge: maxAge, touch: touch, on: $0)
        }
        // The users file decides: a session of a person since removed, given another role or another password is over;
        // so is one of a person the proxy alone signs in, once no proxy header is believed.
        guard let session, let user = users.withLock({ $0.user(named: session.userName) }), user.role.rawValue == session.role,
            session.credential == Self.credential(of: user), user.passwordHash != nil || configuration.userHeader != nil
        else { return nil }
        return session
    }

    func signIn(_ request: HTTPRequest) async -> HTTPResponse {
        let form = FormBody.parse(request.body)
        let name = form["name"] ?? "", password = form["password"] ?? ""
        // Every invalid name is one key for the limiter: a key's size stays bounded, and it is no one's name.
        let limited = ConsoleUsers.isValidName(name) ? name : "(not a valid name)"
        let address = clientAddress(request)
        let now = ContinuousClock.now - started
        if case .wait(let wait) = limiter.withLock({ $0.attempt(name: limited, address: address, now: now) }) {
            let minutes = max(1, Int(wait.components.seconds + 59) / 60)
            return Self.html(
                429, ConsolePages.signIn(error: "Too many failed sign-ins: try again in \(minutes) minute\(minutes == 1 ? "" : "s")."),
                headers: [("Retry-After", String(wait.components.seconds + 1))])
        }
        let user = users.withLock { $0.user(named: name) }
        // An unknown name (or one with no password: the proxy signs them in) costs the same scrypt as a known one, so the
        // time taken does not say which names exist; the decoy matches no password.
        let stored = user?.passwordHash ?? Self.decoyHash
        guard let matches = await verify(password, against: stored) else {
            return Self.html(
                503, ConsolePages.signIn(error: "Too many sign-ins at once; try again in a moment."), headers: [("Retry-After", "2")])
        }
        guard let user, user.passwordHash != nil, matches else {
            logger.info("console sign-in refused", ["user": limited, "address": address])
            return Self.html(401, ConsolePages.signIn(error: "Wrong name or password."))
        }
        limiter.withLock { $0.succeeded(name: limited, address: address, at: now) }
        do {
            let (_, cookie) = try await openSession(for: user, address: address, how: nil)
            return Self.redirect("/", headers: [("Set-Cookie", cookie)])
        } catch {
            return Self.html(503, ConsolePages.signIn(error: "The database is out of reach; try again."))
        }
    }

    /// Starts a session for `user` (recorded as a sign-in, `how` saying by what when not by password) and the cookie
    /// that carries it.
    func openSession(for user: ConsoleUser, address: String, how: String?) async throws -> (ConsoleSession, cookie: String) {
        let token = Hex.encode(randomBytes(32)), csrf = Hex.encode(randomBytes(32))
        let session = ConsoleSession(
            userName: user.name, role: user.role.rawValue, csrfToken: csrf, credential: Self.credential(of: user))
        try await pool.run { conn in
            try ConsoleStore.createSession(tokenSHA256: SHA256.hash(Array(token.utf8)), session: session, address: address, on: conn)
            try ConsoleStore.audit(user: user.name, address: address, action: "sign in", target: nil, detail: how, on: conn)
        }
        logger.info("console sign-in", ["user": user.name, "role": user.role.rawValue, "address": address, "by": how ?? "password"])
        var cookie =
            "\(configuration.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(configuration.maxAge.components.seconds)"
        if configuration.secureCookies { cookie += "; Secure" }
        return (session, cookie)
    }

    func user(named name: String) -> ConsoleUser? { users.withLock { $0.user(named: name) } }

    /// A hash no password matches, verified for an unknown name (same parameters as `make`'s).
    static let decoyHash: String = {
        guard let hash = try? PasswordHash.make(randomBytes(24)) else { preconditionFailure("libcrypto cannot make a scrypt hash") }
        return hash
    }()

    /// What a session keeps of the password it was opened with: a new password ends it.
    static func credential(of user: ConsoleUser) -> String {
        SHA256.hex(Array((user.passwordHash ?? ConsoleUser.proxyOnly).utf8))
    }

    /// scrypt on its own thread, one at a time; nil when too many wait already.
    func verify(_ password: String, against stored: String) async -> Bool? {
        guard waitingSignIns.add(1, ordering: .relaxed).newValue <= Self.maxWaitingSignIns else {
            waitingSignIns.subtract(1, ordering: .relaxed)
            return nil
        }
        defer { waitingSignIns.subtract(1, ordering: .relaxed) }
        return await withCheckedContinuation { continuation in
            Self.hashing.async { continuation.resume(returning: PasswordHash.verify(Array(password.utf8), against: stored)) }
        }
    }

    func signOut(_ request: HTTPRequest, session: ConsoleSession) async -> HTTPResponse {
        if let token = FormBody.cookie(configuration.cookieName, in: request.headers["cookie"]) {
            let address = clientAddress(request)
            do {
                try await pool.run { conn in
                    try ConsoleStore.endSession(tokenSHA256: SHA256.hash(Array(token.utf8)), on: conn)
                    try ConsoleStore.audit(user: session.userName, address: address, action: "sign out", target: nil, detail: nil, on: conn)
                }
            } catch {
                // The session must end where it is kept: clearing only the cookie would leave it valid.
                return Self.html(
                    503,
                    ConsolePages.page(title: "Unavailable", session: session, body: "<p>The database is out of reach; sign out again.</p>"))
            }
        }
        var clear = "\(configuration.cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        if configuration.secureCookies { clear += "; Secure" }
        return Self.redirect("/login", headers: [("Set-Cookie", clear)])
    }

    static func html(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// A redirect within the console only (a fixed path, never one taken from the request).
    static func redirect(_ path: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: 303, headers: [("Location", path)] + headers)
    }
}
