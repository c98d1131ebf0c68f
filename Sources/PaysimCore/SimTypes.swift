import Foundation
import Reconciliation

/// One HTTP request as the simulator sees it (independent of the HTTP server, so it is testable without sockets).
public struct SimRequest: Sendable {
    public var method: String
    /// The path without the query string, still percent-encoded.
    public var path: String
    public var query: [String: String]
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                body: [UInt8] = []) {
        self.method = method.uppercased()
        self.path = path
        self.query = query
        var lowered: [String: String] = [:]
        for (name, value) in headers { lowered[name.lowercased()] = value }
        self.headers = lowered
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// Splits `a=1&b=x%20y` into a dictionary (the last of repeated names wins; `+` means space).
    public static func parseQuery(_ raw: String) -> [String: String] {
        var out: [String: String] = [:]
        for part in raw.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let spaced = s.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            out[decode(pieces[0])] = pieces.count > 1 ? decode(pieces[1]) : ""
        }
        return out
    }
}

/// The simulator's answer. `drop` asks the server to close the connection without an answer (fault injection).
public struct SimResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var drop: Bool

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], drop: Bool = false) {
        self.status = status; self.headers = headers; self.body = body; self.drop = drop
    }

    public static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> SimResponse {
        SimResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: value.serialized())
    }

    public func header(_ name: String) -> String? {
        headers.first(where: { $0.0.lowercased() == name.lowercased() })?.1
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }
    public var json: JSONValue? { try? JSONValue.parse(body) }
}

/// Credentials and keys paysim checks and signs with. Secrets are never logged.
public struct SimConfig: Sendable {
    public var pxpClientID = "paysim-client"
    public var pxpTokenID = "paysim-token"
    public var pxpTokenValue = "paysim-token-value"
    public var pxpMerchantGroup = "paysim-group"
    public var pxpWebhookKey = "paysim-pxp-webhook-key"
    public var paypalClientID = "paysim-paypal-client"
    public var paypalSecret = "paysim-paypal-secret"
    public var paypalWebhookID = "WEBHOOK_ID"
    /// Paypercut's API secret key (`Authorization: Bearer`).
    public var paypercutSecretKey = "sk_test_paysim"
    /// Paypercut's webhook signing secret (`Paypercut-Signature`).
    public var paypercutWebhookSecret = "whsec_paysim"
    /// `expires_in` of issued PayPal access tokens, seconds.
    public var paypalTokenLifetime: Int64 = 32400
    /// Base of links and the PAYPAL-CERT-URL, e.g. `http://127.0.0.1:8081` (set once the port is bound).
    public var publicBaseURL = "http://127.0.0.1"
    public var faults = FaultConfig()
    /// Whether the PayPal app may read disputes (`https://uri.paypal.com/services/disputes/read-seller`); without it
    /// GET /v1/customer/disputes/{id} answers 403 (`--paypal-no-disputes-permission`, `POST /admin/paypal/permissions`).
    public var paypalDisputesPermission = true
    /// What PXP does where it documents nothing (`PXPBehaviour`).
    public var pxpBehaviour = PXPBehaviour()

    public init() {}
}

/// A rejection: HTTP status plus the provider-shaped error body.
struct SimError: Error {
    let status: Int
    let body: JSONValue
    let code: String
    var response: SimResponse { .json(status, body) }

    static func pxp(_ status: Int, _ code: String, _ reason: String) -> SimError {
        SimError(status: status, body: .object(["errorCode": .string(code), "errorReason": .string(reason)]), code: code)
    }

    static func paypal(_ status: Int, name: String, message: String, issue: String, description: String,
                       field: String? = nil) -> SimError {
        let detail = JSONValue.object(["field": field.map { .string($0) }, "issue": .string(issue),
                               "description": .string(description)])
        return SimError(status: status, body: .object([
            "name": .string(name), "message": .string(message), "debug_id": "paysim",
            "details": .array([detail]),
            "links": .array([.object(["href": .string("https://developer.paypal.com/docs/api/payments/v2/#error-\(issue)"),
                                   "rel": "information_link", "method": "GET"])]),
        ]), code: issue)
    }

    static func paypalUnprocessable(_ issue: String, _ description: String) -> SimError {
        paypal(422, name: "UNPROCESSABLE_ENTITY",
               message: "The requested action could not be performed, semantically incorrect, or failed business validation.",
               issue: issue, description: description)
    }

    static func paypalInvalid(_ issue: String, _ description: String, field: String? = nil) -> SimError {
        paypal(400, name: "INVALID_REQUEST",
               message: "Request is not well-formed, syntactically incorrect, or violates schema.",
               issue: issue, description: description, field: field)
    }

    static func paypalNotFound(_ description: String) -> SimError {
        paypal(404, name: "RESOURCE_NOT_FOUND", message: "The specified resource does not exist.",
               issue: "INVALID_RESOURCE_ID", description: description)
    }

    static func admin(_ status: Int, _ code: String, _ message: String) -> SimError {
        SimError(status: status, body: .object(["error": .object(["code": .string(code), "message": .string(message)])]),
                 code: code)
    }
}
