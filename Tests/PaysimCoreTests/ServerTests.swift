import Foundation
import HTTP
import Testing
@testable import PaysimCore

@Suite struct ServerTests {
    @Test func getOverRealHTTP() async throws {
        let sim = makeSimulator()
        sim.seedPXP("ORD-1", value: "20.00")
        let server = PaysimServer(simulator: sim, host: "127.0.0.1", port: 0, threads: 2)
        let port = try server.start()
        #expect(port != 0)
        sim.setPublicBaseURL("http://127.0.0.1:\(port)")
        let client = HTTPClient(configuration: .init(timeoutSeconds: 5))
        let response = try await client.send(HTTPClientRequest(
            url: "http://127.0.0.1:\(port)/api/v1/transactions/M1/S1?merchantTransactionId=ORD-1",
            headers: pxpAuth.map { ($0.key, $0.value) }))
        #expect(response.status == 200)
        #expect(response.text.contains(#""transactionValue":20.00"#))
        #expect(response.headers["Content-Type"] == "application/json")

        let cert = try await client.send(HTTPClientRequest(url: sim.certURL))
        #expect(cert.status == 200)
        #expect(cert.text.hasPrefix("-----BEGIN CERTIFICATE-----\r\n"))

        // A dropped request is answered with an empty body and Connection: close.
        sim.setFaults(FaultConfig(dropRate: 1, seed: 1))
        let dropped = try await client.send(HTTPClientRequest(url: "http://127.0.0.1:\(port)/v2/checkout/orders/X"))
        #expect(dropped.status == 503)
        #expect(dropped.body.isEmpty)
        await server.shutdown(drainTimeout: 1)
    }
}
