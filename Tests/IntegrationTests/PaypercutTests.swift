@_spi(Positional) import Postgres
import Foundation
import Observability
import HTTP
import PaysimCore
import PayreconTesting
import Providers
import Reconciliation
import Store
import Synchronization
import Testing
import TextFormats
import Worker

/// A Paypercut order from webhook to re-fetch to action to execution to a clean re-check, against paysim over HTTP.
@Suite struct PaypercutTests {
    static func event(_ intent: String) -> String {
        #"{"id":"evt_\#(UUID().uuidString)","type":"payment_intent.amount_capturable_updated","created":"2026-12-01T10:00:00Z","livemode":false,"data":{"object":{"id":"\#(intent)","object":"payment_intent"}}}"#
    }

    @Test func aWebhookLeadsToACaptureExecutedOnceAndACleanRecheck() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_1")
            try h.insert(order)
            let id = try h.store(.paypercut, json: Self.event("pi_1"))
            #expect(await h.runOnce().done == 1)
            #expect(try h.delivery(id).status == "done")
            #expect(try h.actions().map(\.idempotencyKey) == ["paypercut:PC-1:capture:2000"])
            #expect(await h.executor.executePending().succeeded == 1)
            let calls = try await h.paysimLog(provider: "paypercut")
            #expect(
                calls.count == 1 && calls[0]["result"] as? String == "applied"
                    && calls[0]["idempotency_key"] as? String == "paypercut:PC-1:capture:2000")
            #expect(await h.checker.check(order, logger: Logger()) == .checked(CheckOutcome(), matched: true))
            // Executing again calls Paypercut no more.
            try h.execute("UPDATE actions SET status = 'pending'")
            _ = await h.executor.executePending()
            #expect(try await h.paysimLog(provider: "paypercut").filter { $0["result"] as? String == "applied" }.count == 1)
        }
    }

    @Test func cancelledOrdersAreVoidedAndRefunded() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"""
                [{"id":"pi_v","amount":1500,"currency":"EUR","capture_method":"manual","status":"requires_capture"},
                 {"id":"pi_r","amount":1500,"currency":"EUR","capture_method":"automatic","status":"succeeded"}]
                """#)
            let void = WorkerHarness.order(
                .paypercut, "PC-V", ref: "pi_v", amount: 1500, currency: "EUR", fulfilment: .cancelled, merchant: nil)
            let refund = WorkerHarness.order(
                .paypercut, "PC-R", ref: "pi_r", intent: .purchase, amount: 1500, currency: "EUR",
                fulfilment: .cancelled, merchant: nil)
            try h.insert(void, refund)
            let summary = try await h.sweep(provider: .paypercut)
            #expect(summary.exitCode == 0)
            #expect(Set(try h.actions().map(\.idempotencyKey)) == ["paypercut:PC-V:void:0", "paypercut:PC-R:refund:1500"])
            #expect(await h.executor.executePending().succeeded == 2)
            #expect(await h.checker.check(void, logger: Logger()) == .checked(CheckOutcome(), matched: true))
            #expect(await h.checker.check(refund, logger: Logger()) == .checked(CheckOutcome(), matched: true))
        }
    }

    /// A BLIK payment left in requires_action for 20 minutes is stale under `blik=15m`, not under the 24 h default.
    @Test func theMethodPicksThePendingWindow() async throws {
        try await WorkerHarness.with { h in
            let created = Int(Date().timeIntervalSince1970) - 20 * 60
            try await h.admin(
                "/admin/paypercut/intents",
                #"""
                {"id":"pi_b","amount":4900,"currency":"PLN","capture_method":"automatic","status":"requires_action","created":\#(created),
                 "payment":{"status":"pending","amount_captured":0,"payment_method":"blik"}}
                """#)
            let order = WorkerHarness.order(
                .paypercut, "PC-B", ref: "pi_b", intent: .purchase, amount: 4900, currency: "PLN",
                fulfilment: .open, merchant: nil)
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            #expect(try h.openKinds(order: "PC-B").isEmpty, "20 minutes is not stale under 24h")
            let blik = OrderChecker(pool: h.pool, gateway: h.gateway, pendingWindows: try PendingWindows.parse("24h,blik=15m"))
            _ = await blik.check(order, logger: Logger())
            #expect(try h.openKinds(order: "PC-B") == ["stale_pending"])
        }
    }

    /// An account Paypercut will not let the key act as (403 `account_invalid`) is a configuration problem: the check
    /// fails naming the account and what to check, through the worker as through a direct check, and nothing is
    /// recorded as missing at the provider.
    @Test func anAccountPaysimDoesNotKnowFailsTheCheckNamingIt() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_x")
            try h.insert(order)
            let id = try h.store(.paypercut, json: Self.event("pi_1"))
            _ = await h.runOnce()
            let delivery = try h.delivery(id)
            #expect(
                delivery.status == "pending" && delivery.lastError?.contains("Paypercut refused account 'acct_x'") == true,
                "\(delivery.status): \(delivery.lastError ?? "-")")
            guard case .failed(let reason) = await h.checker.check(order, logger: Logger()) else {
                Issue.record("the check did not fail"); return
            }
            #expect(
                reason.hasPrefix(
                    "Paypercut refused account 'acct_x' (403 account_invalid): check the order's merchant and that "
                        + "PAYPERCUT_SECRET_KEY may act for it"), "\(reason)")
            #expect(try h.discrepancies().isEmpty, "an account refusal is no finding, least of all missing_at_provider")
            #expect(try h.actions().isEmpty)
        }
    }

    /// An account the key may act for sees only its own intents: another account's is 404 there, so missing.
    @Test func anotherAccountsIntentIsMissingAtProvider() async throws {
        try await WorkerHarness.with { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"""
                [{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"},
                 {"id":"pi_2","account":"acct_2","amount":500,"currency":"EUR","capture_method":"manual","status":"requires_capture"}]
                """#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_2")
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            #expect(try h.openKinds(order: "PC-1") == ["missing_at_provider"])
        }
    }

    /// Someone else acts on the intent at Paypercut (a dashboard, the merchant's own system) after the executor's
    /// re-fetch and before its capture: the one window no re-plan closes. Paypercut refuses the capture with a state
    /// error (409 or 422); the action is `failed` with Paypercut's answer, the order is re-fetched, and nothing calls
    /// again: no retry from the client, the executor or a later check.
    static func captureRefusedAfterAChangeElsewhere(
        _ change: @escaping @Sendable (PaypercutClient) async -> ProviderOutcome<JSONValue>,
        status: Int, code: String, refetched: (rawState: String, captured: Int64),
        finding: String
    ) async throws {
        try await WorkerHarness.with(retry: .standard) { h in
            try await h.admin(
                "/admin/paypercut/intents",
                #"{"id":"pi_1","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#)
            let order = WorkerHarness.order(.paypercut, "PC-1", ref: "pi_1", amount: 2000, currency: "EUR", merchant: "acct_1")
            try h.insert(order)
            _ = await h.checker.check(order, logger: Logger())
            let key = "paypercut:PC-1:capture:2000"
            #expect(try h.actions().map(\.idempotencyKey) == [key])

            let elsewhere = PaypercutClientTests.client(h)
            let api = ChangedBeforeTheCall(base: PaypercutProvider.API(client: PaypercutClientTests.client(h, retry: .standard))) {
                guard case .found = await change(elsewhere) else { Issue.record("the change elsewhere failed"); return }
            }
            let executor = ActionExecutor(
                pool: h.pool, gateway: ProviderGateway(ConfiguredProviders(apis: [.paypercut: api])), checker: h.checker, logger: Logger())
            let totals = await executor.executePending()
            #expect(totals.failed == 1 && totals.succeeded == 0 && totals.deferred == 0, "\(totals)")
            let action = try #require(try h.actions().first)
            #expect(action.status == .failed && !action.inDoubt)
            #expect(
                action.lastError?.hasPrefix("provider answered \(status): ") == true
                    && action.lastError?.contains(#""code":"\#(code)""#) == true,
                "the action keeps Paypercut's answer: \(action.lastError ?? "-")")
            let refetchedRows = try h.database.count(
                """
                SELECT count(*) FROM snapshots WHERE provider = 'paypercut' AND order_id = 'PC-1'
                AND snapshot->>'rawState' = '\(refetched.rawState)' AND (snapshot->>'captured')::bigint = \(refetched.captured)
                """)
            #expect(refetchedRows == 1, "the refusal is followed by a re-fetch: the stored answer is Paypercut's state after the change")
            let open = try h.openKinds(order: "PC-1")
            #expect(open.contains(finding), "\(open)")

            // No retry storm: a second pass, a check and another worker run call Paypercut with this key no more.
            #expect(await executor.executePending() == ActionExecutor.Totals())
            _ = await h.checker.check(order, logger: Logger())
            #expect(await h.executor.executePending() == ActionExecutor.Totals())
            let calls = try await h.paysimLog(provider: "paypercut").filter { $0["idempotency_key"] as? String == key }
            #expect(calls.map { $0["status"] as? Int } == [status], "\(calls)")
            #expect(try h.actions().map(\.status) == [.failed])
            #expect(api.calls == 1)
        }
    }

    /// The intent was cancelled meanwhile: capturing it conflicts with its state (409); the fulfilled order's payment
    /// is voided, a `state_mismatch`.
    @Test func aCaptureOfAnIntentCancelledMeanwhileFailsWith409AndIsNotRetried() async throws {
        try await Self.captureRefusedAfterAChangeElsewhere(
            { await $0.cancel("pi_1", key: "dashboard-cancel", account: "acct_1") },
            status: 409, code: "state_conflict", refetched: ("canceled", 0),
            finding: "state_mismatch")
    }

    /// Part of it was captured meanwhile: the full capture is more than is capturable now (422 `amount_too_large`);
    /// the order still wants the rest under the same key, so the failure is `action_failed` until an operator retries.
    @Test func aCaptureAboveWhatIsCapturableNowFailsWith422AndIsNotRetried() async throws {
        try await Self.captureRefusedAfterAChangeElsewhere(
            { await $0.capture("pi_1", amount: 500, final: false, key: "portal-capture", account: "acct_1") },
            status: 422, code: "amount_too_large", refetched: ("requires_capture", 500),
            finding: "action_failed")
    }

    /// `account.*` events name no payment: the delivery ends ignored with its type, never done having done nothing.
    @Test func accountEventsAreIgnoredWithTheirType() async throws {
        try await WorkerHarness.with { h in
            let id = try h.store(
                .paypercut,
                json:
                    #"{"id":"evt_acct","type":"account.updated","created":"2026-11-30T10:00:00Z","account":"acct_1","data":{"object":{"id":"acct_1","object":"account"}}}"#
            )
            #expect(await h.runOnce().done == 1)
            let d = try h.delivery(id)
            #expect(d.status == "ignored")
            #expect(d.outcome == "account.updated names no payment (data.object: account)")
        }
    }
}

/// The Paypercut client over real HTTP against paysim: answers, errors and what it sends.
@Suite struct PaypercutClientTests {
    static func client(_ h: WorkerHarness, key: String = SimConfig().paypercutSecretKey, retry: RetryPolicy = .none) -> PaypercutClient {
        PaypercutClient(
            configuration: PaypercutConfiguration(baseURL: h.paysimURL, secretKey: key, timeout: .seconds(10)),
            transport: HTTPClientTransport(client: h.http), retry: retry)
    }

    static let seed =
        #"{"id":"pi_c","account":"acct_1","amount":3000,"currency":"EUR","capture_method":"manual","status":"requires_capture"}"#

    @Test func foundNotFoundAndTheWrongAccount() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            let c = Self.client(h)
            #expect(await c.paymentIntent("pi_c", account: "acct_1").value?["status"]?.stringValue == "requires_capture")
            #expect(await c.paymentIntent("pi_nope", account: "acct_1") == .notFound)
            guard case .permanent(.declined(let refused)) = await c.paymentIntent("pi_c", account: "acct_other") else {
                Issue.record("an account the key may not act for is not a named refusal"); return
            }
            #expect(refused.hasPrefix("Paypercut refused account 'acct_other' (403 account_invalid)"), "\(refused)")
        }
    }

    @Test func errorsAreClassified() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            guard case .permanent(.refused(401, let body)) = await Self.client(h, key: "sk_wrong").paymentIntent("pi_c", account: nil)
            else {
                Issue.record("a wrong key is not a permanent 401"); return
            }
            #expect(body.contains(#""code":"token_invalid""#), "\(body)")
            let c = Self.client(h)
            // The same Idempotency-Key on another request: 409 idempotency_error, permanent.
            _ = await c.capture("pi_c", amount: 1000, final: false, key: "k-1", account: "acct_1")
            guard case .permanent(.refused(409, let conflict)) = await c.cancel("pi_c", key: "k-1", account: "acct_1") else {
                Issue.record("a reused key is not a permanent 409"); return
            }
            #expect(conflict.contains("idempotency_error"))
            try await h.faults(#"{"rate_429":1.0,"retry_after":7}"#)
            guard case .transient(let seven) = await c.paymentIntent("pi_c", account: nil) else {
                Issue.record("429 not transient"); return
            }
            #expect(seven.retryAfter == .seconds(7), "Retry-After is honoured")
            try await h.faults(#"{"rate_429":1.0,"retry_after":0}"#)
            guard case .transient(let after) = await c.paymentIntent("pi_c", account: nil) else {
                Issue.record("429 not transient"); return
            }
            #expect(after.retryAfter == nil, "a 429 without Retry-After still backs off (transient), with no delay given")
            try await h.faults(#"{"rate_429":0,"error_rate":1.0}"#)
            #expect(await c.paymentIntent("pi_c", account: nil).isTransient)
        }
    }

    @Test func actionsChangeStateAndHonourTheKey() async throws {
        try await WorkerHarness.with { h in
            try await h.admin("/admin/paypercut/intents", Self.seed)
            let c = Self.client(h)
            let first = await c.capture("pi_c", amount: 1000, final: true, key: "cap-1", account: "acct_1")
            #expect(first.value?["status"]?.stringValue == "succeeded", "a final capture releases the rest")
            #expect(first.value?["amount_received"]?.numberLiteral == "1000" && first.value?["amount_capturable"]?.numberLiteral == "0")
            let again = await c.capture("pi_c", amount: 1000, final: true, key: "cap-1", account: "acct_1")
            #expect(again.value?["amount_received"]?.numberLiteral == "1000", "the same key: the first answer, applied once")
            let refund = await c.refund(paymentIntent: "pi_c", amount: 400, key: "ref-1", account: "acct_1")
            #expect(refund.value?["amount"]?.numberLiteral == "400")
            let log = try await h.paysimLog(provider: "paypercut")
            #expect(log.map { $0["result"] as? String } == ["applied", "replayed", "applied"])
            #expect(log.map { $0["idempotency_key"] as? String } == ["cap-1", "cap-1", "ref-1"])
        }
    }
}

/// Paypercut's API as payrecon calls it, with `meanwhile` run just before each action call: what someone else does
/// at Paypercut lands between the executor's re-fetch and its call. Counts the action calls payrecon made.
final class ChangedBeforeTheCall: ProviderAPI {
    let base: PaypercutProvider.API
    let meanwhile: @Sendable () async -> Void
    private let count = Mutex(0)
    var calls: Int { count.withLock { $0 } }

    init(base: PaypercutProvider.API, meanwhile: @escaping @Sendable () async -> Void) { self.base = base; self.meanwhile = meanwhile }

    var isConfigured: Bool { base.isConfigured }
    var deduplicatesIdempotencyKeys: Bool { base.deduplicatesIdempotencyKeys }
    func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> { await base.references(in: event) }
    func snapshot(of transaction: TransactionQuery) async -> ProviderOutcome<Snapshot> { await base.snapshot(of: transaction) }

    func execute(_ call: ActionCall) async -> ActionCallResult {
        count.withLock { $0 += 1 }
        await meanwhile()
        return await base.execute(call)
    }
}
