import Foundation
import Testing
@testable import Providers
@testable import Reconciliation

/// Each provider's `payrecon doctor` checks against answers paysim does not give (the integration suite runs the
/// rest against paysim): what each line says, and that a probe only reads.
@Suite struct DoctorProbeTests {
    func pxp(_ transport: ScriptedTransport) -> PXPProvider.API {
        PXPProvider.API(
            client: PXPClient(
                configuration: PXPConfiguration(
                    baseURL: "https://pxp.test/api/v1", clientID: "c", tokenID: "t",
                    tokenValue: "v"), transport: transport))
    }

    @Test func pxpProbesTheLatestOrdersMerchantAndSite() async throws {
        let transport = ScriptedTransport([.success(json(404, #"{"errorCode":"TransactionNotFound"}"#))])
        let checks = await pxp(transport).doctor(
            DoctorContext(
                environment: Environment([:]),
                latestMerchant: .found(DoctorMerchant(merchant: "M 1", site: "S1"))))
        #expect(checks.map(\.status) == [.ok])
        let request = try #require(transport.requests.first)
        #expect(request.method == "GET")
        #expect(request.pathAndQuery == "/api/v1/transactions/M%201/S1?merchantTransactionId=payrecon-doctor-no-such-transaction")
        #expect(request.header("Authorization")?.hasPrefix("PXP-UST1 t:") == true, "signed as every PXP call is")
    }

    /// A 403 at a made-up merchant proves the signature was accepted but not that the credentials read a real one.
    @Test func pxp403AtAMadeUpMerchantSaysToCheckWithARealOne() async throws {
        let checks = await pxp(ScriptedTransport([.success(json(403, #"{"errorCode":"Forbidden","errorReason":"no access"}"#))]))
            .doctor(DoctorContext(environment: Environment([:])))
        let check = try #require(checks.first)
        #expect(check.status == .failed)
        #expect(check.detail.contains("403 (Forbidden: no access)") && check.detail.contains("made up"), "\(check.detail)")
    }

    @Test func pxpUnreachableNamesTheBaseURL() async throws {
        let checks = await pxp(ScriptedTransport([.failure(.connection("Could not resolve host: pxp.test"))]))
            .doctor(DoctorContext(environment: Environment([:])))
        #expect(checks.first?.status == .failed)
        #expect(checks.first?.detail.contains("PXP_API_BASE_URL (https://pxp.test/api/v1)") == true, "\(checks)")
    }

    func paypercut(_ transport: ScriptedTransport) -> PaypercutProvider.API {
        PaypercutProvider.API(
            client: PaypercutClient(
                configuration: PaypercutConfiguration(baseURL: "https://pc.test", secretKey: "sk_x"),
                transport: transport))
    }

    /// A 404 that is not Paypercut's error object is what a missing route looks like (PAYPERCUT-5): every order
    /// would read missing_at_provider, so it fails.
    @Test func paypercut404WithoutItsErrorObjectFails() async throws {
        let transport = ScriptedTransport([.success(ProviderResponse(status: 404, body: Array("<html>Not Found</html>".utf8)))])
        let checks = await paypercut(transport).doctor(DoctorContext(environment: Environment([:])))
        #expect(checks.first?.status == .failed)
        #expect(checks.first?.detail.contains("route itself may not exist") == true, "\(checks)")
        let request = try #require(transport.requests.first)
        #expect(request.header("Paypercut-Account") == nil, "no order's merchant is known: the key alone is checked")
    }

    /// With PAYRECON_BACKFILL naming Paypercut, a platform key's lists (403 account_required as itself) are ok: backfill
    /// lists its connected accounts; a key refused (401) fails.
    @Test func paypercutListsOfAPlatformKeyAreOk() async throws {
        let context = DoctorContext(environment: Environment(["PAYRECON_BACKFILL": "paypercut=3d"]))
        let platform = await paypercut(
            ScriptedTransport([.success(json(403, #"{"type":"invalid_request_error","code":"account_required"}"#))])
        ).doctor(context)
        #expect(platform.map(\.name) == ["paypercut credentials", "paypercut payment and refund lists"])
        #expect(platform.allSatisfy { $0.status == .ok }, "\(platform)")
        let refused = await paypercut(
            ScriptedTransport { r, _ in
                r.url.contains("payment_intents") ? json(404, #"{"code":"resource_missing"}"#) : json(401, #"{"code":"token_invalid"}"#)
            }
        ).doctor(context)
        #expect(refused.last?.status == .failed && refused.last?.detail.contains("exits 2") == true, "\(refused)")
    }

    @Test func paypercutAccountRequiredIsAPlatformKey() async throws {
        let checks = await paypercut(
            ScriptedTransport([.success(json(403, #"{"type":"invalid_request_error","code":"account_required"}"#))])
        )
        .doctor(DoctorContext(environment: Environment([:])))
        #expect(checks.first?.status == .ok)
        #expect(checks.first?.detail.contains("every Paypercut order must name its account") == true, "\(checks)")
    }

    /// The token is fetched, then two reads; the certificate check waits for a delivery.
    @Test func paypalReadsOnly() async throws {
        let transport = ScriptedTransport { request, _ in
            switch request.pathAndQuery {
            case "/v1/oauth2/token": json(200, #"{"access_token":"A21","token_type":"Bearer","expires_in":32400}"#)
            case "/v1/customer/disputes?page_size=1": json(200, #"{"links":[{"href":"x","rel":"self"}]}"#)
            default: json(404, #"{"name":"RESOURCE_NOT_FOUND"}"#)
            }
        }
        let api = PayPalProvider.API(
            client: PayPalClient(
                configuration: PayPalConfiguration(
                    baseURL: "https://pp.test", clientID: "id",
                    secret: "s"), transport: transport))
        let checks = await api.doctor(DoctorContext(environment: Environment([:])))
        #expect(checks.map(\.status) == [.ok, .ok, .skipped], "\(checks)")
        #expect(transport.requests.map(\.method) == ["POST", "GET", "GET"])
        #expect(transport.requests.dropFirst().allSatisfy { $0.header("Authorization") == "Bearer A21" })
    }

    @Test func linesLeadWithTheirStatus() {
        #expect(DoctorCheck.ok("pxp credentials", "fine").line == "ok   pxp credentials: fine")
        #expect(DoctorCheck.failed("a", "b").line == "FAIL a: b")
        #expect(DoctorCheck.skipped("a", "").line == "skip a")
    }
}
