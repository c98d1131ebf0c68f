import Foundation
import Observability
import Reconciliation

/// Every HTTP request a provider's API sends, counted by what came back:
/// `payrecon_provider_http_requests_total{provider, class}`, class one of `2xx`, `3xx`, `404`, `429`, `4xx` (any
/// other 4xx: 401 and 403 are credentials), `5xx` and `no_answer` (timeout, refused, reset: no HTTP answer at all).
/// Measured at the transport, so calls answered without a request (a stored event read) never dilute the share
/// of failures, and an outage (no answer) is told apart from a provider saying no.
public struct CountedTransport: ProviderTransport {
    public static let requests = Metrics.shared.counter(
        "payrecon_provider_http_requests_total",
        help: "HTTP requests to each provider's API by what came back: 2xx, 3xx, 404, 429, 4xx (other), 5xx, no_answer")
    public static let classes = ["2xx", "3xx", "404", "429", "4xx", "5xx", "no_answer"]

    let base: any ProviderTransport
    /// The `provider` label of its requests.
    let label: String
    public init(base: any ProviderTransport, provider: Provider) { self.init(base: base, label: provider.rawValue) }
    /// Counted under a label of the caller's (a test's own, so no other test's requests are in its counts).
    init(base: any ProviderTransport, label: String) { self.base = base; self.label = label }

    /// Also where a check's answers are collected as evidence, when its task has an `AnswerLog` bound.
    public func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        let sentAt = Date()
        do {
            let response = try await base.send(request)
            note(request, sentAt: sentAt, status: response.status, body: response.body, error: nil)
            return response
        } catch {
            note(request, sentAt: sentAt, status: nil, error: error)
            throw error
        }
    }

    /// Counts what came back (`error`: no answer) and collects it into the task's log. Not inlined into `send`, so
    /// building the exchange adds nothing to the async frame every request's task holds while it waits.
    @inline(never)
    func note(_ request: ProviderRequest, sentAt: Date, status: Int?, body: [UInt8] = [], error: (any Error)?) {
        Self.requests.increment([("provider", label), ("class", status.map(Self.statusClass) ?? "no_answer")])
        guard request.answerIsEvidence, let log = AnswerLog.current else { return }
        log.append(
            ProviderExchange(
                method: request.method, url: request.url, status: status, sentAt: sentAt,
                body: error.map { Array("no answer: \($0)".utf8) } ?? body,
                requestBody: request.body, idempotencyKey: request.idempotencyKey))
    }

    static func statusClass(_ status: Int) -> String {
        switch status {
        case 404: "404"
        case 429: "429"
        case 200..<300: "2xx"
        case 300..<400: "3xx"
        case 400..<500: "4xx"
        default: "5xx"
        }
    }

    /// Every class of every provider at 0, so `increase()` and ratios see the first failure.
    public static func initialise(providers: [Provider]) { initialise(labels: providers.map(\.rawValue)) }
    static func initialise(labels: [String]) {
        for label in labels { for c in classes { requests.initialise([("provider", label), ("class", c)]) } }
    }
}
