import Foundation
import HTTP
import Providers
import Reconciliation

/// Each provider's endpoint: its verifier on the raw bytes, then its event parser for the dedupe key.
/// The body is parsed only after the signature holds: nothing unauthenticated is interpreted.
public struct PXPEndpoint: WebhookEndpoint {
    public let provider = Provider.pxp
    let verifier: PXPWebhookVerifier
    public init(verifier: PXPWebhookVerifier) { self.verifier = verifier }

    public func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Result<AcceptedDelivery, DeliveryRejection> {
        let h = Headers(headers.pairs.map { ($0.name, $0.value) })
        do {
            try verifier.verify(headers: h, body: body, time: .at(now))
            let n = try PXPNotification.parse(body: body, headers: h)
            return .success(AcceptedDelivery(dedupeKey: n.dedupeKey, eventType: n.eventType))
        } catch { return .failure(DeliveryRejection(error)) }
    }
}

public struct PayPalEndpoint: WebhookEndpoint {
    public let provider = Provider.paypal
    let verifier: PayPalWebhookVerifier
    public init(verifier: PayPalWebhookVerifier) { self.verifier = verifier }

    public func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Result<AcceptedDelivery, DeliveryRejection> {
        let h = Headers(headers.pairs.map { ($0.name, $0.value) })
        do {
            try verifier.verify(headers: h, body: body, time: .at(now))
            let e = try PayPalEvent.parse(body: body)
            return .success(AcceptedDelivery(dedupeKey: e.id, eventType: e.eventType))
        } catch { return .failure(DeliveryRejection(error)) }
    }
}

public struct PaypercutEndpoint: WebhookEndpoint {
    public let provider = Provider.paypercut
    let verifier: PaypercutWebhookVerifier
    public init(verifier: PaypercutWebhookVerifier) { self.verifier = verifier }

    public func accept(headers: HTTPHeaders, body: [UInt8], now: Date) -> Result<AcceptedDelivery, DeliveryRejection> {
        let h = Headers(headers.pairs.map { ($0.name, $0.value) })
        do {
            try verifier.verify(headers: h, body: body, time: .at(now))
            let e = try PaypercutEvent.parse(body: body)
            return .success(AcceptedDelivery(dedupeKey: e.id, eventType: e.type))
        } catch { return .failure(DeliveryRejection(error)) }
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
