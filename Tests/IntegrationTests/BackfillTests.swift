import Foundation
import Observability
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Testing
import Worker

/// `payrecon backfill --provider paypal`, as run, against paysim's Transaction Search (its ledger, its 3-hour lag,
/// its 31-day limit, RESULTSET_TOO_LARGE, 403 without the permission).
@Suite("Backfill", .serialized)
struct BackfillTests {
    static func at(_ daysAgo: Int, _ time: String = "12:00:00") -> String { FeesTests.day(daysAgo) + "T" + time + "Z" }

    static func rfc3339(secondsFromNow: TimeInterval) -> String {
        ISO8601DateFormatter().string(from: Date().addingTimeInterval(secondsFromNow))
    }

    static func backfill(_ h: WorkerHarness, _ args: String...) async throws -> PayreconProcess.Result {
        try await PayreconProcess.launch(
            ["backfill", "--provider", "paypal"] + args, databaseURL: h.database.url, environment: h.payreconEnvironment)
    }

    /// PP-B1 was paid two days ago and no webhook said so, and no order holds it: unknown_order, once. PP-B2's order
    /// was checked clean, then a refund was made in PayPal's dashboard yesterday: backfill re-checks the order.
    @Test func findsWhatNoWebhookSaidOnceAndASecondRunFindsNothingNew() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-B1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"12.00","captures":[{"id":"CAP-B1","create_time":"\#(Self.at(2))"}]},
                 {"id":"PP-B2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"30.00","captures":[{"id":"CAP-B2","create_time":"\#(Self.at(3))"}]}]
                """#)
            try h.insert(WorkerHarness.order(.paypal, "B2", ref: "PP-B2", intent: .purchase, amount: 3_000, currency: "USD", merchant: nil))
            _ = try await h.sweep()
            #expect(try h.openKinds(order: "B2").isEmpty)
            // The dashboard refund, which no webhook reported.
            try await h.seedPayPal(
                #"""
                {"id":"PP-B2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"30.00","captures":[{"id":"CAP-B2","status":"PARTIALLY_REFUNDED","create_time":"\#(Self.at(3))"}],
                 "refunds":[{"id":"REF-B2","capture_id":"CAP-B2","amount":"10.00","create_time":"\#(Self.at(1))"}]}
                """#)
            let r = try await Self.backfill(h, "--since", "5d")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("3 transactions listed") && r.stdout.contains("1 no order holds"), "\(r.stdout)")
            #expect(try h.openKinds(order: "B2") == ["over_refunded"])
            let unknown = try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }
            #expect(unknown.map(\.transactionRef) == ["PP-B1"])
            // Nothing new the second time: the last 3 days are read again (PayPal lists late), and what they list was
            // handled by the first run, so nothing is re-checked or opened twice.
            let again = try await Self.backfill(h, "--since", "5d")
            #expect(
                again.status == 0
                    && again.stdout.contains("transactions listed, 0 new or changed since a run handled them, 0 orders re-checked"),
                "\(again.stdout)")
            #expect(again.stdout.contains("of them again: the last 3d, where paypal lists late"), "\(again.stdout)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.map(\.occurrences) == [1])
            // A dry run of windows no run read lists what a run would do, one line each; it checks and records nothing.
            try h.execute("DELETE FROM backfill_windows")
            try h.execute("DELETE FROM backfill_listed")
            let dry = try await Self.backfill(h, "--since", "5d", "--dry-run")
            #expect(dry.stdout.contains("dry run") && dry.stdout.contains("3 transactions listed, 3 new or changed"), "\(dry.stdout)")
            #expect(
                dry.stdout.contains("  would re-check order B2: it holds transaction CAP-B2 (T0006)")
                    && dry.stdout.contains("  would count unknown_order for transaction CAP-B1 (T0006) again: it is open already"),
                "\(dry.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM backfill_windows") == 0)
            #expect(try h.database.count("SELECT count(*) FROM backfill_listed") == 0)
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.map(\.occurrences) == [1])
        }
    }

    /// Events PayPal made whose deliveries never came (150 of them, so the list is read over two pages by its `next`
    /// link) are stored as deliveries and go through the worker; the one that came is not stored again nor counted as
    /// a redelivery; a second run finds nothing new; windows older than PayPal keeps events for are said, not failed.
    @Test func storesTheEventsPayreconNeverReceived() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-E1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"15.00","captures":[{"id":"CAP-E1","create_time":"\#(Self.at(2))"}]},
                 {"id":"PP-E2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"25.00","captures":[{"id":"CAP-E2","create_time":"\#(Self.at(2, "13:00:00"))"}]}]
                """#)
            try h.insert(
                WorkerHarness.order(.paypal, "E1", ref: "PP-E1", intent: .purchase, amount: 1_500, currency: "USD", merchant: nil),
                WorkerHarness.order(.paypal, "E2", ref: "PP-E2", intent: .purchase, amount: 2_500, currency: "USD", merchant: nil))
            // E2's event came; E1's 150 never did.
            let came = try h.storeWebhook(
                #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-E2","create_time":"\#(Self.at(2, "13:00:01"))"}"#
            )
            _ = try await h.admin(
                "/admin/webhooks/send",
                #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-E1","lost":true,"count":150,"create_time":"\#(Self.at(2, "12:00:01"))"}"#
            )
            let r = try await Self.backfill(h, "--since", "5d")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("151 events listed, 150 payrecon had not stored"), "\(r.stdout)")
            let stats = try await h.admin("/admin/stats", method: "GET")
            let listed = (stats["requests"] as? [String: Any])?["paypal.list_webhook_events"] as? Int ?? 0
            #expect(
                listed >= 6 && r.stdout.contains("\(listed) requests; 151 events"),
                "five day windows, one of them two pages: \(listed) requests")
            #expect(
                try h.database.count(
                    "SELECT count(*) FROM deliveries WHERE headers::text LIKE '%payrecon-source%' AND status = 'pending' AND event_type = 'PAYMENT.CAPTURE.COMPLETED'"
                ) == 150)
            #expect(try h.database.count("SELECT count(*) FROM deliveries WHERE id = \(came[0]) AND redeliveries = 0") == 1)
            // The worker takes them as it takes any delivery: each names CAP-E1, whose order E1 it checks.
            _ = await h.runOnce()
            _ = await h.runOnce()
            #expect(
                try h.database.count("SELECT count(*) FROM deliveries WHERE headers::text LIKE '%payrecon-source%' AND status = 'done'")
                    == 150)
            #expect(try h.openKinds(order: "E1").isEmpty)
            // Read again (the last 3 days are, every run): nothing stored twice.
            let again = try await Self.backfill(h, "--since", "5d")
            #expect(again.stdout.contains("151 events listed, 0 payrecon had not stored"), "\(again.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 151)
            // A window read again (as after a kill mid-window: its pages' events are stored as they come, the window
            // recorded last) stores nothing twice.
            try h.execute("DELETE FROM backfill_windows WHERE source = 'events'")
            let reread = try await Self.backfill(h, "--since", "5d")
            #expect(reread.stdout.contains("151 events listed, 0 payrecon had not stored"), "\(reread.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 151)
            // The delivery itself, coming late (PayPal retries for 3 days), is a redelivery of the stored event: not
            // stored again, not processed again.
            let late = try h.database.string(
                "SELECT dedupe_key FROM deliveries WHERE headers::text LIKE '%payrecon-source%' ORDER BY id LIMIT 1")
            _ = try h.store(.paypal, body: Array(#"{"id":"\#(late)"}"#.utf8), dedupeKey: late)
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 151)
            #expect(
                try h.database.count(
                    "SELECT count(*) FROM deliveries WHERE dedupe_key = '\(late)' AND redeliveries = 1 AND status = 'done'") == 1)
            // A window whose list fails is left for the next run, not recorded: exit 1.
            try h.execute("DELETE FROM backfill_windows")
            try await h.faults(#"{"error_rate":1}"#)
            let failing = try await Self.backfill(h, "--since", "2d")
            try await h.clearFaults()
            #expect(
                failing.status == 1 && failing.stdout.contains("events ") && failing.stdout.contains("left for the next run"),
                "\(failing.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM backfill_windows") == 0)
            // PayPal keeps events about 45 days: an older span is not asked for, and that is said.
            let old = try await Self.backfill(h, "--from", FeesTests.day(60) + "T00:00:00Z", "--to", FeesTests.day(50) + "T00:00:00Z")
            #expect(old.status == 0, "\(old.stdout) \(old.stderr)")
            #expect(
                old.stdout.contains("0 requests; 0 events listed")
                    && old.stdout.contains("only: paypal keeps webhook events about 45 days"), "\(old.stdout)")
            // Nor older than payrecon keeps processed deliveries (their events would be stored and processed again).
            var env = h.payreconEnvironment
            env["PAYRECON_RETAIN"] = "deliveries=1d"
            let kept = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypal", "--since", "5d"], databaseURL: h.database.url, environment: env)
            #expect(kept.stdout.contains("only: payrecon prune keeps processed deliveries 1 days"), "\(kept.stdout)")
        }
    }

    /// `--provider paypercut`: its payment and refund lists, page by page (`last_key`). A payment no order holds is
    /// unknown_order once; a refund made in the dashboard re-checks its order; a second run finds nothing new.
    @Test func paypercutsPaymentAndRefundLists() async throws {
        try await WorkerHarness.with { h in
            let now = Int64(Date().timeIntervalSince1970)
            let twoDays = now - 2 * 86_400, threeDays = now - 3 * 86_400
            func intent(_ id: String, _ amount: Int, created: Int64, refunds: String = "", account: String? = nil) -> String {
                let owner = account.map { #","account":"\#($0)""# } ?? ""
                return
                    #"{"id":"\#(id)","amount":\#(amount),"currency":"EUR","capture_method":"automatic","status":"succeeded","created":\#(created)\#(refunds)\#(owner)}"#
            }
            // 101 held by orders and one no order holds, made the same day: two pages of that day's payments.
            var seeds = (0..<101).map { intent("pi_P\($0)", 500, created: twoDays + Int64($0)) }
            seeds += [intent("pi_U", 1_200, created: twoDays + 200), intent("pi_R", 3_000, created: threeDays)]
            // A connected account's: listed as that account (Paypercut-Account), which an order names as its merchant.
            seeds += [
                intent("pi_A1", 700, created: twoDays + 300, account: "acct_1"),
                intent("pi_A2", 800, created: twoDays + 301, account: "acct_1")
            ]
            try await h.admin("/admin/paypercut/intents", "[" + seeds.joined(separator: ",") + "]")
            try h.insert(
                (0..<101).map {
                    WorkerHarness.order(
                        .paypercut, "P\($0)", ref: "pi_P\($0)", intent: .purchase, amount: 500, currency: "EUR", merchant: nil)
                })
            try h.insert(
                WorkerHarness.order(.paypercut, "R", ref: "pi_R", intent: .purchase, amount: 3_000, currency: "EUR", merchant: nil),
                WorkerHarness.order(.paypercut, "A1", ref: "pi_A1", intent: .purchase, amount: 700, currency: "EUR", merchant: "acct_1"))
            _ = try await h.sweep()
            // An order naming an account the key may not act for: said, and the other accounts are read all the same.
            try h.insert(
                WorkerHarness.order(.paypercut, "G", ref: "pi_G", intent: .purchase, amount: 100, currency: "EUR", merchant: "acct_gone"))
            #expect(try h.openKinds(order: "R").isEmpty)
            // A refund made in Paypercut's dashboard yesterday, which no webhook reported.
            try await h.admin(
                "/admin/paypercut/intents",
                intent("pi_R", 3_000, created: threeDays, refunds: #","refunds":[{"id":"re_R1","amount":1000,"created":\#(now - 86_400)}]"#)
            )
            let r = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypercut", "--since", "5d"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
            #expect(
                r.stdout.contains(
                    "not checked: transaction account acct_gone: Paypercut refused account 'acct_gone' (403 account_invalid)"),
                "\(r.stdout)")
            #expect(
                r.stdout.contains(
                    "106 transactions listed, 106 new or changed since a run handled them, 103 orders re-checked, 2 no order holds"),
                "\(r.stdout)")
            #expect(try h.openKinds(order: "R") == ["over_refunded"])
            #expect(try h.openKinds(order: "A1").isEmpty)
            #expect(Set(try h.discrepancies(.paypercut).filter { $0.kind == "unknown_order" }.map(\.transactionRef)) == ["pi_U", "pi_A2"])
            let stats = try await h.admin("/admin/stats", method: "GET")
            let requests = stats["requests"] as? [String: Any] ?? [:]
            // One window a UTC day from 5 days ago to an hour ago (six, or five just after midnight).
            let days = Int((now - 3_600) / 86_400 - (now - 5 * 86_400) / 86_400 + 1)
            #expect(
                requests["paypercut.list_payments"] as? Int == 3 * days + 1,
                "\(days) day windows, three accounts, one of two pages: \(requests)")
            #expect(
                requests["paypercut.list_refunds"] as? Int == 2 * days,
                "acct_gone's refunds are not asked once its payments are refused: \(requests)")
            // The second run reads only the seconds since the first: nothing new (acct_gone is named again if a second
            // has passed, its exit then 1).
            let again = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypercut", "--since", "5d"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            let notChecked = again.stdout.split(separator: "\n").filter { $0.contains("not checked:") }
            #expect(
                again.stdout.contains("0 new or changed") && notChecked.allSatisfy { $0.contains("acct_gone") }
                    && again.status == (notChecked.isEmpty ? 0 : 1), "\(again.stdout)")
            #expect(try h.discrepancies(.paypercut).filter { $0.kind == "unknown_order" }.map(\.occurrences) == [1, 1])
            // An account an order names for the first time is read over the whole span, in windows of its own.
            try await h.admin("/admin/paypercut/intents", intent("pi_B1", 900, created: twoDays, account: "acct_2"))
            try h.insert(
                WorkerHarness.order(.paypercut, "B1", ref: "pi_B1", intent: .purchase, amount: 900, currency: "EUR", merchant: "acct_2"))
            let newAccount = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypercut", "--since", "5d"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            #expect(newAccount.stdout.contains("1 new or changed since a run handled them, 1 orders re-checked"), "\(newAccount.stdout)")
        }
    }

    /// A window PayPal finds too large is read in halves; nothing is lost (Airbyte's connector lost data here).
    @Test func aWindowTooLargeIsReadInHalves() async throws {
        try await WorkerHarness.with { h in
            let day = FeesTests.day(2)
            let orders = (0..<12).map { i in
                #"{"id":"PP-H\#(i)","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"5.00","captures":[{"id":"CAP-H\#(i)","create_time":"\#(day)T\#(String(format: "%02d", i * 2)):00:00Z"}]}"#
            }
            try await h.seedPayPal("[" + orders.joined(separator: ",") + "]")
            try h.insert(
                (0..<12).map {
                    WorkerHarness.order(.paypal, "H\($0)", ref: "PP-H\($0)", intent: .purchase, amount: 500, currency: "USD", merchant: nil)
                })
            try await h.admin("/admin/paypal/permissions", #"{"search_max_items": 5}"#)
            let r = try await Self.backfill(h, "--from", day + "T00:00:00Z", "--to", FeesTests.day(1) + "T00:00:00Z")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("12 transactions listed") && r.stdout.contains("12 orders re-checked"), "\(r.stdout)")
            #expect(!r.stdout.contains("(0 windows halved)"), "\(r.stdout)")
        }
    }

    /// A day of 501 transactions is two pages of 500: both read (a dry run: listed, nothing checked).
    @Test func aWindowOfMoreThanOnePageIsReadToItsLastPage() async throws {
        try await WorkerHarness.with { h in
            let day = FeesTests.day(2)
            let orders = (0..<501).map { i in
                #"{"id":"PP-M\#(i)","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"1.00","captures":[{"id":"CAP-M\#(i)","create_time":"\#(day)T10:\#(String(format: "%02d:%02d", i / 60, i % 60))Z"}]}"#
            }
            try await h.seedPayPal("[" + orders.joined(separator: ",") + "]")
            let r = try await Self.backfill(h, "--from", day + "T00:00:00Z", "--to", FeesTests.day(1) + "T00:00:00Z", "--dry-run")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("2 list requests") && r.stdout.contains("501 transactions listed"), "\(r.stdout)")
        }
    }

    @Test func withoutThePermissionItSaysSoAndExitsTwo() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypal/permissions", #"{"transaction_search": false}"#)
            try await h.seedPayPal(
                #"{"id":"PP-403","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"9.00","captures":[{"id":"CAP-403","create_time":"\#(Self.at(1))"}]}"#
            )
            _ = try await h.admin(
                "/admin/webhooks/send",
                #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-403","lost":true,"create_time":"\#(Self.at(1, "12:00:01"))"}"#
            )
            let r = try await Self.backfill(h, "--since", "2d")
            #expect(r.status == 2, "\(r.stdout) \(r.stderr)")
            #expect(r.stderr.contains("HTTP 403") && r.stderr.contains("Transaction Search permission"), "\(r.stderr)")
            // The events list is read all the same: a permission not granted yet does not keep lost webhooks unread.
            #expect(r.stdout.contains("1 events listed, 1 payrecon had not stored"), "\(r.stdout)")
            let pxp = try await PayreconProcess.launch(
                ["backfill", "--provider", "pxp"], databaseURL: h.database.url, environment: h.payreconEnvironment)
            #expect(pxp.status == 2 && pxp.stderr.contains("pxp publishes no transaction search"), "\(pxp.stderr)")
            for bad in [
                ["--from", "2026-11-01T00:00:00Z"], ["--since", "2d", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"],
                ["--from", "yesterday", "--to", "today"]
            ] {
                let u = try await PayreconProcess.launch(
                    ["backfill", "--provider", "paypal"] + bad, databaseURL: h.database.url, environment: h.payreconEnvironment)
                #expect(u.status == 2, "\(bad): \(u.stderr)")
            }
        }
    }

    /// Killed with SIGKILL in the middle, it reads again what it had not finished, and every transaction is found
    /// exactly once as a finding.
    @Test func resumesAfterKillMinusNine() async throws {
        try await WorkerHarness.with { h in
            var seeds: [String] = []
            for day in 1...3 {
                for i in 0..<6 {
                    seeds.append(
                        #"{"id":"PP-K\#(day)-\#(i)","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"7.00","captures":[{"id":"CAP-K\#(day)-\#(i)","create_time":"\#(Self.at(day, String(format: "%02d:00:00", 8 + i)))"}]}"#
                    )
                }
            }
            try await h.seedPayPal("[" + seeds.joined(separator: ",") + "]")
            try await h.faults(#"{"latency_ms":120}"#)
            var env = h.payreconEnvironment
            env["DATABASE_URL"] = h.database.url
            // Windows finished are not read again here (a re-read span of 1 s), so the windows read count what the kill left.
            env["PAYRECON_BACKFILL_REREAD"] = "1s"
            let run = try Background(["backfill", "--provider", "paypal", "--since", "4d"], environment: env)
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, run.process.isRunning,
                try h.database.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order'") < 8
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            kill(run.process.processIdentifier, SIGKILL)
            run.process.waitUntilExit()
            let finishedBefore = try h.database.count("SELECT count(*) FROM backfill_windows WHERE source = 'transactions'")
            #expect(try h.database.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order'") < 18)
            try await h.clearFaults()
            #expect(finishedBefore >= 1, "the kill came before any window was finished: the test proves nothing")
            let r = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypal", "--since", "4d"], databaseURL: h.database.url, environment: env)
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            // It read exactly the windows the killed run had not finished.
            let total = try h.database.count("SELECT count(*) FROM backfill_windows WHERE source = 'transactions'")
            #expect(finishedBefore < total)
            #expect(r.stdout.contains(": \(total - finishedBefore) windows read, \(finishedBefore) read before"), "\(r.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order'") == 18)
            #expect(try h.database.count("SELECT count(DISTINCT transaction_ref) FROM discrepancies WHERE kind = 'unknown_order'") == 18)
            let again = try await PayreconProcess.launch(
                ["backfill", "--provider", "paypal", "--since", "4d"], databaseURL: h.database.url, environment: env)
            #expect(again.stdout.contains("0 transactions listed"), "\(again.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order'") == 18)
        }
    }

    /// PAYRECON_BACKFILL=paypal=5d: the nightly reconcile backfills first, so the sweep's report has what no webhook
    /// said; without the permission it says so, sweeps anyway, and exits 1; a bad value is a usage error.
    @Test func theNightlyReconcileBackfillsFirst() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-N1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"9.00","captures":[{"id":"CAP-N1","create_time":"\#(Self.at(2))"}]}"#
            )
            var env = h.payreconEnvironment
            env["PAYRECON_BACKFILL"] = "paypal=5d"
            let r = try await PayreconProcess.launch(["reconcile", "--all"], databaseURL: h.database.url, environment: env)
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("backfill paypal:") && r.stdout.contains("1 no order holds"), "\(r.stdout)")
            #expect(try h.discrepancies(.paypal).map(\.kind) == ["unknown_order"])
            try await h.admin("/admin/paypal/permissions", #"{"transaction_search":false}"#)
            try h.execute("DELETE FROM backfill_windows")
            let refused = try await PayreconProcess.launch(["reconcile", "--all"], databaseURL: h.database.url, environment: env)
            #expect(
                refused.status == 1 && refused.stderr.contains("PAYRECON_BACKFILL paypal: a list was refused")
                    && refused.stderr.contains("403"), "\(refused.stderr)")
            #expect(refused.stdout.contains("reconcile run"), "the sweep still ran: \(refused.stdout)")
            env["PAYRECON_BACKFILL"] = "paypal"
            let bad = try await PayreconProcess.launch(["reconcile", "--all"], databaseURL: h.database.url, environment: env)
            #expect(bad.status == 2 && bad.stderr.contains("PAYRECON_BACKFILL"), "\(bad.stderr)")
        }
    }

    /// The nightly job in-process (what `payrecon reconcile` runs): the backfill first, so the sweep and the report
    /// see what no webhook said; a backfill refused leaves the sweep and settlement to run and makes the exit 1.
    @Test func theNightlyJobBackfillsSweepsAndEvaluatesSettlementInThatOrder() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"{"id":"PP-J1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"9.00","captures":[{"id":"CAP-J1","create_time":"\#(Self.at(2))"}]}"#
            )
            try h.insert(WorkerHarness.order(.pxp, "J2", amount: 2000, currency: "GBP"))
            try await h.seedPXP("TX-J2", currency: "EUR")
            let job = NightlyJob(pool: h.pool, checker: h.checker, executor: nil, logger: h.log.logger)
            let options = NightlyJob.Options(sweep: .init(since: nil, provider: nil, concurrency: 4), backfills: [(.paypal, 5 * 86_400)])
            let report = try await job.run(options)
            guard report.backfills.count == 1, case .ran(let backfill) = report.backfills[0].result else {
                Issue.record("\(report.backfills)"); return
            }
            #expect(backfill.unknown == 1)
            // The sweep ran after it: the PXP order's currency disagrees, and the PayPal capture no order holds is known.
            #expect(report.sweep.runID > 0 && report.sweep.totals.checked == 1 && report.sweep.totals.opened == 1)
            let found = try h.discrepancies()
            #expect(Set(found.map(\.kind)) == ["unknown_order", "currency_mismatch"], "\(found)")
            #expect(report.settlement[.paypal] == .evaluated(opened: 0, resolved: 0))
            #expect(report.actions == nil)
            #expect(report.exitCode == 0)

            try await h.admin("/admin/paypal/permissions", #"{"transaction_search":false}"#)
            try h.execute("DELETE FROM backfill_windows")
            let refused = try await job.run(options)
            // The transaction search refused (its webhook events are still listed): said, and the run's exit is 1.
            guard case .ran(let partly) = refused.backfills.first?.result else { Issue.record("\(refused.backfills)"); return }
            #expect(partly.refused.count == 1 && partly.refused[0].contains("HTTP 403"), "\(partly.refused)")
            #expect(refused.sweep.runID > report.sweep.runID, "the sweep still ran")
            #expect(refused.exitCode == 1)
            // Another provider's run leaves PayPal's backfill and settlement alone.
            let pxpOnly = try await job.run(
                NightlyJob.Options(sweep: .init(since: nil, provider: .pxp, concurrency: 4), backfills: [(.paypal, 86_400)]))
            #expect(pxpOnly.backfills.isEmpty && pxpOnly.settlement.isEmpty && pxpOnly.exitCode == 0)
            // A provider without the lists a backfill reads is skipped, said, and the run's exit is 1.
            let unsupported = try await job.run(
                NightlyJob.Options(sweep: .init(since: nil, provider: .pxp, concurrency: 4), backfills: [(.pxp, 86_400)]))
            guard case .skipped(let why) = unsupported.backfills.first?.result else { Issue.record("\(unsupported.backfills)"); return }
            #expect(!why.isEmpty && unsupported.exitCode == 1)
            // A provider named twice runs twice, and a failure of either is the run's: the later one does not hide it.
            let twice = try await job.run(
                NightlyJob.Options(
                    sweep: .init(since: nil, provider: .paypal, concurrency: 4),
                    backfills: [(.paypal, 86_400), (.paypal, 5 * 86_400)]))
            #expect(twice.backfills.map(\.provider) == [.paypal, .paypal] && twice.exitCode == 1, "\(twice.backfills)")
        }
    }

    /// PayPal lists some payments late (an eCheck that clears, one held for review): every run reads the last
    /// PAYRECON_BACKFILL_REREAD (3d) again, so a payment listed after its window was first read is found by the next
    /// run, and found once. Before, a window read to its end was never read again, and the payment never seen.
    @Test func aPaymentListedAfterItsWindowWasReadIsFoundByTheNextRun() async throws {
        try await WorkerHarness.with { h in
            let later = Self.rfc3339(secondsFromNow: 3_600)
            func seed(listed: String) -> String {
                #"{"id":"PP-L1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"44.00","captures":[{"id":"CAP-L1","create_time":"\#(Self.at(1, "08:00:00"))","listed_time":"\#(listed)"}]}"#
            }
            try await h.seedPayPal(seed(listed: later))
            let first = try await Self.backfill(h, "--since", "3d")
            #expect(first.status == 0 && first.stdout.contains("0 transactions listed"), "\(first.stdout)")
            // PayPal lists it now, under the day it was made, which the first run read to its end.
            try await h.seedPayPal(seed(listed: Self.rfc3339(secondsFromNow: -1)))
            let second = try await Self.backfill(h, "--since", "3d")
            #expect(
                second.status == 0 && second.stdout.contains("1 transactions listed, 1 new or changed")
                    && second.stdout.contains("1 no order holds"),
                "\(second.stdout)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.map(\.transactionRef) == ["PP-L1"])
            let third = try await Self.backfill(h, "--since", "3d")
            #expect(third.stdout.contains("1 transactions listed, 0 new or changed"), "\(third.stdout)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.map(\.occurrences) == [1])
        }
    }

    /// `--dry-run` reads and matches as a run would, and lists what it would store or open, one line each, storing
    /// nothing. Before, with one event lost at PayPal it printed "1 events listed, 0 payrecon had not stored", and the
    /// real run right after stored 1.
    @Test func aDryRunListsWhatARunWouldStoreOrOpen() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-DR1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"21.00","captures":[{"id":"CAP-DR1","create_time":"\#(Self.at(2))"}]}]
                """#)
            _ = try await h.admin(
                "/admin/webhooks/send",
                #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-DR1","lost":true,"create_time":"\#(Self.at(2, "12:00:01"))"}"#
            )
            let dry = try await Self.backfill(h, "--since", "3d", "--dry-run")
            #expect(dry.status == 0, "\(dry.stdout) \(dry.stderr)")
            #expect(
                dry.stdout.contains("1 events listed, 1 payrecon had not stored (a run stores them for payrecon work)"), "\(dry.stdout)")
            #expect(
                dry.stdout.contains("  would store event WH-")
                    && dry.stdout.contains("(PAYMENT.CAPTURE.COMPLETED): no delivery brought it"), "\(dry.stdout)")
            #expect(dry.stdout.contains("  would open unknown_order for transaction CAP-DR1 (T0006): no order holds it"), "\(dry.stdout)")
            for table in ["deliveries", "discrepancies", "backfill_windows", "backfill_listed", "evidence"] {
                #expect(try h.database.count("SELECT count(*) FROM \(table)") == 0, "\(table)")
            }
            // The run does what the dry run said.
            let run = try await Self.backfill(h, "--since", "3d")
            #expect(
                run.stdout.contains("1 events listed, 1 payrecon had not stored") && run.stdout.contains("1 no order holds"),
                "\(run.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM deliveries") == 1)
        }
    }
}
