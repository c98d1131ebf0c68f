import Testing
@testable import PaysimCore

/// paysim's Paypercut answers, as docs.paypercut.io publishes them (docs/PROVIDER-FACTS.md, PAYPERCUT-3 and -19): the
/// account context is an authorization check (403 `account_invalid`), state conflicts are 409 and 422 with a
/// top-level error object, never Stripe's 400s. Paypercut publishes no code for a state conflict: paysim's
/// `state_conflict` is its own (payrecon reads the status), and `amount_too_large` is the one documented code used.
@Suite struct PaypercutTests {
    static let seed = """
        [{"id":"pi_auth","account":"acct_1","amount":2000,"currency":"EUR","capture_method":"manual","status":"requires_capture"},
         {"id":"pi_paid","account":"acct_1","amount":1500,"currency":"EUR","capture_method":"automatic","status":"succeeded"},
         {"id":"pi_void","account":"acct_1","amount":900,"currency":"EUR","capture_method":"manual","status":"canceled"},
         {"id":"pi_other","account":"acct_2","amount":700,"currency":"EUR","capture_method":"manual","status":"requires_capture"}]
        """

    func seeded() -> Simulator {
        let sim = makeSimulator()
        let r = sim.post("/admin/paypercut/intents", Self.seed)
        precondition(r.status == 201, r.bodyText)
        return sim
    }

    static func headers(account: String? = "acct_1", key: String? = nil, header: String = "Paypercut-Account") -> [String: String] {
        var h = ["Authorization": "Bearer sk_test_paysim", "Content-Type": "application/json"]
        if let account { h[header] = account }
        if let key { h["Idempotency-Key"] = key }
        return h
    }

    func get(_ sim: Simulator, _ path: String, account: String? = "acct_1", header: String = "Paypercut-Account") -> SimResponse {
        sim.handle(method: "GET", path: path, headers: Self.headers(account: account, header: header))
    }

    func post(_ sim: Simulator, _ path: String, _ body: String, account: String? = "acct_1", key: String? = nil) -> SimResponse {
        sim.post(path, body, headers: Self.headers(account: account, key: key))
    }

    /// The error object is top level: `type`, `code`, `param` (null when no parameter is at fault), `message`,
    /// `trace_id`; no Stripe `{"error": {...}}` wrapper.
    func expectError(
        _ r: SimResponse, _ status: Int, type: String, code: String, param: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(r.status == status, "\(r.bodyText)", sourceLocation: sourceLocation)
        let j = r.json
        #expect(j?["type"]?.stringValue == type, "\(r.bodyText)", sourceLocation: sourceLocation)
        #expect(j?["code"]?.stringValue == code, "\(r.bodyText)", sourceLocation: sourceLocation)
        #expect(j?["param"]?.stringValue == param && j?["param"] != nil, "\(r.bodyText)", sourceLocation: sourceLocation)
        #expect(
            j?["message"]?.stringValue?.isEmpty == false && j?["trace_id"]?.stringValue?.isEmpty == false,
            sourceLocation: sourceLocation)
        #expect(j?["error"] == nil, sourceLocation: sourceLocation)
    }

    // MARK: The account context

    /// An account the key may not act for (here: one no intent belongs to) is refused before anything is looked up,
    /// on reads and on every action, and nothing changes.
    @Test(arguments: ["/v1/payment_intents/pi_auth", "/v1/payment_intents/pi_nope", "/v2/payments/pay_pi_auth"])
    func anUnknownAccountIsForbiddenOnReads(path: String) {
        let sim = seeded()
        expectError(get(sim, path, account: "acct_x"), 403, type: "invalid_request_error", code: "account_invalid")
        #expect(get(sim, path, account: "acct_x").json?["message"]?.stringValue?.contains("acct_x") == true)
    }

    @Test func anUnknownAccountIsForbiddenOnActionsAndChangesNothing() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":2000}"#, account: "acct_x", key: "k1"),
            403, type: "invalid_request_error", code: "account_invalid")
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/cancel", "{}", account: "acct_x", key: "k2"),
            403, type: "invalid_request_error", code: "account_invalid")
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":100}"#, account: "acct_x", key: "k3"),
            403, type: "invalid_request_error", code: "account_invalid")
        #expect(get(sim, "/v1/payment_intents/pi_auth").json?["status"]?.stringValue == "requires_capture")
        // The refusal is not kept under the key: once the account is right, the same key is carried out.
        #expect(post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":2000}"#, key: "k1").status == 200)
    }

    /// `X-Paypercut-Account` is accepted as an alias (docs.paypercut.io error codes).
    @Test func theAliasHeaderSelectsTheAccountToo() {
        let sim = seeded()
        #expect(get(sim, "/v1/payment_intents/pi_auth", header: "X-Paypercut-Account").status == 200)
        expectError(
            get(sim, "/v1/payment_intents/pi_auth", account: "acct_x", header: "X-Paypercut-Account"),
            403, type: "invalid_request_error", code: "account_invalid")
    }

    /// An account the key may act for does not see another account's intent or payment: 404, "not accessible in the
    /// current context" (docs.paypercut.io error handling). Without the header the platform sees its own.
    @Test func anotherAccountsResourcesAreNotFound() {
        let sim = seeded()
        expectError(get(sim, "/v1/payment_intents/pi_other"), 404, type: "invalid_request_error", code: "resource_missing")
        expectError(get(sim, "/v2/payments/pay_pi_paid", account: "acct_2"), 404, type: "invalid_request_error", code: "resource_missing")
        #expect(get(sim, "/v1/payment_intents/pi_other", account: "acct_2").status == 200)
        #expect(get(sim, "/v2/payments/pay_pi_paid").status == 200)
        #expect(get(sim, "/v1/payment_intents/pi_other", account: nil).status == 200)
    }

    // MARK: Authentication

    @Test func credentialsAreCheckedAsPaypercutNamesTheFailures() {
        let sim = seeded()
        let path = "/v1/payment_intents/pi_auth"
        expectError(sim.handle(method: "GET", path: path), 401, type: "authentication_error", code: "authentication_required")
        expectError(
            sim.handle(method: "GET", path: path, headers: ["Authorization": "Basic c2tfdGVzdDo="]),
            401, type: "authentication_error", code: "authentication_invalid")
        let wrong = sim.handle(method: "GET", path: path, headers: ["Authorization": "Bearer sk_test_wrong_key_123"])
        expectError(wrong, 401, type: "authentication_error", code: "token_invalid")
        #expect(wrong.bodyText.contains("sk_test_wrong_key_123") == false, "the key is shown masked, never whole")
        // Authentication comes before the account context.
        let both = sim.handle(method: "GET", path: path, headers: ["Authorization": "Bearer nope", "Paypercut-Account": "acct_x"])
        expectError(both, 401, type: "authentication_error", code: "token_invalid")
    }

    // MARK: State conflicts: 409 and 422

    /// Capturing an intent that is not `requires_capture` (cancelled, already captured) conflicts with its state.
    @Test(arguments: ["pi_void", "pi_paid"])
    func capturingWhatCannotBeCapturedIs409(intent: String) {
        let sim = seeded()
        expectError(
            post(sim, "/v1/payment_intents/\(intent)/capture", #"{"amount_to_capture":100}"#, key: "cap-\(intent)"),
            409, type: "invalid_request_error", code: "state_conflict")
    }

    @Test func capturingTwiceIs409TheSecondTime() {
        let sim = seeded()
        #expect(
            post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":2000,"final_capture":true}"#, key: "a").status == 200)
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":2000}"#, key: "b"),
            409, type: "invalid_request_error", code: "state_conflict")
    }

    /// A capture above what is capturable now is well formed but cannot be processed in the intent's state: 422
    /// `amount_too_large`, the one Stripe-style code Paypercut documents.
    @Test func capturingMoreThanIsCapturableIs422() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":2001}"#, key: "big"),
            422, type: "invalid_request_error", code: "amount_too_large", param: "amount_to_capture")
        #expect(get(sim, "/v1/payment_intents/pi_auth").json?["amount_capturable"]?.numberLiteral == "2000", "nothing captured")
    }

    @Test func aNonPositiveAmountIsAnInvalidParameter() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":0}"#, key: "zero"),
            400, type: "invalid_request_error", code: "parameter_invalid", param: "amount_to_capture")
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":-5}"#, key: "neg"),
            400, type: "invalid_request_error", code: "parameter_invalid", param: "amount")
    }

    @Test(arguments: ["pi_paid", "pi_void"])
    func cancellingASucceededOrCancelledIntentIs409(intent: String) {
        let sim = seeded()
        expectError(
            post(sim, "/v1/payment_intents/\(intent)/cancel", #"{"cancellation_reason":"requested_by_customer"}"#, key: "c-\(intent)"),
            409, type: "invalid_request_error", code: "state_conflict")
    }

    @Test func refundingMoreThanWasCapturedIs422() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":1501}"#, key: "r-big"),
            422, type: "invalid_request_error", code: "amount_too_large", param: "amount")
        #expect(post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":1000}"#, key: "r-1").status == 200)
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":600}"#, key: "r-2"),
            422, type: "invalid_request_error", code: "amount_too_large", param: "amount")
    }

    /// Nothing captured (an authorisation), or everything already refunded: the intent's state has nothing to refund.
    @Test func refundingWhatHoldsNothingToRefundIs409() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_auth","amount":100}"#, key: "r-auth"),
            409, type: "invalid_request_error", code: "state_conflict")
        #expect(post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid"}"#, key: "r-all").status == 200)
        expectError(
            post(sim, "/v1/refunds", #"{"payment_intent":"pi_paid","amount":1}"#, key: "r-again"),
            409, type: "invalid_request_error", code: "state_conflict")
    }

    @Test func aRefundWithoutItsPaymentIntentIsAMissingParameter() {
        let sim = seeded()
        expectError(
            post(sim, "/v1/refunds", #"{"amount":100}"#, key: "r-none"),
            400, type: "invalid_request_error", code: "missing_required_param", param: "payment_intent")
    }

    /// The same Idempotency-Key on another request is the documented `idempotency_error`, a 409.
    @Test func aKeyReusedOnAnotherRequestIsAnIdempotencyError() {
        let sim = seeded()
        #expect(post(sim, "/v1/payment_intents/pi_auth/capture", #"{"amount_to_capture":500}"#, key: "same").status == 200)
        expectError(
            post(sim, "/v1/payment_intents/pi_auth/cancel", "{}", key: "same"), 409, type: "idempotency_error",
            code: "idempotency_key_in_use")
    }
}
