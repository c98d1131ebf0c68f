import Foundation
import Providers
import Synchronization
@testable import PaysimCore

/// One CA for the whole suite (RSA key generation is the slow part).
let sharedCA: PayPalTestCA = try! PayPalTestCA()

/// A settable clock.
final class TestClock: Sendable {
    private let now = Mutex(Date(timeIntervalSince1970: 1_790_000_000))
    func callAsFunction() -> Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// Records deliveries instead of sending them; answers `status`.
final class RecordingTransport: WebhookTransport {
    struct Sent: Sendable { var url: String; var headers: [(String, String)]; var body: [UInt8] }
    let sent = Mutex<[Sent]>([])
    let status: Int
    init(status: Int = 200) { self.status = status }
    func post(url: String, headers: [(String, String)], body: [UInt8]) async throws -> Int {
        sent.withLock { $0.append(Sent(url: url, headers: headers, body: body)) }
        return status
    }
}

func makeSimulator(
    clock: TestClock = TestClock(), transport: (any WebhookTransport)? = nil,
    configure: (inout SimConfig) -> Void = { _ in }
) -> Simulator {
    var config = SimConfig()
    config.publicBaseURL = "http://127.0.0.1:9999"
    configure(&config)
    return Simulator(config: config, ca: sharedCA, clock: { clock() }, transport: transport)
}

let pxpAuth: [String: String] = [
    "Authorization": "PXP-UST1 paysim-token:1790000000:c2lnbmF0dXJl",
    "X-Request-Id": "req-1",
    "X-Client-Id": "paysim-client"
]

/// PXP-UST1 headers signed the way Providers' PXPClient signs (the default paysim credentials).
func pxpHeaders(
    _ method: String, _ path: String, query: [String: String] = [:], body: [UInt8] = [],
    timestamp: String = "1790000000", requestID: String = "req-1"
) -> [String: String] {
    let signature = PXPAuth.signature(
        tokenValue: "paysim-token-value", timestamp: timestamp, requestID: requestID,
        method: method, pathAndQuery: PXPAuth.requestTarget(decodedPath: path, query: query),
        body: body)
    return [
        "Authorization": "PXP-UST1 paysim-token:\(timestamp):\(signature)", "X-Request-Id": requestID,
        "X-Client-Id": "paysim-client"
    ]
}

extension Simulator {
    /// A signed PXP POST.
    func pxpPost(_ path: String, _ body: String) -> SimResponse {
        post(path, body, headers: pxpHeaders("POST", path, body: Array(body.utf8)))
    }

    func post(_ path: String, _ body: String, headers: [String: String] = [:]) -> SimResponse {
        handle(method: "POST", path: path, headers: headers, body: Array(body.utf8))
    }

    /// Seeds one PXP transaction through the admin API; returns its systemTransactionId.
    @discardableResult
    func seedPXP(
        _ mtid: String, intent: String = "Authorisation", value: String = "20.00", currency: String = "GBP",
        state: String = "Authorised", extra: String = ""
    ) -> String {
        let r = post(
            "/admin/pxp/transactions",
            """
            {"merchant":"M1","site":"S1","merchantTransactionId":"\(mtid)","intent":"\(intent)","currency":"\(currency)",
             "value":"\(value)","state":"\(state)"\(extra)}
            """)
        precondition(r.status == 201, r.bodyText)
        return r.json!["systemTransactionId"]!.stringValue!
    }

    func pxpGet(_ query: String, merchant: String = "M1", site: String = "S1") -> SimResponse {
        let path = "/api/v1/transactions/\(merchant)/\(site)"
        let q = SimRequest.parseQuery(query)
        return handle(method: "GET", path: path, query: q, headers: pxpHeaders("GET", path, query: q))
    }

    func pxpModify(
        _ parent: String, _ operation: String, amount: String?, mtid: String, merchant: String = "M1",
        extra: String = ""
    ) -> SimResponse {
        let amounts = amount.map { #","amounts":{"transaction":\#($0)}"# } ?? ""
        return pxpPost(
            "/api/v1/transactions/\(parent)/modifications",
            """
            {"merchant":"\(merchant)","site":"S1","merchantTransactionId":"\(mtid)","merchantTransactionDate":"2026-01-27T08:51:02.826Z",
             "operation":"\(operation)"\(amounts)\(extra)}
            """)
    }

    /// Sets what PXP does where it documents nothing (`POST /admin/pxp/behaviour`).
    func setPXPBehaviour(_ json: String) throws {
        let r = post("/admin/pxp/behaviour", json)
        guard r.status == 200 else { throw SimTestError(r.bodyText) }
    }

    /// Seeds one PayPal order through the admin API.
    func seedPayPal(_ json: String) {
        let r = post("/admin/paypal/orders", json)
        precondition(r.status == 201, r.bodyText)
    }

    func paypalToken() -> String {
        let basic = Data("paysim-paypal-client:paysim-paypal-secret".utf8).base64EncodedString()
        let r = handle(
            method: "POST", path: "/v1/oauth2/token", headers: ["Authorization": "Basic \(basic)"],
            body: Array("grant_type=client_credentials".utf8))
        return r.json!["access_token"]!.stringValue!
    }

    func paypal(_ method: String, _ path: String, token: String, body: String = "", requestID: String? = nil) -> SimResponse {
        var headers = ["Authorization": "Bearer \(token)"]
        if let requestID { headers["PayPal-Request-Id"] = requestID }
        return handle(method: method, path: path, headers: headers, body: Array(body.utf8))
    }
}

extension SimResponse {
    /// `details[0].issue` of a PayPal error, or PXP's `errorCode`.
    var errorCode: String? {
        json?["details"]?.arrayValue?.first?["issue"]?.stringValue ?? json?["errorCode"]?.stringValue
            ?? json?["error"]?["code"]?.stringValue
    }
}

struct SimTestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
