import Testing
@testable import Reconciliation

private let header = "provider,order_id,transaction_ref,intent,amount,currency,fulfilment,period_start,period_end"

private func csv(_ rows: String...) -> String { ([header] + rows).joined(separator: "\n") + "\n" }

private func at(_ text: String) -> Int64 { UnixTime.seconds(dateOrTime: text)! }

/// `period_start` / `period_end` in the order file: a subscription's billing period, checked row by row and across the
/// file, every bad row named with its line.
@Suite struct BillingPeriodOrderFileTests {
    @Test func aSubscriptionsCyclesImportWithTheirPeriods() throws {
        let orders = try OrderFile.parse(
            text: csv(
                "paypal,SUB-01,I-ABC,purchase,9.99,USD,fulfilled,2026-01-01,2026-02-01",
                "paypal,SUB-02,I-ABC,purchase,9.99,USD,fulfilled,2026-02-01T00:00:00Z,2026-03-01T01:00:00+01:00",
                "paypal,ORD-1,5O190127TN364715T,purchase,9.99,USD,fulfilled,,",
                "paypercut,ORD-2,pi_2,purchase,9.99,USD,fulfilled,,"))
        #expect(orders[0].period == BillingPeriod(start: at("2026-01-01"), end: at("2026-02-01"), datesOnly: true))
        #expect(orders[1].period == BillingPeriod(start: at("2026-02-01"), end: at("2026-03-01")), "+01:00 is the same instant")
        #expect(orders[2].period == nil && orders[3].period == nil)
        // Dates (00:00 UTC, the merchant's zone unknown) put a payment near a boundary in doubt; date-times do not.
        #expect(orders[0].period?.datesOnly == true && orders[1].period?.datesOnly == false)
        let jan = try #require(orders[0].period)
        #expect(jan.nearADateBoundary(at("2026-01-01") + 13 * 3_600) && jan.nearADateBoundary(at("2026-02-01") - 13 * 3_600))
        #expect(!jan.nearADateBoundary(at("2026-01-01") + 15 * 3_600) && !jan.nearADateBoundary(at("2026-01-15")))
        #expect(!(try #require(orders[1].period)).nearADateBoundary(at("2026-02-01") + 3_600))
        // JSON Lines, the same keys.
        let lines = try OrderFile.parse(
            text:
                #"{"provider":"paypal","order_id":"SUB-3","transaction_ref":"I-ABC","intent":"purchase","amount":"9.99","currency":"USD","fulfilment":"open","period_start":"2026-03-01","period_end":"2026-04-01"}"#
        )
        #expect(lines.first?.period?.description == "2026-03-01 – 2026-04-01")
    }

    /// Each bad row, and why, with its line (the header is line 1).
    @Test(arguments: [
        (
            "paypal,S,I-ABC,purchase,1,USD,open,2026-01-01,",
            "line 2, period_end: missing: a billing period needs period_start and period_end"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,,2026-01-01",
            "line 2, period_start: missing: a billing period needs period_start and period_end"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,2026-02-01,2026-02-01",
            "line 2, period_end: 2026-02-01 is not after period_start 2026-02-01 (the end is excluded)"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,2026-03-01,2026-02-01",
            "line 2, period_end: 2026-02-01 is not after period_start 2026-03-01 (the end is excluded)"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,2026-13-01,2026-02-01",
            "line 2, period_start: '2026-13-01' is neither a date (2026-01-31, meaning 00:00 UTC) nor a date-time with its zone (2026-01-31T00:00:00Z)"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,2026-01-01T00:00:00,2026-02-01",
            "line 2, period_start: '2026-01-01T00:00:00' is neither a date (2026-01-31, meaning 00:00 UTC) nor a date-time with its zone (2026-01-31T00:00:00Z)"
        ),
        (
            "paypal,S,I-ABC,purchase,1,USD,open,01/01/2026,2026-02-01",
            "line 2, period_start: '01/01/2026' is neither a date (2026-01-31, meaning 00:00 UTC) nor a date-time with its zone (2026-01-31T00:00:00Z)"
        ),
        (
            "paypal,S,5O190127TN364715T,purchase,1,USD,open,2026-01-01,2026-02-01",
            "line 2, period_start: a billing period is only for an order of one subscription or billing agreement (I-…); transaction_ref is '5O190127TN364715T'"
        ),
        (
            "paypal,S,I-ABC I-DEF,purchase,1,USD,open,2026-01-01,2026-02-01",
            "line 2, period_start: a billing period is only for an order of one subscription or billing agreement (I-…); transaction_ref is 'I-ABC I-DEF'"
        ),
        (
            "paypal,S,I-,purchase,1,USD,open,2026-01-01,2026-02-01",
            "line 2, period_start: a billing period is only for an order of one subscription or billing agreement (I-…); transaction_ref is 'I-'"
        ),
        (
            "paypercut,S,pi_1,purchase,1,USD,open,2026-01-01,2026-02-01",
            "line 2, period_start: paypercut has no subscriptions payrecon splits by billing period: record each renewal as its own order, by the renewal's own transaction"
        )
    ])
    func aBadPeriodIsRefusedWithItsLine(row: String, problem: String) {
        do {
            let orders = try OrderFile.parse(text: csv(row))
            Issue.record("accepted: \(orders)")
        } catch {
            #expect(error.errors.map(\.description) == [problem])
        }
    }

    /// Across the file: two periods of one agreement that overlap, or an order of it without a period beside one with.
    @Test func periodsOfOneAgreementMustNotOverlapInTheFile() {
        do {
            let orders = try OrderFile.parse(
                text: csv(
                    "paypal,SUB-01,I-ABC,purchase,9.99,USD,open,2026-01-01,2026-02-01",
                    "paypal,SUB-02,I-ABC,purchase,9.99,USD,open,2026-02-01,2026-03-01",
                    "paypal,SUB-LATE,I-ABC,purchase,9.99,USD,open,2026-01-15,2026-02-15",
                    "paypal,SUB-ALL,I-ABC,purchase,9.99,USD,open,,",
                    "paypal,OTHER-01,I-OTHER,purchase,9.99,USD,open,2026-01-15,2026-02-15"))
            Issue.record("accepted: \(orders)")
        } catch {
            #expect(
                error.errors.map(\.description) == [
                    "line 4, period_start: order SUB-01 (line 2) is of the same agreement I-ABC and their periods overlap (2026-01-15 – 2026-02-15 and 2026-01-01 – 2026-02-01), so a renewal's payment would count on both",
                    "line 5, transaction_ref: order SUB-01 (line 2) is of the same agreement I-ABC and one of them has no billing period, so it would hold every payment of the agreement"
                ])
        }
    }

    @Test(arguments: [
        ("2026-01-31", Int64(1_769_817_600)), ("2026-01-31T00:00:00Z", 1_769_817_600), ("2026-01-31T01:00:00+01:00", 1_769_817_600),
        ("2026-01-31T12:30:00.250Z", 1_769_862_600), ("1970-01-01", 0)
    ])
    func datesAndTimes(text: String, seconds: Int64) {
        #expect(UnixTime.seconds(dateOrTime: text) == seconds)
        #expect(UnixTime.dateOrTime(1_769_817_600) == "2026-01-31")
        #expect(UnixTime.dateOrTime(1_769_862_600) == "2026-01-31T12:30:00Z")
    }

    @Test(arguments: ["2026-1-31", "2026-02-30", "26-01-31", "2026-01-31T00:00Z", "2026-01-31 ", "", "2026-01-31T00:00:00"])
    func notADateOrTime(text: String) {
        #expect(UnixTime.seconds(dateOrTime: text) == nil, "\(text)")
    }
}

/// Which order of a subscription a payment belongs to: the one whose period holds its creation, or none (said why).
@Suite struct RenewalMatchTests {
    static let jan = BillingPeriod(start: at("2026-01-01"), end: at("2026-02-01"))!
    static let feb = BillingPeriod(start: at("2026-02-01"), end: at("2026-03-01"))!
    static let apr = BillingPeriod(start: at("2026-04-01"), end: at("2026-05-01"))!
    static let lateJan = BillingPeriod(start: at("2026-01-15"), end: at("2026-02-15"))!

    static func match(_ created: String?, _ orders: [(String, BillingPeriod?)]) -> RenewalMatch {
        RenewalMatch.of(payment: "paypal payment S-1", agreement: "I-ABC", createdAt: created.map(at), orders: orders.map { ($0.0, $0.1) })
    }

    @Test func theOrderWhosePeriodHoldsThePayment() {
        let cycles: [(String, BillingPeriod?)] = [("JAN", Self.jan), ("FEB", Self.feb), ("APR", Self.apr)]
        #expect(Self.match("2026-01-05T10:00:00Z", cycles) == .order("JAN"))
        #expect(Self.match("2026-02-01", cycles) == .order("FEB"), "the start is the period's")
        #expect(Self.match("2026-01-31T23:59:59Z", cycles) == .order("JAN"), "the end is the next one's")
        #expect(Self.match("2026-04-08T10:00:00Z", cycles) == .order("APR"), "a retry three days later is still April's")
        #expect(Self.match("2026-01-05T10:00:00Z", [("ALL", nil), ("ALSO", nil)]) == .all, "without periods, as before")
        #expect(Self.match(nil, [("ALL", nil)]) == .all)
    }

    @Test(arguments: [
        (
            "2026-03-05T10:00:00Z",
            "paypal payment S-1 of I-ABC, created 2026-03-05T10:00:00Z, falls in no order's billing period: it falls in 2026-03-01 – 2026-04-01, between order FEB's period and order APR's. A renewal not recorded: import an order for that period"
        ),
        (
            "2026-05-05T10:00:00Z",
            "paypal payment S-1 of I-ABC, created 2026-05-05T10:00:00Z, falls in no order's billing period: it falls after the last recorded period (order APR's, which ended 2026-05-01). A renewal not recorded: import an order for that period"
        ),
        (
            "2025-12-05T10:00:00Z",
            "paypal payment S-1 of I-ABC, created 2025-12-05T10:00:00Z, falls in no order's billing period: it falls before the first recorded period (order JAN's, from 2026-01-01). A renewal not recorded: import an order for that period"
        )
    ])
    func aPaymentNoPeriodHoldsNamesThePeriodItFallsIn(created: String, detail: String) {
        #expect(Self.match(created, [("JAN", Self.jan), ("FEB", Self.feb), ("APR", Self.apr)]) == .unheld(detail: detail))
    }

    @Test func ambiguityCountsOnNoOrder() {
        #expect(
            Self.match("2026-01-20T00:00:00Z", [("JAN", Self.jan), ("LATE", Self.lateJan)])
                == .unheld(
                    detail:
                        "paypal payment S-1 of I-ABC, created 2026-01-20T00:00:00Z, is held by the billing periods of orders JAN (2026-01-01 – 2026-02-01), "
                        + "LATE (2026-01-15 – 2026-02-15), which overlap: counted on neither until the periods are corrected"))
        #expect(
            Self.match("2026-01-05T00:00:00Z", [("JAN", Self.jan), ("ALL", nil)])
                == .unheld(
                    detail:
                        "paypal payment S-1 of I-ABC is counted on no order: of its orders some have a billing period and ALL none (which would hold "
                        + "every payment); give each order of the agreement a period"))
        #expect(
            Self.match(nil, [("JAN", Self.jan)])
                == .unheld(
                    detail:
                        "paypal payment S-1 of I-ABC is counted on no order: the provider's answer does not say when it was created, so no billing "
                        + "period can be said to hold it"))
    }
}
