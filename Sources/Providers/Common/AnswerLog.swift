import Crypto
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
    /// Of the whole answer, always (also when its body is not kept).
    public var sha256: [UInt8]
    /// The answer's size in bytes.
    public var length: Int
    /// The raw answer; empty when it was not kept (`bodyKept`).
    public var body: [UInt8]
    /// False past the log's bounds: the hash and the length stay, the body does not.
    public var bodyKept: Bool
    public var requestBody: [UInt8]
    public var idempotencyKey: String?

    public init(
        method: String, url: String, status: Int?, sentAt: Date, body: [UInt8], requestBody: [UInt8] = [],
        idempotencyKey: String? = nil
    ) {
        self.method = method; self.url = url; self.status = status; self.sentAt = sentAt
        self.sha256 = SHA256.hash(body); self.length = body.count; self.body = body; self.bodyKept = true
        self.requestBody = requestBody; self.idempotencyKey = idempotencyKey
    }
}

/// The provider answers one piece of work used (a check, an action's call), collected where every request passes
/// (`CountedTransport`) while the work's task has a log bound (`AnswerLog.collecting`). Nothing is collected
/// outside one, and an answer holding a credential (an OAuth token) never is (`ProviderRequest.answerIsEvidence`).
///
/// Bounded: the bodies of at most `maxBodies` answers and `maxBodyBytes` in all are kept; past them each answer keeps
/// its hash and length only (`bodyKept` false), up to `maxExchanges`, and any beyond are counted in `omitted`.
public final class AnswerLog: Sendable {
    @TaskLocal public static var current: AnswerLog?

    public static let maxBodies = 64
    public static let maxBodyBytes = 1 << 20
    public static let maxExchanges = 1024

    private struct State {
        var exchanges: [ProviderExchange] = []
        var bodies = 0
        var bodyBytes = 0
        var omitted = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// What was collected so far, in the order the requests were sent.
    public var exchanges: [ProviderExchange] { state.withLock { $0.exchanges } }
    /// Exchanges past `maxExchanges`, not kept at all.
    public var omitted: Int { state.withLock { $0.omitted } }

    func append(_ exchange: ProviderExchange) {
        state.withLock { s in
            guard s.exchanges.count < Self.maxExchanges else { s.omitted += 1; return }
            var e = exchange
            if s.bodies >= Self.maxBodies || s.bodyBytes + e.body.count + e.requestBody.count > Self.maxBodyBytes {
                e.body = []; e.requestBody = []; e.bodyKept = false
            } else {
                s.bodies += 1; s.bodyBytes += e.body.count + e.requestBody.count
            }
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
