import Foundation
import Observability
import Providers
import Reconciliation

struct ReceiverMetrics: Sendable {
    let deliveries = Metrics.shared.counter("payrecon_deliveries_total", help: "Webhook deliveries by provider and outcome.")
    // Up to 30 s: providers give up around 10–30 s, and a p99 the buckets cannot show is no p99.
    let latency = Metrics.shared.histogram(
        "payrecon_ack_seconds", help: "Time from a delivery's arrival to its 200, after commit.",
        buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
    let timedOut = Metrics.shared.counter(
        "payrecon_requests_timed_out_total",
        help: "Connections cut off by PAYRECON_REQUEST_TIMEOUT (a sender too slow to finish its request).")
    func delivery(_ p: Provider, outcome: String) { deliveries.increment([("provider", p.rawValue), ("outcome", outcome)]) }

    /// Every outcome a delivery can have.
    static let outcomes =
        ["accepted", "duplicate", "storage_unavailable", "provider_not_configured", "body_too_large", "body_buffer_full"]
        + RejectionCode.allCases.map(\.rawValue)

    /// Every series at 0, so `increase()` sees the first 503 or rejection after a start.
    func initialise() {
        for provider in Provider.allCases {
            for outcome in Self.outcomes { deliveries.initialise([("provider", provider.rawValue), ("outcome", outcome)]) }
            latency.initialise([("provider", provider.rawValue)])
        }
        timedOut.initialise()
    }
    func requestTimedOut() { timedOut.increment() }
    func ack(_ p: Provider, since: DispatchTime) {
        let nanos = DispatchTime.now().uptimeNanoseconds - since.uptimeNanoseconds
        latency.observe(seconds: Double(nanos) / 1e9, [("provider", p.rawValue)])
    }
}
