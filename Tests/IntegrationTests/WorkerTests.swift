import PayreconTesting
import Foundation
import Observability
import PaysimCore
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing
import Worker

/// A hand-written PXP event (a hint: only the merchantTransactionId / systemTransactionId and owner are read).
func pxpEvent(_ mtid: String? = nil, system: String? = nil, merchant: String = "M1", site: String = "S1") -> String {
    var data: [String] = []
    if let mtid { data.append(#""merchantTransactionId":"\#(mtid)""#) }
    if let system { data.append(#""systemTransactionId":"\#(system)""#) }
    return
        #"{"eventCategory":"Transaction","eventCode":"transaction-authorised","eventOwner":{"merchant":"\#(merchant)","site":"\#(site)"},"eventData":{\#(data.joined(separator: ","))}}"#
}

/// A hand-written PayPal event whose resource is the checkout order itself.
func paypalOrderEvent(_ orderID: String) -> String {
    #"{"id":"WH-\#(UUID().uuidString)","event_type":"CHECKOUT.ORDER.APPROVED","resource_type":"checkout-order","resource":{"id":"\#(orderID)"}}"#
}

/// `payrecon work` against real PostgreSQL and paysim over HTTP.
@Suite("Worker")
struct WorkerTests {
    // MARK: A delivery is processed once

    @Test(arguments: ["single", "array", "nested"])
    func pxpDeliveryIsProcessedOnceWhateverTheBodyShape(shape: String) async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-1", value: "20.00")
            try h.insert(WorkerHarness.order(.pxp, "O-1", ref: "TX-1", amount: 2000, fulfilment: .fulfilled))
            let flags = shape == "array" ? #","array":true"# : shape == "nested" ? #","nested":true"# : ""
            let ids = try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"TX-1"\#(flags)}"#)
            #expect(ids.count == 1)
            let stored = try h.delivery(ids[0])
            let body = String(decoding: stored.body, as: UTF8.self)
            #expect(shape != "array" || body.hasPrefix("["))
            #expect(shape != "nested" || body.contains("transactionData"))

            let first = await h.runOnce()
            #expect(first.done == 1 && first.retried == 0 && first.dead == 0)
            let d = try h.delivery(ids[0])
            #expect(d.status == "done" && d.attempts == 1 && d.processedAt != nil && d.lastError == nil)
            let actions = try h.actions()
            #expect(actions.map(\.idempotencyKey) == ["pxp:O-1:capture:2000"])
            #expect(actions.first?.kind == .capture && actions.first?.amount.minorUnits == 2000 && actions.first?.status == .pending)

            let second = await h.runOnce()
            #expect(second == QueueWorker.Totals())
            #expect(try h.actions().count == 1)
            #expect(try h.delivery(ids[0]).attempts == 1)
        }
    }

    @Test func pxpArrayBodyChecksEveryEventItNames() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-A", value: "10.00")
            try await h.seedPXP("TX-B", value: "30.00")
            try h.insert(
                WorkerHarness.order(.pxp, "A", ref: "TX-A", amount: 1000),
                WorkerHarness.order(.pxp, "B", ref: "TX-B", amount: 3000, fulfilment: .cancelled))
            try h.store(.pxp, json: "[\(pxpEvent("TX-A")),\(pxpEvent("TX-B"))]")
            #expect(await h.runOnce().done == 1)
            #expect(Set(try h.actions().map(\.idempotencyKey)) == ["pxp:A:capture:1000", "pxp:B:void:0"])
        }
    }

    @Test func pxpEventNamingOnlyAKnownSystemTransactionIdFindsItsOrder() async throws {
        try await WorkerHarness.with { h in
            let system = try await h.seedPXP("TX-S", value: "20.00")
            var order = WorkerHarness.order(.pxp, "S", ref: "TX-S", amount: 2000, fulfilment: .open)
            try h.insert(order)
            // Learns the systemTransactionId.
            #expect(await h.checker.check(order, logger: Logger()) == .checked(CheckOutcome(), matched: true))
            order.fulfilment = .fulfilled
            try h.insert(order)
            let id = try h.store(.pxp, json: pxpEvent(system: system))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).status == "done")
            #expect(try h.actions().map(\.idempotencyKey) == ["pxp:S:capture:2000"])
        }
    }

    /// PayPal resources reach their order through supplementary_data.related_ids, or (without it) the `up` links:
    /// capture → order for a purchase, capture → authorization → order for an authorize order.
    @Test(arguments: ["related_ids", "up links"])
    func paypalCaptureEventFindsItsOrder(route: String) async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                """
                [{"id":"PP-CAP","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"25.00","captures":[{"id":"CAP-1"}]},
                 {"id":"PP-AUTH","intent":"AUTHORIZE","status":"COMPLETED","currency":"USD","amount":"30.00",
                  "authorizations":[{"id":"AUTH-2","status":"PARTIALLY_CAPTURED"}],"captures":[{"id":"CAP-2","amount":"10.00"}]}]
                """)
            try h.insert(
                WorkerHarness.order(
                    .paypal, "P-CAP", ref: "PP-CAP", intent: .purchase, amount: 2500, currency: "USD", refund: 500, merchant: nil),
                WorkerHarness.order(.paypal, "P-AUTH", ref: "PP-AUTH", amount: 3000, currency: "USD", merchant: nil))
            let strip: (([String: Any]) -> Any)? =
                route == "up links"
                ? { event in
                    var e = event
                    var resource = e["resource"] as! [String: Any]
                    resource.removeValue(forKey: "supplementary_data")
                    e["resource"] = resource
                    return e
                } : nil
            let ids =
                try h.storeWebhook(
                    #"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-1"}"#, transform: strip)
                + h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-2"}"#, transform: strip)
            if route == "up links" {
                #expect(try ids.allSatisfy { !String(decoding: try h.delivery($0).body, as: UTF8.self).contains("related_ids") })
            }
            let totals = await h.runOnce()
            #expect(totals.done == 2)
            #expect(Set(try h.actions().map(\.idempotencyKey)) == ["paypal:P-CAP:refund:500", "paypal:P-AUTH:capture:3000"])
            let byKey = Dictionary(uniqueKeysWithValues: try h.actions().map { ($0.idempotencyKey, $0) })
            #expect(byKey["paypal:P-CAP:refund:500"]?.providerTarget == "CAP-1")
            #expect(byKey["paypal:P-AUTH:capture:3000"]?.providerTarget == "AUTH-2")
            #expect(byKey["paypal:P-AUTH:capture:3000"]?.amount.minorUnits == 2000)
        }
    }

    // MARK: The decision table, end to end

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var provider: Provider
        /// (admin path, JSON) seeds for paysim.
        var seeds: [(String, String)]
        var order: Order
        var kinds: Set<String>
        var actions: [String: Int64]  // idempotency key → amount
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "PXP fulfilled authorised → capture", provider: .pxp,
            seeds: [
                (
                    "/admin/pxp/transactions",
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Authorisation","currency":"GBP","value":"20.00"}"#
                )
            ],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000, fulfilment: .fulfilled),
            kinds: [], actions: ["pxp:O:capture:2000": 2000]),
        Row(
            name: "PXP cancelled authorised → void", provider: .pxp,
            seeds: [
                (
                    "/admin/pxp/transactions",
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Authorisation","currency":"GBP","value":"20.00"}"#
                )
            ],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000, fulfilment: .cancelled),
            kinds: [], actions: ["pxp:O:void:0": 2000]),
        Row(
            name: "PXP captured purchase with refund_amount → refund", provider: .pxp,
            seeds: [
                (
                    "/admin/pxp/transactions",
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Purchase","currency":"GBP","value":"20.00","state":"Captured"}"#
                )
            ],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", intent: .purchase, amount: 2000, refund: 500),
            kinds: [], actions: ["pxp:O:refund:500": 500]),
        Row(
            name: "PXP open order above the authorisation → increment", provider: .pxp,
            seeds: [
                (
                    "/admin/pxp/transactions",
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Authorisation","currency":"GBP","value":"20.00"}"#
                )
            ],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2500, fulfilment: .open),
            kinds: [], actions: ["pxp:O:increment:2500": 500]),
        Row(
            name: "PXP purchase captured short → amount_mismatch", provider: .pxp,
            seeds: [
                (
                    "/admin/pxp/transactions",
                    #"{"merchant":"M1","site":"S1","merchantTransactionId":"TX","intent":"Purchase","currency":"GBP","value":"15.00","state":"Captured"}"#
                )
            ],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", intent: .purchase, amount: 2000),
            kinds: ["amount_mismatch"], actions: [:]),
        Row(
            name: "PXP order paysim does not have → missing_at_provider", provider: .pxp, seeds: [],
            order: WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000),
            kinds: ["missing_at_provider"], actions: [:]),
        Row(
            name: "PayPal fulfilled authorised → capture", provider: .paypal,
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"TX","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#
                )
            ],
            order: WorkerHarness.order(.paypal, "O", ref: "TX", amount: 2000, currency: "USD", merchant: PayPalOrder.defaultMerchantID),
            kinds: [], actions: ["paypal:O:capture:2000": 2000]),
        Row(
            name: "PayPal cancelled authorised → void", provider: .paypal,
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"TX","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#
                )
            ],
            order: WorkerHarness.order(.paypal, "O", ref: "TX", amount: 2000, currency: "USD", fulfilment: .cancelled, merchant: nil),
            kinds: [], actions: ["paypal:O:void:0": 2000]),
        Row(
            name: "PayPal fulfilled above the authorisation → action_not_allowed (no increment)", provider: .paypal,
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"TX","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]}"#
                )
            ],
            order: WorkerHarness.order(.paypal, "O", ref: "TX", amount: 2500, currency: "USD", merchant: nil),
            kinds: ["action_not_allowed"], actions: [:]),
        Row(
            name: "PayPal merchant mismatch blocks the capture", provider: .paypal,
            seeds: [
                (
                    "/admin/paypal/orders",
                    #"{"id":"TX","intent":"AUTHORIZE","currency":"USD","amount":"20.00","merchant_id":"SOMEONEELSE","authorizations":[{"id":"AUTH-1"}]}"#
                )
            ],
            order: WorkerHarness.order(.paypal, "O", ref: "TX", amount: 2000, currency: "USD", merchant: PayPalOrder.defaultMerchantID),
            kinds: ["merchant_mismatch"], actions: [:]),
        Row(
            name: "PayPal captured purchase with refund_amount → refund", provider: .paypal,
            seeds: [
                ("/admin/paypal/orders", #"{"id":"TX","intent":"CAPTURE","currency":"USD","amount":"20.00","captures":[{"id":"CAP-1"}]}"#)
            ],
            order: WorkerHarness.order(
                .paypal, "O", ref: "TX", intent: .purchase, amount: 2000, currency: "USD", refund: 2000, merchant: nil),
            kinds: [], actions: ["paypal:O:refund:2000": 2000])
    ]

    @Test(arguments: rows)
    func decisionTableRow(_ row: Row) async throws {
        try await WorkerHarness.with { h in
            for (path, json) in row.seeds { try await h.admin(path, json) }
            try h.insert(row.order)
            let id = try h.store(row.provider, json: row.provider == .pxp ? pxpEvent("TX") : paypalOrderEvent("TX"))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).status == "done")
            #expect(try h.openKinds(order: "O") == row.kinds)
            let actions = try h.actions()
            #expect(Dictionary(uniqueKeysWithValues: actions.map { ($0.idempotencyKey, $0.amount.minorUnits) }) == row.actions)
            // Checking again changes nothing but the occurrence counts.
            guard case .checked = await h.checker.check(row.order, logger: Logger()) else { Issue.record("second check failed"); return }
            #expect(try h.actions().count == actions.count)
            #expect(try h.discrepancies().allSatisfy { $0.occurrences == 2 && $0.status == "open" })
        }
    }

    /// `work --batch N` caps the provider calls in flight at N, as the provider counts them, while twice as many
    /// deliveries are in hand.
    @Test func workKeepsAtMostBatchProviderCallsInFlight() async throws {
        try await WorkerHarness.with { h in
            let n = 24
            try await h.seedPXPOrders(n, fulfilment: .open)
            for i in 0..<n { try h.store(.pxp, json: pxpEvent("TX-\(i)")) }
            try await h.faults(#"{"latency_ms":150}"#)
            let env = h.payreconEnvironment
            let run = try await PayreconProcess.run(["work", "--once", "--batch", "3"], environment: env)
            #expect(run.exitCode == 0, "\(run.stdout)\n\(run.stderr)")
            #expect(try h.database.count("SELECT count(*) FROM deliveries WHERE status = 'done'") == Int64(n))
            let stats = try await h.admin("/admin/stats", method: "GET")
            let most = try #require(stats["provider_requests_in_flight_max"] as? Int)
            #expect(most <= 3, "\(most) provider calls in flight at once with --batch 3")
            #expect(most >= 2, "the worker never ran calls side by side")
        }
    }

    /// The worker's lease renewal once deadlocked with its own completion flush (the bench: "40P01 deadlock
    /// detected"): one multi-row UPDATE renewing every held delivery, another completing some of them, each locking
    /// rows in its own order. A renewal now skips a row another transaction holds (that one is being completed or
    /// failed) instead of waiting for it.
    @Test func aLeaseRenewalNeverWaitsOnADeliveryAnotherTransactionHolds() async throws {
        try await WorkerHarness.with { h in
            let ids = try (1...3).map { try h.store(.pxp, json: pxpEvent("TX-R\($0)")) }
            let conn = try h.database.connect(); defer { conn.close() }
            #expect(try DeliveryQueue.claim(owner: "w", lease: .seconds(60), limit: 10, on: conn).map(\.id).sorted() == ids)
            let completing = try h.database.connect(); defer { completing.close() }
            _ = try completing.execute("BEGIN")
            _ = try completing.execute("UPDATE deliveries SET outcome = 'x' WHERE id = $1", [.int64(ids[1])])
            _ = try conn.execute("SET statement_timeout = '3s'")
            let renewed = try await offload { try DeliveryQueue.renew(ids: ids, owner: "w", lease: .seconds(60), on: conn) }
            #expect(renewed.sorted() == [ids[0], ids[2]])
            _ = try completing.execute("ROLLBACK")
        }
    }

    // MARK: A worker killed mid-delivery

    @Test func deliveryOfAWorkerThatDiedIsProcessedByAnotherAfterTheLeaseAndActionsRunOnce() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-K", value: "20.00")
            let order = WorkerHarness.order(.pxp, "K", ref: "TX-K", amount: 2000, fulfilment: .fulfilled)
            try h.insert(order)
            let conn = try h.database.connect(); defer { conn.close() }
            // While a lease holds, no other worker claims the delivery and `events retry` does not take it away.
            let held = try h.store(.pxp, json: pxpEvent("TX-HELD"))
            #expect(try DeliveryQueue.claim(owner: "holder", lease: .seconds(60), limit: 10, on: conn).map(\.id) == [held])
            #expect(try DeliveryQueue.claim(owner: "peer", lease: .seconds(60), limit: 10, on: conn).isEmpty)
            #expect(try DeliveryQueue.retry(id: held, on: conn) == 0)
            #expect(try DeliveryQueue.renew(ids: [held], owner: "peer", lease: .seconds(60), on: conn).isEmpty)
            #expect(try DeliveryQueue.complete(id: held, owner: "holder", on: conn))

            let id = try h.store(.pxp, json: pxpEvent("TX-K"))
            let claimed = try DeliveryQueue.claim(owner: "crashed", lease: .seconds(1), limit: 10, on: conn)
            #expect(claimed.map(\.id) == [id])
            // The crashed worker got as far as checking the order (emitting the capture) before it died.
            guard case .checked(let outcome, _) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(outcome.actionsEmitted == 1)

            var done = 0
            let processed = try await h.eventually(15) {
                done += await h.runOnce(owner: "survivor").done
                return done > 0
            }
            #expect(processed && done == 1)
            let d = try h.delivery(id)
            #expect(d.status == "done" && d.attempts == 2)
            // The crashed worker coming back cannot record an outcome for a delivery it no longer holds.
            #expect(try DeliveryQueue.complete(id: id, owner: "crashed", on: conn) == false)
            #expect(try DeliveryQueue.fail(id: id, owner: "crashed", error: "late", retryAfter: .seconds(1), on: conn) == false)
            #expect(try h.actions().map(\.idempotencyKey) == ["pxp:K:capture:2000"])

            let first = await h.executor.executePending()
            #expect(first.succeeded == 1 && first.failed == 0)
            let again = await h.executor.executePending()
            #expect(again == ActionExecutor.Totals())
            #expect(try h.actions().map(\.status) == [.succeeded])
            // An executor that died after the call but before recording it: the next one re-fetches first, sees the
            // capture made, and does not send it again.
            try h.execute("UPDATE actions SET status = 'pending', provider_ref = NULL")
            let retried = await h.executor.executePending()
            #expect(retried.succeeded == 0 && retried.failed == 0 && retried.deferred == 0)
            #expect(try h.actions().map(\.status) == [.superseded])
            let log = try await h.paysimLog(provider: "pxp")
            #expect(log.filter { $0["result"] as? String == "applied" }.count == 1)
            #expect(log.count == 1, "the capture is sent once: \(log)")
            // The order is now captured in full: checking again emits nothing and finds nothing.
            #expect(await h.checker.check(order, logger: Logger()) == .checked(CheckOutcome(), matched: true))
        }
    }

    @Test func paypalActionsExecutedTwiceCallPayPalOncePerAction() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPayPal(
                #"""
                [{"id":"PP-1","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-1"}]},
                 {"id":"PP-2","intent":"AUTHORIZE","currency":"USD","amount":"15.00","authorizations":[{"id":"AUTH-2"}]}]
                """#)
            try h.insert(
                WorkerHarness.order(.paypal, "P1", ref: "PP-1", amount: 2000, currency: "USD", merchant: nil),
                WorkerHarness.order(.paypal, "P2", ref: "PP-2", amount: 1500, currency: "USD", fulfilment: .cancelled, merchant: nil))
            try h.store(.paypal, json: paypalOrderEvent("PP-1"))
            try h.store(.paypal, json: paypalOrderEvent("PP-2"))
            #expect(await h.runOnce().done == 2)
            #expect(Set(try h.actions().map(\.idempotencyKey)) == ["paypal:P1:capture:2000", "paypal:P2:void:0"])
            #expect(await h.executor.executePending().succeeded == 2)
            #expect(await h.executor.executePending() == ActionExecutor.Totals())
            try h.execute("UPDATE actions SET status = 'pending'")  // as if the outcomes were never recorded
            _ = await h.executor.executePending()
            let log = try await h.paysimLog(provider: "paypal")
            #expect(log.filter { $0["result"] as? String == "applied" }.count == 2)
            #expect(Set(log.compactMap { $0["idempotency_key"] as? String }) == ["paypal:P1:capture:2000", "paypal:P2:void:0"])
        }
    }

    // MARK: Transient provider faults

    @Test(arguments: [Provider.pxp, .paypal])
    func providerErrorsAreRetriedLaterThenProcessed(provider: Provider) async throws {
        try await WorkerHarness.with { h in
            if provider == .pxp {
                try await h.seedPXP("TX", value: "20.00")
                try h.insert(WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000))
            } else {
                try await h.seedPayPal(
                    #"{"id":"TX","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"A1"}]}"#)
                try h.insert(WorkerHarness.order(.paypal, "O", ref: "TX", amount: 2000, currency: "USD", merchant: nil))
            }
            let id = try h.store(provider, json: provider == .pxp ? pxpEvent("TX") : paypalOrderEvent("TX"))
            try await h.faults(#"{"error_rate":1.0}"#)
            let before = Date()
            let totals = await h.runOnce(baseDelay: .seconds(60))
            #expect(totals.retried == 1 && totals.done == 0)
            var d = try h.delivery(id)
            #expect(d.status == "pending" && d.attempts == 1)
            #expect(d.nextAttemptAt >= before.addingTimeInterval(30))  // backoff ≥ half of base·2⁰
            #expect(d.nextAttemptAt <= Date().addingTimeInterval(61))
            #expect(d.lastError?.contains("500") == true, "\(d.lastError ?? "nil")")
            #expect(try h.actions().isEmpty)
            // Not due yet: another pass does nothing.
            #expect(await h.runOnce() == QueueWorker.Totals())

            try await h.clearFaults()
            try h.execute("UPDATE deliveries SET next_attempt_at = now() WHERE id = $1", [.int64(id)])
            #expect(await h.runOnce().done == 1)
            d = try h.delivery(id)
            #expect(d.status == "done" && d.attempts == 2 && d.lastError == nil)
            #expect(try h.actions().map(\.idempotencyKey) == ["\(provider.rawValue):O:capture:2000"])
        }
    }

    @Test func tooManyRequestsHonoursRetryAfter() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            try h.insert(WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000))
            let id = try h.store(.pxp, json: pxpEvent("TX"))
            try await h.faults(#"{"rate_429":1.0,"retry_after":120}"#)
            let before = Date()
            #expect(await h.runOnce(baseDelay: .seconds(1)).retried == 1)
            let d = try h.delivery(id)
            #expect(d.status == "pending" && d.attempts == 1)
            #expect(d.nextAttemptAt >= before.addingTimeInterval(120), "next attempt \(d.nextAttemptAt) vs \(before)")
            #expect(d.nextAttemptAt <= Date().addingTimeInterval(121))
            #expect(d.lastError?.contains("429") == true, "\(d.lastError ?? "nil")")
        }
    }

    // MARK: Dead after the last attempt

    @Test func deadAfterTheLastAttemptThenRetriedByHand() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX", value: "20.00")
            try h.insert(WorkerHarness.order(.pxp, "O", ref: "TX", amount: 2000))
            let id = try h.store(.pxp, json: pxpEvent("TX"))
            try await h.faults(#"{"error_rate":1.0}"#)
            #expect(await h.runOnce(maxAttempts: 2).retried == 1)
            try h.execute("UPDATE deliveries SET next_attempt_at = now() WHERE id = $1", [.int64(id)])
            #expect(await h.runOnce(maxAttempts: 2).dead == 1)
            var d = try h.delivery(id)
            #expect(d.status == "dead" && d.attempts == 2 && d.processedAt != nil)
            #expect(d.lastError?.hasPrefix("gave up after 2 attempts: ") == true, "\(d.lastError ?? "nil")")
            #expect(await h.runOnce(maxAttempts: 2) == QueueWorker.Totals())  // dead is never claimed

            let conn = try h.database.connect(); defer { conn.close() }
            #expect(try DeliveryQueue.retry(id: id, on: conn) == 1)
            d = try h.delivery(id)
            #expect(d.status == "pending" && d.attempts == 0)
            try await h.clearFaults()
            #expect(await h.runOnce(maxAttempts: 2).done == 1)
            d = try h.delivery(id)
            #expect(d.status == "done" && d.attempts == 1)
            #expect(try h.actions().count == 1)
            #expect(try DeliveryQueue.retry(id: 987_654, on: conn) == 0)
        }
    }

    @Test func eventsListAndRetryCommandsAsSubprocesses() async throws {
        try await WorkerHarness.with { h in
            let dead = try h.store(.pxp, json: pxpEvent("TX-D"))
            let done = try h.store(.pxp, json: pxpEvent("TX-E"))
            try h.execute(
                "UPDATE deliveries SET status = 'dead', attempts = 10, last_error = 'gave up after 10 attempts: PXP answered 503' WHERE id = $1",
                [.int64(dead)])
            try h.execute("UPDATE deliveries SET status = 'done', attempts = 1 WHERE id = $1", [.int64(done)])
            let env = ["DATABASE_URL": h.database.url]

            let list = try await PayreconProcess.run(["events", "list", "--status", "dead"], environment: env)
            #expect(list.exitCode == 0, "\(list.stderr)")
            let rows = list.stdout.split(separator: "\n").dropFirst()
            #expect(rows.count == 1)
            #expect(
                rows.first?.hasPrefix("\(dead) ") == true && rows.first?.contains("dead") == true
                    && rows.first?.contains("gave up after 10") == true,
                "\(list.stdout)")

            let retry = try await PayreconProcess.run(["events", "retry", String(dead)], environment: env)
            #expect(retry.exitCode == 0, "\(retry.stderr)")
            #expect(retry.stdout.contains("delivery \(dead) is due again"))
            let d = try h.delivery(dead)
            #expect(d.status == "pending" && d.attempts == 0)
            let after = try await PayreconProcess.run(["events", "list", "--status", "dead"], environment: env)
            #expect(after.exitCode == 0 && after.stdout.split(separator: "\n").count == 1)

            let missing = try await PayreconProcess.run(["events", "retry", "99999"], environment: env)
            // An unknown id is an error saying where the ids are (exit 2, as `discrepancies show`, `rejections show` and
            // `explain` do), not a finding.
            #expect(
                missing.exitCode == 2 && missing.stderr.contains("no delivery 99999") && missing.stderr.contains("events list"),
                "\(missing.stderr)")
            let unknown = try await PayreconProcess.run(["events", "show", "99999"], environment: env)
            #expect(
                unknown.exitCode == 2 && unknown.stderr.contains("no delivery 99999: payrecon events list shows the ids"),
                "\(unknown.stderr)")
            let bad = try await PayreconProcess.run(["events", "retry", "abc"], environment: env)
            #expect(bad.exitCode == 2)
            let badStatus = try await PayreconProcess.run(["events", "list", "--status", "sleeping"], environment: env)
            #expect(badStatus.exitCode == 2)
        }
    }

    // MARK: Unknown orders

    @Test func transactionWithoutAnOrderIsUnknownUntilTheOrderIsImported() async throws {
        try await WorkerHarness.with { h in
            try await h.seedPXP("TX-U", value: "20.00")
            try await h.seedPayPal(#"{"id":"PP-U","intent":"CAPTURE","currency":"USD","amount":"9.99","captures":[{"id":"CAP-U"}]}"#)
            try h.storeWebhook(#"{"provider":"pxp","merchantTransactionId":"TX-U"}"#)
            try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","order_id":"PP-U"}"#)
            try h.store(.pxp, json: pxpEvent("TX-NOWHERE"))  // neither ours nor paysim's: nothing to report
            #expect(await h.runOnce().done == 3)
            let found = try h.discrepancies()
            #expect(found.count == 2)
            for (provider, ref) in [(Provider.pxp, "TX-U"), (.paypal, "PP-U")] {
                let d = try #require(try h.discrepancies(provider).first)
                #expect(d.kind == "unknown_order" && d.orderID == nil && d.transactionRef == ref && d.status == "open")
            }
            #expect(try h.actions().isEmpty)

            let order = WorkerHarness.order(.pxp, "U", ref: "TX-U", amount: 2000, fulfilment: .open)
            try h.insert(order)
            guard case .checked(let outcome, let matched) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("check failed"); return
            }
            #expect(matched && outcome.resolved == 1)
            let pxp = try #require(try h.discrepancies(.pxp).first)
            #expect(pxp.status == "resolved" && pxp.resolvedAt != nil)
            #expect(try h.discrepancies(.paypal).first?.status == "open")
        }
    }

    // MARK: Several workers on one database

    @Test func threeWorkersNeverProcessADeliveryTwice() async throws {
        try await WorkerHarness.with { h in
            let n = 30
            try await h.seedPXPOrders(n)
            let conn = try h.database.connect(); defer { conn.close() }
            _ = try DeliveryStore.commit(
                (0..<n).map {
                    NewDelivery(provider: .pxp, dedupeKey: "req-\($0)", eventType: nil, headers: [], body: Array(pxpEvent("TX-\($0)").utf8))
                }, on: conn)

            let workers = (0..<3).map { h.worker(owner: "worker-\($0)", batchSize: 4) }
            let totals = await withTaskGroup(of: QueueWorker.Totals.self) { group in
                for w in workers { group.addTask { await w.run(once: true) } }
                return await group.reduce(into: [QueueWorker.Totals]()) { $0.append($1) }
            }
            #expect(totals.map(\.done).reduce(0, +) == n, "\(totals)")
            #expect(totals.allSatisfy { $0.lostLease == 0 && $0.retried == 0 && $0.dead == 0 })
            #expect(try h.database.count("SELECT count(*) FROM deliveries WHERE status = 'done' AND attempts = 1") == Int64(n))
            let keys = try h.actions().map(\.idempotencyKey)
            #expect(keys.count == n && Set(keys) == Set((0..<n).map { "pxp:O-\($0):capture:2000" }))
            // Stopping does not cancel a completion flush under way (that logged a spurious warning at every --once end).
            #expect(h.log.entries("could not record completed deliveries; will retry").isEmpty)
        }
    }
}
