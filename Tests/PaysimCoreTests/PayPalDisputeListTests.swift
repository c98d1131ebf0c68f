import Foundation
import Testing
@testable import PaysimCore

/// `GET /v1/customer/disputes` (customer_disputes_v1.json `disputes.list`): what `payrecon doctor` reads to tell
/// whether the app has the disputes permission.
@Suite struct PayPalDisputeListTests {
    func seeded(disputes: Int) -> (Simulator, String) {
        let clock = TestClock()
        let sim = makeSimulator(clock: clock)
        sim.seedPayPal(
            """
            {"id":"ORDER-C","intent":"CAPTURE","status":"COMPLETED","currency":"EUR","amount":"30.00","merchant_id":"MERCH1",
             "captures":[{"id":"CAP-1","status":"COMPLETED"}]}
            """)
        for n in 0..<disputes {
            clock.advance(60)  // each dispute created a minute after the one before
            let r = sim.post("/admin/paypal/disputes", #"{"id":"PP-D-\#(n)","transaction_id":"CAP-1","amount":"1.00"}"#)
            precondition(r.status < 300, r.bodyText)
        }
        return (sim, sim.paypalToken())
    }

    @Test func listsSummariesLatestFirstAPageAtATime() throws {
        let (sim, token) = seeded(disputes: 3)
        let first = sim.handle(
            method: "GET", path: "/v1/customer/disputes", query: ["page_size": "2"], headers: ["Authorization": "Bearer \(token)"])
        #expect(first.status == 200, "\(first.bodyText)")
        let items = try #require(first.json?["items"]?.arrayValue)
        #expect(items.compactMap { $0["dispute_id"]?.stringValue } == ["PP-D-2", "PP-D-1"])
        // dispute_info: a summary, without the full dispute's disputed_transactions or outcome.
        let keys = Set(try #require(items[0].objectMembers).map(\.0))
        #expect(
            keys == ["dispute_id", "create_time", "update_time", "reason", "status", "dispute_amount", "dispute_life_cycle_stage", "links"])
        #expect(items[0]["dispute_amount"]?["value"]?.stringValue == "1.00")
        let links = try #require(first.json?["links"]?.arrayValue)
        let next = try #require(links.first { $0["rel"]?.stringValue == "next" }?["href"]?.stringValue)
        #expect(next.hasSuffix("/v1/customer/disputes?page_size=2&next_page_token=2"))

        let second = sim.handle(
            method: "GET", path: "/v1/customer/disputes", query: ["page_size": "2", "next_page_token": "2"],
            headers: ["Authorization": "Bearer \(token)"])
        #expect(second.json?["items"]?.arrayValue?.compactMap { $0["dispute_id"]?.stringValue } == ["PP-D-0"])
        #expect(second.json?["links"]?.arrayValue?.contains { $0["rel"]?.stringValue == "next" } == false)
    }

    /// `items` has `minItems: 1` in the schema: with no dispute it is left out, and `links` still names the list.
    @Test func noDisputeIsNoItems() throws {
        let (sim, token) = seeded(disputes: 0)
        let r = sim.handle(
            method: "GET", path: "/v1/customer/disputes", query: ["page_size": "1"], headers: ["Authorization": "Bearer \(token)"])
        #expect(r.status == 200)
        #expect(r.json?["items"] == nil)
        #expect(r.json?["links"]?.arrayValue?.count == 1)
    }

    @Test func refusedWithoutTheTokenOrThePermissionOrWithABadPageSize() throws {
        let (sim, token) = seeded(disputes: 1)
        #expect(sim.handle(method: "GET", path: "/v1/customer/disputes").status == 401)
        let bad = sim.handle(
            method: "GET", path: "/v1/customer/disputes", query: ["page_size": "51"], headers: ["Authorization": "Bearer \(token)"])
        #expect(bad.status == 400)
        #expect(bad.errorCode == "INVALID_PARAMETER_VALUE")
        #expect(sim.post("/admin/paypal/permissions", #"{"disputes":false}"#).status == 200)
        let refused = sim.handle(
            method: "GET", path: "/v1/customer/disputes", query: ["page_size": "1"], headers: ["Authorization": "Bearer \(token)"])
        #expect(refused.status == 403)
        #expect(refused.json?["name"]?.stringValue == "NOT_AUTHORIZED")
        #expect(refused.errorCode == "PERMISSION_DENIED")
    }
}
