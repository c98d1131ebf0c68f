import Foundation
import Observability
import PayreconTesting
import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// Issue 40: a PayPal subscription reconciled one renewal at a time. Each order names the billing agreement and the
/// period it charges; a sale of the agreement is the order's whose period holds the sale's creation time as PayPal's
/// answer states it. Against paysim over real HTTP and a real PostgreSQL.
@Suite("Subscriptions by billing period", .serialized) struct SubscriptionPeriodTests {
    static let agreement = "I-YEAR2026"

    static func at(_ text: String) -> Int64 { UnixTime.seconds(dateOrTime: text)! }

    /// The order for `month` (1…12) of 2026: 9.99 USD, the month as its period.
    static func cycle(_ month: Int, refund: Int64 = 0, agreement: String = agreement) -> Order {
        var order = WorkerHarness.order(
            .paypal, String(format: "SUB-%02d", month), ref: agreement, intent: .purchase, amount: 999,
            currency: "USD", refund: refund, merchant: nil)
        let next = month == 12 ? "2027-01-01" : String(format: "2026-%02d-01", month + 1)
        order.period = BillingPeriod(start: at(String(format: "2026-%02d-01", month)), end: at(next))
        return order
    }

    /// The sale of `month`'s renewal, charged on the 5th (or `day`).
    static func sale(_ id: String, month: Int, day: Int = 5, state: String = "completed", agreement: String = agreement) -> String {
        #"{"id":"\#(id)","state":"\#(state)","amount":"9.99","currency":"USD","billing_agreement_id":"\#(agreement)","create_time":"2026-\#(String(format: "%02d", month))-\#(String(format: "%02d", day))T10:00:00Z"}"#
    }

    /// A year of monthly renewals, one order per cycle, delivered as PayPal sends them (a `PAYMENT.SALE.COMPLETED`
    /// each): April's renewal failed and was retried three days later, June's was refunded from the dashboard (the
    /// merchant's order wants it refunded), September's was charged back (a dispute the buyer won), March's order wants
    /// a refund payrecon must take from March's sale alone, and July's cycle the merchant never recorded.
    @Test func aYearOfRenewalsIsReconciledOneCycleAtATime() async throws {
        try await WorkerHarness.with { h in
            var sales: [String] = []
            for month in 1...12 {
                if month == 4 {
                    try await h.admin("/admin/paypal/sales", Self.sale("S-04-FAILED", month: 4, state: "denied"))
                    try await h.admin("/admin/paypal/sales", Self.sale("S-04", month: 4, day: 8))
                    sales += ["S-04-FAILED", "S-04"]
                } else {
                    let id = String(format: "S-%02d", month)
                    try await h.admin("/admin/paypal/sales", Self.sale(id, month: month))
                    sales.append(id)
                }
            }
            let usd = Currency(code: "USD")!
            let dashboard = await ActionSafetyTests.elsewhere(h).refundSale(
                "S-06", amount: Money(minorUnits: 999, currency: usd),
                requestID: "dashboard-refund-june")
            guard case .found = dashboard else { Issue.record("the dashboard refund failed: \(dashboard)"); return }
            try h.insert((1...12).filter { $0 != 7 }.map { Self.cycle($0, refund: $0 == 3 || $0 == 6 ? 999 : 0) })
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-SEPT","transaction_id":"S-09"}"#)
            try await h.admin("/admin/paypal/disputes", #"{"resolve":"PP-D-SEPT","outcome":"buyer"}"#)

            var ids: [Int64] = []
            for sale in sales {
                ids += try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"\#(sale)"}"#)
            }
            ids += try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"S-06"}"#)
            ids += try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.RESOLVED","resource_id":"PP-D-SEPT"}"#)
            ids += try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REVERSED","resource_id":"S-09"}"#)
            while await h.runOnce().done > 0 {}
            for id in ids {
                let d = try h.delivery(id)
                #expect(d.status == "done", "delivery \(id): \(d.outcome ?? "")")
            }

            // Each sale re-checked its own cycle's order only.
            #expect(try h.delivery(ids[0]).outcome == "re-checked paypal order SUB-01")
            #expect(try h.delivery(ids[4]).outcome == "re-checked paypal order SUB-04", "the retry three days later is April's")
            // No finding but the ones made on purpose: September's chargeback, on September's order alone, and July's
            // renewal, which no order records.
            let september = try h.openKinds(order: "SUB-09")
            #expect(september == ["reversed"], "\(september)")
            for month in (1...12).filter({ $0 != 7 && $0 != 3 && $0 != 9 }) {
                let order = String(format: "SUB-%02d", month), open = try h.openKinds(order: order)
                #expect(open.isEmpty, "\(order): \(open)")
            }
            let unknown = try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }
            #expect(unknown.map(\.transactionRef) == ["S-07"])
            let detail = try h.database.string("SELECT detail FROM discrepancies WHERE kind = 'unknown_order' AND transaction_ref = 'S-07'")
            #expect(detail.contains(Self.agreement) && detail.contains("2026-07-01 – 2026-08-01"), "\(detail)")

            // March's refund is planned on March's sale, for March's 9.99; June's was made already and plans nothing.
            let refunds = try h.actions().filter { $0.kind == .refund }
            #expect(refunds.count == 1)
            #expect(
                refunds.first?.orderID == "SUB-03" && refunds.first?.providerTarget == "S-03" && refunds.first?.amount.minorUnits == 999,
                "\(refunds)")

            // The merchant records July: its order takes the sale kept for it, and its check resolves the unknown_order.
            try h.insert(Self.cycle(7))
            _ = try await h.sweep()
            let july = try h.openKinds(order: "SUB-07")
            #expect(july.isEmpty, "\(july)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }.isEmpty)
            // And the sweep keeps every cycle as it was: one sale each, none counted twice.
            for month in (1...12).filter({ $0 != 3 && $0 != 9 }) {
                let order = String(format: "SUB-%02d", month), open = try h.openKinds(order: order)
                #expect(open.isEmpty, "after the sweep, \(order): \(open)")
            }
            #expect(try h.database.count("SELECT (snapshot->>'captured')::bigint FROM snapshots WHERE order_id = 'SUB-04'") == 999)
        }
    }

    /// A sale's refund (in either shape) delivered before the sale itself, both handled in one batch: the refund is
    /// found through the sale's own answer (its agreement, its creation time) and counts on that cycle alone; nothing is
    /// ever `unknown_order`.
    @Test(arguments: ["refund", "simulator"]) func aRefundBeforeItsSaleCountsOnItsCycle(shape: String) async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypal/sales", Self.sale("R-02", month: 2))
            try await h.admin("/admin/paypal/sales", Self.sale("R-03", month: 3))
            let usd = Currency(code: "USD")!
            let dashboard = await ActionSafetyTests.elsewhere(h).refundSale(
                "R-02", amount: Money(minorUnits: 999, currency: usd),
                requestID: "dashboard-refund-feb-\(shape)")
            guard case .found = dashboard else { Issue.record("the dashboard refund failed: \(dashboard)"); return }
            try h.insert(Self.cycle(2, refund: 999), Self.cycle(3))
            let refund = try h.storeWebhook(
                #"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"R-02","shape":"\#(shape)"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"R-02"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"R-03"}"#)
            while await h.runOnce().done > 0 {}
            #expect(try h.delivery(try #require(refund.first)).outcome == "re-checked paypal order SUB-02")
            let february = try h.openKinds(order: "SUB-02"), march = try h.openKinds(order: "SUB-03")
            #expect(february.isEmpty && march.isEmpty, "February \(february), March \(march)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.isEmpty)
            #expect(try h.actions().isEmpty)
            #expect(try h.database.count("SELECT (snapshot->>'refunded')::bigint FROM snapshots WHERE order_id = 'SUB-03'") == 0)
        }
    }

    /// No webhook came: `payrecon backfill` lists each renewal in PayPal's Transaction Search (T0002), and each goes
    /// to its own cycle's order; the one no order records is `unknown_order` naming the agreement and where it falls.
    @Test func backfillFindsEachRenewalsCycle() async throws {
        try await WorkerHarness.with { h in
            func day(_ daysAgo: Int) -> Int64 { Self.at(FeesTests.day(daysAgo)) }
            for daysAgo in [4, 3, 2] {
                try await h.admin(
                    "/admin/paypal/sales",
                    #"{"id":"BF-\#(daysAgo)","state":"completed","amount":"9.99","currency":"USD","billing_agreement_id":"I-BACKFILL","create_time":"\#(BackfillTests.at(daysAgo))"}"#
                )
            }
            var first = Self.cycle(1, agreement: "I-BACKFILL"), second = Self.cycle(2, agreement: "I-BACKFILL")
            first.period = BillingPeriod(start: day(4), end: day(3))
            second.period = BillingPeriod(start: day(3), end: day(2))
            try h.insert(first, second)
            let r = try await BackfillTests.backfill(h, "--since", "5d")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let one = try h.openKinds(order: "SUB-01"), two = try h.openKinds(order: "SUB-02")
            #expect(one.isEmpty && two.isEmpty, "SUB-01 \(one), SUB-02 \(two)")
            let unknown = try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }
            #expect(unknown.map(\.transactionRef) == ["BF-2"])
            let detail = try h.database.string("SELECT detail FROM discrepancies WHERE transaction_ref = 'BF-2'")
            #expect(detail.contains("I-BACKFILL") && detail.contains("after the last recorded period (order SUB-02's"), "\(detail)")
        }
    }

    /// A sale's refunds count on the order whose period holds the sale, wherever an earlier event recorded them: March's
    /// sale and a 3.00 refund of it were first linked to February's order (its period wrongly covered mid-March); the
    /// periods corrected, March's order wants 5.00 refunded and a 1.00 refund arrives. Only 1.00 more is planned (the
    /// refund recorded on February's order counted: without it, 4.00, and 8.00 refunded in all).
    @Test func aSalesRefundsCountWhereverAnEarlierEventRecordedThem() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypal/sales", Self.sale("M-03", month: 3))
            var february = Self.cycle(2)
            february.period = BillingPeriod(start: Self.at("2026-02-01"), end: Self.at("2026-03-15"))
            try h.insert(february)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"M-03"}"#)
            let usd = Currency(code: "USD")!
            for (amount, key) in [(300, "dashboard-3"), (100, "dashboard-1")] {
                if key == "dashboard-1" {
                    try h.insert(Self.cycle(2), Self.cycle(3, refund: 500))  // the periods corrected; March wants 5.00 back
                }
                let refund = await ActionSafetyTests.elsewhere(h).refundSale(
                    "M-03", amount: Money(minorUnits: Int64(amount), currency: usd), requestID: key)
                guard case .found(let answer) = refund, let id = answer["id"]?.stringValue else { Issue.record("\(refund)"); return }
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"\#(id)"}"#)
                while await h.runOnce().done > 0 {}
            }
            _ = try await h.sweep()
            let refunds = try h.actions().filter { $0.kind == .refund }
            #expect(refunds.map(\.amount.minorUnits) == [100], "\(refunds.map { ($0.orderID, $0.amount) })")
            #expect(refunds.allSatisfy { $0.orderID == "SUB-03" && $0.providerTarget == "M-03" })
        }
    }

    /// A dispute of a renewal no order records yet is kept with its sale: when the cycle's order is recorded wanting
    /// the sale refunded, the open dispute holds the refund (the buyer may be paid twice otherwise).
    @Test func aDisputeOfAnUnrecordedRenewalHoldsItsRefundOnceRecorded() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypal/sales", Self.sale("D-06", month: 6))
            try await h.admin("/admin/paypal/sales", Self.sale("D-07", month: 7))
            try h.insert(Self.cycle(6))
            try await h.admin("/admin/paypal/disputes", #"{"id":"PP-D-JULY","transaction_id":"D-07"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"D-07"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.CREATED","resource_id":"PP-D-JULY"}"#)
            while await h.runOnce().done > 0 {}
            #expect(
                try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }.map(\.transactionRef) == ["D-07"])
            try h.insert(Self.cycle(7, refund: 999))
            _ = try await h.sweep()
            #expect(try h.actions().filter { $0.kind == .refund }.isEmpty, "no refund while the buyer disputes the sale")
            let july = try h.openKinds(order: "SUB-07")
            #expect(july.contains("disputed"), "\(july)")
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" && $0.status == "open" }.isEmpty)
        }
    }

    /// A period given as dates is read as 00:00 UTC; for a merchant ten hours east, a renewal charged at 20:00 UTC on
    /// the last day is the next cycle's. Its order still counts it (and says so), but takes no refund from it on that
    /// guess: the order wanting it refunded gets action_not_allowed naming the doubt, never a refund.
    @Test func noRefundIsTakenFromARenewalMadeNearADateOnlyBoundary() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypal/sales",
                #"{"id":"TZ-1","state":"completed","amount":"9.99","currency":"USD","billing_agreement_id":"\#(Self.agreement)","create_time":"2026-02-28T20:00:00Z"}"#
            )
            var february = Self.cycle(2, refund: 999)
            february.period?.datesOnly = true
            try h.insert(february)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"TZ-1"}"#)
            while await h.runOnce().done > 0 {}
            #expect(try h.actions().isEmpty)
            #expect(try h.openKinds(order: "SUB-02").contains("action_not_allowed"))
            let detail = try h.database.string("SELECT detail FROM discrepancies WHERE order_id = 'SUB-02' AND kind = 'action_not_allowed'")
            #expect(detail.contains("within 14 hours") && detail.contains("with a time and zone"), "\(detail)")
        }
    }

    /// paysim's subscription book (`POST /admin/paypal/subscriptions`): a year of monthly renewals with April failed and
    /// retried three days later, June refunded and September charged back, as PayPal's records show them. One order
    /// per cycle, June's wanting its refund: every cycle reconciles clean but September's chargeback.
    @Test func paysimsSubscriptionYearReconcilesCycleByCycle() async throws {
        try await WorkerHarness.with { h in
            let book = try await h.admin(
                "/admin/paypal/subscriptions",
                #"""
                {"id":"I-BOOK","amount":"9.99","currency":"USD","start":"2026-01-05T10:00:00Z","cycles":12,
                 "failed_then_retried":[4],"retry_after_days":3,"refunded":[6],"charged_back":[9]}
                """#)
            let cycles = try #require(book["cycles"] as? [[String: Any]])
            #expect(cycles.count == 12)
            #expect(cycles[3]["sale"] as? String == "I-BOOK-04-R" && cycles[3]["create_time"] as? String == "2026-04-08T10:00:00Z")
            #expect(cycles[5]["refund"] != nil && cycles[8]["dispute"] as? String == "PP-D-I-BOOK-09")
            try h.insert((1...12).map { Self.cycle($0, refund: $0 == 6 ? 999 : 0, agreement: "I-BOOK") })
            for cycle in cycles {
                let sale = try #require(cycle["sale"] as? String)
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"\#(sale)"}"#)
                for failed in cycle["failed"] as? [[String: Any]] ?? [] {
                    try h.storeWebhook(
                        #"{"provider":"paypal","event_type":"PAYMENT.SALE.DENIED","resource_id":"\#(failed["id"] as? String ?? "")"}"#)
                }
                if let refund = cycle["refund"] as? String {
                    try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.REFUNDED","resource_id":"\#(refund)"}"#)
                }
                if let dispute = cycle["dispute"] as? String {
                    try h.storeWebhook(#"{"provider":"paypal","event_type":"CUSTOMER.DISPUTE.RESOLVED","resource_id":"\#(dispute)"}"#)
                }
            }
            while await h.runOnce().done > 0 {}
            for month in 1...12 {
                let order = String(format: "SUB-%02d", month), open = try h.openKinds(order: order)
                #expect(open == (month == 9 ? ["reversed"] : []), "\(order): \(open)")
            }
            #expect(try h.discrepancies(.paypal).filter { $0.kind == "unknown_order" }.isEmpty)
            #expect(try h.actions().isEmpty)
        }
    }

    /// A cycle recorded before PayPal charges it is a renewal still to come: pending from its period's start (no finding,
    /// verdict wait), not missing; one whose period is over with no sale is missing_at_provider (the verdict refuses),
    /// and a cancelled one of those is nothing.
    @Test func aCycleNotChargedYetIsPendingNotMissing() async throws {
        try await WorkerHarness.with { h in
            let now = Int64(Date().timeIntervalSince1970)
            var upcoming = Self.cycle(1, agreement: "I-EARLY")
            upcoming.period = BillingPeriod(start: now - 3_600, end: now + 30 * 86_400)
            var overdue = Self.cycle(2, agreement: "I-EARLY")
            overdue.period = BillingPeriod(start: now - 40 * 86_400, end: now - 3_600)
            var cancelled = Self.cycle(3, agreement: "I-EARLY")
            cancelled.period = BillingPeriod(start: now - 80 * 86_400, end: now - 40 * 86_400)
            cancelled.fulfilment = .cancelled
            try h.insert(upcoming, overdue, cancelled)
            _ = try await h.sweep()
            #expect(try h.openKinds(order: "SUB-01").isEmpty)
            #expect(try h.openKinds(order: "SUB-02") == ["missing_at_provider"])
            #expect(try h.openKinds(order: "SUB-03").isEmpty)
            let (_, verdict, _) = await h.checker.verify(upcoming, logger: Logger())
            #expect(
                verdict?.outcome == .wait && verdict?.reasons.contains { $0.contains("no sale in this period yet") } == true,
                "\(String(describing: verdict))")
        }
    }

    /// Without periods nothing changes: one order for the agreement sums every sale.
    @Test func withoutPeriodsOneOrderSumsEverySale() async throws {
        try await WorkerHarness.with { h in
            for month in 1...3 {
                try await h.admin("/admin/paypal/sales", Self.sale("T-0\(month)", month: month, agreement: "I-SUMMED"))
            }
            try h.insert(
                WorkerHarness.order(
                    .paypal, "SUB-ALL", ref: "I-SUMMED", intent: .purchase, amount: 2997, currency: "USD",
                    merchant: nil))
            for month in 1...3 {
                try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.SALE.COMPLETED","resource_id":"T-0\#(month)"}"#)
            }
            while await h.runOnce().done > 0 {}
            let open = try h.openKinds(order: "SUB-ALL")
            #expect(open.isEmpty, "\(open)")
            #expect(try h.database.count("SELECT (snapshot->>'captured')::bigint FROM snapshots WHERE order_id = 'SUB-ALL'") == 2997)
        }
    }

    /// The import refuses periods of one agreement that overlap what is stored, or an order of it without a period,
    /// naming both orders; nothing of the file is kept.
    @Test func overlappingPeriodsAreRefusedAgainstWhatIsStored() async throws {
        try await WorkerHarness.with { h in
            try h.insert(Self.cycle(1), Self.cycle(2))
            var overlapping = Self.cycle(3)
            overlapping.orderID = "SUB-LATE-FEB"
            overlapping.period = BillingPeriod(start: Self.at("2026-02-15"), end: Self.at("2026-03-15"))
            #expect {
                try h.insert(Self.cycle(4), overlapping)
            } throws: { error in
                let text = "\(error)"
                return error is OrderStore.PeriodConflict && text.contains("SUB-LATE-FEB") && text.contains("SUB-02")
            }
            var unperiodic = WorkerHarness.order(
                .paypal, "SUB-NONE", ref: Self.agreement, intent: .purchase, amount: 999, currency: "USD",
                merchant: nil)
            unperiodic.period = nil
            #expect(throws: OrderStore.PeriodConflict.self) { try h.insert(unperiodic) }
            #expect(try h.database.count("SELECT count(*) FROM orders") == 2, "nothing of a refused import is kept")
        }
    }
}
