import Crypto
import Foundation
import HTTP
import Providers

/// What the receiver decided about a delivery, on the thread serving it, from the provider's webhook side
/// (`ProviderWebhook`, the one seam): the signature on the raw bytes first, the body read only after it holds.
enum Acceptance: Sendable {
    case accepted(AcceptedEvent)
    case rejected(DeliveryRejection)
    /// Something must be fetched first (PayPal's signing certificate): `prepare`, then decide again.
    case needsFetch

    /// Decides without waiting on anything. The accepted event's keys are made storable (`storable`).
    init(_ webhook: any ProviderWebhook, headers: HTTPHeaders, body: [UInt8], now: Date) {
        do {
            guard let event = try webhook.acceptWithoutWaiting(headers: headers, body: body, now: now) else {
                self = .needsFetch
                return
            }
            self = .accepted(
                AcceptedEvent(
                    dedupeKey: Self.storable(event.dedupeKey),
                    eventType: event.eventType.map { String(Self.storable($0).prefix(200)) },
                    transmissionID: event.transmissionID.map(Self.storable)))
        } catch {
            self = .rejected(DeliveryRejection(status: error.httpStatus, code: error.code.rawValue, message: error.message))
        }
    }

    /// Keys go into a text column: NUL bytes can't, and very long ones shouldn't; such keys are hashed instead.
    static func storable(_ s: String) -> String {
        if !s.utf8.contains(0) && s.utf8.count <= 256 { return s }
        return "sha256:" + SHA256.hex(Array(s.utf8))
    }
}

/// Why a delivery was refused: the answer's status (400 or 401), the contract's error code, and the words.
struct DeliveryRejection: Error, Sendable {
    var status: Int
    var code: String
    var message: String
}
