import Foundation
import Testing
@testable import PaysimCore

@Suite struct AdminTests {
    let seed = """
        {"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"ORD-1","intent":"Purchase","currency":"USD","value":"12.34","state":"Captured","createdAt":"2026-11-01T08:00:00Z"},
                {"merchant":"M1","site":"S1","merchantTransactionId":"ORD-2","intent":"Authorisation","currency":"JPY","value":1000,"state":"Authorised","systemTransactionId":"fixed-sid"}],
         "paypal":[{"id":"ORDER-A","intent":"AUTHORIZE","currency":"USD","amount":"10.00","authorizations":[{"id":"AUTH-1"}]},
                   {"id":"ORDER-B","intent":"CAPTURE","currency":"EUR","amount":"5.00","captures":[{"id":"CAP-B","status":"REFUNDED"}],"refunds":[{"id":"REF-B"}]}]}
        """

    @Test func seedLoadsBothProviders() throws {
        let sim = makeSimulator()
        let r = sim.post("/admin/seed", seed)
        #expect(r.status == 200)
        #expect(r.json?["pxp"]?.numberLiteral == "2")
        #expect(r.json?["paypal"]?.numberLiteral == "2")
        let first = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(first.json?["merchantTransactionDate"]?.stringValue == "2026-11-01T08:00:00Z")
        #expect(first.bodyText.contains(#""transactionValue":12.34"#))
        #expect(sim.pxpGet("systemTransactionId=fixed-sid").status == 200)
        let token = sim.paypalToken()
        let order = try #require(sim.paypal("GET", "/v2/checkout/orders/ORDER-B", token: token).json)
        let payments = order["purchase_units"]?.arrayValue?.first?["payments"]
        #expect(payments?["captures"]?.arrayValue?.first?["status"]?.stringValue == "REFUNDED")
        #expect(payments?["refunds"]?.arrayValue?.first?["amount"]?["value"]?.stringValue == "5.00")
        #expect(sim.paypal("GET", "/v2/payments/authorizations/AUTH-1", token: token).json?["status"]?.stringValue == "CREATED")
    }

    @Test func seedFileAPI() throws {
        let sim = makeSimulator()
        let counts = try sim.seed(Array(seed.utf8))
        #expect(counts.pxp == 2 && counts.paypal == 2)
        #expect(throws: Simulator.SeedError.self) { try sim.seed(Array("{".utf8)) }
    }

    @Test(arguments: [
        (
            #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Authorisation","currency":"USD","value":"1.001"}]}"#,
            "value"
        ),
        (#"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Sale","currency":"USD","value":"1"}]}"#, "intent"),
        (
            #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Purchase","currency":"XXX","value":"1"}]}"#,
            "currency"
        ),
        (
            #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Purchase","currency":"USD","value":"1","state":"Done"}]}"#,
            "state"
        ),
        (#"{"pxp":[{"site":"S1","merchantTransactionId":"X","intent":"Purchase","currency":"USD","value":"1"}]}"#, "merchant"),
        (
            #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Purchase","currency":"USD","value":"1","createdAt":"yesterday"}]}"#,
            "createdAt"
        ),
        (
            #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"X","intent":"Purchase","currency":"USD","value":"-1"}]}"#,
            "value"
        ),
        (#"{"paypal":[{"id":"O","intent":"SALE","currency":"USD","amount":"1.00"}]}"#, "intent"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.001"}]}"#, "amount"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD"}]}"#, "amount"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.00","status":"PAID"}]}"#, "status"),
        (#"{"paypal":[{"id":"O","intent":"AUTHORIZE","currency":"USD","amount":"1.00","authorizations":[{"status":"OPEN"}]}]}"#, "status"),
        (
            #"{"paypal":[{"id":"O","intent":"AUTHORIZE","currency":"USD","amount":"1.00","captures":[{"authorization_id":"NOPE"}]}]}"#,
            "authorization_id"
        ),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.00","refunds":[{"amount":"1.00"}]}]}"#, "capture"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.00","captures":{}}]}"#, "captures"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":-1}]}"#, "amount"),
        (#"{"paypal":[{"id":"O","intent":"CAPTURE","currency":"USD","amount":"1.00","amount":"2.00"}]}"#, "duplicate"),
        (#"{"pxp":{}}"#, "arrays"),
        (#"[]"#, "expected")
    ])
    func invalidSeedRejectsEverything(body: String, mentions: String) {
        let sim = makeSimulator()
        // A valid entry first: all or nothing.
        let withValid =
            body.hasPrefix(#"{"pxp":["#)
            ? body.replacingOccurrences(
                of: #"{"pxp":["#,
                with:
                    #"{"pxp":[{"merchant":"M1","site":"S1","merchantTransactionId":"GOOD","intent":"Purchase","currency":"USD","value":"1"},"#
            )
            : body
        let r = sim.post("/admin/seed", withValid)
        #expect(r.status == 400)
        let message = r.json?["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(mentions), "\(message)")
        #expect(sim.pxpGet("merchantTransactionId=GOOD").status == 404)
    }

    /// Seeds are read like a provider's rendering: a trailing zero beyond the exponent does not change the value.
    @Test func seedAmountsAcceptTrailingZerosAndNumbers() {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", value: "20.000", currency: "USD")
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").bodyText.contains(#""transactionValue":20.00,"#))
        sim.seedPayPal(#"{"id":"O","intent":"CAPTURE","currency":"JPY","amount":1000.0}"#)
        let order = sim.paypal("GET", "/v2/checkout/orders/O", token: sim.paypalToken())
        #expect(order.json?["purchase_units"]?[0]?["amount"]?["value"]?.stringValue == "1000")
    }

    @Test func putReplacesATransactionAndItsModifications() throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00")
        let capture = try #require(sim.pxpModify(sid, "Capture", amount: "20.00", mtid: "CAP-1").json?["systemTransactionId"]?.stringValue)
        let newSid = sim.seedPXP("ORD-1", value: "30.00")
        #expect(newSid != sid)
        #expect(sim.pxpGet("systemTransactionId=\(capture)").status == 404)
        #expect(sim.pxpGet("systemTransactionId=\(sid)").status == 404)
        #expect(sim.pxpModify(newSid, "Capture", amount: "30.00", mtid: "CAP-1").status == 200)
    }

    @Test func putAcceptsAnArray() {
        let sim = makeSimulator()
        let r = sim.post(
            "/admin/pxp/transactions",
            """
            [{"merchant":"M1","site":"S1","merchantTransactionId":"A","intent":"Payout","currency":"USD","value":"1","state":"Executed"},
             {"merchant":"M1","site":"S1","merchantTransactionId":"B","intent":"Purchase","currency":"USD","value":"2","state":"Refused"}]
            """)
        #expect(r.status == 201)
        #expect(r.json?.arrayValue?.count == 2)
        #expect(sim.pxpGet("merchantTransactionId=B").json?["stateData"]?["code"]?.stringValue == "CRD005")
    }

    @Test func paypalOrderPutReplacesPayments() throws {
        let sim = makeSimulator()
        sim.seedPayPal(#"{"id":"O","intent":"AUTHORIZE","currency":"USD","amount":"1.00","authorizations":[{"id":"A1"}]}"#)
        sim.seedPayPal(#"{"id":"O","intent":"AUTHORIZE","currency":"USD","amount":"2.00","authorizations":[{"id":"A2"}]}"#)
        let token = sim.paypalToken()
        #expect(sim.paypal("GET", "/v2/payments/authorizations/A1", token: token).status == 404)
        #expect(sim.paypal("GET", "/v2/payments/authorizations/A2", token: token).json?["amount"]?["value"]?.stringValue == "2.00")
    }

    @Test func logListsActionsWithFilters() throws {
        let sim = makeSimulator()
        #expect(sim.post("/admin/seed", seed).status == 200)
        let sid = try #require(sim.pxpGet("merchantTransactionId=ORD-2").json?["systemTransactionId"]?.stringValue)
        _ = sim.pxpModify(sid, "Capture", amount: "100", mtid: "CAP-1")
        _ = sim.pxpModify(sid, "Capture", amount: "5000", mtid: "CAP-2")
        let token = sim.paypalToken()
        _ = sim.paypal("POST", "/v2/payments/authorizations/AUTH-1/void", token: token, requestID: "pp-1")
        let all = try #require(sim.handle(method: "GET", path: "/admin/log").json)
        #expect(all["count"]?.numberLiteral == "3")
        let entries = try #require(all["entries"]?.arrayValue)
        #expect(entries.map { $0["result"]?.stringValue } == ["applied", "AmountExceeded", "applied"])
        #expect(entries.map { $0["status"]?.numberLiteral } == ["200", "422", "200"])
        #expect(entries[0]["idempotency_key"]?.stringValue == "CAP-1")
        #expect(entries[0]["path"]?.stringValue == "/api/v1/transactions/\(sid)/modifications")
        #expect(entries[2]["provider"]?.stringValue == "paypal")
        #expect(entries[2]["idempotency_key"]?.stringValue == "pp-1")
        #expect(entries[2]["resource_id"]?.stringValue == "AUTH-1")
        #expect(entries.allSatisfy { $0["time"]?.stringValue.flatMap(SimTime.parse) != nil })
        let paypalOnly = sim.handle(method: "GET", path: "/admin/log", query: ["provider": "paypal"]).json
        #expect(paypalOnly?["count"]?.numberLiteral == "1")
        let since = sim.handle(method: "GET", path: "/admin/log", query: ["since": "2"]).json
        #expect(since?["count"]?.numberLiteral == "1")
        // GETs are not actions.
        _ = sim.pxpGet("merchantTransactionId=ORD-1")
        #expect(sim.log.count == 3)
    }

    @Test func resetForgetsEverything() {
        let sim = makeSimulator()
        _ = sim.post("/admin/seed", seed)
        sim.setFaults(FaultConfig(errorRate: 1, seed: 3))
        #expect(sim.post("/admin/reset", "").status == 200)
        #expect(sim.pxpGet("merchantTransactionId=ORD-1").status == 404)
        #expect(sim.handle(method: "GET", path: "/admin/faults").json?["error_rate"]?.numberLiteral == "0.0")
        #expect(sim.log.isEmpty)
    }

    @Test func statsCountRequestsByRoute() {
        let sim = makeSimulator()
        _ = sim.post("/admin/seed", seed)
        _ = sim.pxpGet("merchantTransactionId=ORD-1")
        _ = sim.pxpGet("merchantTransactionId=ORD-2")
        let stats = sim.handle(method: "GET", path: "/admin/stats").json
        #expect(stats?["requests"]?["pxp.get_transaction"]?.numberLiteral == "2")
        #expect(stats?["pxp_transactions"]?.numberLiteral == "2")
        #expect(stats?["paypal_orders"]?.numberLiteral == "2")
    }

    @Test(arguments: [("GET", "/admin/seed"), ("POST", "/admin/log"), ("GET", "/admin/reset"), ("DELETE", "/admin/faults")])
    func wrongMethods(method: String, path: String) {
        #expect(makeSimulator().handle(method: method, path: path).status == 405)
    }

    @Test(arguments: ["/", "/admin/nope", "/nothing", "/api/v2/x", "/v1/other"])
    func unknownPathsAre404(path: String) {
        #expect(makeSimulator().handle(method: "GET", path: path).status == 404)
    }

    @Test func healthz() {
        #expect(makeSimulator().handle(method: "GET", path: "/healthz").status == 200)
    }
}
