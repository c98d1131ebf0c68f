import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing

/// Fees and net: kept from the answers checks fetch (PayPal's breakdowns, Paypercut's balance transaction), summed
/// per provider, currency and day by `payrecon report --view fees`, exactly.
@Suite("Fees", .serialized)
struct FeesTests {
    /// `YYYY-MM-DD` of `daysAgo` days before today (UTC).
    static func day(_ daysAgo: Int) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX"); f.timeZone = TimeZone(identifier: "UTC"); f.dateFormat = "yyyy-MM-dd"
        return f.string(from: Date().addingTimeInterval(-Double(daysAgo) * 86_400))
    }

    /// paysim's PayPal fee is 3.49% half up + 0.49 (a refund gives back the 3.49% of its amount); Paypercut's 1.4% + 0.20.
    /// Two days ago: 100.00 USD captured (fee 3.98, net 96.02) and 20.00 USD captured (fee 1.19, net 18.81) of which
    /// 5.00 refunded (fee back 0.17, net out 4.83): net 110.00. Yesterday: 1000 JPY captured (fee 35 + 49 = 84, net 916) and a
    /// capture of 7.00 USD still pending (no breakdown: counted without a fee). Today: 20.00 EUR captured at Paypercut
    /// by payrecon's own action (fee 0.48, net 19.52).
    @Test func feesAppearInTheReportWithExactSums() async throws {
        try await WorkerHarness.with { h in
            let d2 = Self.day(2), d1 = Self.day(1)
            try await h.seedPayPal(
                #"""
                [{"id":"PP-F1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-F1","create_time":"\#(d2)T09:00:00Z"}]},
                 {"id":"PP-F2","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-F2","status":"PARTIALLY_REFUNDED","create_time":"\#(d2)T10:00:00Z"}],
                  "refunds":[{"id":"REF-F2","capture_id":"CAP-F2","amount":"5.00","create_time":"\#(d2)T23:59:59Z"}]},
                 {"id":"PP-F3","intent":"CAPTURE","status":"COMPLETED","currency":"JPY","amount":"1000","captures":[{"id":"CAP-F3","create_time":"\#(d1)T00:00:00Z"}]},
                 {"id":"PP-F4","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"7.00","captures":[{"id":"CAP-F4","status":"PENDING","create_time":"\#(d1)T12:00:00Z"}]}]
                """#)
            try await h.admin(
                "/admin/paypercut/intents",
                #"{"id":"pi_f","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            try h.insert(
                WorkerHarness.order(.paypal, "F1", ref: "PP-F1", intent: .purchase, amount: 10_000, currency: "USD", merchant: nil),
                WorkerHarness.order(
                    .paypal, "F2", ref: "PP-F2", intent: .purchase, amount: 2_000, currency: "USD", refund: 500, merchant: nil),
                WorkerHarness.order(.paypal, "F3", ref: "PP-F3", intent: .purchase, amount: 1_000, currency: "JPY", merchant: nil),
                WorkerHarness.order(.paypal, "F4", ref: "PP-F4", intent: .purchase, amount: 700, currency: "USD", merchant: nil),
                WorkerHarness.order(.paypercut, "FC", ref: "pi_f", amount: 2_000, currency: "EUR", merchant: "acct_1"))
            _ = try await h.sweep()
            #expect(await h.executor.executePending().succeeded == 1)  // the Paypercut capture
            _ = try await h.sweep()

            let r = try await PayreconProcess.launch(["report", "--view", "fees", "--format", "json"], databaseURL: h.database.url)
            #expect(r.status == 0, "\(r.stderr)")
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
            let days = try #require(doc["days"] as? [[String: Any]])
            func row(_ day: String, _ provider: String, _ currency: String) -> [String: String] {
                guard
                    let d = days.first(where: {
                        $0["day"] as? String == day && $0["provider"] as? String == provider && $0["currency"] as? String == currency
                    })
                else { return [:] }
                var out: [String: String] = [:]
                for (k, v) in d { out[k] = "\(v)" }
                return out
            }
            #expect(
                row(d2, "paypal", "USD") == [
                    "day": d2, "provider": "paypal", "currency": "USD", "captured": "120.00", "refunded": "5.00",
                    "reversed": "0.00", "fees": "5.00", "net": "110.00", "movements": "3", "without_fee": "0"
                ])
            #expect(
                row(d1, "paypal", "JPY") == [
                    "day": d1, "provider": "paypal", "currency": "JPY", "captured": "1000", "refunded": "0",
                    "reversed": "0", "fees": "84", "net": "916", "movements": "1", "without_fee": "0"
                ])
            // The pending capture moved no money yet: PayPal lists it, but it is not a counted capture.
            #expect(row(d1, "paypal", "USD").isEmpty)
            #expect(row(Self.day(0), "paypercut", "EUR")["fees"] == "0.48" && row(Self.day(0), "paypercut", "EUR")["net"] == "19.52")
            #expect(days.count == 3, "\(days)")
            let totals = try #require(doc["totals"] as? [[String: Any]])
            #expect(totals.count == 3)
            #expect(
                totals.contains {
                    $0["provider"] as? String == "paypal" && $0["currency"] as? String == "USD" && $0["net"] as? String == "110.00"
                })

            // The other formats carry the same figures.
            let table = try await PayreconProcess.launch(["report", "--view", "fees"], databaseURL: h.database.url)
            #expect(
                table.status == 0 && table.stdout.contains("110.00") && table.stdout.contains("Totals") && table.stdout.contains("By day"))
            let csv = try await PayreconProcess.launch(
                ["report", "--view", "fees", "--format", "csv", "--provider", "paypal"], databaseURL: h.database.url)
            #expect(csv.stdout.hasPrefix("day,provider,currency,captured,refunded,reversed,fees,net,movements,without_fee\r\n"))
            #expect(csv.stdout.contains("\(d2),paypal,USD,120.00,5.00,0.00,5.00,110.00,3,0\r\n"))
            #expect(!csv.stdout.contains("paypercut"))
            let html = try await PayreconProcess.launch(["report", "--view", "fees", "--format", "html"], databaseURL: h.database.url)
            #expect(html.stdout.contains("<svg") && html.stdout.contains("Fees per day, paypal USD") && html.stdout.contains("110.00"))
        }
    }

    /// PayPal converts the net of a payment made in another currency than the payee receives in: a capture's answer
    /// then states `receivable_amount` (a refund's `net_amount_in_receivable_currency`) with the rate. The fees view
    /// counts that net where it reached the balance: in the currency received. Before, it was counted in the payment's
    /// currency, where nothing was credited. 100.00 EUR captured (fee 3.98, net 96.02) at 1.0847 USD per EUR is 104.15
    /// USD received; 20.00 EUR refunded (fee back 0.70, net 19.30) is 20.93 USD out.
    @Test func aConvertedNetCountsWhereItWasReceived() async throws {
        try await WorkerHarness.with { h in
            let d1 = Self.day(1)
            try await h.seedPayPal(
                #"""
                {"id":"PP-FX","intent":"CAPTURE","status":"COMPLETED","currency":"EUR","amount":"100.00","receivable_currency":"USD","exchange_rate":"1.0847",
                 "captures":[{"id":"CAP-FX","status":"PARTIALLY_REFUNDED","create_time":"\#(d1)T09:00:00Z"}],
                 "refunds":[{"id":"REF-FX","capture_id":"CAP-FX","amount":"20.00","create_time":"\#(d1)T10:00:00Z"}]}
                """#)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "FX", ref: "PP-FX", intent: .purchase, amount: 10_000, currency: "EUR", refund: 2_000, merchant: nil))
            _ = try await h.sweep()
            #expect(
                try h.database.count(
                    "SELECT count(*) FROM movements WHERE movement_id = 'CAP-FX' AND received_minor = 10415 AND received_currency = 'USD'")
                    == 1)
            #expect(
                try h.database.count(
                    "SELECT count(*) FROM movements WHERE movement_id = 'REF-FX' AND received_minor = 2093 AND received_currency = 'USD'")
                    == 1)
            let r = try await PayreconProcess.launch(["report", "--view", "fees", "--format", "csv"], databaseURL: h.database.url)
            #expect(r.status == 0, "\(r.stderr)")
            // EUR: captured, refunded and fees in EUR; no net credited in EUR. USD: no capture of its own, the net received.
            #expect(r.stdout.contains("\(d1),paypal,EUR,100.00,20.00,0.00,3.28,0.00,2,0\r\n"), "\(r.stdout)")
            #expect(r.stdout.contains("\(d1),paypal,USD,0.00,0.00,0.00,0.00,83.22,0,0\r\n"), "\(r.stdout)")
        }
    }

    /// The movements table follows the snapshots: a movement the answer no longer lists goes, a re-check that finds
    /// nothing new writes nothing, and sums of amounts past 64 bits are exact.
    @Test func movementsFollowTheSnapshotsAndSumPast64Bits() throws {
        let db = try TestDatabase.create(); defer { db.drop() }
        let conn = try db.connect(); defer { conn.close() }
        func snapshot(_ movements: String) -> String {
            #"{"provider":"paypal","transactionRef":"PP-1","intent":"purchase","currency":{"code":"USD","exponent":2},"value":1,"authorised":0,"captured":1,"refunded":0,"state":"captured","rawState":"COMPLETED","movements":\#(movements)}"#
        }
        let big = Int64.max - 1
        _ = try conn.execute(
            "INSERT INTO snapshots (provider, order_id, transaction_ref, snapshot) VALUES ('paypal', 'O1', 'PP-1', $1::jsonb)",
            [
                .text(
                    snapshot(
                        #"[{"id":"C1","kind":"capture","at":1764590400,"currency":{"code":"USD","exponent":2},"gross":\#(big),"fee":3,"net":\#(big - 3)},{"id":"C2","kind":"capture","at":1764590401,"currency":{"code":"USD","exponent":2},"gross":\#(big),"fee":null,"net":null},{"id":"C2","kind":"capture","at":1764590401,"currency":{"code":"USD","exponent":2},"gross":\#(big),"fee":null,"net":null}]"#
                    ))
            ])
        let days = try FeeStore.days(provider: nil, within: nil, on: conn)
        #expect(days.count == 1)
        #expect(days.first?.captured == Int128(big) * 2)
        #expect(days.first?.fees == 3 && days.first?.net == Int128(big - 3) && days.first?.withoutFee == 1 && days.first?.movements == 2)
        let before = try conn.query("SELECT updated_at::text AS t FROM movements WHERE movement_id = 'C1'").first?.string("t")
        // The same list again (another check): nothing written.
        _ = try conn.execute("UPDATE snapshots SET snapshot = snapshot, fetched_at = now()")
        #expect(try conn.query("SELECT updated_at::text AS t FROM movements WHERE movement_id = 'C1'").first?.string("t") == before)
        // C2 no longer listed: it goes; C1 changed: it is rewritten.
        _ = try conn.execute(
            "UPDATE snapshots SET snapshot = $1::jsonb",
            [
                .text(
                    snapshot(
                        #"[{"id":"C1","kind":"capture","at":1764590400,"currency":{"code":"USD","exponent":2},"gross":100,"fee":3,"net":97}]"#
                    ))
            ])
        let rows = try conn.query("SELECT movement_id, gross_minor FROM movements ORDER BY 1")
        #expect(rows.count == 1)
        #expect(try rows.first?.string("movement_id") == "C1" && rows.first?.int64("gross_minor") == 100)
        // A snapshot with no list (stored before movements existed, or an answer without money) leaves none.
        _ = try conn.execute("UPDATE snapshots SET snapshot = snapshot - 'movements'")
        #expect(try conn.query("SELECT count(*) AS n FROM movements").first?.int64("n") == 0)
    }

    @Test func reportViewUsageErrors() async throws {
        for args in [
            ["--view", "money"], ["--view", "fees", "--kind", "amount_mismatch"], ["--view", "fees", "--status", "open"],
            ["--view", "fees", "--fail-on-open"]
        ] {
            let r = try await PayreconProcess.launch(["report"] + args, databaseURL: "postgresql://127.0.0.1:1/none")
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("--view") || r.stderr.contains("does not apply to --view fees"), "\(args): \(r.stderr)")
        }
    }
}
