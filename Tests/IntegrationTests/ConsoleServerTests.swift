import Console
import Crypto
import Foundation
import HTTP
import Observability
import PayreconTesting
import Postgres
import Reporting
import Store
import Testing

/// `payrecon console` over real HTTP and PostgreSQL: no page without a session, a viewer reads and cannot write, an
/// operator acknowledges with the form's CSRF token and is recorded, provider strings are text, sign-ins are limited.
@Suite("Console", .serialized) struct ConsoleServerTests {
    static let cheap = PasswordHash.Parameters(ln: 10, r: 8, p: 1)

    struct Harness {
        let db: TestDatabase
        let pool: PostgresPool
        let console: ConsoleServer
        let base: String
        let http = URLSessionHTTPClient()

        func get(_ path: String, cookie: String? = nil) async throws -> HTTPClientResponse {
            try await http.send(HTTPClientRequest(method: "GET", url: base + path, headers: cookie.map { [("Cookie", $0)] } ?? []))
        }

        func post(
            _ path: String, _ form: [(String, String)], cookie: String? = nil, headers: [(String, String)] = []
        ) async throws -> HTTPClientResponse {
            let body = form.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
            return try await http.send(
                HTTPClientRequest(
                    method: "POST", url: base + path,
                    headers: [("Content-Type", "application/x-www-form-urlencoded")] + (cookie.map { [("Cookie", $0)] } ?? []) + headers,
                    body: Array(body.joined(separator: "&").utf8)))
        }

        /// Signs in; the session's cookie (`name=token`) and its CSRF token.
        func signIn(_ name: String, _ password: String) async throws -> (cookie: String, csrf: String) {
            let answer = try await post("/login", [("name", name), ("password", password)])
            #expect(answer.status == 303 && answer.headers["location"] == "/", "\(answer.status) \(answer.text)")
            let setCookie = try #require(answer.headers["set-cookie"])
            let cookie = String(setCookie.split(separator: ";")[0])
            let page = try await get("/", cookie: cookie)
            return (cookie, try #require(Self.csrf(in: page.text)))
        }

        static func csrf(in html: String) -> String? {
            guard let r = html.range(of: #"name="csrf" value=""#) else { return nil }
            return String(html[r.upperBound...].prefix { $0 != "\"" })
        }
    }

    static func users() throws -> ConsoleUsers {
        ConsoleUsers([
            ConsoleUser(
                name: "ana", role: .operator, passwordHash: try PasswordHash.make(Array("ana's long password".utf8), parameters: cheap)),
            ConsoleUser(
                name: "vic", role: .viewer, passwordHash: try PasswordHash.make(Array("vic's long password".utf8), parameters: cheap))
        ])
    }

    static func with(
        _ configure: (inout ConsoleServer.Configuration) throws -> Void = { _ in }, _ body: (Harness, Int64) async throws -> Void
    ) async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let pool = PostgresPool(conninfo: db.url, size: 2, acquireTimeout: .seconds(5))
        defer { pool.close() }
        let id = try await offload {
            let conn = try db.connect()
            defer { conn.close() }
            return try conn.query(
                """
                INSERT INTO discrepancies (provider, order_id, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor, currency)
                VALUES ('pxp', 'O-1', 'TX-1', 'amount_mismatch', '{"amount": "15.00"}', '{"captured": "0.00"}',
                        'PXP says <script>alert(1)</script> for it', 1500, 'EUR') RETURNING id
                """
            ).first!.int64("id")
        }
        var configuration = ConsoleServer.Configuration(host: "127.0.0.1", port: 0, users: try users())
        try configure(&configuration)
        let console = ConsoleServer(configuration: configuration, pool: pool, logger: Logger())
        let port = try console.start()
        defer { console.stop() }
        try await body(Harness(db: db, pool: pool, console: console, base: "http://127.0.0.1:\(port)"), id)
    }

    @Test func noPageWithoutASessionAndAWrongPasswordIsRefused() async throws {
        try await Self.with { h, id in
            let overview = try await h.get("/")
            #expect(overview.status == 303 && overview.headers["location"] == "/login")
            #expect(try await h.get("/discrepancies/\(id)").status == 303)
            #expect(try await h.post("/discrepancies/\(id)/ack", [("csrf", "x")]).status == 403)
            let wrong = try await h.post("/login", [("name", "ana"), ("password", "not it at all")])
            #expect(wrong.status == 401 && wrong.text.contains("Wrong name or password") && wrong.headers["set-cookie"] == nil)
            let nobody = try await h.post("/login", [("name", "zed"), ("password", "ana's long password")])
            #expect(nobody.status == 401 && nobody.text.contains("Wrong name or password"), "an unknown name reads the same")
            let login = try await h.get("/login")
            #expect(login.headers["cache-control"] == "no-store")
            #expect(login.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(login.headers["x-frame-options"] == "DENY")
        }
    }

    @Test func anOperatorAcknowledgesWithTheFormsTokenAndIsRecorded() async throws {
        try await Self.with { h, id in
            let answer = try await h.post("/login", [("name", "ana"), ("password", "ana's long password")])
            let setCookie = try #require(answer.headers["set-cookie"])
            #expect(
                setCookie.hasPrefix("payrecon_console=") && setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict")
                    && !setCookie.contains("Secure") && setCookie.contains("Path=/") && !setCookie.contains("Domain"),
                "on loopback a browser speaks plain HTTP: \(setCookie)")
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")

            let overview = try await h.get("/", cookie: cookie)
            #expect(
                overview.status == 200 && overview.text.contains("15.00 EUR")
                    && overview.text.contains(#"<div class="value" id="open">1</div>"#))
            let page = try await h.get("/discrepancies/\(id)", cookie: cookie)
            #expect(page.status == 200 && page.text.contains("Acknowledge"))
            #expect(
                page.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !page.text.contains("<script>"),
                "a provider's string is text")
            let list = try await h.get("/discrepancies?status=open&q=O-1", cookie: cookie)
            #expect(list.status == 200 && list.text.contains("/discrepancies/\(id)\""))
            #expect(try await h.get("/discrepancies?q=O-404", cookie: cookie).text.contains("No discrepancy matches"))

            let forged = try await h.post("/discrepancies/\(id)/ack", [("note", "no token")], cookie: cookie)
            #expect(forged.status == 403)
            let stale = try await h.post("/discrepancies/\(id)/ack", [("csrf", String(csrf.reversed())), ("note", "x")], cookie: cookie)
            #expect(stale.status == 403)
            #expect(try await Self.status(h, id) == "open")

            let acked = try await h.post("/discrepancies/\(id)/ack", [("csrf", csrf), ("note", "refunded by hand")], cookie: cookie)
            #expect(acked.status == 303 && acked.headers["location"] == "/discrepancies/\(id)")
            #expect(try await Self.status(h, id) == "acknowledged")
            let after = try await h.get("/discrepancies/\(id)", cookie: cookie)
            #expect(after.text.contains("Acknowledged by ana: refunded by hand") && after.text.contains("ana acknowledge from 127.0.0.1"))
            #expect(!after.text.contains(#"action="/discrepancies/\#(id)/ack""#), "no form for what is not open")
            let emptied = try await h.get("/", cookie: cookie)
            #expect(emptied.text.contains(#"<div class="value" id="open">0</div>"#) && !emptied.text.contains("15.00 EUR"))
            let audit = try await offload {
                let conn = try h.db.connect()
                defer { conn.close() }
                return try conn.query("SELECT user_name, action, target, detail FROM console_audit WHERE action = 'acknowledge'").map {
                    [try $0.string("user_name"), try $0.string("action"), try $0.string("target"), try $0.string("detail")]
                }
            }
            #expect(audit == [["ana", "acknowledge", "discrepancy \(id)", "refunded by hand"]])
            // `payrecon explain` shows who acknowledged it, from where, and why.
            let explained = try await offload {
                let conn = try h.db.connect()
                defer { conn.close() }
                return try ExplainStore.explain(.discrepancy(id), on: conn)
            }
            #expect(
                explained.table().contains("acknowledged by ana in the console from 127.0.0.1: refunded by hand"), "\(explained.table())")
            let json = String(decoding: explained.json(), as: UTF8.self)
            #expect(json.contains(#""event":"discrepancy_acknowledged""#) && json.contains(#""console_address":"127.0.0.1""#), "\(json)")

            let out = try await h.post("/logout", [("csrf", csrf)], cookie: cookie)
            #expect(out.status == 303 && out.headers["location"] == "/login")
            #expect(try await h.get("/", cookie: cookie).status == 303, "the session is over")
        }
    }

    @Test func aViewerReadsAndCannotWrite() async throws {
        try await Self.with { h, id in
            let (cookie, csrf) = try await h.signIn("vic", "vic's long password")
            let page = try await h.get("/discrepancies/\(id)", cookie: cookie)
            #expect(page.status == 200 && !page.text.contains(#"action="/discrepancies/\#(id)/ack""#))
            let crafted = try await h.post("/discrepancies/\(id)/ack", [("csrf", csrf), ("note", "sneaky")], cookie: cookie)
            #expect(crafted.status == 403)
            #expect(try await Self.status(h, id) == "open")
        }
    }

    /// Five wrong passwords for a name: the sixth try is refused without checking, right password or not.
    @Test func repeatedWrongPasswordsAreLimited() async throws {
        try await Self.with { h, _ in
            for _ in 0..<5 { #expect(try await h.post("/login", [("name", "ana"), ("password", "wrong wrong wrong")]).status == 401) }
            let limited = try await h.post("/login", [("name", "ana"), ("password", "ana's long password")])
            #expect(limited.status == 429 && limited.text.contains("Too many failed sign-ins") && limited.headers["retry-after"] != nil)
        }
    }

    /// Behind a TLS proxy the cookie is Secure and `__Host-` (sent over HTTPS only, and no other site can plant one).
    @Test func behindAProxyTheCookieIsSecureAndHostOnly() async throws {
        try await Self.with({ $0.secureCookies = true }) { h, _ in
            let answer = try await h.post("/login", [("name", "ana"), ("password", "ana's long password")])
            let setCookie = try #require(answer.headers["set-cookie"])
            #expect(
                setCookie.hasPrefix("__Host-payrecon_console=") && setCookie.contains("; Secure") && setCookie.contains("Path=/")
                    && !setCookie.contains("Domain"), "\(setCookie)")
            let cookie = String(setCookie.split(separator: ";")[0])
            #expect(try await h.get("/", cookie: cookie).status == 200)
            #expect(
                try await h.get("/", cookie: "payrecon_console=" + cookie.split(separator: "=")[1]).status == 303, "only the __Host- name")
        }
    }

    /// On loopback, a page that rebinds its own name to 127.0.0.1 reaches the console under that name: refused (421);
    /// the loopback names and those listed are answered.
    @Test func onLoopbackOnlyLoopbackNamesAreAnswered() async throws {
        try await Self.with({ $0.allowedHosts = ["console.internal"] }) { h, _ in
            let curl = CurlHTTPClient(configuration: .init(timeout: .seconds(10)))
            let port = h.base.split(separator: ":").last!
            func status(_ host: String) async throws -> Int {
                try await curl.send(HTTPClientRequest(method: "GET", url: h.base + "/login", headers: [("Host", host)])).status
            }
            let answers = [
                try await status("evil.example:\(port)"), try await status("127.0.0.1.evil.example"),
                try await status("127.0.0.1:\(port)"), try await status("localhost:\(port)"), try await status("Console.Internal:\(port)")
            ]
            #expect(answers == [421, 421, 200, 200, 200])
        }
    }

    /// A form another site's page sends through a signed-in browser is refused, token or not; so is a sign-in from one
    /// (login CSRF).
    @Test func aFormFromAnotherSiteIsRefused() async throws {
        try await Self.with { h, id in
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let evil = try await h.post(
                "/discrepancies/\(id)/ack", [("csrf", csrf)], cookie: cookie, headers: [("Origin", "https://evil.example")])
            #expect(evil.status == 403)
            let fetched = try await h.post(
                "/discrepancies/\(id)/ack", [("csrf", csrf)], cookie: cookie, headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(fetched.status == 403)
            let login = try await h.post(
                "/login", [("name", "ana"), ("password", "ana's long password")], headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(login.status == 403 && login.headers["set-cookie"] == nil)
            #expect(try await Self.status(h, id) == "open")
            let host = String(h.base.dropFirst("http://".count))
            let same = try await h.post(
                "/discrepancies/\(id)/ack", [("csrf", csrf)], cookie: cookie, headers: [("Origin", "http://" + host)])
            #expect(same.status == 303, "the console's own origin")
            let browser = try await h.post(
                "/discrepancies/\(id)/ack", [("csrf", csrf)], cookie: cookie,
                headers: [("Origin", "null"), ("Sec-Fetch-Site", "same-origin")])
            #expect(
                browser.status == 409, "a browser under no-referrer sends Origin: null and says same-origin (already acknowledged: 409)")
        }
    }

    /// A note with a control character (a NUL PostgreSQL text cannot hold) is refused with what to do, not blamed on
    /// the database.
    @Test func aNoteWithAControlCharacterIsRefused() async throws {
        try await Self.with { h, id in
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let answer = try await h.post("/discrepancies/\(id)/ack", [("csrf", csrf), ("note", "a\u{0}b")], cookie: cookie)
            #expect(answer.status == 400 && answer.text.contains("control character"), "\(answer.status) \(answer.text.prefix(300))")
            #expect(try await Self.status(h, id) == "open")
        }
    }

    /// A new password (the users file read again) ends the sessions opened with the old one; a removed person's too.
    @Test func aNewPasswordEndsTheSessionsOfTheOldOne() async throws {
        try await Self.with { h, _ in
            let (cookie, _) = try await h.signIn("ana", "ana's long password")
            #expect(try await h.get("/", cookie: cookie).status == 200)
            var users = try Self.users()
            users.put(
                ConsoleUser(
                    name: "ana", role: .operator,
                    passwordHash: try PasswordHash.make(Array("a new long password".utf8), parameters: Self.cheap)))
            h.console.replaceUsers(users)
            #expect(try await h.get("/", cookie: cookie).status == 303, "signed out by the new password")
            let (vic, _) = try await h.signIn("vic", "vic's long password")
            h.console.replaceUsers(ConsoleUsers(users.users.filter { $0.name != "vic" }))
            #expect(try await h.get("/", cookie: vic).status == 303, "signed out by leaving the file")
        }
    }

    /// Behind a trusted proxy the person's address is the forwarded one: the audit trail names it, and the sign-in
    /// limit counts it, not the proxy's.
    @Test func behindATrustedProxyTheForwardedAddressIsThePersons() async throws {
        let secret = ("X-Payrecon-Proxy-Secret", String(repeating: "p", count: 40))
        try await Self.with({
            $0.trustedProxies = [try AddressRange("127.0.0.0/8")]
            $0.proxySecret = Array(secret.1.utf8)
        }) { h, id in
            // Without the proxy's secret, X-Forwarded-For is anyone's word (every process on the proxy's host connects
            // from its address): a page rotating it would sign in past the limits. The peer's address counts.
            for i in 0..<5 {
                _ = try await h.post(
                    "/login", [("name", "vic"), ("password", "wrong \(i)")], headers: [("X-Forwarded-For", "192.0.2.\(i)")])
            }
            let rotated = try await h.post(
                "/login", [("name", "vic"), ("password", "vic's long password")], headers: [("X-Forwarded-For", "192.0.2.99")])
            #expect(rotated.status == 429, "five tries from 127.0.0.1, whatever they said")
            for i in 0..<5 {
                _ = try await h.post(
                    "/login", [("name", "ana"), ("password", "wrong \(i)")], headers: [("X-Forwarded-For", "203.0.113.7"), secret])
            }
            let limited = try await h.post(
                "/login", [("name", "ana"), ("password", "ana's long password")], headers: [("X-Forwarded-For", "203.0.113.7"), secret])
            #expect(limited.status == 429, "203.0.113.7 tried ana five times")
            let elsewhere = try await h.post(
                "/login", [("name", "ana"), ("password", "ana's long password")], headers: [("X-Forwarded-For", "198.51.100.4"), secret])
            #expect(elsewhere.status == 303, "ana from her own address is not locked out")
            let cookie = String(try #require(elsewhere.headers["set-cookie"]).split(separator: ";")[0])
            let page = try await h.get("/discrepancies/\(id)", cookie: cookie)
            let csrf = try #require(Harness.csrf(in: page.text))
            _ = try await h.post(
                "/discrepancies/\(id)/ack", [("csrf", csrf)], cookie: cookie, headers: [("X-Forwarded-For", "198.51.100.4"), secret])
            let after = try await h.get("/discrepancies/\(id)", cookie: cookie)
            #expect(after.text.contains("ana acknowledge from 198.51.100.4"), "\(after.text.suffix(800))")
        }
    }

    static func status(_ h: Harness, _ id: Int64) async throws -> String {
        try await offload {
            let conn = try h.db.connect()
            defer { conn.close() }
            return try conn.query("SELECT status FROM discrepancies WHERE id = \(.int64(id))").first!.string("status")
        }
    }
}
