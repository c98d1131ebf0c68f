import Crypto
import Foundation
import Testing
@testable import Providers

@Suite struct PXPEventTests {
    static let single = #"""
        {"eventCode":"transaction-authorised","eventCategory":"Transaction","eventDate":"2024-10-27T08:51:04.8264455Z",
         "eventData":{"state":"Authorised","merchantTransactionId":"ORD-1","systemTransactionId":"0b6d2c5e-1111"},
         "eventOwner":{"merchantGroup":"MG1","merchant":"M1","site":"S1"}}
        """#

    @Test func singleObject() throws {
        let n = try PXPNotification.parse(body: Array(Self.single.utf8), headers: ["X-Request-Id": "req-7"])
        #expect(n.dedupeKey == "req-7")
        #expect(
            n.events == [
                PXPEvent(
                    eventType: "transaction-authorised", eventCategory: "Transaction",
                    eventDate: "2024-10-27T08:51:04.8264455Z", merchantGroup: "MG1", merchant: "M1", site: "S1",
                    merchantTransactionID: "ORD-1", systemTransactionID: "0b6d2c5e-1111")
            ])
        #expect(n.eventType == "transaction-authorised")
    }

    @Test func arrayIsOneDeliveryWithSeveralEvents() throws {
        let body = #"[{"eventType":"a","eventData":{"merchantTransactionId":"ORD-1"}},{"eventCategory":"Token","eventData":{}}]"#
        let n = try PXPNotification.parse(body: Array(body.utf8), headers: [:])
        #expect(n.events.count == 2)
        #expect(n.events[0].eventType == "a")
        #expect(n.events[0].merchantTransactionID == "ORD-1")
        #expect(n.events[1].eventType == nil)
        #expect(n.events[1].eventCategory == "Token")
        #expect(n.eventType == "a")
    }

    @Test func nestedTransactionData() throws {
        let body =
            #"[{"eventDate":"2024-10-27T08:51:04Z","eventCategory":"Transaction","eventData":{"transactionData":{"merchantTransactionId":"ORD-9","systemTransactionId":12345}}}]"#
        let event = try #require(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).events.first)
        #expect(event.merchantTransactionID == "ORD-9")
        #expect(event.systemTransactionID == "12345")
        #expect(event.eventType == nil)
    }

    @Test func directReferencesWinOverNested() throws {
        let body =
            #"{"eventData":{"merchantTransactionId":"TOP","transactionData":{"merchantTransactionId":"NESTED","systemTransactionId":"SYS"}}}"#
        let event = try #require(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).events.first)
        #expect(event.merchantTransactionID == "TOP")
        #expect(event.systemTransactionID == "SYS")
    }

    @Test func eventCodeWinsOverEventType() throws {
        let body = #"{"eventCode":"code","eventType":"type"}"#
        #expect(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).eventType == "code")
    }

    @Test func dedupeKeyFallsBackToTheBodyHash() throws {
        let body = Array(Self.single.utf8)
        #expect(try PXPNotification.parse(body: body, headers: [:]).dedupeKey == Crypto.SHA256.hex(body))
        #expect(try PXPNotification.parse(body: body, headers: ["x-request-id": " "]).dedupeKey == Crypto.SHA256.hex(body))
        #expect(try PXPNotification.parse(body: body, headers: ["x-request-id": "r"]).dedupeKey == "r")
    }

    @Test(arguments: ["[]", "", "not json", "{\"a\":", "42", "\"text\"", "null", "true", "[1,2]", "[{}, \"x\"]"])
    func malformed(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PXPNotification.parse(body: Array(body.utf8), headers: [:]) }
        #expect(error?.code == .malformedBody)
        #expect(error?.httpStatus == 400)
    }

    @Test func minimalObjectIsAccepted() throws {
        let n = try PXPNotification.parse(body: Array("{}".utf8), headers: [:])
        #expect(n.events == [PXPEvent()])
    }

    /// Ids given as JSON integers are identifiers, taken from the literal digits (no Double: big ids stay exact).
    @Test(arguments: [
        ("12345", "12345"), ("0", "0"), ("-7", "-7"), ("-0", "0"),
        ("123456789012345678901234567890", "123456789012345678901234567890")
    ])
    func integerIdentifiers(literal: String, id: String) throws {
        let body = #"{"eventData":{"systemTransactionId":\#(literal),"merchantTransactionId":\#(literal)}}"#
        let event = try #require(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).events.first)
        #expect(event.systemTransactionID == id)
        #expect(event.merchantTransactionID == id)
    }

    /// Fractions, exponents, booleans, null, empty strings, objects and arrays are not identifiers; a nested id
    /// of the right kind is used instead.
    @Test(arguments: ["12.5", "12.0", "1e3", "1E3", "true", "false", "null", "\"\"", "{}", "[\"X\"]"])
    func nonIdentifiersFallBackToNested(value: String) throws {
        let body = #"{"eventData":{"merchantTransactionId":\#(value),"transactionData":{"merchantTransactionId":"N"}}}"#
        let event = try #require(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).events.first)
        #expect(event.merchantTransactionID == "N")
    }

    @Test(arguments: [
        #"{"eventCode":7,"eventCategory":true,"eventOwner":"x","eventData":[1]}"#,
        #"{"eventType":"","eventDate":null,"eventOwner":{"merchant":""},"eventData":{"transactionData":3}}"#
    ])
    func wrongTypesReadAsAbsent(body: String) throws {
        let n = try PXPNotification.parse(body: Array(body.utf8), headers: [:])
        #expect(n.events == [PXPEvent()])
    }

    /// Duplicate member names anywhere are refused (strict parser): two readers could take different values.
    @Test(arguments: [
        #"{"eventCode":"a","eventCode":"b"}"#,
        #"{"eventData":{"merchantTransactionId":"A","merchantTransactionId":"B"}}"#,
        #"[{"eventCode":"a"},{"x":{"y":1,"y":2}}]"#
    ])
    func duplicateKeysAreMalformed(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PXPNotification.parse(body: Array(body.utf8), headers: [:]) }
        #expect(error?.code == .malformedBody)
        #expect(error?.message.contains("duplicate") == true)
    }

    /// Anything that is not strict RFC 8259 JSON is `malformed_body`.
    @Test(arguments: ["{\"a\":1,}", "[{},]", "{\"a\":01}", "\u{FEFF}{}", "{\"a\":\"\u{1}\"}", "{} x", "{'a':1}", "{\"a\":NaN}"])
    func strictJSONOnly(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PXPNotification.parse(body: Array(body.utf8), headers: [:]) }
        #expect(error?.code == .malformedBody)
    }

    @Test func invalidUTF8IsMalformed() {
        let body: [UInt8] = Array(#"{"eventCode":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        let error = #expect(throws: WebhookRejection.self) { try PXPNotification.parse(body: body, headers: [:]) }
        #expect(error?.code == .malformedBody)
    }

    /// Deep or long-numbered parts we never read do not get a body refused (limits as generous as JSONSerialization's).
    @Test func deepNestingAndLongNumbersAreAccepted() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        let long = String(repeating: "9", count: 1000)
        let body = #"{"eventCode":"c","extra":\#(deep),"big":\#(long).5}"#
        #expect(try PXPNotification.parse(body: Array(body.utf8), headers: [:]).eventType == "c")
    }

    @Test func rejectionMessages() {
        func message(_ body: String) -> String? {
            do throws(WebhookRejection) {
                _ = try PXPNotification.parse(body: Array(body.utf8), headers: [:]); return nil
            } catch { return error.message }
        }
        #expect(message("") == "the body is empty")
        #expect(message("[]") == "the body is an empty JSON array; expected event objects")
        #expect(message("[{}, 3]") == "element 1 of the body array is not a JSON object")
        #expect(message("42") == "the body is a JSON number; expected an event object or an array of them")
        #expect(message("\"s\"") == "the body is a JSON string; expected an event object or an array of them")
        #expect(message("null") == "the body is a JSON null; expected an event object or an array of them")
        #expect(message("true") == "the body is a JSON boolean; expected an event object or an array of them")
        #expect(message("nope")?.hasPrefix("the body is not valid JSON (") == true)
    }
}

@Suite struct PayPalEventTests {
    static func sample(_ name: String) throws -> PayPalEvent {
        try PayPalEvent.parse(body: Fixture.bytes("paypal/samples/\(name)"))
    }

    @Test func orderApproved() throws {
        let e = try Self.sample("CHECKOUT.ORDER.APPROVED.v2.docs-sample.json")
        #expect(e.id == "WH-COC11055RA711503B-4YM959094A144403T")
        #expect(e.dedupeKey == e.id)
        #expect(e.eventType == "CHECKOUT.ORDER.APPROVED")
        #expect(e.resourceType == "checkout-order")
        #expect(e.references == [.order("5O190127TN364715T")])
        #expect(e.orderID == "5O190127TN364715T")
    }

    @Test func orderCompletedSimulatorBody() throws {
        let e = try Self.sample("CHECKOUT.ORDER.COMPLETED.v2.simulator-2021.body.bin")
        #expect(e.eventType == "CHECKOUT.ORDER.COMPLETED")
        #expect(e.references == [.order("5O190127TN364715T")])
    }

    @Test func authorizationVoided() throws {
        let e = try Self.sample("PAYMENT.AUTHORIZATION.VOIDED.v2.simulator-sample.json")
        #expect(e.eventType == "PAYMENT.AUTHORIZATION.VOIDED")
        #expect(e.resourceID == "8PP38301D7923932J")
        #expect(e.references == [.authorization("8PP38301D7923932J"), .order("9RC99380MW614700D")])
        #expect(e.orderID == "9RC99380MW614700D")
    }

    @Test func captureDenied() throws {
        let e = try Self.sample("PAYMENT.CAPTURE.DENIED.v2.docs-pui-sample.json")
        #expect(e.eventType == "PAYMENT.CAPTURE.DENIED")
        // related_ids and the up link name the same order: listed once.
        #expect(e.references == [.capture("826413372K501814R"), .order("5O190127TN364715T")])
    }

    @Test func refundPointsToItsCapture() throws {
        let e = try Self.sample("PAYMENT.CAPTURE.REFUNDED.v2.constructed.json")
        #expect(e.eventType == "PAYMENT.CAPTURE.REFUNDED")
        #expect(e.resourceType == "refund")
        #expect(e.references == [.refund("1Y107995YT783435V"), .capture("0JF852973C016714D")])
        #expect(e.orderID == nil)
    }

    @Test func approvalReversedNamesTheOrderDirectly() throws {
        let e = try Self.sample("CHECKOUT.PAYMENT-APPROVAL.REVERSED.docs-pui-sample.json")
        #expect(e.resourceType == nil)
        #expect(e.references == [.order("5O190127TN364715T")])
    }

    @Test func eventsWithoutPaymentReferences() throws {
        let vault = try Self.sample("VAULT.PAYMENT-TOKEN.CREATED.v3.shopware-fixture.json")
        #expect(vault.resourceType == "payment_token")
        #expect(vault.references.isEmpty)
        let v1 = try Self.sample("PAYMENT.AUTHORIZATION.CREATED.v1.sandbox-2015.json")
        #expect(v1.references == [.authorization("6F961703H62685926")])
    }

    @Test(arguments: Fixture.paypalVectors)
    func signedVectorBodies(name: String) throws {
        let e = try PayPalEvent.parse(body: Fixture.bytes("paypal/\(name)/body.bin"))
        #expect(e.eventType == "PAYMENT.SALE.COMPLETED")
        #expect(e.id.hasPrefix("WH-"))
    }

    @Test(arguments: [
        ("https://api.paypal.com/v2/checkout/orders/O1", PayPalReference.order("O1")),
        ("https://api-m.sandbox.paypal.com/v2/payments/captures/C1", .capture("C1")),
        ("https://api.paypal.com/v2/payments/authorizations/A1?x=1", .authorization("A1")),
        ("/v2/payments/refunds/R1", .refund("R1"))
    ])
    func upLinkPaths(href: String, reference: PayPalReference) {
        #expect(PayPalEvent.reference(href: href) == reference)
    }

    @Test(arguments: [
        "https://api.paypal.com/v1/payments/sale/S1", "https://api.paypal.com/v2/checkout/orders", "not a url",
        "https://api.paypal.com/v2/vault/payment-tokens/T1"
    ])
    func otherLinksNameNothing(href: String) {
        #expect(PayPalEvent.reference(href: href) == nil)
    }

    @Test(arguments: [#"{"event_type":"X"}"#, #"{"id":""}"#, #"{"id":42}"#, "[]", "[{\"id\":\"WH-1\"}]", "nope", ""])
    func malformed(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PayPalEvent.parse(body: Array(body.utf8)) }
        #expect(error?.code == .malformedBody)
    }

    @Test func minimal() throws {
        let e = try PayPalEvent.parse(body: Array(#"{"id":"WH-1"}"#.utf8))
        #expect(e == PayPalEvent(id: "WH-1"))
    }

    @Test(arguments: [#"{"id":"WH-1","id":"WH-2"}"#, #"{"id":"WH-1","resource":{"id":"A","id":"B"}}"#])
    func duplicateKeysAreMalformed(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PayPalEvent.parse(body: Array(body.utf8)) }
        #expect(error?.code == .malformedBody)
    }

    @Test func oddlyTypedPartsAreIgnored() throws {
        let body =
            #"{"id":"WH-1","resource_type":"capture","resource":{"id":"C1","supplementary_data":[],"order_id":5,"links":[7,{"rel":"UP","href":"/v2/checkout/orders/O1"},{"rel":"up"},{"rel":"self","href":"/v2/checkout/orders/O2"}]}}"#
        let e = try PayPalEvent.parse(body: Array(body.utf8))
        #expect(e.references == [.capture("C1"), .order("O1")])
        let notObject = try PayPalEvent.parse(body: Array(#"{"id":"WH-2","resource":"x","event_type":1}"#.utf8))
        #expect(notObject == PayPalEvent(id: "WH-2"))
    }
}

@Suite struct PaypercutEventTests {
    @Test func paymentIntentEvent() throws {
        let body =
            #"{"id":"01KA9T0VGBB5YAB0X9TN7VHWW8","type":"payment_intent.captured","created":"2023-11-21T10:30:45Z","livemode":false,"data":{"object":{"id":"01K755J9SV2364REVHB915Z2FW","object":"payment_intent","status":"succeeded"}}}"#
        let e = try PaypercutEvent.parse(body: Array(body.utf8))
        #expect(e.dedupeKey == "01KA9T0VGBB5YAB0X9TN7VHWW8")
        #expect(e.type == "payment_intent.captured")
        #expect(e.objectType == "payment_intent")
        #expect(e.paymentIntentID == "01K755J9SV2364REVHB915Z2FW")
    }

    @Test func checkoutSessionNamesItsIntent() throws {
        // The documented example (paypercut.md §7).
        let body = #"""
            { "id": "01KA9T0VGBB5YAB0X9TN7VHWW8", "account": "01KAKB228G3K4E98NFVE2MGHW4", "api_version": "v1",
              "type": "checkout_session.completed", "created": "2023-11-21T10:30:45Z", "livemode": true,
              "data": { "object": { "id": "01KA9T0VG5MDBTN4BBZK10QT0G", "object": "checkout_session", "amount_total": 2000,
                        "currency": {"iso": "USD", "scale": 2}, "payment_status": "paid", "status": "complete",
                        "customer": "...", "payment_intent": "01KA9T0ABC123456789DEFGHIJ", "mode": "payment",
                        "metadata": {"order_id": "12345"}, "created": "...", "expires_at": "...", "livemode": true } } }
            """#
        let e = try PaypercutEvent.parse(body: Array(body.utf8))
        #expect(e.account == "01KAKB228G3K4E98NFVE2MGHW4")
        #expect(e.objectType == "checkout_session")
        #expect(e.objectID == "01KA9T0VG5MDBTN4BBZK10QT0G")
        #expect(e.paymentIntentID == "01KA9T0ABC123456789DEFGHIJ")
    }

    @Test func intentEventWithoutObjectField() throws {
        let e = try PaypercutEvent.parse(
            body: Array(#"{"id":"E1","type":"payment_intent.authorized","data":{"object":{"id":"PI9"}}}"#.utf8))
        #expect(e.paymentIntentID == "PI9")
    }

    @Test func otherEventsNameNoIntent() throws {
        let e = try PaypercutEvent.parse(
            body: Array(#"{"id":"E2","type":"account.updated","data":{"object":{"id":"ACC","object":"account"}}}"#.utf8))
        #expect(e.paymentIntentID == nil)
        #expect(e.objectID == "ACC")
    }

    @Test(arguments: [#"{"type":"x"}"#, #"{"id":"E"}"#, #"{"id":7,"type":"x"}"#, "[]", "null", "{", ""])
    func malformed(body: String) {
        let error = #expect(throws: WebhookRejection.self) { try PaypercutEvent.parse(body: Array(body.utf8)) }
        #expect(error?.code == .malformedBody)
    }

    @Test func duplicateKeysAreMalformed() {
        let body = #"{"id":"E1","type":"t","data":{"object":{"id":"PI1","id":"PI2"}}}"#
        let error = #expect(throws: WebhookRejection.self) { try PaypercutEvent.parse(body: Array(body.utf8)) }
        #expect(error?.code == .malformedBody)
    }
}

@Suite struct WebhookCommonTests {
    @Test func rejectionStatusesAndBody() throws {
        #expect(RejectionCode.malformedBody.httpStatus == 400)
        for code in RejectionCode.allCases where code != .malformedBody { #expect(code.httpStatus == 401) }
        let r = WebhookRejection(.staleTimestamp, "say \"hi\"")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.jsonBody)) as? [String: [String: String]])
        #expect(json == ["error": ["code": "stale_timestamp", "message": "say \"hi\""]])
        #expect(r.description == "stale_timestamp: say \"hi\"")
    }

    @Test func headersLookup() {
        var h = Headers([("Content-Type", "a"), ("X-Dup", "1"), ("x-dup", "2")])
        #expect(h["content-type"] == "a")
        #expect(h["CONTENT-TYPE"] == "a")
        #expect(h["X-DUP"] == "1")
        #expect(h.values(for: "x-Dup") == ["1", "2"])
        #expect(h["missing"] == nil)
        h.set("X-DUP", "3")
        #expect(h.values(for: "x-dup") == ["3"])
        let d = Headers(["Paypal-Transmission-Id": "t"])
        #expect(d["PAYPAL-TRANSMISSION-ID"] == "t")
        #expect(d.nonEmpty("paypal-transmission-id") == "t")
        #expect(Headers(["A": " \t"]).nonEmpty("a") == nil)
    }

    @Test func summaryPerProvider() throws {
        let pxp = try WebhookDeliverySummary.parse(provider: .pxp, body: Array(#"{"eventCode":"c"}"#.utf8), headers: ["X-Request-Id": "r"])
        #expect(pxp == WebhookDeliverySummary(provider: .pxp, dedupeKey: "r", eventType: "c"))
        let paypal = try WebhookDeliverySummary.parse(provider: .paypal, body: Array(#"{"id":"WH-1","event_type":"E"}"#.utf8), headers: [:])
        #expect(paypal == WebhookDeliverySummary(provider: .paypal, dedupeKey: "WH-1", eventType: "E"))
        let ppc = try WebhookDeliverySummary.parse(provider: .paypercut, body: Array(#"{"id":"E1","type":"t"}"#.utf8), headers: [:])
        #expect(ppc == WebhookDeliverySummary(provider: .paypercut, dedupeKey: "E1", eventType: "t"))
    }
}
