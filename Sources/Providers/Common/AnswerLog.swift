import Foundation
import Synchronization

/// One request a provider's API was sent and what came back, as `payrecon explain` keeps it: the raw answer and its
/// SHA-256, the request's method, URL and body (never its headers: they carry credentials), and the idempotency key
/// as sent.
public struct ProviderExchange: Sendable {
    public var method: String
    public var url: String
    /// nil: no answer at all (timeout, refused, reset); `body` then says what happened.
    public var status: Int?
    public var sentAt: Date
    public var sha256: [UInt8]
    public var body: [UInt8]
    public var requestBody: [UInt8]
    public var idempotencyKey: String?

    public init(method: String, url: String, status: Int?, sentAt: Date, body: [UInt8], requestBody: [UInt8] = [],
                idempotencyKey: String? = nil) {
        self.method = method; self.url = url; self.status = status; self.sentAt = sentAt
        self.sha256 = SHA256.hash(body); self.body = body; self.requestBody = requestBody; self.idempotencyKey = idempotencyKey
    }
}

/// The provider answers one piece of work used (a check, an action's call), collected where every request passes
/// (`CountedTransport`) while the work's task has a log bound (`AnswerLog.collecting`). Nothing is collected
/// outside one, and an answer holding a credential (an OAuth token) never is (`ProviderRequest.answerIsEvidence`).
///
/// Bounded: at most `maxExchanges` requests and `maxBodyBytes` of bodies per log; past them the hash is still kept
/// and the body is left out (`omitted` says how many were).
public final class AnswerLog: Sendable {
    @TaskLocal public static var current: AnswerLog?

    public static let maxExchanges = 64
    public static let maxBodyBytes = 4 << 20

    private struct State {
        var exchanges: [ProviderExchange] = []
        var bodyBytes = 0
        var omitted = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// What was collected so far, in the order the requests were sent.
    public var exchanges: [ProviderExchange] { state.withLock { $0.exchanges } }
    /// Bodies left out past the bounds.
    public var omitted: Int { state.withLock { $0.omitted } }

    func append(_ exchange: ProviderExchange) {
        state.withLock { s in
            var e = exchange
            if s.exchanges.count >= Self.maxExchanges { s.omitted += 1; return }
            if s.bodyBytes + e.body.count > Self.maxBodyBytes { e.body = []; s.omitted += 1 } else { s.bodyBytes += e.body.count }
            s.exchanges.append(e)
        }
    }

    /// Runs `work` with a fresh log bound, and returns what it collected with its result.
    public static func collecting<T: Sendable>(_ work: () async -> T) async -> (T, [ProviderExchange]) {
        let log = AnswerLog()
        let result = await $current.withValue(log) { await work() }
        return (result, log.exchanges)
    }
}
