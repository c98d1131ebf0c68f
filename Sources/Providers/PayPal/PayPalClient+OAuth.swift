import Foundation

/// A PayPal OAuth2 access token and when to stop using it.
public struct PayPalAccessToken: Sendable, Equatable {
    public var value: String
    /// Unix seconds after which a new token is fetched (shortly before PayPal's `expires_in` runs out).
    public var refreshAt: Int64

    public init(value: String, refreshAt: Int64) { self.value = value; self.refreshAt = refreshAt }

    /// Seconds before expiry at which the token is renewed: a tenth of its life, at most 5 minutes.
    static func refreshMargin(expiresIn: Int64) -> Int64 { min(300, expiresIn / 10) }
}

/// One cached token shared by every caller; concurrent callers wait on the same fetch (no stampede).
actor PayPalTokenCache {
    private var token: PayPalAccessToken?
    private var inFlight: (id: Int, task: Task<ProviderOutcome<PayPalAccessToken>, Never>)?
    private var nextID = 0
    private(set) var fetchCount = 0

    /// The cached token while it is fresh, else the result of one shared `fetch`.
    func get(
        now: Int64, fetch: @escaping @Sendable () async -> ProviderOutcome<PayPalAccessToken>
    ) async
        -> ProviderOutcome<PayPalAccessToken>
    {
        if let token, now < token.refreshAt { return .found(token) }
        if let inFlight { return await inFlight.task.value }
        nextID += 1
        let id = nextID
        let task = Task { await fetch() }
        inFlight = (id, task)
        fetchCount += 1
        let result = await task.value
        if inFlight?.id == id {
            inFlight = nil
            if case .found(let t) = result { token = t }
        }
        return result
    }

    /// Drops the cached token if it is still `value` (a 401 with an older token must not evict a newer one).
    func invalidate(_ value: String) {
        if token?.value == value { token = nil }
    }
}

extension PayPalClient {
    /// POST /v1/oauth2/token with Basic client credentials and `grant_type=client_credentials`.
    package func tokenRequest() -> ProviderRequest {
        let credentials = Data("\(configuration.clientID):\(configuration.secret)".utf8).base64EncodedString()
        var request = ProviderRequest(
            method: "POST", url: ProviderURL.build(base: configuration.baseURL, segments: ["v1", "oauth2", "token"]),
            headers: [
                ("Authorization", "Basic \(credentials)"), ("Accept", "application/json"),
                ("Content-Type", "application/x-www-form-urlencoded")
            ],
            body: ProviderURL.form([("grant_type", "client_credentials")]),
            timeout: configuration.timeout)
        // Its answer is an access token: never evidence.
        request.answerIsEvidence = false
        return request
    }

    /// Fetches a token. 401/400 (bad credentials) are permanent; timeouts and 5xx transient.
    func fetchToken() async -> ProviderOutcome<PayPalAccessToken> {
        let fetchedAt = now()
        let raw: ProviderOutcome<[UInt8]>
        do {
            raw = ProviderOutcomeClassifier.classify(try await transport.send(tokenRequest()), notFoundIsAbsence: false, now: fetchedAt)
        } catch {
            raw = ProviderOutcomeClassifier.classify(transportError: error)
        }
        switch ProviderOutcomeClassifier.parsingJSON(raw) {
        case .found(let answer):
            guard let value = answer["access_token"]?.stringValue, !value.isEmpty,
                let expiresText = answer["expires_in"]?.numberLiteral, let expiresIn = Int64(expiresText), expiresIn > 0
            else {
                return .permanent(.notSent("oauth2 token answer without access_token/expires_in"))
            }
            return .found(
                PayPalAccessToken(
                    value: value,
                    refreshAt: fetchedAt + expiresIn - PayPalAccessToken.refreshMargin(expiresIn: expiresIn)))
        // Without a token the call it was for is never sent: whatever PayPal said of the token, that call is `notSent`.
        case .notFound: return .permanent(.notSent("oauth2 token: PayPal answered 404 (the token endpoint was not found)"))
        case .transient(let t): return .transient(Transient("oauth2 token: " + t.reason, retryAfter: t.retryAfter))
        case .permanent(let failure): return .permanent(.notSent("oauth2 token: " + failure.words(for: "PayPal")))
        }
    }
}
