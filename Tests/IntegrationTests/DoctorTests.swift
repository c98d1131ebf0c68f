import PayreconTesting
import Foundation
@_spi(Positional) import Postgres
import Providers
import Store
import Testing

/// `payrecon doctor` as operators run it: the built binary against a throwaway schema and paysim over real HTTP,
/// paysim answering each probe as the provider would (401 for bad credentials, 404 for unknown ids, 403 without the
/// disputes permission, its test CA's leaf at the cert URL). One test at a time: each runs the binary, and ten
/// processes at once on two cores would starve the suites beside it that time leases.
@Suite(.serialized) struct DoctorTests {
    /// One doctor run: its exit code and its lines by check name.
    struct Run {
        var result: PayreconProcess.Result
        var status: Int32 { result.status }
        var lines: [String] { result.stdout.split(separator: "\n").map(String.init) }

        /// The line of `check` (`ok   pxp credentials: …`), or "" when there is none.
        func line(_ check: String) -> String {
            lines.first { $0.dropFirst(5).hasPrefix(check + ":") || $0.dropFirst(5) == check } ?? ""
        }
        var failed: [String] { lines.filter { $0.hasPrefix("FAIL ") } }
        var description: String { "exit \(status)\n" + result.stdout + result.stderr }
    }

    static let checks = [
        "database reachable", "database migrated", "pxp credentials", "paypal credentials",
        "paypal disputes permission", "paypal certificate of the last stored delivery", "paypercut credentials"
    ]

    /// Every provider configured against `h`'s paysim, PayPal deliveries verified against paysim's test CA.
    static func environment(_ h: WorkerHarness, roots: String) -> [String: String] {
        var env = h.payreconEnvironment
        let config = h.simulator.config
        env["PAYPERCUT_API_BASE_URL"] = h.paysimURL
        env["PAYPERCUT_SECRET_KEY"] = config.paypercutSecretKey
        env["PAYPAL_CERT_URL_PREFIXES"] = h.paysimURL + "/v1/notifications/certs/"
        env["PAYPAL_TRUST_ROOTS"] = roots
        return env
    }

    /// paysim's root and intermediate, as `paysim --paypal-root-out` writes them.
    static func paysimRoots() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("doctor-roots-\(UUID().uuidString).pem").path
        try WorkerHarness.ca.trustBundlePEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// PayPal's own DigiCert roots, shipped with payrecon: paysim's leaf does not chain to them.
    static let digiCertRoots = PayreconProcess.packageRoot.appendingPathComponent("certs/paypal-trust-roots.pem").path

    static func doctor(_ env: [String: String], _ arguments: [String] = []) async throws -> Run {
        Run(result: try await PayreconProcess.run(["doctor"] + arguments, environment: env))
    }

    /// A PXP order (so PXP is probed at its merchant and site) and a PayPal delivery as paysim signs them (its
    /// PAYPAL-CERT-URL names paysim's leaf).
    static func seed(_ h: WorkerHarness) async throws {
        try h.insert(WorkerHarness.order(.pxp, "ORD-1", ref: "TX-1"))
        try await h.seedPayPal(
            #"{"id":"PP-1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"10.00","captures":[{"id":"CAP-1"}]}"#)
        try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-1"}"#)
    }

    @Test func everyCheckPassesAgainstPaysim() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            let run = try await Self.doctor(Self.environment(h, roots: roots))
            #expect(run.status == 0, "\(run.description)")
            for check in Self.checks { #expect(run.line(check).hasPrefix("ok   "), "\(check): \(run.description)") }
            #expect(
                run.line("pxp credentials").contains("merchant M1, site S1"), "probed at the latest order's merchant: \(run.description)")
            #expect(run.line("pxp credentials").contains("404"))
            #expect(run.line("paypercut credentials").contains("404 resource_missing"))
            #expect(run.line("paypal certificate of the last stored delivery").contains(h.simulator.certURL), "\(run.description)")
            #expect(run.lines.last?.hasPrefix("doctor: 7 ok, 0 failed") == true, "\(run.description)")
            // Secrets are never printed.
            let config = h.simulator.config
            for secret in [config.pxpTokenValue, config.paypalSecret, config.paypercutSecretKey] {
                #expect(!run.result.stdout.contains(secret) && !run.result.stderr.contains(secret))
            }
            // Nothing was moved: paysim logged no capture, void, refund or modification.
            #expect(try await h.paysimLog().isEmpty)
        }
    }

    /// A wrong PXP-UST1 token value: PXP answers 401 on the signature, and the line says what to check and that the
    /// signing itself is the other suspect.
    @Test func badPXPCredentialsAre401() async throws {
        try await WorkerHarness.with { h in
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            env["PXP_TOKEN_VALUE"] = "not-the-token-value"
            let run = try await Self.doctor(env)
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("pxp credentials")
            #expect(line.hasPrefix("FAIL "), "\(run.description)")
            #expect(line.contains("answered 401") && line.contains("signature does not match"), "\(line)")
            #expect(line.contains("PXP_TOKEN_VALUE") && line.contains("PXP-11"), "\(line)")
            #expect(run.failed.count == 1, "only PXP fails: \(run.description)")
            // No PayPal delivery is stored: the certificate check waits for the first one, and does not fail.
            #expect(run.line("paypal certificate of the last stored delivery").hasPrefix("skip "), "\(run.description)")
        }
    }

    @Test func badPayPalSecretIs401() async throws {
        try await WorkerHarness.with { h in
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            env["PAYPAL_CLIENT_SECRET"] = "not-the-secret"
            let run = try await Self.doctor(env, ["--provider", "paypal"])
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("paypal credentials")
            #expect(line.hasPrefix("FAIL ") && line.contains("401") && line.contains("invalid_client"), "\(run.description)")
            #expect(line.contains("PAYPAL_CLIENT_SECRET"), "\(line)")
            #expect(run.line("paypal disputes permission").hasPrefix("skip "), "no token, nothing to ask: \(run.description)")
            #expect(run.line("pxp credentials").isEmpty, "--provider paypal checks only PayPal: \(run.description)")
        }
    }

    @Test func badPaypercutKeyIs401() async throws {
        try await WorkerHarness.with { h in
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            env["PAYPERCUT_SECRET_KEY"] = "sk_test_wrong"
            let run = try await Self.doctor(env, ["--provider", "paypercut"])
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("paypercut credentials")
            #expect(
                line.hasPrefix("FAIL ") && line.contains("401") && line.contains("token_invalid") && line.contains("PAYPERCUT_SECRET_KEY"),
                "\(run.description)")
            #expect(!run.result.stdout.contains("sk_test_wrong"), "the key is not echoed")
        }
    }

    @Test func disputesPermissionOffIs403NamingTheScope() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            try await h.admin("/admin/paypal/permissions", #"{"disputes":false}"#)
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            let run = try await Self.doctor(Self.environment(h, roots: roots))
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("paypal disputes permission")
            #expect(line.hasPrefix("FAIL ") && line.contains("403"), "\(run.description)")
            #expect(line.contains("https://uri.paypal.com/services/disputes/read-seller"), "\(line)")
            #expect(run.failed.count == 1, "the credentials still pass: \(run.description)")
            #expect(run.line("paypal credentials").hasPrefix("ok   "))
        }
    }

    /// With PAYRECON_BACKFILL naming PayPal, doctor checks the Transaction Search permission too: ok with it, 403
    /// naming what to enable without it. Without PAYRECON_BACKFILL it is not asked.
    @Test func transactionSearchPermissionIsCheckedWhenBackfillIsSet() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            #expect(try await Self.doctor(env).line("paypal transaction search permission").isEmpty)
            env["PAYRECON_BACKFILL"] = "paypal=3d"
            let granted = try await Self.doctor(env)
            #expect(
                granted.status == 0 && granted.line("paypal transaction search permission").hasPrefix("ok   "), "\(granted.description)")
            try await h.admin("/admin/paypal/permissions", #"{"transaction_search":false}"#)
            let refused = try await Self.doctor(env)
            let line = refused.line("paypal transaction search permission")
            #expect(
                refused.status == 1 && line.hasPrefix("FAIL ") && line.contains("403") && line.contains("Transaction search"),
                "\(refused.description)")
        }
    }

    /// With PAYRECON_BACKFILL naming Paypercut, doctor checks that the key may list payments and refunds: ok against
    /// paysim, and a key Paypercut refuses fails naming what backfill would then do. Without it, not asked.
    @Test func paypercutListsAreCheckedWhenBackfillNamesIt() async throws {
        try await WorkerHarness.with { h in
            var env = h.payreconEnvironment
            #expect(try await Self.doctor(env, ["--provider", "paypercut"]).line("paypercut payment and refund lists").isEmpty)
            env["PAYRECON_BACKFILL"] = "paypercut=3d"
            let granted = try await Self.doctor(env, ["--provider", "paypercut"])
            #expect(granted.line("paypercut payment and refund lists").hasPrefix("ok   "), "\(granted.description)")
            env["PAYPERCUT_SECRET_KEY"] = "sk_test_not_the_key"
            let refused = try await Self.doctor(env, ["--provider", "paypercut"])
            let line = refused.line("paypercut payment and refund lists")
            #expect(
                refused.status == 1 && line.hasPrefix("FAIL ") && line.contains("401") && line.contains("exits 2"), "\(refused.description)"
            )
        }
    }

    /// The last stored PayPal delivery names paysim's leaf, and PAYPAL_TRUST_ROOTS holds PayPal's DigiCert roots only.
    @Test func aCertificateThatDoesNotChainToTheRootsFails() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            let run = try await Self.doctor(Self.environment(h, roots: Self.digiCertRoots), ["--provider", "paypal"])
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("paypal certificate of the last stored delivery")
            #expect(line.hasPrefix("FAIL ") && line.contains("does not chain to PAYPAL_TRUST_ROOTS"), "\(run.description)")
            #expect(line.contains(h.simulator.certURL) && line.contains("401 untrusted_certificate"), "\(line)")
            #expect(run.failed.count == 1, "\(run.description)")
        }
    }

    /// Roots that do not hold PayPal's chain refuse every delivery, so none is stored: the last delivery refused
    /// `untrusted_certificate` (a kept sample) is where doctor finds the certificate URL to check.
    @Test func withEveryDeliveryRefusedTheRefusedSampleIsChecked() async throws {
        try await WorkerHarness.with { h in
            let headers = DeliveryStore.headersJSON([("PAYPAL-CERT-URL", h.simulator.certURL), ("PAYPAL-TRANSMISSION-ID", "T-1")])
            try h.execute(
                """
                INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes)
                VALUES ('paypal', 'untrusted_certificate', 'the signing certificate does not chain to PAYPAL_TRUST_ROOTS', $1::jsonb, ''::bytea, 0)
                """, [.text(headers)])
            let refused = try await Self.doctor(Self.environment(h, roots: Self.digiCertRoots), ["--provider", "paypal"])
            #expect(refused.status == 1, "\(refused.description)")
            let line = refused.line("paypal certificate of the last stored delivery")
            #expect(line.hasPrefix("FAIL ") && line.contains("does not chain to PAYPAL_TRUST_ROOTS"), "\(refused.description)")
            #expect(
                line.contains("refused untrusted_certificate, sample") && line.contains("Every PayPal delivery so far was refused"),
                "\(line)")

            // Once PAYPAL_TRUST_ROOTS holds the chain, the same certificate passes.
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            let fixed = try await Self.doctor(Self.environment(h, roots: roots), ["--provider", "paypal"])
            #expect(fixed.status == 0, "\(fixed.description)")
            #expect(fixed.line("paypal certificate of the last stored delivery").contains("verify now"), "\(fixed.description)")
        }
    }

    /// An event `payrecon backfill` read from PayPal's own list carries no PAYPAL-CERT-URL (nothing was delivered):
    /// the certificate checked is the last delivery PayPal sent. Before, doctor read the backfilled event and failed
    /// "delivery N has no PAYPAL-CERT-URL header" after every nightly backfill.
    @Test func anEventReadByBackfillIsNotTheDeliveryWhoseCertificateIsChecked() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            let conn = try h.database.connect(); defer { conn.close() }
            let listed = try DeliveryStore.insertListed(
                provider: .paypal,
                events: [
                    (
                        id: "WH-LISTED-1", eventType: "PAYMENT.CAPTURE.COMPLETED",
                        body: Array(#"{"id":"WH-LISTED-1"}"#.utf8)
                    )
                ],
                source: "paypal webhook events list", on: conn)
            #expect(listed == 1)
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            let run = try await Self.doctor(Self.environment(h, roots: roots), ["--provider", "paypal"])
            #expect(run.status == 0, "\(run.description)")
            #expect(run.line("paypal certificate of the last stored delivery").contains(h.simulator.certURL), "\(run.description)")
        }
    }

    /// A cert URL outside PAYPAL_CERT_URL_PREFIXES is what the receiver never fetches: doctor says so, fetching nothing.
    @Test func aCertificateURLOutsideThePrefixesFails() async throws {
        try await WorkerHarness.with { h in
            try await Self.seed(h)
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            env["PAYPAL_CERT_URL_PREFIXES"] = nil  // PayPal's own prefixes only
            let run = try await Self.doctor(env, ["--provider", "paypal"])
            #expect(run.status == 1, "\(run.description)")
            let line = run.line("paypal certificate of the last stored delivery")
            #expect(line.hasPrefix("FAIL ") && line.contains("not under PAYPAL_CERT_URL_PREFIXES"), "\(run.description)")
        }
    }

    @Test func anUnmigratedDatabaseSaysToMigrate() async throws {
        try await WorkerHarness.with { h in
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            // A schema nothing was applied to.
            let schema = "t_doctor_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
            let admin = try PostgresConnection(conninfo: TestDatabase.baseURL)
            defer { _ = try? admin.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE"); admin.close() }
            _ = try admin.execute("CREATE SCHEMA \(schema)")
            var env = Self.environment(h, roots: roots)
            env["DATABASE_URL"] = TestDatabase.withSearchPath(TestDatabase.baseURL, schema)
            let empty = try await Self.doctor(env)
            #expect(empty.status == 1, "\(empty.description)")
            #expect(empty.line("database reachable").hasPrefix("ok   "), "\(empty.description)")
            let line = empty.line("database migrated")
            #expect(
                line.hasPrefix("FAIL ") && line.contains("run payrecon migrate") && line.contains("0001_deliveries"), "\(empty.description)"
            )
            #expect(empty.line("paypal certificate of the last stored delivery").contains("not migrated"), "\(empty.description)")
            #expect(empty.line("pxp credentials").hasPrefix("ok   "), "the providers are still checked: \(empty.description)")
            #expect(empty.line("pxp credentials").contains("made-up merchant"), "no order can be read: \(empty.description)")

            // One migration missing from a migrated database is named.
            let sql = try #require(Migrator.locateDirectory())
            let last = try #require(try Migrator.load(from: sql).last?.version)
            try h.execute("DELETE FROM schema_migrations WHERE version = $1", [.text(last)])
            let behind = try await Self.doctor(Self.environment(h, roots: roots))
            #expect(behind.status == 1, "\(behind.description)")
            #expect(
                behind.line("database migrated").contains("1 of") && behind.line("database migrated").contains(last),
                "\(behind.description)")
        }
    }

    @Test func anUnreachableDatabaseIsFatal() async throws {
        try await WorkerHarness.with { h in
            let roots = try Self.paysimRoots(); defer { try? FileManager.default.removeItem(atPath: roots) }
            var env = Self.environment(h, roots: roots)
            env["DATABASE_URL"] = "postgresql://postgres@127.0.0.1:1/payrecon"  // nothing listens on port 1
            let run = try await Self.doctor(env)
            #expect(run.status == 2, "\(run.description)")
            let line = run.line("database reachable")
            #expect(
                line.hasPrefix("FAIL ") && line.contains("cannot connect to PostgreSQL") && line.contains("DATABASE_URL"),
                "\(run.description)")
            #expect(run.line("pxp credentials").hasPrefix("ok   "), "the providers are still checked: \(run.description)")
            #expect(run.lines.last?.contains("the database is unreachable") == true, "\(run.description)")

            env["DATABASE_URL"] = nil
            let unset = try await Self.doctor(env)
            #expect(unset.status == 2 && unset.line("database reachable").contains("DATABASE_URL is not set"), "\(unset.description)")
        }
    }

    /// Asked for a provider without credentials: a failure naming what to set (without --provider it is skipped).
    @Test func aProviderAskedForWithoutCredentialsFails() async throws {
        try await WorkerHarness.with { h in
            var env = h.payreconEnvironment
            env["PXP_CLIENT_ID"] = nil
            env["PAYPERCUT_SECRET_KEY"] = nil
            let asked = try await Self.doctor(env, ["--provider", "pxp"])
            #expect(
                asked.status == 1 && asked.line("pxp credentials").contains("PXP_CLIENT_ID, PXP_TOKEN_ID and PXP_TOKEN_VALUE"),
                "\(asked.description)")
            let all = try await Self.doctor(env)
            #expect(all.line("pxp").hasPrefix("skip "), "\(all.description)")
            #expect(all.line("paypercut").hasPrefix("skip "), "\(all.description)")
            #expect(all.status == 0, "the configured providers pass, PayPal without a stored delivery: \(all.description)")
        }
    }
}

/// A stranger's bytes never reach the terminal as they are (issue "strangers, round three", item 4): the raw
/// PAYPAL-CERT-URL of a rejected sample, with escape sequences that set the title, clear the screen and draw a green
/// "ok" over the FAIL, is written by `doctor` as visible escapes on its one line; the body of `rejections show` is
/// behind a gutter, so none of its lines can pass for one of payrecon's.
@Suite("Strangers' bytes on the terminal", .serialized) struct TerminalEscapingTests {
    static let hostile =
        "https://api.sandbox.paypal.com/v1/notifications/certs/\u{1B}]0;pwned\u{07}\u{1B}[2J\u{1B}[32mok   everything\u{1B}[0m\nok   paypal certificate of the last stored delivery"

    @Test func doctorWritesARejectedSamplesCertificateURLAsEscapes() async throws {
        try await WorkerHarness.with { h in
            let headers = DeliveryStore.headersJSON([("PAYPAL-CERT-URL", Self.hostile), ("PAYPAL-TRANSMISSION-ID", "T-1")])
            try h.execute(
                """
                INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes)
                VALUES ('paypal', 'untrusted_certificate', 'refused', $1::jsonb, ''::bytea, 0)
                """, [.text(headers)])
            let run = try await DoctorTests.doctor(DoctorTests.environment(h, roots: DoctorTests.digiCertRoots), ["--provider", "paypal"])
            let bytes = Array(run.result.stdout.utf8)
            #expect(!bytes.contains(0x1B) && !bytes.contains(0x07), "no escape sequence reaches the terminal: \(run.description)")
            #expect(
                run.lines.filter { $0.contains("paypal certificate of the last stored delivery") }.count == 1,
                "the stranger's newline did not make a line of its own: \(run.description)")
            #expect(run.result.stdout.contains("\\u{1B}]0;pwned"), "\(run.description)")
        }
    }

    @Test func rejectionsShowKeepsABodysLinesBehindAGutter() async throws {
        try await WorkerHarness.with { h in
            let body = "{\"id\":1}\n2026-12-07T00:00:00Z  delivery 9 PAYMENT.CAPTURE.COMPLETED received; done\n\u{1B}[2Jok"
            try h.execute(
                """
                INSERT INTO rejected_deliveries (provider, reason, message, headers, body_prefix, body_bytes)
                VALUES ('pxp', 'invalid_signature', 'forged\nok', '[]'::jsonb, $1::bytea, $2)
                """, [.bytea(Array(body.utf8)), .int64(Int64(body.utf8.count))])
            let id = try h.database.count("SELECT max(id) FROM rejected_deliveries")
            let r = try await PayreconProcess.launch(["rejections", "show", String(id)], databaseURL: h.database.url)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(!Array(r.stdout.utf8).contains(0x1B), "\(r.stdout)")
            let afterBody = r.stdout.components(separatedBy: "body:\n").last ?? ""
            let bodyLines = afterBody.split(separator: "\n").prefix(3)
            #expect(bodyLines.count == 3 && bodyLines.allSatisfy { $0.hasPrefix("  | ") }, "\(r.stdout)")
            #expect(!r.stdout.split(separator: "\n").contains { $0.hasPrefix("2026-12-07T00:00:00Z") }, "\(r.stdout)")
            #expect(r.stdout.contains("forged\\nok"), "the message is one line: \(r.stdout)")
        }
    }
}
