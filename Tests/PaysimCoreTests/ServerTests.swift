import Foundation
import HTTP
import Providers
import Reconciliation
import Testing
@testable import PaysimCore

/// paysim over real HTTP, called by the project's own provider clients (so both sides agree on the wire).
@Suite(.serialized) struct ServerTests {
    func started(_ sim: Simulator) throws -> (PaysimServer, String) {
        let server = PaysimServer(simulator: sim, host: "127.0.0.1", port: 0, threads: 2)
        let port = try server.start()
        let base = "http://127.0.0.1:\(port)"
        sim.setPublicBaseURL(base)
        return (server, base)
    }

    @Test func getOverRealHTTP() async throws {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", value: "20.00")
        let (server, base) = try started(sim)
        let client = URLSessionHTTPClient(configuration: .init(timeout: .seconds(5)))
        let path = "/api/v1/transactions/M1/S1"
        let response = try await client.send(
            HTTPClientRequest(
                url: base + path + "?merchantTransactionId=ORD-1",
                headers: pxpHeaders("GET", path, query: ["merchantTransactionId": "ORD-1"]).map { ($0.key, $0.value) }))
        #expect(response.status == 200)
        #expect(response.text.contains(#""transactionValue":20.00"#))
        #expect(response.headers["Content-Type"] == "application/json")

        let cert = try await client.send(HTTPClientRequest(url: sim.certURL))
        #expect(cert.status == 200)
        #expect(cert.text.hasPrefix("-----BEGIN CERTIFICATE-----\r\n"))

        // A dropped request is answered with an empty body and Connection: close.
        sim.setFaults(FaultConfig(dropRate: 1, seed: 1))
        let dropped = try await client.send(HTTPClientRequest(url: base + "/v2/checkout/orders/X"))
        #expect(dropped.status == 503)
        #expect(dropped.body.isEmpty)
        await server.shutdown(drainTimeout: 1)
    }

    /// A rate-limit benchmark reads what arrived each second per provider from /admin/stats; admin and certificate
    /// requests are not provider API calls and are not counted.
    @Test func statsCountProviderRequestsPerSecond() async throws {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", value: "20.00")
        let (server, base) = try started(sim)
        let client = URLSessionHTTPClient(configuration: .init(timeout: .seconds(5)))
        let path = "/api/v1/transactions/M1/S1"
        for _ in 0..<3 {
            _ = try await client.send(
                HTTPClientRequest(
                    url: base + path + "?merchantTransactionId=ORD-1",
                    headers: pxpHeaders("GET", path, query: ["merchantTransactionId": "ORD-1"]).map { ($0.key, $0.value) }))
        }
        _ = try await client.send(HTTPClientRequest(url: sim.certURL))
        let stats = try await client.send(HTTPClientRequest(url: base + "/admin/stats"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        let perSecond = try #require(json["requests_per_second"] as? [String: [String: Int]])
        #expect(perSecond["pxp"]?.values.reduce(0, +) == 3)
        #expect(perSecond["paypal"] == nil)
        let now = Int(Date().timeIntervalSince1970)
        #expect(perSecond["pxp"]?.keys.allSatisfy { abs(Int($0)! - now) < 60 } == true)
        await server.shutdown(drainTimeout: 1)
    }

    @Test func pxpClientReadsAndModifies() async throws {
        let sim = makeSimulator()
        let sid = sim.seedPXP("ORD-1", value: "20.00", currency: "USD")
        let (server, base) = try started(sim)
        let pxp = PXPClient(
            configuration: PXPConfiguration(
                baseURL: base + "/api/v1", clientID: "paysim-client",
                tokenID: "paysim-token", tokenValue: "paysim-token-value"),
            transport: HTTPClientTransport(client: URLSessionHTTPClient(configuration: .init(timeout: .seconds(5)))))
        guard case .found(let t) = await pxp.transaction(merchant: "M1", site: "S1", merchantTransactionId: "ORD-1") else {
            Issue.record("transaction not found"); return
        }
        #expect(t["systemTransactionId"]?.stringValue == sid)
        guard case .notFound = await pxp.transaction(merchant: "M1", site: "S1", merchantTransactionId: "NOPE") else {
            Issue.record("expected notFound"); return
        }
        let currency = try #require(Currency(code: "USD"))
        let mtid = PXPClient.merchantTransactionId(forIdempotencyKey: "pxp:ORD-1:capture:2000")
        for _ in 0..<2 {  // executed twice: applied once
            let outcome = await pxp.modify(
                systemTransactionId: sid, .capture(amount: 2000), currency: currency, merchant: "M1",
                site: "S1", merchantTransactionId: mtid, merchantTransactionDate: "2026-11-01T00:00:00.000Z")
            guard case .found(let result) = outcome else { Issue.record("capture: \(outcome)"); return }
            #expect(result.state == "Captured")
        }
        #expect(sim.log.map(\.result) == ["applied", "replayed"])
        let over = await pxp.modify(
            systemTransactionId: sid, .capture(amount: 1), currency: currency, merchant: "M1",
            site: "S1", merchantTransactionId: "other", merchantTransactionDate: "2026-11-01T00:00:00.000Z")
        guard case .permanent(.refused(let status, _)) = over else { Issue.record("over-capture: \(over)"); return }
        #expect(status == 422)
        await server.shutdown(drainTimeout: 1)
    }

    @Test func paypalClientReadsAndCaptures() async throws {
        let sim = makeSimulator()
        sim.seedPayPal(#"{"id":"ORDER-A","intent":"AUTHORIZE","currency":"USD","amount":"10.00","authorizations":[{"id":"AUTH-1"}]}"#)
        let (server, base) = try started(sim)
        let paypal = PayPalClient(
            configuration: PayPalConfiguration(
                baseURL: base, clientID: "paysim-paypal-client",
                secret: "paysim-paypal-secret"),
            transport: HTTPClientTransport(client: URLSessionHTTPClient(configuration: .init(timeout: .seconds(5)))))
        guard case .found(let order) = await paypal.order("ORDER-A") else { Issue.record("order"); return }
        #expect(order["intent"]?.stringValue == "AUTHORIZE")
        let usd = try #require(Currency(code: "USD"))
        let captured = await paypal.captureAuthorization(
            "AUTH-1", amount: Money(minorUnits: 400, currency: usd), final: false,
            requestID: "paypal:ORDER-A:capture:400")
        guard case .found(let capture) = captured else { Issue.record("capture: \(captured)"); return }
        #expect(capture["status"]?.stringValue == "COMPLETED")
        let voided = await paypal.voidAuthorization("AUTH-1", requestID: "paypal:ORDER-A:void:0")
        guard case .permanent(.refused(let status, _)) = voided else { Issue.record("void: \(voided)"); return }
        #expect(status == 422)
        #expect(sim.log.map(\.idempotencyKey) == ["paypal:ORDER-A:capture:400", "paypal:ORDER-A:void:0"])
        await server.shutdown(drainTimeout: 1)
    }
}
