import CivilTime
import CCurl
import Synchronization

/// One request on its way through a `CurlLoop`: the easy handle's settings, the response as it arrives, and the
/// continuation to resume.
///
/// `phase` settles the race between starting and cancelling; after `start` submits it, every other field is
/// touched on the loop thread only (curl calls the callbacks there), and the loop resumes the continuation once.
final class CurlTransfer: @unchecked Sendable {
    private enum Phase {
        case idle, cancelled, submitted
    }

    let request: HTTPClientRequest
    let timeoutMilliseconds: Int
    let limit: Int
    private let phase = Mutex(Phase.idle)

    // Loop thread only, once submitted.
    private var continuation: CheckedContinuation<HTTPClientResponse, any Error>?
    var easy: CurlEasy?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var headers = HTTPHeaders()
    private var body: [UInt8] = []
    /// Set by a callback (size cap) before it aborts the transfer; wins over curl's error code.
    private var failure: HTTPClientError?

    init(request: HTTPClientRequest, timeout: Duration, limit: Int) {
        self.request = request
        self.timeoutMilliseconds = Int(max(1, (timeout.inSeconds * 1000).rounded(.up)).clamped(to: 1...Double(Int32.max)))
        self.limit = limit
    }

    var url: String { request.url }

    /// Hands the transfer to the loop, unless the task was cancelled first.
    func start(_ continuation: CheckedContinuation<HTTPClientResponse, any Error>, on loop: CurlLoop) {
        self.continuation = continuation
        let go = phase.withLock { phase -> Bool in
            guard phase != .cancelled else { return false }
            phase = .submitted
            return true
        }
        if go {
            loop.submit(.add(self))  // the queue's lock orders our writes before the loop's reads
        } else {
            self.continuation = nil
            continuation.resume(throwing: CancellationError())
        }
    }

    /// Task cancellation: before `start`, `start` fails at once; after, the loop removes the transfer.
    func cancel(on loop: CurlLoop) {
        let submitted = phase.withLock { phase -> Bool in
            if phase == .submitted { return true }
            phase = .cancelled
            return false
        }
        if submitted { loop.submit(.cancel(self)) }
    }

    /// Resumes the caller (once) and frees what the request held.
    func finish(_ result: Result<HTTPClientResponse, any Error>) {
        if let headerList {
            curl_slist_free_all(headerList)
            self.headerList = nil
        }
        continuation?.resume(with: result)
        continuation = nil
    }

    // MARK: The easy handle

    /// Options set on an easy handle, remembering whether curl refused any.
    struct Options {
        let handle: UnsafeMutableRawPointer
        var ok = true
        mutating func set(_ option: CURLoption, _ value: Int) {
            ok = ok && payrecon_curl_easy_setopt_long(handle, option, value) == CURLE_OK
        }
        mutating func set(_ option: CURLoption, _ value: String) {
            ok = ok && value.withCString { payrecon_curl_easy_setopt_pointer(handle, option, $0) } == CURLE_OK  // curl copies strings
        }
        mutating func set(_ option: CURLoption, pointer: UnsafeRawPointer?) {
            ok = ok && payrecon_curl_easy_setopt_pointer(handle, option, pointer) == CURLE_OK
        }
        mutating func set(_ option: CURLoption, size: Int) {
            ok = ok && payrecon_curl_easy_setopt_off(handle, option, curl_off_t(size)) == CURLE_OK
        }
    }

    /// Sets `easy` up for this request (it is fresh or reset); an error means the request cannot be made.
    func configure(_ easy: CurlEasy) -> HTTPClientError? {
        let handle = easy.handle
        easy.errorBuffer[0] = 0
        var options = Options(handle: handle)
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_URL, request.url)
        options.set(CURLOPT_PROTOCOLS_STR, "http,https")
        options.set(CURLOPT_FOLLOWLOCATION, 0)
        options.set(CURLOPT_ERRORBUFFER, pointer: easy.errorBuffer)
        options.set(CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
        options.set(CURLOPT_CONNECTTIMEOUT_MS, timeoutMilliseconds)
        let context = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())  // the loop's `active` holds us
        options.set(CURLOPT_WRITEDATA, pointer: context)
        options.set(CURLOPT_HEADERDATA, pointer: context)
        options.ok =
            options.ok
            && payrecon_curl_easy_setopt_write(handle, CURLOPT_WRITEFUNCTION) { buffer, size, count, context in
                guard let buffer, let context else { return 0 }
                return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
                    .receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
            } == CURLE_OK
        options.ok =
            options.ok
            && payrecon_curl_easy_setopt_write(handle, CURLOPT_HEADERFUNCTION) { buffer, size, count, context in
                guard let buffer, let context else { return 0 }
                return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
                    .receiveHeader(UnsafeRawBufferPointer(start: buffer, count: size * count))
            } == CURLE_OK
        setMethodAndBody(&options)
        setHeaders(&options)
        return options.ok ? nil : .connection(request.url, easy.errorMessage ?? "curl rejected the request settings")
    }

    /// The method, and the body when there is one (copied: binary-safe with its size).
    private func setMethodAndBody(_ options: inout Options) {
        let method = request.method.uppercased()
        switch (method, request.body) {
        case ("GET", nil), ("GET", .some([])):
            options.set(CURLOPT_HTTPGET, 1)
        case ("HEAD", _):
            options.set(CURLOPT_NOBODY, 1)
        case (_, let body?):
            options.set(CURLOPT_POSTFIELDSIZE_LARGE, size: body.count)
            if body.isEmpty {
                options.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                body.withUnsafeBytes { options.set(CURLOPT_COPYPOSTFIELDS, pointer: $0.baseAddress) }
            }
            if method != "POST" { options.set(CURLOPT_CUSTOMREQUEST, request.method) }
        case (_, nil):
            if method == "POST" {
                options.set(CURLOPT_POSTFIELDSIZE_LARGE, size: 0)
                options.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                options.set(CURLOPT_CUSTOMREQUEST, request.method)
            }
        }
    }

    /// The request's headers (CR and LF made spaces), and no `Expect: 100-continue` round trip for a body.
    private func setHeaders(_ options: inout Options) {
        var list: UnsafeMutablePointer<curl_slist>?
        var sawExpect = false
        for (name, value) in request.headers {
            let name = Self.headerSafe(name), value = Self.headerSafe(value)
            if name.lowercased() == "expect" { sawExpect = true }
            // "Name:" would tell curl to drop its own header; "Name;" sends an empty one.
            list = curl_slist_append(list, value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        if !sawExpect { list = curl_slist_append(list, "Expect:") }
        headerList = list
        options.set(CURLOPT_HTTPHEADER, pointer: list)
    }

    /// CR and LF in a header would start a new one: replaced by spaces.
    private static func headerSafe(_ text: String) -> String {
        text.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" })
            ? String(text.map { $0 == "\r" || $0 == "\n" || $0 == "\r\n" ? " " : $0 }) : text
    }

    // MARK: Callbacks (loop thread)

    /// Appends body bytes; a body over the cap aborts the transfer (returning less than given).
    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard failure == nil else { return 0 }
        if body.count + bytes.count > limit {
            failure = .responseTooLarge(request.url, limit)
            body = []
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    /// One header line (status lines start a new block: a 100 Continue's headers are dropped).
    private func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        if line.starts(with: "HTTP/".utf8) {
            headers = HTTPHeaders()
            return line.count
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return line.count }  // the blank line
        let name = Self.trimmed(line[..<colon])
        let value = Self.trimmed(line[(colon + 1)...])
        if name.lowercased() == "content-length", let declared = Int(value) {
            if declared > limit {
                failure = .responseTooLarge(request.url, limit)
                return 0
            }
            body.reserveCapacity(declared)
        }
        headers.add(name, value)
        return line.count
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    // MARK: Completion

    /// The caller's answer for a finished transfer.
    func result(of code: CURLcode, easy: CurlEasy) -> Result<HTTPClientResponse, any Error> {
        if let failure { return .failure(failure) }
        let url = request.url
        switch code {
        case CURLE_OK:
            var status = 0
            _ = payrecon_curl_easy_getinfo_long(easy.handle, CURLINFO_RESPONSE_CODE, &status)
            guard status > 0 else { return .failure(HTTPClientError.connection(url, "no HTTP response")) }
            return .success(HTTPClientResponse(status: status, headers: headers, body: body))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(HTTPClientError.timeout(url))
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .failure(HTTPClientError.invalidURL(url))
        case CURLE_COULDNT_RESOLVE_HOST:
            return .failure(HTTPClientError.connection(url, "host not found"))
        default:
            let reason = easy.errorMessage ?? String(cString: curl_easy_strerror(code))
            return .failure(HTTPClientError.connection(url, reason))
        }
    }
}

extension Comparable {
    fileprivate func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
