import Foundation
import HTTP
import Providers
import Reconciliation

/// A provider's endpoint: its verifier on the raw bytes, then its event parser for the dedupe key.
/// The body is parsed only after the signature holds: nothing unauthenticated is interpreted.
public struct VerifyingEndpoint: WebhookEndpoint {
    public let provider: Provider
    let verify: @Sendable (Headers, [UInt8], Date) throws(WebhookRejection) -> Void
    let parse: @Sendable (Headers, [UInt8]) throws(WebhookRejection) -> AcceptedDelivery

    public func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Result<AcceptedDelivery, DeliveryRejection> {
        do {
            try verify(headers, body, now)
            return .success(try parse(headers, body))
        } catch { return .failure(DeliveryRejection(error)) }
    }

    public static func pxp(_ verifier: PXPWebhookVerifier) -> VerifyingEndpoint {
        VerifyingEndpoint(provider: .pxp, verify: { h, b, now throws(WebhookRejection) in try verifier.verify(headers: h, body: b, time: .at(now)) },
                          parse: { h, b throws(WebhookRejection) in
                              let n = try PXPNotification.parse(body: b, headers: h)
                              return AcceptedDelivery(dedupeKey: n.dedupeKey, eventType: n.eventType)
                          })
    }

    public static func paypal(_ verifier: PayPalWebhookVerifier) -> VerifyingEndpoint {
        VerifyingEndpoint(provider: .paypal, verify: { h, b, now throws(WebhookRejection) in try verifier.verify(headers: h, body: b, time: .at(now)) },
                          parse: { _, b throws(WebhookRejection) in
                              let e = try PayPalEvent.parse(body: b)
                              return AcceptedDelivery(dedupeKey: e.id, eventType: e.eventType)
                          })
    }

    public static func paypercut(_ verifier: PaypercutWebhookVerifier) -> VerifyingEndpoint {
        VerifyingEndpoint(provider: .paypercut, verify: { h, b, now throws(WebhookRejection) in try verifier.verify(headers: h, body: b, time: .at(now)) },
                          parse: { _, b throws(WebhookRejection) in
                              let e = try PaypercutEvent.parse(body: b)
                              return AcceptedDelivery(dedupeKey: e.id, eventType: e.type)
                          })
    }
}

extension DeliveryRejection {
    init(_ rejection: WebhookRejection) {
        self.init(status: rejection.httpStatus, code: rejection.code.rawValue, message: rejection.message)
    }
}

/// Fetches PayPal signing certificates over HTTP(S), bounded in size and time. Only ever called by the verifier
/// after the URL passed the allowed-prefix check, and behind `CachingCertificateSource`.
public struct HTTPCertificateSource: CertificateSource {
    let client: HTTPClient
    public init(client: HTTPClient = HTTPClient(configuration: .init(timeoutSeconds: 5, maxConcurrentRequests: 4, maxResponseBytes: 64 * 1024))) {
        self.client = client
    }
    public func pem(for url: String) throws -> [UInt8] {
        let response = try client.sendBlocking(HTTPClientRequest(method: "GET", url: url))
        guard response.status == 200 else { throw CertificateFetchError(message: "GET \(url) answered \(response.status)") }
        return response.body
    }
    struct CertificateFetchError: Error, CustomStringConvertible { var message: String; var description: String { message } }
}
