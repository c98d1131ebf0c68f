import HTTP
import Synchronization
import Testing
@testable import Providers
@testable import Reconciliation

/// A transport that answers from a script and records every request (no network).
final class ScriptedTransport: ProviderTransport, @unchecked Sendable {
    private let state = Mutex<(requests: [ProviderRequest], handler: @Sendable (ProviderRequest, Int) async throws -> ProviderResponse)>(
        ([], { _, _ in ProviderResponse(status: 500) }))

    init(_ handler: @escaping @Sendable (ProviderRequest, Int) async throws -> ProviderResponse) {
        state.withLock { $0.handler = handler }
    }

    /// Answers the given responses (or errors) in order, repeating the last one.
    convenience init(_ script: [Result<ProviderResponse, ProviderTransportError>]) {
        self.init { _, n in try script[min(n, script.count - 1)].get() }
    }

    var requests: [ProviderRequest] { state.withLock { $0.requests } }

    func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        let (n, handler) = state.withLock { s in
            s.requests.append(request)
            return (s.requests.count - 1, s.handler)
        }
        return try await handler(request, n)
    }
}

func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> ProviderResponse {
    ProviderResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(text.utf8))
}

/// A retry policy that never sleeps and records the waits it was asked for.
final class RecordedSleeps: @unchecked Sendable {
    private let waits = Mutex<[Duration]>([])
    var all: [Duration] { waits.withLock { $0 } }
    func policy(maxAttempts: Int = 3, jitter: @escaping @Sendable (Int64) -> Int64 = { $0 }) -> RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts, baseDelay: .milliseconds(100), maxDelay: .seconds(10),
            sleep: { d in self.waits.withLock { $0.append(d) } }, random: jitter)
    }
}

@Suite struct ProviderOutcomeClientTests {
    let now: Int64 = 1_700_000_000

    @Test(arguments: [200, 201, 204, 299])
    func twoHundredsAreFound(status: Int) {
        #expect(
            ProviderOutcomeClassifier.classify(ProviderResponse(status: status, body: [1]), notFoundIsAbsence: true, now: now)
                == .found([1]))
    }

    @Test func notFoundOnlyForReads() {
        let r = ProviderResponse(status: 404, body: Array("nope".utf8))
        #expect(ProviderOutcomeClassifier.classify(r, notFoundIsAbsence: true, now: now) == .notFound)
        #expect(
            ProviderOutcomeClassifier.classify(r, notFoundIsAbsence: false, now: now) == .permanent(.refused(status: 404, body: "nope")))
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504, 599])
    func transientStatuses(status: Int) {
        #expect(
            ProviderOutcomeClassifier.classify(ProviderResponse(status: status), notFoundIsAbsence: true, now: now)
                == .transient(reason: "HTTP \(status)", retryAfter: nil))
    }

    @Test func retryAfterSecondsAndDates() {
        let seconds = ProviderResponse(status: 429, headers: [("retry-after", "7")])
        #expect(
            ProviderOutcomeClassifier.classify(seconds, notFoundIsAbsence: true, now: now)
                == .transient(reason: "HTTP 429", retryAfter: .seconds(7)))
        // 1_700_000_000 = Tue, 14 Nov 2023 22:13:20 GMT
        let date = ProviderResponse(status: 503, headers: [("Retry-After", "Tue, 14 Nov 2023 22:14:00 GMT")])
        #expect(
            ProviderOutcomeClassifier.classify(date, notFoundIsAbsence: true, now: now)
                == .transient(reason: "HTTP 503", retryAfter: .seconds(40)))
        let garbage = ProviderResponse(status: 429, headers: [("Retry-After", "soon")])
        #expect(
            ProviderOutcomeClassifier.classify(garbage, notFoundIsAbsence: true, now: now)
                == .transient(reason: "HTTP 429", retryAfter: nil))
    }

    @Test(
        arguments: [
            ("Tue, 14 Nov 2023 22:14:00 GMT", 40), ("Tuesday, 14-Nov-23 22:14:00 GMT", 40), ("Tue Nov 14 22:14:00 2023", 40),
            ("Tue, 14 Nov 2023 22:00:00 GMT", 0), ("0", 0), ("120", 120), (" 3 ", 3), ("99999999999", Int(Int32.max))
        ] as [(String, Int)])
    func retryAfterForms(value: String, seconds: Int) {
        #expect(RetryAfter.seconds(from: value, now: now) == seconds)
    }

    @Test(arguments: ["", "-1", "1.5", "Tue, 32 Nov 2023 22:14:00 GMT", "Tue, 14 Foo 2023 22:14:00 GMT", "Tue, 14 Nov 2023 22:14 GMT"])
    func unreadableRetryAfter(value: String) {
        #expect(RetryAfter.seconds(from: value, now: now) == nil)
    }

    @Test(arguments: [400, 401, 403, 409, 422])
    func otherClientErrorsArePermanentWithTheBody(status: Int) {
        let body = #"{"name":"UNPROCESSABLE_ENTITY"}"#
        #expect(
            ProviderOutcomeClassifier.classify(json(status, body), notFoundIsAbsence: true, now: now)
                == .permanent(.refused(status: status, body: body)))
    }

    @Test func errorBodiesAreTruncatedTo4KiBOnACharacterBoundary() {
        let body = Array(repeating: UInt8(ascii: "a"), count: 4095) + Array("é".utf8) + Array(repeating: UInt8(ascii: "b"), count: 100)
        guard
            case .permanent(.refused(_, let text)) = ProviderOutcomeClassifier.classify(
                ProviderResponse(status: 400, body: body),
                notFoundIsAbsence: true, now: now)
        else {
            Issue.record("not permanent"); return
        }
        #expect(text == String(repeating: "a", count: 4095) + "…")
    }

    @Test func transportErrorsAreTransient() {
        #expect(
            ProviderOutcomeClassifier.classify(transportError: ProviderTransportError.timeout)
                == .transient(reason: "timeout", retryAfter: nil))
        #expect(
            ProviderOutcomeClassifier.classify(transportError: ProviderTransportError.connection("refused"))
                == .transient(reason: "connection: refused", retryAfter: nil))
        #expect(ProviderOutcomeClassifier.classify(transportError: CancellationError()).isTransient)
    }

    /// A request that could not be made was never sent; an answer over the size cap was answered. The difference
    /// decides a money call: one never sent moved nothing, one answered may have moved money (in doubt).
    @Test(arguments: [
        (HTTPClientError.invalidURL("no url"), "notSent"),
        (HTTPClientError.responseTooLarge("https://p/x", 100), "unreadable")
    ])
    func aRequestNeverSentIsToldFromAnAnswerNotTaken(error: HTTPClientError, expected: String) async {
        struct Throwing: HTTPSending {
            let error: HTTPClientError
            func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse { throw error }
            func sendBlocking(_ request: HTTPClientRequest) throws -> HTTPClientResponse { throw error }
        }
        let transport = HTTPClientTransport(client: Throwing(error: error))
        let outcome: ProviderOutcome<[UInt8]>
        do {
            outcome = ProviderOutcomeClassifier.classify(
                try await transport.send(ProviderRequest(method: "POST", url: "https://p/x", headers: [], body: [])),
                notFoundIsAbsence: false, now: 0)
        } catch {
            outcome = ProviderOutcomeClassifier.classify(transportError: error)
        }
        switch outcome {
        case .permanent(.notSent(let why)):
            #expect(expected == "notSent" && why.hasPrefix("request rejected: "))
        case .permanent(.unreadable(let why)):
            #expect(expected == "unreadable" && why.hasPrefix("answer not taken: "))
            #expect(ProviderFailure.unreadable(why).reachedProvider)
        default: Issue.record("\(error) came to \(outcome)")
        }
        #expect(
            !ProviderFailure.notSent("x").reachedProvider && ProviderFailure.refused(status: 400, body: "").reachedProvider
                && ProviderFailure.declined("FAILED").reachedProvider)
    }

    @Test func unreadableAnswersArePermanent() {
        guard case .permanent(.unreadable(let body)) = ProviderOutcomeClassifier.parsingJSON(.found(Array("<html>".utf8))) else {
            Issue.record("not permanent"); return
        }
        #expect(body.hasPrefix("unreadable answer (invalid JSON at byte 0"))
    }
}

@Suite struct RetryClientTests {
    @Test func retriesTransientWithExponentialFullJitterCaps() async {
        let sleeps = RecordedSleeps()
        let calls = Mutex(0)
        let outcome: ProviderOutcome<Int> = await retrying(sleeps.policy(maxAttempts: 4)) {
            calls.withLock { $0 += 1 }
            return .transient(reason: "HTTP 503", retryAfter: nil)
        }
        #expect(outcome == .transient(reason: "HTTP 503", retryAfter: nil))
        #expect(calls.withLock { $0 } == 4)
        #expect(sleeps.all == [.milliseconds(100), .milliseconds(200), .milliseconds(400)])  // jitter = the cap
    }

    @Test func jitterIsDrawnBelowTheCap() async {
        let sleeps = RecordedSleeps()
        let bounds = Mutex<[Int64]>([])
        let _: ProviderOutcome<Int> = await retrying(
            sleeps.policy(
                maxAttempts: 3,
                jitter: { n in
                    bounds.withLock { $0.append(n) }; return n / 2
                })
        ) {
            .transient(reason: "timeout", retryAfter: nil)
        }
        #expect(bounds.withLock { $0 } == [100, 200])
        #expect(sleeps.all == [.milliseconds(50), .milliseconds(100)])
    }

    @Test func backoffIsCappedAtMaxDelay() {
        let policy = RetryPolicy(maxAttempts: 50, baseDelay: .milliseconds(100), maxDelay: .seconds(10), random: { $0 })
        #expect(policy.delay(beforeRetry: 10, retryAfter: nil) == .seconds(10))
        #expect(policy.delay(beforeRetry: 45, retryAfter: nil) == .seconds(10))
    }

    @Test func honoursRetryAfterAndGivesUpOnLongOnes() async {
        let sleeps = RecordedSleeps()
        let calls = Mutex(0)
        let outcome: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            let n = calls.withLock {
                $0 += 1; return $0
            }
            return n == 1
                ? .transient(reason: "HTTP 429", retryAfter: .seconds(2)) : .transient(reason: "HTTP 429", retryAfter: .seconds(60))
        }
        #expect(sleeps.all == [.seconds(2)])
        #expect(calls.withLock { $0 } == 2)
        #expect(outcome == .transient(reason: "HTTP 429", retryAfter: .seconds(60)))  // handed back for the caller to schedule
    }

    /// A capture's first attempt times out (it may have been applied); the retry is never sent (its OAuth token was
    /// refused). The call is in doubt, not "never sent": only a call no attempt of which may have reached the provider is.
    @Test(arguments: [
        (
            "timeout",
            ProviderOutcome<Int>.transient(
                reason: "an earlier attempt may have reached the provider, and the last was not sent: token refused",
                retryAfter: nil)
        ),
        ("HTTP 429", ProviderOutcome<Int>.permanent(.notSent("token refused")))
    ])
    func aRetryNeverSentAfterOneThatMayHaveArrivedIsInDoubt(first: String, expected: ProviderOutcome<Int>) async {
        let sleeps = RecordedSleeps()
        let calls = Mutex(0)
        let outcome: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            calls.withLock {
                $0 += 1; return $0
            } == 1 ? .transient(reason: first, retryAfter: nil) : .permanent(.notSent("token refused"))
        }
        #expect(outcome == expected)
        let refusedAfter: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            calls.withLock {
                $0 += 1; return $0
            } == 3 ? .transient(reason: "timeout", retryAfter: nil) : .permanent(.refused(status: 422, body: "x"))
        }
        #expect(refusedAfter == .permanent(.refused(status: 422, body: "x")), "a refusal reached the provider: it stands")
    }

    /// A capture's first attempt times out (it may have been applied) and the retry is answered 429: the call is in
    /// doubt, not "refused before it was processed" (which the executor would send again as if it were the first),
    /// and keeps the wait the 429 asked for.
    @Test func a429AfterAnAttemptThatMayHaveArrivedIsInDoubt() async {
        let sleeps = RecordedSleeps()
        let calls = Mutex(0)
        let outcome: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            calls.withLock {
                $0 += 1; return $0
            } == 1 ? .transient(reason: "timeout", retryAfter: nil) : .transient(reason: "HTTP 429", retryAfter: .seconds(60))
        }
        guard case .transient(let t) = outcome else { Issue.record("\(outcome)"); return }
        #expect(!ProviderOutcomeClassifier.refusedBeforeProcessing(t.reason), "\(t.reason)")
        #expect(t.reason.contains("may have reached the provider") && t.reason.contains("HTTP 429"), "\(t.reason)")
        #expect(t.retryAfter == .seconds(60))
        // The same when the attempts run out on 429s the policy waits for (2 s each).
        let calls2 = Mutex(0)
        let ranOut: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            calls2.withLock {
                $0 += 1; return $0
            } == 1 ? .transient(reason: "HTTP 503", retryAfter: nil) : .transient(reason: "HTTP 429", retryAfter: .seconds(2))
        }
        #expect(calls2.withLock { $0 } == 3)
        guard case .transient(let last) = ranOut else { Issue.record("\(ranOut)"); return }
        #expect(!ProviderOutcomeClassifier.refusedBeforeProcessing(last.reason) && last.retryAfter == .seconds(2), "\(last)")
        // Every attempt refused before it was processed: nothing may have been applied, and it stays a 429.
        let refused: ProviderOutcome<Int> = await retrying(sleeps.policy()) { .transient(reason: "HTTP 429", retryAfter: .seconds(60)) }
        #expect(refused == .transient(reason: "HTTP 429", retryAfter: .seconds(60)))
    }

    @Test func stopsOnSuccessOrPermanent() async {
        let sleeps = RecordedSleeps()
        let calls = Mutex(0)
        let found: ProviderOutcome<Int> = await retrying(sleeps.policy()) {
            calls.withLock {
                $0 += 1; return $0
            } == 1 ? .transient(reason: "timeout", retryAfter: nil) : .found(7)
        }
        #expect(found == .found(7))
        let permanent: ProviderOutcome<Int> = await retrying(sleeps.policy()) { .permanent(.refused(status: 422, body: "x")) }
        #expect(permanent == .permanent(.refused(status: 422, body: "x")))
        let absent: ProviderOutcome<Int> = await retrying(sleeps.policy()) { .notFound }
        #expect(absent == .notFound)
        #expect(sleeps.all.count == 1)
    }

    @Test func aThrowingSleepStopsRetrying() async {
        let calls = Mutex(0)
        let policy = RetryPolicy(maxAttempts: 5, sleep: { _ in throw CancellationError() })
        let outcome: ProviderOutcome<Int> = await retrying(policy) {
            calls.withLock { $0 += 1 }
            return .transient(reason: "timeout", retryAfter: nil)
        }
        #expect(outcome.isTransient)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func noRetryPolicy() async {
        let calls = Mutex(0)
        let _: ProviderOutcome<Int> = await retrying(.none) {
            calls.withLock { $0 += 1 }
            return .transient(reason: "timeout", retryAfter: nil)
        }
        #expect(calls.withLock { $0 } == 1)
    }
}

@Suite struct ProviderTimeClientTests {
    @Test(
        arguments: [
            ("2024-01-27T08:51:02.826Z", 1706345462), ("2025-01-27 08:51:02.826445+00:00", 1737967862),
            ("2024-10-27T08:51:04.8264455Z", 1730019064), ("2018-08-15T12:13:29-07:00", 1534360409),
            ("2018-04-01T21:18:49Z", 1522617529), ("1970-01-01T00:00:00Z", 0), ("2024-02-29T00:00:00+0100", 1709161200),
            ("2024-01-27T08:51Z", 1706345460), ("2024-01-27t08:51:02z", 1706345462)
        ] as [(String, Int64)])
    func parsesProviderTimestamps(text: String, seconds: Int64) {
        #expect(ISO8601.unixSeconds(from: text) == seconds)
    }

    @Test(arguments: [
        "", "2024-01-27", "2024-01-27T08:51:02", "2018-19-12T22:20:32.000Z", "2023-02-29T00:00:00Z",
        "2024-01-27T24:00:00Z", "2024-01-27T08:51:02.Z", "2024-01-27T08:51:02.1234567890Z",
        "2024-02-15T00:56:38.367PST", "2024-01-27T08:51:02Z junk", "2024-01-27T08:51:02+25:00"
    ])
    func rejectsBadTimestamps(text: String) {
        #expect(ISO8601.unixSeconds(from: text) == nil)
    }

    @Test func formatsPXPDates() {
        #expect(PXPClient.formatDate(unixSeconds: 1706345462) == "2024-01-27T08:51:02.000Z")
        #expect(PXPClient.formatDate(unixSeconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(ISO8601.unixSeconds(from: PXPClient.formatDate(unixSeconds: 1709161199)) == 1709161199)
    }
}

@Suite struct ProviderURLClientTests {
    @Test func encodesEverySegmentAndQueryValue() {
        #expect(
            ProviderURL.build(
                base: "https://h/api/v1/", segments: ["transactions", "M 1/../x", "S?#&"],
                query: [("merchantTransactionId", "A&B=C é")])
                == "https://h/api/v1/transactions/M%201%2F..%2Fx/S%3F%23%26?merchantTransactionId=A%26B%3DC%20%C3%A9")
        #expect(ProviderURL.encodeComponent("Az09-._~") == "Az09-._~")
    }

    /// `.` and `..` as a whole segment would be resolved away by path normalization (`/orders/..` is `/`): their
    /// dots are encoded, so an id can never name another resource.
    @Test func dotSegmentsAreEncoded() {
        #expect(ProviderURL.build(base: "https://h", segments: ["v2", "checkout", "orders", ".."]) == "https://h/v2/checkout/orders/%2E%2E")
        #expect(ProviderURL.build(base: "https://h", segments: ["a", ".", "b"]) == "https://h/a/%2E/b")
        #expect(ProviderURL.build(base: "https://h", segments: ["a..b", "..."]) == "https://h/a..b/...")
    }

    @Test func pathAndQueryOfAURL() {
        #expect(ProviderRequest(method: "GET", url: "https://h:8443/api/v1/t?a=b#f").pathAndQuery == "/api/v1/t?a=b")
        #expect(ProviderRequest(method: "GET", url: "http://h").pathAndQuery == "/")
        #expect(ProviderRequest(method: "GET", url: "http://h?x=1").pathAndQuery == "/?x=1")
    }
}
