import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// How the Paypercut client reads Paypercut's refusals (docs.paypercut.io error codes and error handling): a 403
/// about the account context is a configuration problem named in words, never an absence; state conflicts (409,
/// 422) are permanent with Paypercut's answer as it came.
@Suite struct PaypercutClientRefusalTests {
    static func client(_ answer: ProviderResponse) -> (PaypercutClient, ScriptedTransport) {
        let transport = ScriptedTransport([.success(answer)])
        return (
            PaypercutClient(
                configuration: PaypercutConfiguration(baseURL: "https://api.paypercut.io", secretKey: "sk_test_1"),
                transport: transport, retry: .none, now: { 0 }), transport
        )
    }

    static let accountInvalid =
        #"{"type":"invalid_request_error","code":"account_invalid","param":null,"message":"No such account.","trace_id":"trc_1"}"#

    @Test func anInaccessibleAccountNamesTheAccountAndWhatToCheck() async {
        let (c, _) = Self.client(json(403, Self.accountInvalid))
        let expected = ProviderOutcome<JSONValue>.permanent(
            .declined(
                "Paypercut refused account 'acct_x' (403 account_invalid): check the "
                    + "order's merchant and that PAYPERCUT_SECRET_KEY may act for it (trace_id trc_1)"))
        #expect(await c.paymentIntent("pi_1", account: "acct_x") == expected)
        #expect(await c.payment("pay_1", account: "acct_x") == expected)
        #expect(await c.capture("pi_1", amount: 100, final: true, key: "k", account: "acct_x") == expected)
    }

    /// Paypercut's own plugins read `error.message` as well as `message`: the wrapped form is read too.
    @Test func theWrappedErrorFormIsReadToo() async {
        let (c, _) = Self.client(
            json(403, #"{"error":{"type":"invalid_request_error","code":"account_invalid","message":"No such account."}}"#))
        #expect(
            await c.paymentIntent("pi_1", account: "acct_x")
                == .permanent(
                    .declined(
                        "Paypercut refused account 'acct_x' (403 account_invalid): check the order's merchant and that "
                            + "PAYPERCUT_SECRET_KEY may act for it")))
    }

    @Test func noAccountWhereOneIsRequiredSaysToSetTheMerchant() async {
        let (c, _) = Self.client(
            json(
                403,
                #"{"type":"invalid_request_error","code":"account_required","message":"Provide Paypercut-Account.","trace_id":"trc_2"}"#))
        #expect(
            await c.paymentIntent("pi_1", account: nil)
                == .permanent(
                    .declined(
                        "Paypercut requires an account (403 account_required): set the order's merchant to the Paypercut "
                            + "account the payment belongs to (trace_id trc_2)")))
    }

    /// Any other 403 (a permission), and the state conflicts, stay Paypercut's answer as it came: permanent, status kept.
    @Test(arguments: [
        (403, #"{"type":"invalid_request_error","code":"permission_denied","message":"Not allowed.","trace_id":"t"}"#),
        (409, #"{"type":"invalid_request_error","code":"state_conflict","message":"This payment intent is canceled.","trace_id":"t"}"#),
        (409, #"{"type":"idempotency_error","code":"idempotency_key_in_use","message":"Key reused.","trace_id":"t"}"#),
        (
            422,
            #"{"type":"invalid_request_error","code":"amount_too_large","param":"amount_to_capture","message":"Too much.","trace_id":"t"}"#
        )
    ])
    func otherRefusalsArePermanentAsAnswered(status: Int, body: String) async {
        let (c, transport) = Self.client(json(status, body))
        #expect(
            await c.capture("pi_1", amount: 100, final: true, key: "k", account: "acct_1")
                == .permanent(.refused(status: status, body: body)))
        #expect(transport.requests.count == 1, "a refusal is not retried")
    }
}
