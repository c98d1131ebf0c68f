import Foundation
import Reconciliation
import TextFormats

/// One HTTP request as the simulator sees it (independent of the HTTP server, so it is testable without sockets).
public struct SimRequest: Sendable {
    public var method: String
    /// The path without the query string, still percent-encoded.
    public var path: String
    public var query: [String: String]
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = []
    ) {
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
    /// GET /v1/customer/disputes and /v1/customer/disputes/{id} answer 403 (`--paypal-no-disputes-permission`,
    /// `POST /admin/paypal/permissions`).
    public var paypalDisputesPermission = true
    /// Whether the app may use Transaction Search (`https://uri.paypal.com/services/reporting/search/read`); without it
    /// GET /v1/reporting/transactions answers 403 (`POST /admin/paypal/permissions {"transaction_search": false}`).
    public var paypalTransactionSearchPermission = true
    /// Whether the app may capture authorizations; without it POST /v2/payments/authorizations/{id}/capture answers
    /// 403 NOT_AUTHORIZED / PERMISSION_DENIED before anything is applied, as `payments_payment_v2.json` documents that
    /// answer (`POST /admin/paypal/permissions {"captures": false}`: the merchant's app lacks the permission until
    /// they grant it).
    public var paypalCapturePermission = true
    /// The most transactions one Transaction Search window may hold before PayPal answers RESULTSET_TOO_LARGE
    /// (10,000, as Airbyte's connector documents it; lower for tests: `{"search_max_items": N}`).
    public var paypalSearchMaxItems = 10_000
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

    static func paypal(
        _ status: Int, name: String, message: String, issue: String, description: String,
        field: String? = nil
    ) -> SimError {
        let detail = JSONValue.object([
            "field": field.map { .string($0) }, "issue": .string(issue),
            "description": .string(description)
        ])
        return SimError(
            status: status,
            body: .object([
                "name": .string(name), "message": .string(message), "debug_id": "paysim",
                "details": .array([detail]),
                "links": .array([
                    .object([
                        "href": .string("https://developer.paypal.com/docs/api/payments/v2/#error-\(issue)"),
                        "rel": "information_link", "method": "GET"
                    ])
                ])
            ]), code: issue)
    }

    /// 422 for `issue`. On the Payments v2 routes PayPal's documents fix each issue's description (the `details` of
    /// `422`, `authorizations.void-422` and `captures.refund-422` in payments_payment_v2.json), so the description
    /// is theirs (`paypalDescriptions`); the v1 sale refund documents none, and passes its own.
    static func paypalUnprocessable(_ issue: String, _ description: String? = nil, field: String? = nil) -> SimError {
        paypal(
            422, name: "UNPROCESSABLE_ENTITY",
            message: "The requested action could not be performed, semantically incorrect, or failed business validation.",
            issue: issue, description: description ?? paypalDescriptions[issue] ?? issue, field: field)
    }

    /// 400 for `issue`, described as `paypalUnprocessable` describes.
    static func paypalInvalid(_ issue: String, _ description: String? = nil, field: String? = nil) -> SimError {
        paypal(
            400, name: "INVALID_REQUEST",
            message: "Request is not well-formed, syntactically incorrect, or violates schema.",
            issue: issue, description: description ?? paypalDescriptions[issue] ?? issue, field: field)
    }

    /// 404 `INVALID_RESOURCE_ID`, with the one description payments_payment_v2.json's and checkout_orders_v2.json's
    /// `404` allow (the v1 routes, whose `error` fixes none, may pass their own).
    static func paypalNotFound(_ description: String? = nil) -> SimError {
        paypal(
            404, name: "RESOURCE_NOT_FOUND", message: "The specified resource does not exist.",
            issue: "INVALID_RESOURCE_ID", description: description ?? paypalDescriptions["INVALID_RESOURCE_ID"]!)
    }

    /// The description PayPal's documents give each issue paysim answers on the Orders v2 and Payments v2 routes,
    /// word for word (their typos included: the schemas list these strings as the only values `description` takes).
    /// Where a route's schema leaves the description free (the refund's 400 and most of its 422), the same words
    /// serve.
    static let paypalDescriptions: [String: String] = [
        // 400 (payments_payment_v2.json `400`; the refund's `captures.refund-400` takes any description)
        "MISSING_REQUIRED_PARAMETER": "A required field / parameter is missing.",
        "INVALID_PARAMETER_SYNTAX": "The value of a field does not conform to the expected format.",
        // 422 of a capture (`422`); the refund's `captures.refund-422` takes any description for these three
        "CANNOT_BE_ZERO_OR_NEGATIVE":
            "Must be greater than zero. If the currency supports decimals, only two decimal place precision is supported.",
        "DECIMAL_PRECISION": "If the currency supports decimals, only two decimal place precision is supported.",
        "DECIMALS_NOT_SUPPORTED":
            "Currency does not support decimals. Please refer to https://developer.paypal.com/docs/api/reference/currency-codes/ for more information.",
        "TRANSACTION_REFUSED": "PayPal's internal controls prevent authorization from being captured.",
        "AUTHORIZATION_VOIDED": "A voided authorization cannot be captured or reauthorized. ",
        "AUTH_CAPTURE_CURRENCY_MISMATCH": "Currency of capture must be the same as currency of authorization.",
        "AUTHORIZATION_DENIED": "An denied authorization cannot be captured.",
        "AUTHORIZATION_ALREADY_CAPTURED": "Authorization has previously been captured.",
        "MAX_CAPTURE_AMOUNT_EXCEEDED":
            "Capture amount exceeds allowable limit. Please contact customer service or your account manager to request the change to your overage limit. The default overage limit is 115%, which allows the sum of all captures to be up to 115% of the order amount. The ability to over capture is subjected to regulatory approvals.",
        // 422 of a void (`authorizations.void-422`)
        "PREVIOUSLY_CAPTURED": "Authorization has been previously captured and hence cannot be voided.",
        "PREVIOUSLY_VOIDED": "Authorization has been previously voided and hence cannot be voided again.",
        "CANNOT_BE_VOIDED": "A reauthorization cannot be voided. Please void the original parent authorization.",
        // 422 of a refund (`captures.refund-422`)
        "CAPTURE_FULLY_REFUNDED": "The capture has already been fully refunded",
        "REFUND_CAPTURE_CURRENCY_MISMATCH": "Refund must be in the same currency as the capture",
        "REFUND_NOT_ALLOWED": "Capture cannot be refunded.",
        "REFUND_AMOUNT_EXCEEDED": "The refund amount must be less than or equal to the capture amount that has not yet been refunded.",
        "PENDING_CAPTURE":
            "Cannot initiate a refund as the capture is pending. Capture is typically pending when the payer has funded the transaction using e-check/bank funded.",
        // 403 and 404 (`403`, `404`)
        "PERMISSION_DENIED": "You do not have permission to access or perform operations on this resource.",
        "INVALID_RESOURCE_ID": "Specified resource ID does not exist. Please check the resource ID and try again."
    ]

    static func admin(_ status: Int, _ code: String, _ message: String) -> SimError {
        SimError(
            status: status, body: .object(["error": .object(["code": .string(code), "message": .string(message)])]),
            code: code)
    }
}
