import Console
import Foundation
import HTTP
import Observability
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Synchronization
import Testing

/// The console's other pages over real HTTP and PostgreSQL: actions (and their retry), deliveries (and retrying a
/// dead one), an order, rejections (and their download for `payrecon verify`), settlement, and the overview's charts.
@Suite("Console pages", .serialized) struct ConsolePagesTests {
    typealias Harness = ConsoleServerTests.Harness

    static func run(_ h: Harness, _ statements: String...) async throws {
        try await offload {
            let conn = try h.db.connect()
            defer { conn.close() }
            for statement in statements { _ = try conn.execute(statement) }
        }
    }

    static func one(_ h: Harness, _ query: String) async throws -> String? {
        try await offload {
            let conn = try h.db.connect()
            defer { conn.close() }
            return try conn.query(query).first?.optionalString("v")
        }
    }

    static let failedAction = """
        INSERT INTO actions (id, provider, order_id, action, amount_minor, currency, target_minor, idempotency_key, status, attempts,
                             last_error, in_doubt)
        VALUES (41, 'paypal', 'O-1', 'capture', 7500, 'USD', 7500, 'paypal:O-1:capture:7500', 'failed', 1,
                'provider answered 403: <b>NOT_AUTHORIZED</b>', false),
               (42, 'pxp', 'O-2', 'refund', 1000, 'EUR', 1000, 'pxp:O-2:refund:1000', 'failed', 3, 'no answer', true)
        """

    /// A failed action is retried by the executor the console is given (the same code as `payrecon actions retry`);
    /// the console only asks, records who asked and what came of it, and insists on a check at the provider first
    /// when the last call's outcome is unknown.
    @Test func anOperatorRetriesAFailedActionAndIsRecorded() async throws {
        let asked = Mutex<[Int64]>([])
        try await ConsoleServerTests.with({
            $0.retryAction = { id, _ in
                asked.withLock { $0.append(id) }
                return id == 41 ? .retired("planned again under a key of its own") : .pending(amount: 1000)
            }
        }) { h, _ in
            try await Self.run(h, Self.failedAction)
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let list = try await h.get("/actions?status=failed", cookie: cookie)
            #expect(list.status == 200 && list.text.contains("/actions/41\"") && list.text.contains("/actions/42\""))
            #expect(list.text.contains("&lt;b&gt;NOT_AUTHORIZED&lt;/b&gt;"), "a provider's words are text")
            let inDoubt = try await h.get("/actions?status=in_doubt", cookie: cookie)
            #expect(inDoubt.text.contains("/actions/42\"") && !inDoubt.text.contains("/actions/41\""))
            let page = try await h.get("/actions/41", cookie: cookie)
            #expect(page.status == 200 && page.text.contains(#"action="/actions/41/retry""#) && page.text.contains("75.00 USD"))
            #expect(page.text.contains("/order?provider=paypal&amp;id=O-1"))

            // Without the attempt looked at, or with an older one: refused (it was tried again since).
            #expect(try await h.post("/actions/41/retry", [("csrf", csrf)], cookie: cookie).status == 409)
            let stale = try await h.post("/actions/41/retry", [("csrf", csrf), ("attempts", "0")], cookie: cookie)
            #expect(stale.status == 409 && stale.text.contains("tried again since you opened it"))
            #expect(asked.withLock { $0 }.isEmpty)
            let retried = try await h.post("/actions/41/retry", [("csrf", csrf), ("attempts", "1")], cookie: cookie)
            #expect(retried.status == 303 && retried.headers["location"] == "/actions/41")
            let after = try await h.get("/actions/41", cookie: cookie)
            #expect(after.text.contains("ana retry from 127.0.0.1: superseded: planned again under a key of its own"), "\(after.text)")

            // The last call's outcome is unknown: not without the operator's word that it was checked at the provider.
            let unchecked = try await h.post("/actions/42/retry", [("csrf", csrf), ("attempts", "3")], cookie: cookie)
            #expect(unchecked.status == 409 && unchecked.text.contains("check at pxp that it was not applied"))
            #expect(asked.withLock { $0 } == [41])
            let checked = try await h.post("/actions/42/retry", [("csrf", csrf), ("attempts", "3"), ("checked", "yes")], cookie: cookie)
            #expect(checked.status == 303)
            #expect(asked.withLock { $0 } == [41, 42])
            let trail = try await Self.one(h, "SELECT detail AS v FROM console_audit WHERE target = 'action 42'")
            #expect(trail == "checked at the provider that attempt 3 was not applied; pending again: 10.00 EUR")
            #expect(try await h.post("/actions/999/retry", [("csrf", csrf)], cookie: cookie).status == 404)
        }
    }

    /// A retry the executor ran but could not complete is answered as every write is, with a redirect (a reload of
    /// the page does not send it again): the page it leads to says what came of it, read from the audit trail, to the
    /// person who asked only.
    @Test func aRetryThatIsNotCompletedRedirectsAndThePageSaysWhy() async throws {
        try await ConsoleServerTests.with({
            $0.retryAction = { id, _ in id == 41 ? .notNow("paypal is out of reach <now>") : .notFailed("action 42 is pending, not failed")
            }
        }) { h, _ in
            try await Self.run(h, Self.failedAction)
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let notNow = try await h.post("/actions/41/retry", [("csrf", csrf), ("attempts", "1")], cookie: cookie)
            let record = try #require(try await Self.one(h, "SELECT id::text AS v FROM console_audit WHERE target = 'action 41'"))
            #expect(notNow.status == 303 && notNow.headers["location"] == "/actions/41?retry=\(record)", "\(notNow.status) \(notNow.text)")
            let page = try await h.get("/actions/41?retry=\(record)", cookie: cookie)
            #expect(page.status == 200 && page.text.contains("class=\"error\""), "\(page.text)")
            #expect(page.text.contains("was not completed: paypal is out of reach &lt;now&gt;."), "\(page.text)")
            // The same record on another action's page, or for another person, says nothing.
            try await Self.run(h, "UPDATE actions SET attempts = 3, in_doubt = false WHERE id = 42")
            #expect(!(try await h.get("/actions/42?retry=\(record)", cookie: cookie).text.contains("Your retry")))
            let (viewer, _) = try await h.signIn("vic", "vic's long password")
            #expect(!(try await h.get("/actions/41?retry=\(record)", cookie: viewer).text.contains("Your retry")))
            #expect(!(try await h.get("/actions/41?retry=x", cookie: cookie).text.contains("Your retry")))
            let notFailed = try await h.post("/actions/42/retry", [("csrf", csrf), ("attempts", "3")], cookie: cookie)
            #expect(notFailed.status == 303 && notFailed.headers["location"]?.hasPrefix("/actions/42?retry=") == true)
            let said = try await h.get(try #require(notFailed.headers["location"]), cookie: cookie)
            #expect(said.text.contains("was not completed: action 42 is pending, not failed."), "\(said.text)")
            // A later retry of the action, or a quarter of an hour, and the old record says nothing more.
            let again = try await h.post("/actions/41/retry", [("csrf", csrf), ("attempts", "1")], cookie: cookie)
            let newer = try #require(again.headers["location"])
            #expect(newer != "/actions/41?retry=\(record)")
            #expect(!(try await h.get("/actions/41?retry=\(record)", cookie: cookie).text.contains("Your retry")))
            #expect(try await h.get(newer, cookie: cookie).text.contains("Your retry"))
            try await Self.run(h, "UPDATE console_audit SET at = at - interval '16 minutes' WHERE target = 'action 41'")
            #expect(!(try await h.get(newer, cookie: cookie).text.contains("Your retry")))
        }
    }

    @Test func aViewerCannotRetryAndAConsoleWithoutCredentialsSaysWhy() async throws {
        try await ConsoleServerTests.with { h, _ in
            try await Self.run(h, Self.failedAction)
            let (viewer, viewerCSRF) = try await h.signIn("vic", "vic's long password")
            #expect(!(try await h.get("/actions/41", cookie: viewer).text.contains("/actions/41/retry")))
            #expect(try await h.post("/actions/41/retry", [("csrf", viewerCSRF)], cookie: viewer).status == 403)
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let answer = try await h.post("/actions/41/retry", [("csrf", csrf), ("attempts", "1")], cookie: cookie)
            #expect(answer.status == 503 && answer.text.contains("no provider API credentials") && answer.text.contains("actions retry 41"))
            #expect(try await Self.one(h, "SELECT status AS v FROM actions WHERE id = 41") == "failed")
        }
    }

    /// A dead delivery: its headers as stored (a credential header hidden), its body as text, and retry, which makes
    /// it due again once and is recorded.
    @Test func aDeadDeliveryIsShownAndRetriedOnce() async throws {
        try await ConsoleServerTests.with { h, _ in
            try await Self.run(
                h,
                """
                INSERT INTO deliveries (id, provider, dedupe_key, event_type, headers, body, status, attempts, last_error)
                VALUES (7, 'pxp', 'k-7', 'Authorisation', '[["x-signature", "abc"], ["Authorization", "Basic c2VjcmV0"]]',
                        convert_to('{"note": "<img src=x onerror=alert(1)>"}', 'UTF8'), 'dead', 8, 'out of attempts'),
                       (8, 'pxp', 'k-8', 'Authorisation', '[]', '\\x7b7d', 'done', 1, NULL)
                """,
                "INSERT INTO delivery_orders VALUES (7, 'pxp', 'O-1')")
            let (cookie, csrf) = try await h.signIn("ana", "ana's long password")
            let dead = try await h.get("/deliveries?status=dead", cookie: cookie)
            #expect(dead.text.contains("/deliveries/7\"") && !dead.text.contains("/deliveries/8\""))
            let page = try await h.get("/deliveries/7", cookie: cookie)
            #expect(
                page.status == 200 && page.text.contains("abc") && !page.text.contains("c2VjcmV0") && page.text.contains("<i>hidden</i>"))
            #expect(page.text.contains("&lt;img src=x onerror=alert(1)&gt;") && !page.text.contains("<img"))
            #expect(page.text.contains("/order?provider=pxp&amp;id=O-1"))
            let retried = try await h.post("/deliveries/7/retry", [("csrf", csrf)], cookie: cookie)
            #expect(retried.status == 303)
            #expect(try await Self.one(h, "SELECT status || ' ' || attempts AS v FROM deliveries WHERE id = 7") == "pending 0")
            let again = try await h.post("/deliveries/7/retry", [("csrf", csrf)], cookie: cookie)
            #expect(again.status == 409 && again.text.contains("only a dead delivery"))
            #expect(try await h.post("/deliveries/8/retry", [("csrf", csrf)], cookie: cookie).status == 409)
            #expect(try await h.post("/deliveries/9/retry", [("csrf", csrf)], cookie: cookie).status == 404)
            #expect(try await Self.one(h, "SELECT count(*)::text AS v FROM console_audit WHERE target = 'delivery 7'") == "1")
        }
    }

    @Test func anOrdersPageHoldsItsDiscrepanciesAndTimeline() async throws {
        try await ConsoleServerTests.with { h, id in
            let (cookie, _) = try await h.signIn("vic", "vic's long password")
            let page = try await h.get("/order?provider=pxp&id=O-1", cookie: cookie)
            #expect(page.status == 200 && page.text.contains("/discrepancies/\(id)\"") && page.text.contains("pre class=\"timeline\""))
            #expect(!page.text.contains("<script>alert"), "a provider's words are text")
            #expect(try await h.get("/order?provider=pxp&id=O-404", cookie: cookie).status == 404)
            #expect(try await h.get("/order?provider=nope&id=O-1", cookie: cookie).status == 404)
            #expect(try await h.get("/order", cookie: cookie).status == 404)
        }
    }

    /// A rejected delivery's sample, with its body and headers as the files `payrecon verify` reads.
    @Test func aRejectionIsShownAndDownloadedForVerify() async throws {
        try await ConsoleServerTests.with { h, _ in
            try await Self.run(
                h,
                """
                INSERT INTO rejected_deliveries (id, provider, reason, message, headers, body_prefix, body_bytes, remote_addr)
                VALUES (5, 'paypercut', 'invalid_signature', 'no v1 matches', '[["paypercut-signature", "t=1,v1=ab"]]',
                        convert_to('<svg onload=alert(1)>', 'UTF8'), 21, '203.0.113.9')
                """,
                "INSERT INTO rejection_counts VALUES ('paypercut', 'invalid_signature', '203.0.113.9', date_trunc('hour', now()), 3)")
            let (cookie, _) = try await h.signIn("vic", "vic's long password")
            let list = try await h.get("/rejections", cookie: cookie)
            #expect(list.status == 200 && list.text.contains("/rejections/5\"") && list.text.contains("<td class=\"num\">3</td>"))
            let page = try await h.get("/rejections/5", cookie: cookie)
            #expect(page.text.contains("&lt;svg onload=alert(1)&gt;") && page.text.contains("payrecon verify paypercut --body body"))
            let body = try await h.get("/rejections/5/body", cookie: cookie)
            #expect(body.status == 200 && body.text == "<svg onload=alert(1)>")
            #expect(
                body.headers["content-disposition"] == "attachment; filename=\"body\""
                    && body.headers["x-content-type-options"] == "nosniff")
            let headers = try await h.get("/rejections/5/headers.json", cookie: cookie)
            let object = try JSONSerialization.jsonObject(with: Data(headers.body)) as? [String: String]
            #expect(object == ["paypercut-signature": "t=1,v1=ab"])
            #expect(try await h.get("/rejections/5/other", cookie: cookie).status == 404)
            #expect(try await h.get("/rejections/5/body").status == 303, "no download without a session")
        }
    }

    /// The overview's 30-day chart reads the money at risk each nightly run recorded as it finished; the deliveries
    /// chart counts each hour by how deliveries ended; the settlement page lists files and backfill windows.
    @Test func theOverviewChartsWhatRunsRecordedAndTheSettlementPageListsFiles() async throws {
        try await ConsoleServerTests.with { h, _ in
            let run = try await offload {
                let conn = try h.db.connect()
                defer { conn.close() }
                let id = try RunStore.start(options: "{}", on: conn)
                try RunStore.finish(id: id, totals: .init(), errors: [], exitCode: 1, on: conn)
                return try conn.query("SELECT at_risk::text AS v FROM runs WHERE id = \(.int64(id))").first?.string("v")
            }
            #expect(run == #"{"EUR": "1500"}"#, "the run recorded the open money at risk, each order once")
            try await Self.run(
                h,
                """
                INSERT INTO deliveries (provider, dedupe_key, headers, body, status, outcome)
                VALUES ('pxp', 'a', '[]', '\\x00', 'done', 're-checked pxp order O-1'), ('pxp', 'b', '[]', '\\x00', 'ignored', 'account.updated names no payment'),
                       ('pxp', 'c', '[]', '\\x00', 'dead', NULL)
                """,
                """
                INSERT INTO settlement_files (provider, sha256, name, kind, body_rows, lines_new, problems)
                VALUES ('paypal', '\\x01', 'STL-20261207.01.009.CSV', 'STL', 12, 10, '{"the totals do not add up"}')
                """,
                """
                INSERT INTO backfill_windows (provider, source, window_start, window_end, found, requests)
                VALUES ('paypal', 'webhook events', now() - interval '2 days', now() - interval '1 day', 4, 2)
                """)
            let (cookie, _) = try await h.signIn("vic", "vic's long password")
            let overview = try await h.get("/", cookie: cookie)
            #expect(overview.text.contains(#"aria-label="Money at risk in EUR, the last 30 days, at most 15.00 EUR""#), "\(overview.text)")
            #expect(overview.text.contains("Deliveries per hour, the last 24 hours: done 1, ignored 1, pending 0, dead 1, rejected 0"))
            #expect(overview.text.contains("checked 0") && overview.text.contains("STL-20261207.01.009.CSV"))
            let settlement = try await h.get("/settlement", cookie: cookie)
            #expect(settlement.text.contains("the totals do not add up") && settlement.text.contains("webhook events"))
        }
    }

    /// The overview's long poll is answered when a delivery is stored (the receiver's NOTIFY wakes the console's
    /// watcher, which reads the figures once), long before its timer; a page left open does not keep its session
    /// alive, and without one the poll is 401.
    @Test func theOverviewsPollIsAnsweredWhenADeliveryIsNotified() async throws {
        try await ConsoleServerTests.with({ $0.refreshInterval = .seconds(120) }) { h, _ in
            // The harness has no LISTEN URL; the second console here has, and the same database.
            var configuration = ConsoleServer.Configuration(host: "127.0.0.1", port: 0, users: try ConsoleServerTests.users())
            configuration.listenURL = h.db.url
            configuration.refreshInterval = .seconds(120)
            let console = ConsoleServer(configuration: configuration, pool: h.pool, logger: Logger())
            let port = try console.start()
            defer { console.stop() }
            let other = Harness(db: h.db, pool: h.pool, console: console, base: "http://127.0.0.1:\(port)")
            let (cookie, _) = try await other.signIn("vic", "vic's long password")
            // The page's stamp, once the watcher has read the same figures (asked since another stamp, the poll
            // answers at once with the one it holds).
            var stamp = "", held = ""
            for _ in 0..<50 {
                let overview = try await other.get("/", cookie: cookie).text
                stamp = overview.range(of: #"data-live=""#).map { String(overview[$0.upperBound...].prefix { $0 != "\"" }) } ?? ""
                held = try await other.get("/live?since=none", cookie: cookie).text
                if held == stamp { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(!stamp.isEmpty && held == stamp, "the watcher read the figures at start")
            let clock = ContinuousClock()
            let asked = clock.now
            let since = stamp
            async let answer = other.get("/live?since=\(since)", cookie: cookie)
            try await Task.sleep(for: .milliseconds(300))
            try await Self.run(
                h, "INSERT INTO deliveries (provider, dedupe_key, headers, body, status) VALUES ('pxp', 'n-1', '[]', '\\x7b7d', 'dead')",
                "SELECT pg_notify('payrecon_deliveries', '')")
            let moved = try await answer
            #expect(moved.status == 200 && moved.text != stamp && !moved.text.isEmpty)
            #expect(asked.duration(to: clock.now) < .seconds(15), "woken by the NOTIFY, not the 120 s timer")
            #expect(try await h.get("/live?since=x").status == 401)
            let seen = try await Self.one(h, "SELECT last_seen::text AS v FROM console_sessions WHERE user_name = 'vic'")
            _ = try await other.get("/live?since=none", cookie: cookie)
            #expect(try await Self.one(h, "SELECT last_seen::text AS v FROM console_sessions WHERE user_name = 'vic'") == seen)
        }
    }

    /// Behind an authenticating proxy the person is the one its header names, from the proxy's address only, and only
    /// when the users file lists them (their role from there); another person's session in the browser ends.
    @Test func aProxyNamesThePersonFromItsAddressOnly() async throws {
        let secret = ("X-Payrecon-Proxy-Secret", String(repeating: "s3", count: 20))
        try await ConsoleServerTests.with({
            $0.trustedProxies = [try AddressRange("127.0.0.0/8")]
            $0.userHeader = "x-forwarded-user"
            $0.proxySecret = Array(secret.1.utf8)
        }) { h, _ in
            // Any other process on the proxy's host connects from its address too: without the proxy's secret (or with
            // a wrong one, or two) the header is ignored.
            for headers in [
                [("X-Forwarded-User", "ana")], [("X-Forwarded-User", "ana"), (secret.0, "wrong")],
                [("X-Forwarded-User", "ana"), secret, secret]
            ] {
                let forged = try await h.http.send(HTTPClientRequest(method: "GET", url: h.base + "/", headers: headers))
                #expect(forged.status == 303 && forged.headers["location"] == "/login", "\(headers)")
            }
            let twice = try await h.http.send(
                HTTPClientRequest(
                    method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "ana"), ("X-Forwarded-User", "vic"), secret]))
            #expect(twice.status == 400 && twice.headers["set-cookie"] == nil)
            let signedIn = try await h.http.send(
                HTTPClientRequest(method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "Ana"), secret]))
            #expect(signedIn.status == 200 && signedIn.text.contains("ana (operator)"))
            let cookie = String(try #require(signedIn.headers["set-cookie"]).split(separator: ";")[0])
            let again = try await h.get("/", cookie: cookie)
            #expect(again.status == 200 && again.headers["set-cookie"] == nil, "the cookie carries the session on")
            let stranger = try await h.http.send(
                HTTPClientRequest(method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "mallory"), secret]))
            #expect(stranger.status == 403 && stranger.text.contains("does not list") && stranger.headers["set-cookie"] == nil)
            let switched = try await h.http.send(
                HTTPClientRequest(method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "vic"), ("Cookie", cookie), secret]))
            #expect(switched.status == 200 && switched.text.contains("vic (viewer)"))
            #expect(try await h.get("/", cookie: cookie).status == 303, "ana's session ended when the proxy named vic")
            let how = try await Self.one(h, "SELECT string_agg(user_name || ': ' || detail, ', ' ORDER BY id) AS v FROM console_audit")
            #expect(how == "ana: named by the proxy's x-forwarded-user, vic: named by the proxy's x-forwarded-user")
        }
        // A person listed with no password (`add-user --proxy-only`) signs in through the proxy, and never with a password.
        try await ConsoleServerTests.with({
            $0.trustedProxies = [try AddressRange("127.0.0.0/8")]
            $0.userHeader = "x-forwarded-user"
            $0.proxySecret = Array(secret.1.utf8)
            $0.users.put(ConsoleUser(name: "pia", role: .viewer, passwordHash: nil))
        }) { h, _ in
            let named = try await h.http.send(
                HTTPClientRequest(method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "pia"), secret]))
            #expect(named.status == 200 && named.text.contains("pia (viewer)"))
            for password in ["", "proxy", "pia's long password"] {
                let refused = try await h.post("/login", [("name", "pia"), ("password", password)])
                #expect(refused.status == 401 && refused.headers["set-cookie"] == nil, "password \(password.debugDescription)")
            }
            // A console started without the proxy's header (on the same database) ends the session the proxy opened.
            let cookie = String(try #require(named.headers["set-cookie"]).split(separator: ";")[0])
            #expect(try await h.get("/", cookie: cookie).status == 200)
            var plain = ConsoleServer.Configuration(host: "127.0.0.1", port: 0, users: try ConsoleServerTests.users())
            plain.users.put(ConsoleUser(name: "pia", role: .viewer, passwordHash: nil))
            let other = ConsoleServer(configuration: plain, pool: h.pool, logger: Logger())
            let port = try other.start()
            defer { other.stop() }
            let ended = try await h.http.send(
                HTTPClientRequest(method: "GET", url: "http://127.0.0.1:\(port)/", headers: [("Cookie", cookie)]))
            #expect(ended.status == 303 && ended.headers["location"] == "/login")
        }
        // From an address that is not the proxy's, the header is anyone's words: ignored.
        try await ConsoleServerTests.with({
            $0.trustedProxies = [try AddressRange("10.0.0.0/8")]
            $0.userHeader = "x-forwarded-user"
            $0.proxySecret = Array(secret.1.utf8)
        }) { h, _ in
            let ignored = try await h.http.send(
                HTTPClientRequest(method: "GET", url: h.base + "/", headers: [("X-Forwarded-User", "ana"), secret]))
            #expect(ignored.status == 303 && ignored.headers["location"] == "/login")
        }
    }
}
