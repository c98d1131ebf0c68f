import Testing
@testable import PaysimCore

@Suite struct PXPTests {
    @Test func getByMerchantTransactionIdHasPXPShape() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "50.05", currency: "EUR")
        let r = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(r.status == 200)
        #expect(r.bodyText.contains(#""transactionValue":50.05,"#))
        let j = try #require(r.json)
        #expect(j["systemTransactionId"]?.stringValue == sid)
        #expect(j["state"]?.stringValue == "Authorised")
        #expect(j["stateData"]?["code"]?.stringValue == "CRD000")
        #expect(j["merchant"]?.stringValue == "M1")
        #expect(j["site"]?.stringValue == "S1")
        #expect(j["merchantTransactionId"]?.stringValue == "ORD-1")
        #expect(j["transactionMethod"]?["intent"]?.stringValue == "Authorisation")
        #expect(j["transactionMethod"]?["entryType"]?.stringValue == "Ecom")
        #expect(j["transactionMethod"]?["fundingType"]?.stringValue == "Card")
        #expect(j["amounts"]?["currencyCode"]?.stringValue == "EUR")
        #expect(j["fundingData"]?["providerResponse"]?["authorisedAmount"] == nil)
        #expect(j["merchantTransactionDate"]?.stringValue != nil)
    }

    @Test(arguments: [
        ("JPY", "1000", #""transactionValue":1000,"#), ("BHD", "1.25", #""transactionValue":1.250,"#),
        ("GBP", "20", #""transactionValue":20.00,"#)
    ])
    func transactionValueHasTheCurrencyDigits(currency: String, value: String, expected: String) {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", value: value, currency: currency)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").bodyText.contains(expected))
    }

    @Test func reportedSiteIsAnsweredWhileThePathUsesTheSeededSite() throws {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", extra: #","reportedSite":"POS-7""#)
        let r = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(r.status == 200)
        #expect(try #require(r.json)["site"]?.stringValue == "POS-7")
    }

    @Test func getBySystemTransactionIdAndAuthorisedAmount() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", extra: #","authorisedAmount":"15.00""#)
        let r = sim.pxpGet("systemTransactionId=\(sid)")
        #expect(r.status == 200)
        #expect(r.bodyText.contains(#""authorisedAmount":15.00"#))
    }

    @Test(arguments: [
        ("merchantTransactionId=NOPE", "M1", "S1"), ("merchantTransactionId=ORD-1", "M2", "S1"),
        ("merchantTransactionId=ORD-1", "M1", "S2")
    ])
    func unknownOrMismatchedIs404(query: String, merchant: String, site: String) {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1")
        let r = sim.pxpGet(query, merchant: merchant, site: site)
        #expect(r.status == 404)
        #expect(r.errorCode == "TransactionNotFound")
    }

    @Test func systemTransactionIdOfAnotherMerchantIs404() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        #expect(sim.pxpGet("systemTransactionId=\(sid)", merchant: "M2").status == 404)
    }

    @Test func getWithoutReferenceIs400() {
        let sim = makeSimulator()
        #expect(sim.pxpGet("").status == 400)
    }

    @Test(arguments: [
        [String: String](),
        ["Authorization": "Bearer abc", "X-Request-Id": "r", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 wrong-token:1790000000:abc", "X-Request-Id": "r", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 paysim-token:yesterday:abc", "X-Request-Id": "r", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 paysim-token:1790000000", "X-Request-Id": "r", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 paysim-token:1790000000:", "X-Request-Id": "r", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 paysim-token:1790000000:abc", "X-Client-Id": "paysim-client"],
        ["Authorization": "PXP-UST1 paysim-token:1790000000:abc", "X-Request-Id": "r"],
        ["Authorization": "PXP-UST1 paysim-token:1790000000:abc", "X-Request-Id": "r", "X-Client-Id": "other"]
    ])
    func badCredentialsAre401(headers: [String: String]) {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1")
        let r = sim.handle(
            method: "GET", path: "/api/v1/transactions/M1/S1", query: ["merchantTransactionId": "ORD-1"],
            headers: headers)
        #expect(r.status == 401)
        #expect(r.errorCode == "Unauthorized")
    }

    @Test(arguments: ["1790000000", "1790000000123", "2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123+01:00"])
    func acceptedTimestampFormats(timestamp: String) {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1")
        let path = "/api/v1/transactions/M1/S1", query = ["merchantTransactionId": "ORD-1"]
        let r = sim.handle(
            method: "GET", path: path, query: query,
            headers: pxpHeaders("GET", path, query: query, timestamp: timestamp))
        #expect(r.status == 200)
    }

    @Test func wrongSignatureIs401() {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1")
        let path = "/api/v1/transactions/M1/S1"
        var headers = pxpHeaders("GET", path, query: ["merchantTransactionId": "ORD-1"])
        headers["Authorization"] = "PXP-UST1 paysim-token:1790000000:c2lnbmF0dXJl"
        let r = sim.handle(method: "GET", path: path, query: ["merchantTransactionId": "ORD-1"], headers: headers)
        #expect(r.status == 401)
        #expect(r.json?["errorReason"]?.stringValue == "signature does not match")
        // Signed for another query, request id or token value.
        for other in [
            pxpHeaders("GET", path, query: ["merchantTransactionId": "ORD-2"]),
            pxpHeaders("GET", path, query: ["merchantTransactionId": "ORD-1"], requestID: "req-2")
                .merging(["X-Request-Id": "req-1"]) { $1 }
        ] {
            #expect(sim.handle(method: "GET", path: path, query: ["merchantTransactionId": "ORD-1"], headers: other).status == 401)
        }
    }

    @Test func signatureCoversTheBody() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        let path = "/api/v1/transactions/\(sid)/modifications"
        let signedBody = #"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Void"}"#
        let sentBody = #"{"merchant":"M1","site":"S1","merchantTransactionId":"Y","operation":"Void"}"#
        let r = sim.post(path, sentBody, headers: pxpHeaders("POST", path, body: Array(signedBody.utf8)))
        #expect(r.status == 401)
        #expect(sim.pxpPost(path, sentBody).status == 200)
    }

    // MARK: modifications

    @Test func partialCapturesUpToTheAuthorisedAmount() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        let first = sim.pxpModify(sid, "Capture", amount: "12.50", mtid: "CAP-1")
        #expect(first.status == 200)
        let capture = try #require(first.json)
        #expect(capture["state"]?.stringValue == "Captured")
        #expect(first.bodyText.contains(#""transactionValue":12.50"#))
        let captureID = try #require(capture["systemTransactionId"]?.stringValue)
        #expect(captureID != sid)
        // The modification is a transaction of its own.
        let fetched = sim.pxpGet("systemTransactionId=\(captureID)")
        #expect(fetched.status == 200)
        #expect(fetched.json?["merchantTransactionId"]?.stringValue == "CAP-1")
        #expect(sim.pxpGet("merchantTransactionId=CAP-1").json?["systemTransactionId"]?.stringValue == captureID)

        let over = sim.pxpModify(sid, "Capture", amount: "7.51", mtid: "CAP-2")
        #expect(over.status == 422)
        #expect(over.errorCode == "AmountExceeded")
        // After a partial capture the parent is still Authorised (the default reading; PXP documents neither).
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Authorised")
        #expect(sim.pxpModify(sid, "Capture", amount: "7.50", mtid: "CAP-3").status == 200)
        // "A capture updates the state to Captured" (developer.pxp.io): once the whole amount is captured, nothing
        // more can be.
        #expect(sim.pxpModify(sid, "Capture", amount: "0.01", mtid: "CAP-4").errorCode == "InvalidState")
        let parent = try #require(sim.pxpGet("merchantTransactionId=ORD-1").json)
        #expect(parent["state"]?.stringValue == "Captured")
        #expect(parent["fundingData"]?["providerResponse"]?["authorisedAmount"] == nil)
    }

    /// The other reading of a partial capture: the parent shows Captured at once, and may still be captured.
    @Test func aParentShownCapturedAfterAPartialCaptureCanBeCapturedFurther() throws {
        let sim = makeSimulator()
        try sim.setPXPBehaviour(#"{"partial_capture":"captured"}"#)
        let sid = sim.seedPXP("ORD-1", intent: "Authorisation", value: "20.00")
        #expect(sim.pxpModify(sid, "Capture", amount: "12.50", mtid: "CAP-1").status == 200)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Captured")
        #expect(sim.pxpModify(sid, "Capture", amount: "7.51", mtid: "CAP-2").errorCode == "AmountExceeded")
        #expect(sim.pxpModify(sid, "Capture", amount: "7.50", mtid: "CAP-3").status == 200)
    }

    /// A PXP that does not de-duplicate applies a repeated merchantTransactionId again; one whose lookup does not find
    /// modifications answers 404 for a modification's merchantTransactionId.
    @Test func undocumentedModificationBehavioursAreSettings() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", intent: "Authorisation", value: "20.00")
        #expect(sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-1").status == 200)
        let replay = sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-1")
        #expect(replay.status == 200)
        #expect(sim.pxpGet("merchantTransactionId=CAP-1").status == 200)
        try sim.setPXPBehaviour(#"{"dedupe":false,"lookup":false}"#)
        #expect(
            sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-1").json?["systemTransactionId"]?.stringValue
                != replay.json?["systemTransactionId"]?.stringValue)
        #expect(sim.pxpGet("merchantTransactionId=CAP-1").status == 404)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").status == 200)
        // Applied twice: 10.00 of the 20.00 captured; two more repeats capture the rest.
        #expect(sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-1").status == 200)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Authorised")
        #expect(sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-1").status == 200)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Captured")
    }

    @Test func finalCaptureClosesTheAuthorisation() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        let r = sim.pxpModify(sid, "FinalCapture", amount: "5.00", mtid: "CAP-1")
        #expect(r.status == 200)
        #expect(r.json?["state"]?.stringValue == "Captured")
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-2").errorCode == "InvalidState")
        #expect(sim.pxpModify(sid, "Incremental", amount: "30.00", mtid: "INC-1").errorCode == "InvalidState")
    }

    @Test func voidCancelsTheParent() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        let r = sim.pxpModify(sid, "Void", amount: "20.00", mtid: "VOID-1")
        #expect(r.status == 200)
        #expect(r.json?["state"]?.stringValue == "Cancelled")
        #expect(r.bodyText.contains(#""authorisedAmount":0.00"#))
        let parent = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(parent.json?["state"]?.stringValue == "Cancelled")
        #expect(parent.bodyText.contains(#""authorisedAmount":0.00"#))
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-1").errorCode == "InvalidState")
        #expect(sim.pxpModify(sid, "Void", amount: nil, mtid: "VOID-2").errorCode == "InvalidState")
    }

    @Test func voidWithoutAmountIsAccepted() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        #expect(sim.pxpModify(sid, "Void", amount: nil, mtid: "VOID-1").status == 200)
    }

    @Test func voidAfterACaptureIsRejected() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-1").status == 200)
        let r = sim.pxpModify(sid, "Void", amount: nil, mtid: "VOID-1")
        #expect(r.status == 422)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Authorised")
    }

    @Test func voidWithAnotherAmountIsRejected() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        #expect(sim.pxpModify(sid, "Void", amount: "3.00", mtid: "VOID-1").errorCode == "InvalidAmount")
    }

    @Test func incrementalTakesTheNewTotal() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", intent: "EstimatedAuthorisation", value: "24.99")
        let r = sim.pxpModify(sid, "Incremental", amount: "29.99", mtid: "INC-1")
        #expect(r.status == 200)
        #expect(r.json?["state"]?.stringValue == "Authorised")
        #expect(r.bodyText.contains(#""authorisedAmount":29.99"#))
        #expect(r.bodyText.contains(#""transactionValue":5.00"#))  // the increase
        // Not a new total above the current one.
        #expect(sim.pxpModify(sid, "Incremental", amount: "29.99", mtid: "INC-2").errorCode == "InvalidAmount")
        #expect(sim.pxpModify(sid, "Incremental", amount: "10.00", mtid: "INC-3").errorCode == "InvalidAmount")
        // Capture is now limited by the new total.
        #expect(sim.pxpModify(sid, "Capture", amount: "29.99", mtid: "CAP-1").status == 200)
        // The parent reports the new total as its authorisedAmount, its value unchanged (the default reading).
        let parent = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(parent.bodyText.contains(#""transactionValue":24.99"#))
        #expect(parent.bodyText.contains(#""authorisedAmount":29.99"#))
    }

    @Test func anIncrementMayRaiseTheParentsValueToo() throws {
        let sim = makeSimulator()
        try sim.setPXPBehaviour(#"{"increment":"value"}"#)
        let sid = sim.seedPXP("ORD-1", intent: "EstimatedAuthorisation", value: "24.99")
        #expect(sim.pxpModify(sid, "Incremental", amount: "29.99", mtid: "INC-1").status == 200)
        let parent = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(parent.bodyText.contains(#""transactionValue":29.99"#))
        #expect(parent.bodyText.contains(#""authorisedAmount":29.99"#))
    }

    @Test(arguments: ["Capture", "FinalCapture", "Void", "Incremental"])
    func authorisationOperationsNeedAnAuthorisation(operation: String) {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", intent: "Purchase", state: "Captured")
        let r = sim.pxpModify(sid, operation, amount: "30.00", mtid: "MOD-1")
        #expect(r.status == 422)
        #expect(r.errorCode == "InvalidOperation")
    }

    @Test(arguments: ["Refused", "Pending", "Cancelled", "Captured"])
    func captureNeedsStateAuthorised(state: String) {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", state: state)
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-1").errorCode == "InvalidState")
    }

    @Test func refundsOfAPurchaseUpToItsValue() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", intent: "Purchase", value: "20.00", state: "Captured")
        let r = sim.pxpModify(sid, "Refund", amount: "15.00", mtid: "REF-1")
        #expect(r.status == 200)
        #expect(r.json?["state"]?.stringValue == "Authorised")
        #expect(r.bodyText.contains(#""transactionValue":15.00"#))
        #expect(sim.pxpModify(sid, "Refund", amount: "5.01", mtid: "REF-2").errorCode == "AmountExceeded")
        #expect(sim.pxpModify(sid, "Refund", amount: "5.00", mtid: "REF-3").status == 200)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").json?["state"]?.stringValue == "Captured")
    }

    @Test func refundOfAnAuthorisationNeedsACapture() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        #expect(sim.pxpModify(sid, "Refund", amount: "1.00", mtid: "REF-1").errorCode == "InvalidOperation")
        #expect(sim.pxpModify(sid, "Capture", amount: "8.00", mtid: "CAP-1").status == 200)
        #expect(sim.pxpModify(sid, "Refund", amount: "8.01", mtid: "REF-2").errorCode == "AmountExceeded")
        #expect(sim.pxpModify(sid, "Refund", amount: "8.00", mtid: "REF-3").status == 200)
    }

    @Test(arguments: ["Refused", "Pending", "Cancelled", "Refunded"])
    func refundNeedsCapturedMoney(state: String) {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", intent: "Purchase", state: state)
        #expect(sim.pxpModify(sid, "Refund", amount: "1.00", mtid: "REF-1").status == 422)
    }

    @Test func sameMerchantTransactionIdReplaysWithoutApplyingTwice() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        let first = sim.pxpModify(sid, "Capture", amount: "15.00", mtid: "CAP-1")
        let again = sim.pxpModify(sid, "Capture", amount: "15.00", mtid: "CAP-1")
        #expect(first.status == 200)
        #expect(again.status == 200)
        #expect(first.json?["systemTransactionId"] == again.json?["systemTransactionId"])
        // Applied once: 5.00 is still capturable.
        #expect(sim.pxpModify(sid, "Capture", amount: "5.00", mtid: "CAP-2").status == 200)
        let results = sim.log.map(\.result)
        #expect(results == ["applied", "replayed", "applied"])
        #expect(sim.log.first?.idempotencyKey == "CAP-1")
    }

    @Test func merchantTransactionIdOfAnotherTransactionIs409() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        sim.seedPXP("ORD-2")
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "ORD-2").status == 409)
    }

    @Test func modifyingAModificationIsRejected() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        let capture = try #require(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-1").json?["systemTransactionId"]?.stringValue)
        #expect(sim.pxpModify(capture, "Refund", amount: "1.00", mtid: "REF-1").errorCode == "InvalidOperation")
    }

    @Test func unknownParentOrOtherMerchantIs404() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        #expect(sim.pxpModify("no-such-id", "Capture", amount: "1.00", mtid: "CAP-1").status == 404)
        #expect(sim.pxpModify(sid, "Capture", amount: "1.00", mtid: "CAP-1", merchant: "M2").status == 404)
    }

    @Test(arguments: [
        ("not json", 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","amounts":{"transaction":1}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Reverse","amounts":{"transaction":1}}"#, 400),
        (#"{"site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":1}}"#, 400),
        (#"{"merchant":"M1","site":"S1","operation":"Capture","amounts":{"transaction":1}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture"}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":1.001}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":-1}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":0}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":1e2}}"#, 400),
        (#"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":true}}"#, 400),
        (
            #"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","amounts":{"transaction":1,"currencyCode":"USD"}}"#,
            422
        ),
        (
            #"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Capture","merchantTransactionDate":"soon","amounts":{"transaction":1}}"#,
            400
        ),
        (#"[1,2]"#, 400)
    ])
    func invalidModificationBodies(body: String, status: Int) {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        let r = sim.pxpPost("/api/v1/transactions/\(sid)/modifications", body)
        #expect(r.status == status, "\(r.bodyText)")
        #expect(r.json?["errorReason"]?.stringValue != nil)
        // Nothing was applied.
        #expect(sim.pxpModify(sid, "Capture", amount: "20.00", mtid: "CAP-FULL").status == 200)
    }

    @Test func zeroExponentCurrencyRejectsDecimals() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "1000", currency: "JPY")
        #expect(sim.pxpModify(sid, "Capture", amount: "1.0", mtid: "CAP-1").errorCode == "InvalidAmount")
        let ok = sim.pxpModify(sid, "Capture", amount: "400", mtid: "CAP-2")
        #expect(ok.bodyText.contains(#""transactionValue":400,"#))
    }

    @Test func modificationsNeedAuthToo() {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1")
        let r = sim.post(
            "/api/v1/transactions/\(sid)/modifications",
            #"{"merchant":"M1","site":"S1","merchantTransactionId":"X","operation":"Void"}"#)
        #expect(r.status == 401)
    }

    @Test func wrongMethodIs405() {
        let sim = makeSimulator()
        #expect(sim.handle(method: "DELETE", path: "/api/v1/transactions/M1/S1", headers: pxpAuth).status == 405)
    }
}
