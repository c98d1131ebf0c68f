import Foundation
import Providers
import Reconciliation
import Testing

/// The seam: every provider has one definition, built from the environment, and reading a stored event needs no
/// credentials where the provider's events carry the transaction ids.
@Suite struct ProviderRegistryTests {
    @Test func everyProviderHasExactlyOneDefinition() {
        let defined = ProviderRegistry.definitions.map(\.provider)
        #expect(Set(defined) == Set(Provider.allCases))
        #expect(defined.count == Provider.allCases.count)
        for p in Provider.allCases { #expect(ProviderRegistry.definition(p).provider == p) }
    }

    @Test func traitsSayWhichProvidersNeedMerchantAndSite() {
        #expect(ProviderRegistry.traits(.pxp).requiresMerchantAndSite)
        #expect(!ProviderRegistry.traits(.paypal).requiresMerchantAndSite)
        #expect(!ProviderRegistry.traits(.paypercut).requiresMerchantAndSite)
    }

    @Test func webhookSidesExistOnlyForProvidersWhoseSecretIsSet() throws {
        #expect(try ConfiguredProviders.webhooks(environment: Environment([:])).isEmpty)
        let hooks = try ConfiguredProviders.webhooks(environment: Environment(["PXP_WEBHOOK_KEY": "k", "PAYPERCUT_WEBHOOK_SECRET": "s"]))
        #expect(Set(hooks.keys) == [.pxp, .paypercut])
    }

    @Test func aBadWebhookSettingIsAConfigurationErrorNamingTheVariable() {
        #expect(throws: ConfigurationError.self) {
            try ConfiguredProviders.webhooks(environment: Environment(["PXP_WEBHOOK_KEY": "k", "PXP_WEBHOOK_HMAC": "md5"]))
        }
        do {
            _ = try ConfiguredProviders.webhooks(
                environment: Environment(["PAYPAL_WEBHOOK_ID": "W", "PAYPAL_TRUST_ROOTS": "/nonexistent/roots.pem"]))
            Issue.record("an unreadable PAYPAL_TRUST_ROOTS was accepted")
        } catch {
            #expect(String(describing: error).contains("PAYPAL_TRUST_ROOTS=/nonexistent/roots.pem cannot be read"))
        }
    }

    /// `WEBHOOK_ID` is the id PayPal's public webhook simulator signs with, and anyone can aim that simulator at any
    /// listener: with PayPal's own certificate URLs allowed, it would let anyone post events that verify.
    @Test(arguments: [
        nil,
        "https://api.paypal.com/v1/notifications/certs/",
        "https://api.sandbox.paypal.com/v1/notifications/certs/",
        "http://127.0.0.1:8081/v1/notifications/certs/,https://api.sandbox.paypal.com/v1/notifications/certs/"
    ])
    func theSimulatorsWebhookIDIsRefusedWithPayPalsOwnPrefixes(prefixes: String?) {
        var env = ["PAYPAL_WEBHOOK_ID": " WEBHOOK_ID "]
        env["PAYPAL_CERT_URL_PREFIXES"] = prefixes
        do {
            _ = try ConfiguredProviders.webhooks(environment: Environment(env))
            Issue.record("PAYPAL_WEBHOOK_ID=WEBHOOK_ID was accepted with prefixes \(prefixes ?? "(default)")")
        } catch {
            let message = String(describing: error)
            #expect(message.contains("PAYPAL_WEBHOOK_ID=WEBHOOK_ID"), "\(message)")
            #expect(message.contains("webhook simulator") && message.contains("any listener"), "\(message)")
        }
    }

    /// With only prefixes that are not PayPal's (paysim on loopback, as scripts/demo sets), the simulator's id is
    /// what paysim signs with, and stays accepted.
    @Test func theSimulatorsWebhookIDIsAcceptedWithOnlyLocalPrefixes() throws {
        let hooks = try ConfiguredProviders.webhooks(
            environment: Environment([
                "PAYPAL_WEBHOOK_ID": "WEBHOOK_ID", "PAYPAL_CERT_URL_PREFIXES": "http://127.0.0.1:8081/v1/notifications/certs/"
            ]))
        #expect(hooks[.paypal] != nil)
        // A real webhook id with PayPal's prefixes is, of course, fine.
        #expect(try ConfiguredProviders.webhooks(environment: Environment(["PAYPAL_WEBHOOK_ID": "40L71081MK3756722"]))[.paypal] != nil)
    }

    @Test func everyAPIIsBuiltAndOnlyThoseWithCredentialsAreConfigured() async throws {
        let providers = try ConfiguredProviders(
            environment: Environment(["PAYPAL_CLIENT_ID": "id", "PAYPAL_CLIENT_SECRET": "s"]),
            transport: FailingTransport())
        #expect(Set(providers.apis.keys) == Set(Provider.allCases))
        #expect(providers.apis[.paypal]?.isConfigured == true)
        #expect(providers.apis[.pxp]?.isConfigured == false)
        // Without credentials a fetch fails permanently and says what to set.
        let outcome = await providers.apis[.pxp]!.snapshot(of: TransactionQuery(transactionRef: "T", merchant: "M", site: "S"))
        guard case .permanent(.notSent(let body)) = outcome else { Issue.record("expected a permanent failure, got \(outcome)"); return }
        #expect(body.contains("PXP_CLIENT_ID, PXP_TOKEN_ID and PXP_TOKEN_VALUE"))
    }

    @Test func pxpEventsAreReadWithoutCredentials() async throws {
        let api = try PXPProvider.definition.api(Environment([:]), FailingTransport())
        let body =
            #"[{"eventData":{"merchantTransactionId":"TX-1","systemTransactionId":"SYS-1"},"eventOwner":{"merchant":"M1","site":"S1"}},{"eventCategory":"Authentication"}]"#
        let outcome = await api.references(in: StoredEvent(id: 1, headers: Headers([]), body: Array(body.utf8)))
        #expect(outcome == .found(.references([EventReference(transactionRef: "TX-1", alias: "SYS-1", merchant: "M1", site: "S1")])))
        // Events naming no transaction end ignored, saying what they were.
        let auth = await api.references(
            in: StoredEvent(id: 3, headers: Headers([]), body: Array(#"{"eventCode":"3DS","eventCategory":"Authentication"}"#.utf8)))
        #expect(auth == .found(.ignored("3DS (category Authentication) names no transaction")))
        let broken = await api.references(in: StoredEvent(id: 2, headers: Headers([]), body: Array("{".utf8)))
        guard case .permanent(.notSent(let reason)) = broken else { Issue.record("expected permanent, got \(broken)"); return }
        #expect(reason.hasPrefix("stored body no longer parses"))
    }

    @Test func secretsMayComeFromAFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("payrecon-secret-\(UUID().uuidString)").path
        try "s3cret\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try Environment(["PXP_WEBHOOK_KEY_FILE": path]).secret("PXP_WEBHOOK_KEY") == "s3cret")
        #expect(try Environment(["PXP_WEBHOOK_KEY": "direct", "PXP_WEBHOOK_KEY_FILE": path]).secret("PXP_WEBHOOK_KEY") == "direct")
        #expect(try Environment([:]).secret("PXP_WEBHOOK_KEY") == nil)
        #expect(throws: ConfigurationError.self) { try Environment(["PXP_WEBHOOK_KEY_FILE": path + ".missing"]).secret("PXP_WEBHOOK_KEY") }
    }
}

extension EventReference: CustomStringConvertible {
    public var description: String { "ref(\(transactionRef ?? "-"), alias \(alias ?? "-"))" }
}

/// A transport that must not be reached.
private struct FailingTransport: ProviderTransport {
    struct Reached: Error {}
    func send(_ request: ProviderRequest) async throws -> ProviderResponse { throw Reached() }
}
