/// What the provider clients need of an HTTP client: `CurlHTTPClient` (libcurl multi, the default) and
/// `URLSessionHTTPClient` (URLSession) both offer it, with the same request, response and error types.
public protocol HTTPSending: Sendable {
    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse
    /// `send` for callers on a thread of their own (never on Swift's cooperative pool).
    func sendBlocking(_ request: HTTPClientRequest) throws -> HTTPClientResponse
}

extension URLSessionHTTPClient: HTTPSending {}
extension CurlHTTPClient: HTTPSending {}
