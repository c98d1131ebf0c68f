/// A request as the server hands it to the application: the raw body bytes, exactly as received.
public struct HTTPRequest: Sendable {
    /// The method token as sent (`GET`, `POST`, ...).
    public var method: String
    /// The path without the query string (percent-decoded by libmicrohttpd).
    public var path: String
    /// Decoded query arguments; a key without `=` maps to "". A repeated key keeps its first value.
    public var query: [String: String]
    public var headers: HTTPHeaders
    /// The body bytes. When `bodyTooLarge` is true this is only a prefix (at most 64 KiB, possibly empty).
    public var body: [UInt8]
    /// True when the body exceeded the server's `maxBodyBytes` (by Content-Length or as received);
    /// the application should answer 413. The rest of the body is not kept.
    public var bodyTooLarge: Bool
    /// The peer's address (`"127.0.0.1"`), when known.
    public var remoteAddress: String?
    /// True when the body did not fit the server's body budget (`maxBodyBuffer`, all connections together): the body
    /// is empty and the application should answer 503 with Retry-After.
    public var bodyOverBudget: Bool = false

    public init(
        method: String, path: String, query: [String: String] = [:], headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], bodyTooLarge: Bool = false, remoteAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.remoteAddress = remoteAddress
    }
}
