import Crypto
import Foundation
import Reconciliation
import TextFormats

/// Where and as whom to call the PXP Transactions API.
public struct PXPConfiguration: Sendable, CustomStringConvertible {
    /// e.g. `https://api-services.test.pxp.io/api/v1` (sandbox) or `https://api-services.pxp.io/api/v1`.
    public var baseURL: String
    public var clientID: String
    public var tokenID: String
    /// The token value (HMAC key). Never printed: `description` masks it.
    public var tokenValue: String
    public var timeout: Duration

    public static let sandboxBaseURL = "https://api-services.test.pxp.io/api/v1"

    public init(
        baseURL: String = PXPConfiguration.sandboxBaseURL, clientID: String, tokenID: String, tokenValue: String,
        timeout: Duration = .seconds(30)
    ) {
        self.baseURL = baseURL; self.clientID = clientID; self.tokenID = tokenID; self.tokenValue = tokenValue
        self.timeout = timeout
    }

    public var description: String {
        "PXPConfiguration(baseURL: \(baseURL), clientID: \(clientID), tokenID: \(tokenID), tokenValue: <redacted>)"
    }
}

/// A PXP post-transaction operation (`operation` in the modification body).
public enum PXPOperation: String, Sendable, Hashable, Codable, CaseIterable {
    case capture = "Capture", finalCapture = "FinalCapture", refund = "Refund", incremental = "Incremental", void = "Void"

    /// Case-insensitive match of PXP's operation name.
    public init?(pxpName: String) {
        guard let op = PXPOperation.allCases.first(where: { $0.rawValue.lowercased() == pxpName.lowercased() }) else { return nil }
        self = op
    }
}

/// A modification with the amount PXP expects in `amounts.transaction` for it.
public enum PXPModificationKind: Sendable, Hashable {
    /// Capture this amount (≤ the authorised value).
    case capture(amount: Int64)
    /// Capture this last part and release the rest.
    case finalCapture(amount: Int64)
    /// Refund this amount.
    case refund(amount: Int64)
    /// Raise the authorisation: PXP takes the NEW TOTAL (docs example 24.99 → 29.99; inferred), not the delta.
    case incremental(newTotal: Int64)
    /// Void: PXP wants the original transaction value.
    case void(originalValue: Int64)

    public var operation: PXPOperation {
        switch self {
        case .capture: .capture
        case .finalCapture: .finalCapture
        case .refund: .refund
        case .incremental: .incremental
        case .void: .void
        }
    }

    /// The minor units sent as `amounts.transaction`.
    public var transactionAmount: Int64 {
        switch self {
        case .capture(let a), .finalCapture(let a), .refund(let a): a
        case .incremental(let t): t
        case .void(let v): v
        }
    }
}

/// What PXP answered to a modification: its new systemTransactionId and state, and the whole answer.
public struct PXPModificationResult: Sendable, Equatable {
    public var systemTransactionId: String
    public var state: String
    public var answer: JSONValue

    public init(systemTransactionId: String, state: String, answer: JSONValue) {
        self.systemTransactionId = systemTransactionId; self.state = state; self.answer = answer
    }
}

/// The PXP Transactions API: read a transaction, modify it. Every request carries PXP-UST1 auth; transient
/// failures of reads are retried per `retry`. A modification is sent once and never retried here: its
/// merchantTransactionId is derived from the action's idempotency key (`merchantTransactionId(forIdempotencyKey:)`),
/// and after an unknown outcome the executor looks it up before deciding to send it again.
public final class PXPClient: Sendable {
    public let configuration: PXPConfiguration
    let transport: any ProviderTransport
    let retry: RetryPolicy
    let now: @Sendable () -> Int64
    let newRequestID: @Sendable () -> String

    /// - Parameters:
    ///   - now: unix seconds (the PXP-UST1 timestamp, Retry-After dates).
    ///   - newRequestID: the `X-Request-Id` of each request (a fresh lower-case UUID by default).
    public init(
        configuration: PXPConfiguration, transport: any ProviderTransport, retry: RetryPolicy = .standard,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        newRequestID: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }
    ) {
        self.configuration = configuration; self.transport = transport; self.retry = retry
        self.now = now; self.newRequestID = newRequestID
    }

    // MARK: Calls

    /// GET /transactions/{merchant}/{site}?merchantTransactionId=… — the transaction the merchant named.
    public func transaction(merchant: String, site: String, merchantTransactionId: String) async -> ProviderOutcome<JSONValue> {
        await fetch(merchant: merchant, site: site, query: ("merchantTransactionId", merchantTransactionId))
    }

    /// GET /transactions/{merchant}/{site}?systemTransactionId=… — by PXP's own id.
    public func transaction(merchant: String, site: String, systemTransactionId: String) async -> ProviderOutcome<JSONValue> {
        await fetch(merchant: merchant, site: site, query: ("systemTransactionId", systemTransactionId))
    }

    /// POST /transactions/{systemTransactionId}/modifications.
    /// - Parameters:
    ///   - systemTransactionId: the FIRST systemTransactionId of the authorisation or purchase (PXP's rule).
    ///   - merchantTransactionId: a new id for this modification; use `merchantTransactionId(forIdempotencyKey:)`.
    ///   - merchantTransactionDate: when the initial transaction happened (its `merchantTransactionDate`, or
    ///     `formatDate(unixSeconds:)` of the snapshot's createdAt).
    public func modify(
        systemTransactionId: String, _ kind: PXPModificationKind, currency: Currency, merchant: String,
        site: String, merchantTransactionId: String, merchantTransactionDate: String
    ) async
        -> ProviderOutcome<PXPModificationResult>
    {
        // Sent once: after a timeout, a 5xx or a cut connection PXP may have applied it, and whether PXP
        // de-duplicates a repeated merchantTransactionId is undocumented (PXP-DEDUPE). The action stays in doubt
        // and its next attempt looks the merchantTransactionId up before anything is sent again.
        let request = modificationRequest(
            systemTransactionId: systemTransactionId, kind, currency: currency,
            merchant: merchant, site: site, merchantTransactionId: merchantTransactionId,
            merchantTransactionDate: merchantTransactionDate)
        let outcome = await send(request, notFoundIsAbsence: false)
        switch outcome {
        case .found(let answer):
            guard let id = answer["systemTransactionId"]?.stringValue, let state = answer["state"]?.stringValue else {
                return .permanent(
                    .unreadable(
                        "modification answer without systemTransactionId/state: "
                            + ProviderOutcomeClassifier.truncatedBody(answer.serialized())))
            }
            return .found(PXPModificationResult(systemTransactionId: id, state: state, answer: answer))
        case .notFound: return .notFound
        case .transient(let t): return .transient(t)
        case .permanent(let failure): return .permanent(failure)
        }
    }

    // MARK: Request building (pure; tested directly)

    package func transactionRequest(merchant: String, site: String, query: (String, String)) -> ProviderRequest {
        let url = ProviderURL.build(base: configuration.baseURL, segments: ["transactions", merchant, site], query: [query])
        return signed(
            ProviderRequest(
                method: "GET", url: url, headers: [("Accept", "application/json")],
                timeout: configuration.timeout))
    }

    package func modificationRequest(
        systemTransactionId: String, _ kind: PXPModificationKind, currency: Currency,
        merchant: String, site: String, merchantTransactionId: String,
        merchantTransactionDate: String
    ) -> ProviderRequest {
        let body: JSONValue = .object([
            ("merchant", .string(merchant)),
            ("site", .string(site)),
            ("merchantTransactionId", .string(merchantTransactionId)),
            ("merchantTransactionDate", .string(merchantTransactionDate)),
            (
                "amounts",
                .object([
                    ("transaction", JSONValue.decimal(minorUnits: kind.transactionAmount, exponent: currency.exponent)),
                    ("currencyCode", .string(currency.code))
                ])
            ),
            ("operation", .string(kind.operation.rawValue))
        ])
        let url = ProviderURL.build(base: configuration.baseURL, segments: ["transactions", systemTransactionId, "modifications"])
        var request = signed(
            ProviderRequest(
                method: "POST", url: url,
                headers: [("Accept", "application/json"), ("Content-Type", "application/json")],
                body: body.serialized(), timeout: configuration.timeout))
        // PXP's idempotency is the merchantTransactionId in the body (derived from the action's key).
        request.idempotencyKey = merchantTransactionId
        return request
    }

    /// Adds X-Request-Id, X-Client-Id and the PXP-UST1 Authorization header.
    package func signed(_ request: ProviderRequest) -> ProviderRequest {
        var r = request
        let requestID = newRequestID()
        let timestamp = String(now())
        let signature = PXPAuth.signature(
            tokenValue: configuration.tokenValue, timestamp: timestamp, requestID: requestID,
            method: r.method, pathAndQuery: r.pathAndQuery, body: r.body)
        r.headers.append(("X-Request-Id", requestID))
        r.headers.append(("X-Client-Id", configuration.clientID))
        r.headers.append(
            (
                "Authorization",
                PXPAuth.authorizationHeader(
                    tokenID: configuration.tokenID, timestamp: timestamp,
                    signature: signature)
            ))
        return r
    }

    /// `2025-01-27T08:51:02.000Z` for unix seconds (a merchantTransactionDate when only the time is known).
    public static func formatDate(unixSeconds: Int64) -> String {
        String(UnixTime.iso8601(unixSeconds).dropLast()) + ".000Z"
    }

    // MARK: Plumbing

    private func fetch(merchant: String, site: String, query: (String, String)) async -> ProviderOutcome<JSONValue> {
        await retrying(retry) { () async -> ProviderOutcome<JSONValue> in
            await self.send(self.transactionRequest(merchant: merchant, site: site, query: query), notFoundIsAbsence: true)
        }
    }

    /// One signed request (re-signed per attempt: fresh request id and timestamp) → outcome with the parsed answer.
    private func send(_ request: ProviderRequest, notFoundIsAbsence: Bool) async -> ProviderOutcome<JSONValue> {
        let raw: ProviderOutcome<[UInt8]>
        do {
            let response = try await transport.send(request)
            raw = ProviderOutcomeClassifier.classify(response, notFoundIsAbsence: notFoundIsAbsence, now: now())
        } catch {
            raw = ProviderOutcomeClassifier.classify(transportError: error)
        }
        return ProviderOutcomeClassifier.parsingJSON(raw)
    }
}

extension ProviderOutcomeClassifier {
    /// `.found(bytes)` → `.found(JSONValue)`; an unreadable 2xx answer is permanent (status 200, the parse error and
    /// the start of the body) — retrying the same read would get the same bytes.
    public static func parsingJSON(_ outcome: ProviderOutcome<[UInt8]>) -> ProviderOutcome<JSONValue> {
        switch outcome {
        case .found(let bytes):
            do { return .found(try JSONValue.parse(bytes)) } catch {
                return .permanent(.unreadable(truncatedBody(Array("unreadable answer (\(error)): ".utf8) + bytes)))
            }
        case .notFound: return .notFound
        case .transient(let t): return .transient(t)
        case .permanent(let failure): return .permanent(failure)
        }
    }
}
