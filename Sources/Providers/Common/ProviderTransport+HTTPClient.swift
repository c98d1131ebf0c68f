import HTTP

/// `ProviderTransport` over either of the HTTP room's clients (libcurl or URLSession): bounded in flight, size cap,
/// transport failures mapped to `ProviderTransportError`.
public struct HTTPClientTransport: ProviderTransport {
    public let client: any HTTPSending

    public init(client: any HTTPSending) { self.client = client }

    public func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        let outgoing = HTTPClientRequest(
            method: request.method, url: request.url, headers: request.headers,
            body: request.body.isEmpty && request.method == "GET" ? nil : request.body,
            timeout: request.timeout)
        let response: HTTPClientResponse
        do {
            response = try await client.send(outgoing)
        } catch let error as HTTPClientError {
            switch error {
            case .timeout: throw ProviderTransportError.timeout
            case .connection(_, let reason): throw ProviderTransportError.connection(reason)
            case .invalidURL: throw ProviderTransportError.rejected(error.description)
            case .responseTooLarge: throw ProviderTransportError.unreadable(error.description)
            }
        }
        return ProviderResponse(
            status: response.status, headers: response.headers.pairs.map { ($0.name, $0.value) },
            body: response.body)
    }
}
