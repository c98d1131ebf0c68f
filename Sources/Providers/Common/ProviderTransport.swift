// The seam between the provider clients and the HTTP room: a request/response pair and one async `send`.
// Clients depend on this protocol, so their request building, auth and outcome classification are tested with
// a scripted transport; `URLSessionHTTPClient` is adapted to it where the service wires things together.

/// One HTTP request to a provider API.
public struct ProviderRequest: Sendable, Equatable {
    public var method: String
    /// Absolute URL, already percent-encoded.
    public var url: String
    /// Header names as sent; lookups are case-insensitive (`header(_:)`).
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Per-request timeout in seconds (whole request).
    public var timeout: Duration
    /// The idempotency key as this request sends it (a header or a body field), for `payrecon explain`.
    public var idempotencyKey: String?
    /// Whether the answer may be kept as evidence (`AnswerLog`): false for an answer that holds a credential.
    public var answerIsEvidence = true

    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeout: Duration = .seconds(30)) {
        self.method = method; self.url = url; self.headers = headers; self.body = body; self.timeout = timeout
    }

    /// The first value of a header, matched case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first(where: { $0.0.lowercased() == name.lowercased() })?.1
    }

    /// The path and query of `url` as they go on the wire (`/api/v1/transactions/M/S?merchantTransactionId=X`).
    public var pathAndQuery: String { ProviderRequest.pathAndQuery(of: url) }

    static func pathAndQuery(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let afterScheme = url[schemeEnd.upperBound...]
        guard let slash = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        var target = String(afterScheme[slash...])
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        return target.hasPrefix("?") ? "/" + target : target
    }

    public static func == (lhs: ProviderRequest, rhs: ProviderRequest) -> Bool {
        lhs.method == rhs.method && lhs.url == rhs.url && lhs.body == rhs.body && lhs.timeout == rhs.timeout
            && lhs.headers.elementsEqual(rhs.headers, by: { $0.0 == $1.0 && $0.1 == $1.1 })
    }
}

/// A provider's HTTP answer.
public struct ProviderResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status; self.headers = headers; self.body = body
    }

    /// The first value of a header, matched case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first(where: { $0.0.lowercased() == name.lowercased() })?.1
    }
}

/// Transport failures a `ProviderTransport` throws: `timeout` and `connection` are transient, `rejected` is not.
public enum ProviderTransportError: Error, Sendable, Equatable {
    /// No answer within the request's timeout.
    case timeout
    /// The connection could not be made or broke (DNS, refused, reset, TLS).
    case connection(String)
    /// The request cannot be made (a bad URL): nothing was sent. Not transient.
    case rejected(String)
    /// The provider answered and the answer cannot be taken (over the size cap): the request reached it. Not transient.
    case unreadable(String)
}

/// Sends one request; throws `ProviderTransportError` when no HTTP answer arrived.
public protocol ProviderTransport: Sendable {
    func send(_ request: ProviderRequest) async throws -> ProviderResponse
}
