import CCurl
import Dispatch
import Foundation
import Synchronization

/// An async HTTP client for provider APIs over libcurl's multi interface, with the semantics of `URLSessionHTTPClient`:
/// connection reuse, a whole-request timeout, a bound on requests in flight (FIFO, cancellation-safe), a cap on
/// response size, no cookies, no cache, no automatic redirects (a 3xx comes back as a response).
///
/// One thread per client runs every transfer (`curl_multi_poll` / `curl_multi_perform`); `send` hands it the
/// request through a queue and awaits the completion. Cheaper per request than URLSession on Linux, whose
/// FoundationNetworking pays for dispatch timers and callback hops on every transfer.
public final class CurlHTTPClient: Sendable {
    /// The same knobs as `URLSessionHTTPClient`; `maxConnectionsPerHost` bounds curl's connections per host.
    public typealias Configuration = URLSessionHTTPClient.Configuration

    public let configuration: Configuration
    private let loop: CurlLoop
    private let limiter: AsyncSemaphore

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let perHost = max(1, configuration.maxConnectionsPerHost)
        self.loop = CurlLoop(
            maxConnectionsPerHost: perHost,
            maxCachedConnections: max(perHost, configuration.maxConcurrentRequests) + 8,
            maxIdleHandles: max(1, configuration.maxConcurrentRequests))
        self.limiter = AsyncSemaphore(permits: max(1, configuration.maxConcurrentRequests))
    }

    deinit {
        loop.shutdown()
    }

    /// Sends `request` and returns the response, whatever its status.
    /// - Throws: `HTTPClientError` for transport failures, `CancellationError` if the task is cancelled.
    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try Self.validate(request.url)
        try await limiter.acquire()
        defer { limiter.release() }

        let transfer = CurlTransfer(
            request: request, timeout: request.timeout ?? configuration.timeout,
            limit: configuration.maxResponseBytes)
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.start(continuation, on: loop)
            }
        } onCancel: {
            transfer.cancel(on: loop)
        }
    }

    /// `send` for callers on threads outside Swift concurrency (an MHD handler thread, a pool thread):
    /// blocks the calling thread until the answer arrives.
    ///
    /// Never call it from async code or a task: it would block one of the few cooperative threads
    /// the request itself may need, and can deadlock.
    public func sendBlocking(_ request: HTTPClientRequest) throws -> HTTPClientResponse {
        let outcome = Mutex<Result<HTTPClientResponse, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached { [self] in
            let result: Result<HTTPClientResponse, any Error>
            do { result = .success(try await send(request)) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        guard let result = outcome.withLock({ $0 }) else { throw HTTPClientError.connection(request.url, "no result") }
        return try result.get()
    }

    /// The URL rule `URLSessionHTTPClient` applies: absolute, http or https, with a host.
    static func validate(_ url: String) throws {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "http" || scheme == "https", parsed.host != nil
        else { throw HTTPClientError.invalidURL(url) }
    }
}

/// `curl_global_init`, once per process, before the first handle (Swift runs a global's initializer once).
let curlGlobalInit: Void = {
    let code = curl_global_init(payrecon_curl_global_all)
    precondition(code == CURLE_OK, "curl_global_init failed: \(code.rawValue)")
}()
