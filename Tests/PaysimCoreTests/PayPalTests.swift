import Foundation
import Testing
@testable import PaysimCore
import Reconciliation

private let authorizeOrder = """
    {"id":"ORDER-A","intent":"AUTHORIZE","status":"COMPLETED","currency":"USD","amount":"10.00","merchant_id":"MERCH1",
     "create_time":"2026-11-01T10:00:00Z","authorizations":[{"id":"AUTH-1","status":"CREATED"}]}
    """
private let captureOrder = """
    {"id":"ORDER-C","intent":"CAPTURE","status":"COMPLETED","currency":"EUR","amount":"30.00","merchant_id":"MERCH1",
     "captures":[{"id":"CAP-1","status":"COMPLETED"}]}
    """

@Suite struct PayPalTests {
    func seeded(clock: TestClock = TestClock()) -> (Simulator, String) {
        let sim = makeSimulator(clock: clock)
        sim.seedPayPal(authorizeOrder)
        sim.seedPayPal(captureOrder)
        return (sim, sim.paypalToken())
    }

    // MARK: OAuth

    @Test func tokenAnswerShape() throws {
        let sim = makeSimulator()
        let basic = Data("paysim-paypal-client:paysim-paypal-secret".utf8).base64EncodedString()
        let r = sim.handle(
            method: "POST", path: "/v1/oauth2/token", headers: ["Authorization": "Basic \(basic)"],
            body: Array("grant_type=client_credentials".utf8))
        #expect(r.status == 200)
        let j = try #require(r.json)
        #expect(j["token_type"]?.stringValue == "Bearer")
        #expect(j["expires_in"]?.numberLiteral == "32400")
        #expect((j["access_token"]?.stringValue?.count ?? 0) > 20)
    }

    @Test(arguments: [
        ("Basic " + Data("paysim-paypal-client:wrong".utf8).base64EncodedString(), "grant_type=client_credentials", 401),
        ("Basic " + Data("other:paysim-paypal-secret".utf8).base64EncodedString(), "grant_type=client_credentials", 401),
        ("Basic !!!", "grant_type=client_credentials", 401),
        ("Bearer abc", "grant_type=client_credentials", 401),
        ("", "grant_type=client_credentials", 401),
        ("Basic " + Data("paysim-paypal-client:paysim-paypal-secret".utf8).base64EncodedString(), "grant_type=password", 400),
        ("Basic " + Data("paysim-paypal-client:paysim-paypal-secret".utf8).base64EncodedString(), "", 400)
    ])
    func badTokenRequests(authorization: String, body: String, status: Int) {
        let sim = makeSimulator()
        let headers = authorization.isEmpty ? [:] : ["Authorization": authorization]
        let r = sim.handle(method: "POST", path: "/v1/oauth2/token", headers: headers, body: Array(body.utf8))
        #expect(r.status == status)
    }

    @Test func configurableLifetimeAndExpiry() {
        let clock = TestClock()
        let sim = makeSimulator(clock: clock) { $0.paypalTokenLifetime = 60 }
        sim.seedPayPal(authorizeOrder)
        let token = sim.paypalToken()
        #expect(sim.paypal("GET", "/v2/checkout/orders/ORDER-A", token: token).status == 200)
        clock.advance(61)
        let expired = sim.paypal("GET", "/v2/checkout/orders/ORDER-A", token: token)
        #expect(expired.status == 401)
        #expect(expired.json?["name"]?.stringValue == "AUTHENTICATION_FAILURE")
    }

    @Test(arguments: ["/v2/checkout/orders/ORDER-A", "/v2/payments/authorizations/AUTH-1", "/v2/payments/captures/CAP-1"])
    func bearerRequired(path: String) {
        let (sim, _) = seeded()
        #expect(sim.handle(method: "GET", path: path).status == 401)
        #expect(sim.paypal("GET", path, token: "made-up").status == 401)
        #expect(sim.handle(method: "POST", path: "/v2/payments/authorizations/AUTH-1/void").status == 401)
    }

    // MARK: reads

    @Test func orderShape() throws {
        let (sim, token) = seeded()
        let r = sim.paypal("GET", "/v2/checkout/orders/ORDER-A", token: token)
        #expect(r.status == 200)
        let j = try #require(r.json)
        #expect(j["intent"]?.stringValue == "AUTHORIZE")
        #expect(j["status"]?.stringValue == "COMPLETED")
        #expect(j["create_time"]?.stringValue == "2026-11-01T10:00:00Z")
        let unit = try #require(j["purchase_units"]?.arrayValue?.first)
        #expect(unit["amount"]?["value"]?.stringValue == "10.00")
        #expect(unit["amount"]?["currency_code"]?.stringValue == "USD")
        #expect(unit["payee"]?["merchant_id"]?.stringValue == "MERCH1")
        #expect(unit["reference_id"]?.stringValue == "default")
        let auth = try #require(unit["payments"]?["authorizations"]?.arrayValue?.first)
        #expect(auth["id"]?.stringValue == "AUTH-1")
        #expect(auth["status"]?.stringValue == "CREATED")
        #expect(auth["amount"]?["value"]?.stringValue == "10.00")
        let up = auth["links"]?.arrayValue?.first { $0["rel"]?.stringValue == "up" }
        #expect(up?["href"]?.stringValue == "http://127.0.0.1:9999/v2/checkout/orders/ORDER-A")
        #expect(unit["payments"]?["captures"] == nil)
    }

    @Test func resourcesCarryRelatedIdsAndUpLinks() throws {
        let (sim, token) = seeded()
        let auth = try #require(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json)
        #expect(auth["supplementary_data"]?["related_ids"]?["order_id"]?.stringValue == "ORDER-A")
        let capture = try #require(
            sim.paypal(
                "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
                body: #"{"amount":{"currency_code":"USD","value":"4.00"}}"#
            ).json)
        let captureID = try #require(capture["id"]?.stringValue)
        let fetched = try #require(sim.paypal("GET", "/v2/payments/captures/\(captureID)", token: token).json)
        #expect(fetched["supplementary_data"]?["related_ids"]?["order_id"]?.stringValue == "ORDER-A")
        #expect(fetched["supplementary_data"]?["related_ids"]?["authorization_id"]?.stringValue == "AUTH-1")
        let up = fetched["links"]?.arrayValue?.first { $0["rel"]?.stringValue == "up" }
        #expect(up?["href"]?.stringValue?.hasSuffix("/v2/payments/authorizations/AUTH-1") == true)
        let refund = try #require(sim.paypal("POST", "/v2/payments/captures/\(captureID)/refund", token: token, body: "{}").json)
        let refundID = try #require(refund["id"]?.stringValue)
        let r = try #require(sim.paypal("GET", "/v2/payments/refunds/\(refundID)", token: token).json)
        #expect(r["supplementary_data"] == nil)  // PayPal's refund names only its capture (the up link below)
        #expect(r["amount"]?["value"]?.stringValue == "4.00")
        let refundUp = r["links"]?.arrayValue?.first { $0["rel"]?.stringValue == "up" }
        #expect(refundUp?["href"]?.stringValue?.hasSuffix("/v2/payments/captures/\(captureID)") == true)
    }

    @Test(arguments: [
        "/v2/checkout/orders/NOPE", "/v2/payments/authorizations/NOPE", "/v2/payments/captures/NOPE",
        "/v2/payments/refunds/NOPE", "/v2/payments/whatever/X"
    ])
    func unknownResourcesAre404(path: String) {
        let (sim, token) = seeded()
        let r = sim.paypal("GET", path, token: token)
        #expect(r.status == 404)
        #expect(r.json?["name"]?.stringValue == "RESOURCE_NOT_FOUND")
    }

    // MARK: capture

    /// paysim's fee model on PayPal's breakdown shapes: a completed capture states gross, paypal_fee and net (3.49%
    /// half up + 0.49: 30.00 → 1.54, net 28.46); a refund gives back the percentage of its own amount (10.00 → 0.35,
    /// net 9.65) with the capture's total refunded so far; a pending capture states no breakdown at all.
    @Test func capturesAndRefundsStateTheirFeeAndNet() throws {
        let (sim, token) = seeded()
        let capture = try #require(sim.paypal("GET", "/v2/payments/captures/CAP-1", token: token).json)
        let b = try #require(capture["seller_receivable_breakdown"])
        #expect(
            b["gross_amount"]?["value"]?.stringValue == "30.00" && b["paypal_fee"]?["value"]?.stringValue == "1.54"
                && b["net_amount"]?["value"]?.stringValue == "28.46" && b["paypal_fee"]?["currency_code"]?.stringValue == "EUR")
        let refund = try #require(
            sim.paypal(
                "POST", "/v2/payments/captures/CAP-1/refund", token: token,
                body: #"{"amount":{"currency_code":"EUR","value":"10.00"}}"#
            ).json)
        let p = try #require(refund["seller_payable_breakdown"])
        #expect(
            p["gross_amount"]?["value"]?.stringValue == "10.00" && p["paypal_fee"]?["value"]?.stringValue == "0.35"
                && p["net_amount"]?["value"]?.stringValue == "9.65" && p["total_refunded_amount"]?["value"]?.stringValue == "10.00")
        sim.seedPayPal(
            #"{"id":"ORDER-P","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"5.00","captures":[{"id":"CAP-P","status":"PENDING"}]}"#
        )
        let pending = try #require(sim.paypal("GET", "/v2/payments/captures/CAP-P", token: token).json)
        #expect(pending["status"]?.stringValue == "PENDING" && pending["seller_receivable_breakdown"] == nil)
        // Never more than the gross, whatever the amount; JPY has no decimals at PayPal.
        #expect(PayPalFees.capture(10, Currency(code: "USD")!) == 10)
        #expect(PayPalFees.capture(1_000, Currency(code: "JPY")!) == 84)
        #expect(PayPalFees.refund(1_000, Currency(code: "JPY")!) == 35)
    }

    /// An app without the capture permission is answered 403 NOT_AUTHORIZED / PERMISSION_DENIED (payments_payment_v2's
    /// error_403) and nothing is captured; granted again, the same capture goes through.
    @Test func aCaptureWithoutThePermissionIsRefusedAndAppliesNothing() throws {
        let (sim, token) = seeded()
        #expect(sim.post("/admin/paypal/permissions", #"{"captures":false}"#).status == 200)
        let refused = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: "{}")
        #expect(refused.status == 403)
        #expect(refused.json?["name"]?.stringValue == "NOT_AUTHORIZED")
        #expect(refused.errorCode == "PERMISSION_DENIED")
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "CREATED")
        #expect(sim.post("/admin/paypal/permissions", #"{"captures":"no"}"#).status == 400)
        #expect(sim.post("/admin/paypal/permissions", #"{"captures":true}"#).status == 200)
        #expect(sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: "{}").status == 201)
    }

    @Test func partialThenFullCapture() throws {
        let (sim, token) = seeded()
        let first = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"4.00"}}"#)
        #expect(first.status == 201)
        #expect(first.json?["status"]?.stringValue == "COMPLETED")
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "PARTIALLY_CAPTURED")
        let over = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"6.01"}}"#)
        #expect(over.status == 422)
        #expect(over.json?["name"]?.stringValue == "UNPROCESSABLE_ENTITY")
        #expect(over.errorCode == "MAX_CAPTURE_AMOUNT_EXCEEDED")
        let rest = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: "")
        #expect(rest.status == 201)
        #expect(rest.json?["amount"]?["value"]?.stringValue == "6.00")
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "CAPTURED")
        let again = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: "{}")
        #expect(again.errorCode == "AUTHORIZATION_ALREADY_CAPTURED")
        let order = try #require(sim.paypal("GET", "/v2/checkout/orders/ORDER-A", token: token).json)
        #expect(order["purchase_units"]?.arrayValue?.first?["payments"]?["captures"]?.arrayValue?.count == 2)
    }

    @Test func finalCaptureClosesTheAuthorization() {
        let (sim, token) = seeded()
        let r = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"3.00"},"final_capture":true}"#)
        #expect(r.status == 201)
        #expect(r.json?["final_capture"]?.boolValue == true)
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "CAPTURED")
    }

    /// A value PayPal cannot take is 422 and a missing or malformed field 400, as payments_payment_v2.json lists
    /// the capture's issues (it has no MALFORMED_REQUEST_JSON).
    @Test(arguments: [
        (#"{"amount":{"currency_code":"EUR","value":"1.00"}}"#, 422, "AUTH_CAPTURE_CURRENCY_MISMATCH"),
        (#"{"amount":{"currency_code":"USD","value":"1.001"}}"#, 422, "DECIMAL_PRECISION"),
        (#"{"amount":{"currency_code":"USD","value":"0.00"}}"#, 422, "CANNOT_BE_ZERO_OR_NEGATIVE"),
        (#"{"amount":{"currency_code":"USD","value":"-1.00"}}"#, 422, "DECIMAL_PRECISION"),
        (#"{"amount":{"value":"1.00"}}"#, 400, "MISSING_REQUIRED_PARAMETER"),
        (#"{"amount":{"currency_code":"USD"}}"#, 400, "MISSING_REQUIRED_PARAMETER"),
        (#"{"final_capture":"yes"}"#, 400, "INVALID_PARAMETER_SYNTAX"),
        (#"{"amount":"#, 400, "INVALID_PARAMETER_SYNTAX"),
        (#"[1]"#, 400, "INVALID_PARAMETER_SYNTAX")
    ])
    func invalidCaptureBodies(body: String, status: Int, issue: String) {
        let (sim, token) = seeded()
        let r = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: body)
        #expect(r.status == status)
        #expect(r.errorCode == issue)
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "CREATED")
    }

    @Test(arguments: [
        ("VOIDED", "AUTHORIZATION_VOIDED"), ("DENIED", "AUTHORIZATION_DENIED"),
        ("CAPTURED", "AUTHORIZATION_ALREADY_CAPTURED"), ("PENDING", "TRANSACTION_REFUSED")
    ])
    func captureNeedsAnOpenAuthorization(status: String, issue: String) {
        let sim = makeSimulator()
        sim.seedPayPal(authorizeOrder.replacingOccurrences(of: #""status":"CREATED""#, with: #""status":"\#(status)""#))
        let r = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: sim.paypalToken(), body: "{}")
        #expect(r.status == 422)
        #expect(r.errorCode == issue)
    }

    @Test func zeroExponentCurrency() {
        let sim = makeSimulator()
        sim.seedPayPal(
            #"{"id":"O","intent":"AUTHORIZE","currency":"JPY","amount":"1000","authorizations":[{"id":"A","status":"CREATED"}]}"#)
        let token = sim.paypalToken()
        #expect(
            sim.paypal(
                "POST", "/v2/payments/authorizations/A/capture", token: token,
                body: #"{"amount":{"currency_code":"JPY","value":"1.5"}}"#
            ).errorCode == "DECIMALS_NOT_SUPPORTED")
        let ok = sim.paypal(
            "POST", "/v2/payments/authorizations/A/capture", token: token,
            body: #"{"amount":{"currency_code":"JPY","value":"400"}}"#)
        #expect(ok.json?["amount"]?["value"]?.stringValue == "400")
    }

    // MARK: void

    @Test func voidACreatedAuthorization() {
        let (sim, token) = seeded()
        let r = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/void", token: token)
        #expect(r.status == 200)
        #expect(r.json?["status"]?.stringValue == "VOIDED")
        #expect(sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/void", token: token).errorCode == "PREVIOUSLY_VOIDED")
        #expect(
            sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: "{}").errorCode == "AUTHORIZATION_VOIDED")
    }

    @Test func voidAfterACaptureIsRejected() {
        let (sim, token) = seeded()
        _ = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"1.00"}}"#)
        let r = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/void", token: token)
        #expect(r.status == 422)
        #expect(r.errorCode == "PREVIOUSLY_CAPTURED")
    }

    @Test(arguments: [("DENIED", "CANNOT_BE_VOIDED"), ("PENDING", "CANNOT_BE_VOIDED"), ("CAPTURED", "PREVIOUSLY_CAPTURED")])
    func voidNeedsCreated(status: String, issue: String) {
        let sim = makeSimulator()
        sim.seedPayPal(authorizeOrder.replacingOccurrences(of: #""status":"CREATED""#, with: #""status":"\#(status)""#))
        #expect(sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/void", token: sim.paypalToken()).errorCode == issue)
    }

    // MARK: refund

    @Test func partialThenFullRefund() throws {
        let (sim, token) = seeded()
        let first = sim.paypal(
            "POST", "/v2/payments/captures/CAP-1/refund", token: token,
            body: #"{"amount":{"currency_code":"EUR","value":"10.00"}}"#)
        #expect(first.status == 201)
        #expect(first.json?["status"]?.stringValue == "COMPLETED")
        #expect(sim.paypal("GET", "/v2/payments/captures/CAP-1", token: token).json?["status"]?.stringValue == "PARTIALLY_REFUNDED")
        let over = sim.paypal(
            "POST", "/v2/payments/captures/CAP-1/refund", token: token,
            body: #"{"amount":{"currency_code":"EUR","value":"20.01"}}"#)
        #expect(over.errorCode == "REFUND_AMOUNT_EXCEEDED")
        let rest = sim.paypal("POST", "/v2/payments/captures/CAP-1/refund", token: token, body: "{}")
        #expect(rest.status == 201)
        #expect(rest.json?["amount"]?["value"]?.stringValue == "20.00")
        #expect(rest.json?["seller_payable_breakdown"]?["total_refunded_amount"]?["value"]?.stringValue == "30.00")
        #expect(sim.paypal("GET", "/v2/payments/captures/CAP-1", token: token).json?["status"]?.stringValue == "REFUNDED")
        #expect(sim.paypal("POST", "/v2/payments/captures/CAP-1/refund", token: token, body: "{}").errorCode == "CAPTURE_FULLY_REFUNDED")
        let refunds = sim.paypal("GET", "/v2/checkout/orders/ORDER-C", token: token).json?["purchase_units"]?.arrayValue?.first?[
            "payments"]?["refunds"]?.arrayValue
        #expect(refunds?.count == 2)
    }

    @Test(arguments: [("PENDING", "PENDING_CAPTURE"), ("DECLINED", "REFUND_NOT_ALLOWED"), ("FAILED", "REFUND_NOT_ALLOWED")])
    func refundNeedsACompletedCapture(status: String, issue: String) {
        let sim = makeSimulator()
        sim.seedPayPal(captureOrder.replacingOccurrences(of: #""status":"COMPLETED"}"#, with: #""status":"\#(status)"}"#))
        #expect(sim.paypal("POST", "/v2/payments/captures/CAP-1/refund", token: sim.paypalToken(), body: "{}").errorCode == issue)
    }

    @Test func refundCurrencyMustMatch() {
        let (sim, token) = seeded()
        let r = sim.paypal(
            "POST", "/v2/payments/captures/CAP-1/refund", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"1.00"}}"#)
        #expect(r.status == 422)
        #expect(r.errorCode == "REFUND_CAPTURE_CURRENCY_MISMATCH")
    }

    // MARK: idempotency

    @Test(arguments: [
        ("/v2/payments/authorizations/AUTH-1/capture", #"{"amount":{"currency_code":"USD","value":"4.00"}}"#),
        ("/v2/payments/captures/CAP-1/refund", #"{"amount":{"currency_code":"EUR","value":"4.00"}}"#),
        ("/v2/payments/authorizations/AUTH-1/void", "")
    ])
    func samePayPalRequestIdIsAppliedOnce(path: String, body: String) {
        let (sim, token) = seeded()
        let first = sim.paypal("POST", path, token: token, body: body, requestID: "key-1")
        let again = sim.paypal("POST", path, token: token, body: body, requestID: "key-1")
        #expect(first.status == again.status)
        #expect(first.body == again.body)
        #expect(sim.log.map(\.result) == ["applied", "replayed"])
        #expect(sim.log.allSatisfy { $0.idempotencyKey == "key-1" })
        // A new key applies again.
        let other = sim.paypal("POST", path, token: token, body: body, requestID: "key-2")
        if path.hasSuffix("void") {
            #expect(other.errorCode == "PREVIOUSLY_VOIDED")
        } else {
            #expect(other.status == 201)
            #expect(other.json?["id"] != first.json?["id"])
        }
    }

    @Test func withoutRequestIdEachCallApplies() {
        let (sim, token) = seeded()
        let body = #"{"amount":{"currency_code":"USD","value":"4.00"}}"#
        #expect(sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: body).status == 201)
        #expect(sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: body).status == 201)
        #expect(
            sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/capture", token: token, body: body).errorCode
                == "MAX_CAPTURE_AMOUNT_EXCEEDED")
    }

    @Test func rejectionIsRememberedUnderItsKey() {
        let (sim, token) = seeded()
        let over = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"99.00"}}"#, requestID: "k")
        let again = sim.paypal(
            "POST", "/v2/payments/authorizations/AUTH-1/capture", token: token,
            body: #"{"amount":{"currency_code":"USD","value":"1.00"}}"#, requestID: "k")
        #expect(over.status == 422)
        #expect(again.body == over.body)
    }
}
