import Foundation
import Reconciliation

// What a provider call came to, in the terms the worker acts on: a value, an absence, "try again later" or
// "don't retry". Every client classifies HTTP answers and transport errors the same way here.

/// Worth trying again later: why not now (a timeout, a 429, a 5xx, the database out of reach), and how long the other
/// side asked to be left alone (a Retry-After), when it said. One value, carried whole from the provider's answer
/// through the check's and the delivery's results to the delivery's backoff, so no hop takes it apart.
public struct Transient: Sendable, Equatable {
    public var reason: String
    public var retryAfter: Duration?
    public init(_ reason: String, retryAfter: Duration? = nil) { self.reason = reason; self.retryAfter = retryAfter }
}

/// The result of one provider call.
public enum ProviderOutcome<T: Sendable>: Sendable {
    /// The provider answered with the thing asked for.
    indirect case found(T)
    /// The provider says it does not exist (404 on a read).
    case notFound
    /// Worth retrying: timeout, connection failure, 429, 5xx, with a Retry-After header's wait.
    case transient(Transient)
    /// Retrying will not help: the provider refused the request, its answer cannot be read, or nothing was sent.
    case permanent(ProviderFailure)

    /// Transforms a found value; other cases pass through.
    public func map<U: Sendable>(_ transform: (T) throws -> U) rethrows -> ProviderOutcome<U> {
        switch self {
        case .found(let v): return .found(try transform(v))
        case .notFound: return .notFound
        case .transient(let t): return .transient(t)
        case .permanent(let failure): return .permanent(failure)
        }
    }

    /// `.transient` of `reason`, with the wait the provider asked for.
    public static func transient(reason: String, retryAfter: Duration?) -> Self { .transient(Transient(reason, retryAfter: retryAfter)) }

    /// The same non-found outcome for another value type; nil for `.found`.
    public func failure<U: Sendable>(as _: U.Type = U.self) -> ProviderOutcome<U>? {
        switch self {
        case .found: return nil
        case .notFound: return .notFound
        case .transient(let t): return .transient(t)
        case .permanent(let failure): return .permanent(failure)
        }
    }

    public var value: T? {
        if case .found(let v) = self { return v }
        return nil
    }

    public var isTransient: Bool {
        if case .transient = self { return true }
        return false
    }
}

extension ProviderOutcome: Equatable where T: Equatable {}

/// Why a provider call will not succeed by being made again as it is. Which of the three it is decides what follows
/// a money call: one never sent moved nothing, while one answered may have moved money whatever its answer says.
public enum ProviderFailure: Sendable, Hashable, CustomStringConvertible {
    /// The provider answered with this HTTP status (a 4xx other than 404 on a read, 408 and 429; or a status it does
    /// not document), and this body, at most 4 KiB.
    case refused(status: Int, body: String)
    /// The provider answered, and what it answered cannot be read (the reason names the field, or the answer was over
    /// the size cap). The call reached the provider and may have had its effect.
    case unreadable(String)
    /// The provider answered, readably, that it did not do (all of) what was asked: a refund answered FAILED, or a
    /// call of several parts that stopped after some were done.
    case declined(String)
    /// Nothing was sent: payrecon lacks what the call needs (credentials, an id), the provider has no such call, or
    /// the request could not be made.
    case notSent(String)

    /// The provider's status, when it answered with a refusal.
    public var status: Int? {
        if case .refused(let status, _) = self { return status }
        return nil
    }

    /// The provider's body, or payrecon's reason.
    public var text: String {
        switch self {
        case .refused(_, let body): body
        case .unreadable(let reason), .declined(let reason), .notSent(let reason): reason
        }
    }

    /// Whether the request reached the provider (any answer, readable or not).
    public var reachedProvider: Bool {
        if case .notSent = self { return false }
        return true
    }

    /// In words, for a log line or a stored error: "provider answered 422: …" for a refusal, else the reason.
    public var description: String { words(for: "provider") }

    /// The same, with the provider named: "paypal answered 422: …".
    public func words(for name: String, bodyLimit: Int = Int.max) -> String {
        switch self {
        case .refused(let status, let body): "\(name) answered \(status): \(body.prefix(bodyLimit))"
        case .unreadable(let reason), .declined(let reason), .notSent(let reason): reason
        }
    }
}

/// The classification rules shared by the clients.
public enum ProviderOutcomeClassifier {
    /// Largest provider error body kept in `.permanent`.
    public static let maxErrorBodyBytes = 4096

    /// Classifies an HTTP answer. 2xx → `.found(body)`; 404 → `.notFound` when `notFoundIsAbsence` (reads), else
    /// permanent; 408, 429 and 5xx → transient (Retry-After honoured); other statuses → permanent with the body.
    /// `now` (unix seconds) turns an HTTP-date Retry-After into seconds.
    public static func classify(_ response: ProviderResponse, notFoundIsAbsence: Bool, now: Int64) -> ProviderOutcome<[UInt8]> {
        switch response.status {
        case 200..<300:
            return .found(response.body)
        case 404 where notFoundIsAbsence:
            return .notFound
        case 408, 429, 500..<600:
            let retryAfter = response.header("Retry-After").flatMap { RetryAfter.seconds(from: $0, now: now) }.map { Duration.seconds($0) }
            return .transient(reason: "HTTP \(response.status)", retryAfter: retryAfter)
        default:
            return .permanent(.refused(status: response.status, body: truncatedBody(response.body)))
        }
    }

    /// Whether a transient outcome's reason is a 429: the provider refused the request before processing it (an
    /// OAuth token refused so comes first: the call itself was never sent). A money call so refused is not in doubt.
    public static func refusedBeforeProcessing(_ reason: String) -> Bool {
        reason == "HTTP 429" || reason.hasSuffix(": HTTP 429")
    }

    /// Classifies an error thrown by a transport: timeouts and connection failures are transient; `rejected` was never
    /// sent and `unreadable` was answered (over the size cap), both permanent; anything else (a cancelled task, an unknown error) is transient,
    /// since the request's fate is unknown.
    public static func classify(transportError error: any Error) -> ProviderOutcome<[UInt8]> {
        switch error {
        case ProviderTransportError.timeout:
            return .transient(reason: "timeout", retryAfter: nil)
        case ProviderTransportError.connection(let message):
            return .transient(reason: "connection: \(message)", retryAfter: nil)
        case ProviderTransportError.rejected(let message):
            return .permanent(.notSent(truncatedBody(Array("request rejected: \(message)".utf8))))
        case ProviderTransportError.unreadable(let message):
            return .permanent(.unreadable(truncatedBody(Array("answer not taken: \(message)".utf8))))
        case is CancellationError:
            return .transient(reason: "cancelled", retryAfter: nil)
        default:
            return .transient(reason: "transport: \(error)", retryAfter: nil)
        }
    }

    /// The body as text for a report, at most 4 KiB, cut on a character boundary. A NUL in it is U+FFFD: this text
    /// is stored (a delivery's outcome, an action's last error), and PostgreSQL's text holds no NUL.
    public static func truncatedBody(_ body: [UInt8]) -> String {
        guard body.count > maxErrorBodyBytes else { return String(decoding: body, as: UTF8.self).withoutNUL }
        var end = maxErrorBodyBytes
        while end > 0, body[end] & 0xC0 == 0x80 { end -= 1 }  // don't split a UTF-8 sequence
        return String(decoding: body[..<end], as: UTF8.self).withoutNUL + "…"
    }

}

/// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
public enum RetryAfter {
    /// Seconds to wait, or nil if the value cannot be read. A date in the past gives 0.
    public static func seconds(from value: String, now: Int64) -> Int? {
        let v = value.trimmingCharacters(in: .whitespaces)
        if !v.isEmpty, v.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard v.count <= 9, let s = Int(v) else { return Int(Int32.max) }
            return s
        }
        guard let date = HTTPDate.unixSeconds(from: v) else { return nil }
        return Int(max(0, min(date - now, Int64(Int32.max))))
    }
}

/// HTTP-date parsing: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), and the obsolete RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms recipients must accept.
public enum HTTPDate {
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    public static func unixSeconds(from value: String) -> Int64? {
        let tokens = value.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" }).map(String.init)
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?
        for token in tokens.dropFirst() {  // the first token is the weekday
            if let m = months.firstIndex(of: token.lowercased()) { month = m + 1; continue }
            if token.contains(":") {
                let parts = token.split(separator: ":").compactMap { Int($0) }
                guard parts.count == 3 else { return nil }
                time = (parts[0], parts[1], parts[2]); continue
            }
            if token == "GMT" { continue }
            // In all three forms the first number is the day and the second the year.
            guard let n = Int(token), token.count <= 4 else { return nil }
            if day == nil {
                day = n
            } else if year == nil {
                year = token.count == 2 ? (n < 70 ? 2000 + n : 1900 + n) : n
            } else {
                return nil
            }
        }
        guard let d = day, let m = month, let y = year, let (h, mi, s) = time else { return nil }
        return UnixTime.seconds(year: y, month: m, day: d, hour: h, minute: mi, second: s)
    }
}
