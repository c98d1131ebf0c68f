import Providers
import Reconciliation
import Store
import Synchronization

/// Which check is running, for the evidence it keeps: bound by the queue worker around a delivery (`webhook`, with
/// the delivery's id), by the sweep (`sweep`) and by the executor (`executor`); anything else is `command`.
public struct CheckContext: Sendable {
    @TaskLocal public static var current = CheckContext(source: .command, deliveryID: nil)

    public var source: CheckSource
    public var deliveryID: Int64?
    public init(source: CheckSource, deliveryID: Int64?) {
        self.source = source; self.deliveryID = deliveryID
    }

    /// The evidence of a check that used `exchanges`.
    func evidence(_ exchanges: [ProviderExchange]) -> CheckEvidence {
        CheckEvidence(source: source, deliveryID: deliveryID, answers: exchanges.map(\.answer))
    }
}

extension ProviderExchange {
    var answer: EvidenceAnswer {
        EvidenceAnswer(
            method: method, url: url, status: status, fetchedAt: sentAt, sha256: sha256, length: length, body: body, bodyKept: bodyKept)
    }

    var call: EvidenceStore.Call {
        EvidenceStore.Call(
            sentAt: sentAt, method: method, url: url, idempotencyKey: idempotencyKey, requestBody: requestBody,
            status: status, sha256: sha256, length: length, body: body, bodyKept: bodyKept)
    }
}
