/// A request for `URLSessionHTTPClient.send`.
public struct HTTPClientRequest: Sendable {
    public var method: String
    /// Absolute `http` or `https` URL.
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?
    /// Overrides the client's `timeout` for this request (whole request: connect, send, receive).
    public var timeout: Duration?

    public init(
        method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response from `URLSessionHTTPClient.send` (any status; only transport failures throw).
public struct HTTPClientResponse: Sendable {
    public var status: Int
    /// Header lookup is case-insensitive: `response.headers["retry-after"]`.
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body decoded as UTF-8 (lossy).
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Transport failures. HTTP error statuses are not errors: they come back as responses.
public enum HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No complete answer within the timeout.
    case timeout(String)
    /// Could not connect, or the connection failed (refused, reset, DNS, TLS...). (url, reason)
    case connection(String, String)
    /// The URL is not an absolute http(s) URL.
    case invalidURL(String)
    /// The response body exceeded the client's `maxResponseBytes`. (url, limit)
    case responseTooLarge(String, Int)

    public var description: String {
        switch self {
        case .timeout(let url): "timeout: \(url)"
        case .connection(let url, let reason): "connection failed: \(url): \(reason)"
        case .invalidURL(let url): "invalid URL: \(url)"
        case .responseTooLarge(let url, let limit): "response larger than \(limit) bytes: \(url)"
        }
    }

    /// Worth retrying (the request may not have reached the server, or the server was slow).
    public var isTransient: Bool {
        switch self {
        case .timeout, .connection: true
        case .invalidURL, .responseTooLarge: false
        }
    }
}
