import CivilTime
import Dispatch
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An async HTTP client for provider APIs over URLSession: connection reuse, a whole-request timeout,
/// a bound on requests in flight (FIFO, cancellation-safe), a cap on response size, no cookies, no
/// cache, and no automatic redirects (a 3xx comes back as a response).
public final class URLSessionHTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Default whole-request timeout (a request may override it).
        public var timeout: Duration
        /// Requests in flight at once; further `send`s wait their turn.
        public var maxConcurrentRequests: Int
        /// Open connections per host (URLSession's pool).
        public var maxConnectionsPerHost: Int
        /// Larger response bodies fail with `.responseTooLarge`.
        public var maxResponseBytes: Int

        public init(
            timeout: Duration = .seconds(30), maxConcurrentRequests: Int = 64, maxConnectionsPerHost: Int = 16,
            maxResponseBytes: Int = 10 * 1024 * 1024
        ) {
            self.timeout = timeout
            self.maxConcurrentRequests = maxConcurrentRequests
            self.maxConnectionsPerHost = maxConnectionsPerHost
            self.maxResponseBytes = maxResponseBytes
        }
    }

    public let configuration: Configuration
    private let session: URLSession
    private let delegate: SessionDelegate
    private let limiter: AsyncSemaphore

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.timeoutIntervalForRequest = configuration.timeout.inSeconds
        // The whole-request deadline is ours (per request); URLSession's resource timeout must not cut it short.
        sessionConfiguration.timeoutIntervalForResource = 7 * 24 * 3600
        sessionConfiguration.httpMaximumConnectionsPerHost = max(1, configuration.maxConnectionsPerHost)
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.urlCache = nil
        sessionConfiguration.httpCookieStorage = nil
        sessionConfiguration.httpShouldSetCookies = false
        let delegate = SessionDelegate()
        let queue = OperationQueue()
        queue.name = "URLSessionHTTPClient.delegate"
        queue.maxConcurrentOperationCount = 1
        self.delegate = delegate
        self.session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: queue)
        self.limiter = AsyncSemaphore(permits: max(1, configuration.maxConcurrentRequests))
    }

    deinit {
        session.invalidateAndCancel()  // the session holds its delegate until invalidated
    }

    /// Sends `request` and returns the response, whatever its status.
    /// - Throws: `HTTPClientError` for transport failures, `CancellationError` if the task is cancelled.
    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        let urlRequest = try makeURLRequest(request)
        try await limiter.acquire()
        defer { limiter.release() }

        let timeout = request.timeout ?? configuration.timeout
        let task = session.dataTask(with: urlRequest)
        let id = task.taskIdentifier
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // The overall deadline: URLRequest.timeoutInterval is only an idle timeout.
                let deadline = DispatchWorkItem { [delegate] in
                    if delegate.fail(id, with: .timeout(request.url)) { task.cancel() }
                }
                delegate.register(
                    id, url: request.url, limit: configuration.maxResponseBytes, deadline: deadline,
                    continuation: continuation)
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout.inSeconds, execute: deadline)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// `send` for callers on threads outside Swift concurrency (an MHD handler thread, a pool thread):
    /// blocks the calling thread until the answer arrives.
    ///
    /// Never call it from async code or a task: it would block one of the few cooperative threads
    /// the request itself may need, and can deadlock.
    public func sendBlocking(_ request: HTTPClientRequest) throws -> HTTPClientResponse {
        let outcome = BlockingOutcome()
        let done = DispatchSemaphore(value: 0)
        Task.detached { [self] in
            do { outcome.set(.success(try await send(request))) } catch { outcome.set(.failure(error)) }
            done.signal()
        }
        done.wait()
        return try outcome.get()
    }

    private func makeURLRequest(_ request: HTTPClientRequest) throws -> URLRequest {
        guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host != nil
        else { throw HTTPClientError.invalidURL(request.url) }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = (request.timeout ?? configuration.timeout).inSeconds
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        for (name, value) in request.headers { urlRequest.addValue(value, forHTTPHeaderField: name) }
        if let body = request.body { urlRequest.httpBody = Data(body) }
        return urlRequest
    }
}

/// The result handed from the detached task to the blocked thread (the semaphore orders the accesses).
private final class BlockingOutcome: @unchecked Sendable {
    private let value = Mutex<Result<HTTPClientResponse, any Error>?>(nil)
    func set(_ result: Result<HTTPClientResponse, any Error>) { value.withLock { $0 = result } }
    func get() throws -> HTTPClientResponse {
        guard let result = value.withLock({ $0 }) else { throw HTTPClientError.connection("", "no result") }
        return try result.get()
    }
}

/// URLSession's delegate: collects each task's response and body (bounded) and resumes its continuation.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// DispatchWorkItem is thread-safe (cancel from any thread) but not marked Sendable.
    struct Deadline: @unchecked Sendable {
        let item: DispatchWorkItem
    }

    private struct Pending {
        let url: String
        let limit: Int
        let continuation: CheckedContinuation<HTTPClientResponse, any Error>
        /// Cancelled when the task completes, so finished requests don't linger until their deadline.
        let deadline: Deadline
        var response: HTTPURLResponse?
        var body: [UInt8] = []
        /// Set by us (timeout, size) before cancelling the task; wins over URLSession's error.
        var failure: HTTPClientError?
    }

    private let pending = Mutex<[Int: Pending]>([:])

    func register(
        _ id: Int, url: String, limit: Int, deadline: DispatchWorkItem,
        continuation: CheckedContinuation<HTTPClientResponse, any Error>
    ) {
        pending.withLock { $0[id] = Pending(url: url, limit: limit, continuation: continuation, deadline: Deadline(item: deadline)) }
    }

    /// Marks the task failed (first failure wins); true if it was still running, so the caller cancels it.
    func fail(_ id: Int, with error: HTTPClientError) -> Bool {
        pending.withLock { pending in
            guard pending[id] != nil, pending[id]?.failure == nil else { return false }
            pending[id]?.failure = error
            return true
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let id = dataTask.taskIdentifier
        let tooLarge = pending.withLock { pending -> Bool in
            guard var entry = pending[id] else { return false }
            entry.response = response as? HTTPURLResponse
            let declared = response.expectedContentLength
            if declared > entry.limit, entry.failure == nil {
                entry.failure = .responseTooLarge(entry.url, entry.limit)
            } else if declared > 0 {
                entry.body.reserveCapacity(Int(declared))
            }
            pending[id] = entry
            return entry.failure != nil
        }
        completionHandler(tooLarge ? .cancel : .allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        let overLimit = pending.withLock { pending -> Bool in
            guard var entry = pending[id], entry.failure == nil else { return false }
            if entry.body.count + data.count > entry.limit {
                entry.failure = .responseTooLarge(entry.url, entry.limit)
                entry.body = []
            } else {
                entry.body.append(contentsOf: data)
            }
            pending[id] = entry
            return entry.failure != nil
        }
        if overLimit { dataTask.cancel() }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)  // hand the 3xx back to the caller
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = pending.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        entry.deadline.item.cancel()
        if let failure = entry.failure {
            entry.continuation.resume(throwing: failure)
        } else if let error {
            entry.continuation.resume(throwing: Self.map(error, url: entry.url))
        } else if let response = entry.response {
            var headers = HTTPHeaders()
            for (name, value) in response.allHeaderFields {
                headers.add(String(describing: name), String(describing: value))
            }
            entry.continuation.resume(returning: HTTPClientResponse(status: response.statusCode, headers: headers, body: entry.body))
        } else {
            entry.continuation.resume(throwing: HTTPClientError.connection(entry.url, "no HTTP response"))
        }
    }

    private static func map(_ error: any Error, url: String) -> any Error {
        guard let urlError = error as? URLError else {
            return HTTPClientError.connection(url, String(describing: error))
        }
        switch urlError.code {
        case .timedOut: return HTTPClientError.timeout(url)
        case .cancelled: return CancellationError()  // only our onCancel cancels without a recorded failure
        case .badURL, .unsupportedURL: return HTTPClientError.invalidURL(url)
        case .cannotConnectToHost: return HTTPClientError.connection(url, "connection refused")
        case .cannotFindHost, .dnsLookupFailed: return HTTPClientError.connection(url, "host not found")
        case .networkConnectionLost: return HTTPClientError.connection(url, "connection lost")
        default: return HTTPClientError.connection(url, urlError.localizedDescription)
        }
    }
}
