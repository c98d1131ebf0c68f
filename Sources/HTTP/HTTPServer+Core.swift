import CMicroHTTPD
import Foundation
import Synchronization

// The libmicrohttpd side of HTTPServer. Everything here runs on MHD worker threads unless noted.
//
// Per request, MHD calls the access handler several times:
//   1. headers received            (*upload_data_size == 0, *req_cls == NULL)  -> allocate RequestContext
//   2. for each piece of body      (*upload_data_size  > 0)                    -> accumulate (bounded)
//   3. body complete               (*upload_data_size == 0)                    -> call the app's handler
// After the handler returns without an answer the connection is suspended; the responder (any thread)
// stores the response and resumes the connection; MHD then calls the access handler again (size 0) and
// that call queues the response. Only MHD threads ever queue. NOTIFY_COMPLETED frees the context.
// The context's RequestStateMachine, under a Mutex, decides every step (see RequestStateMachine.swift).

/// Shared by all MHD threads of one server; passed to the C callbacks as an Unmanaged opaque pointer.
final class ServerCore: @unchecked Sendable {
    let configuration: HTTPServer.Configuration
    let handler: HTTPServer.Handler
    /// Started, not yet completed requests (what shutdown drains).
    private let contexts = Mutex<[ObjectIdentifier: RequestContext]>([:])
    /// Set when the drain timed out: unanswered requests get 503 instead of waiting.
    private let forcing = Atomic<Bool>(false)
    /// The +1 reference the C side holds while the daemon runs.
    private var unmanagedSelf: Unmanaged<ServerCore>?
    /// Cuts off connections past `requestTimeout` (nil without one).
    let deadlines: DeadlineWatchdog?
    /// Bodies held in memory, all connections together (used only with `maxBodyBuffer`).
    let budget: Mutex<BodyBudget>
    let hasBudget: Bool
    /// Connections per address, when some addresses are exempt (else MHD's own per-IP limit counts them).
    let perAddress: Mutex<ConnectionsPerAddress>
    let countsPerAddress: Bool

    /// Body bytes kept when the body is too large.
    static let tooLargePrefix = 64 * 1024

    init(configuration: HTTPServer.Configuration, handler: @escaping HTTPServer.Handler) {
        self.configuration = configuration
        self.handler = handler
        deadlines = configuration.requestTimeout.map { DeadlineWatchdog(timeout: $0, onCut: configuration.onRequestTimeout) }
        budget = Mutex(BodyBudget(limit: configuration.maxBodyBuffer ?? Int.max, connections: configuration.connectionLimit))
        hasBudget = configuration.maxBodyBuffer != nil
        perAddress = Mutex(
            ConnectionsPerAddress(limit: configuration.connectionLimitPerIP, exempt: configuration.connectionLimitPerIPExempt))
        countsPerAddress = configuration.connectionLimitPerIP > 0 && !configuration.connectionLimitPerIPExempt.isEmpty
    }

    var activeRequests: Int { contexts.withLock { $0.count } }

    // MARK: Daemon lifecycle (caller's thread)

    func startDaemon(listenFD: Int32) -> DaemonHandle? {
        let retained = Unmanaged.passRetained(self)
        let cls = retained.toOpaque()
        let pollFlag =
            MHD_is_feature_supported(.FEATURE_EPOLL) == MHD_Result.YES
            ? MHD_USE_EPOLL.rawValue
            : MHD_is_feature_supported(.FEATURE_POLL) == MHD_Result.YES ? MHD_USE_POLL.rawValue : 0
        var flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | pollFlag | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_ITC.rawValue
        if configuration.errorLog != nil { flags |= MHD_USE_ERROR_LOG.rawValue }

        // MHD_start_daemon is variadic (not callable from Swift); its va_list twin is. Each option is read
        // back with va_arg as: option (int), then its value in the type the header documents.
        var options: [CVarArg] = []
        if configuration.errorLog != nil {  // first, so MHD logs nothing through its default logger
            options += [option(.EXTERNAL_LOGGER), unsafeBitCast(errorLogger, to: OpaquePointer.self), OpaquePointer(cls)]
        }
        options += [
            option(.LISTEN_SOCKET), CInt(listenFD),
            option(.THREAD_POOL_SIZE), CUnsignedInt(max(1, configuration.threads)),
            option(.CONNECTION_TIMEOUT), CUnsignedInt(configuration.connectionTimeoutSeconds),
            option(.CONNECTION_LIMIT), CUnsignedInt(max(1, configuration.connectionLimit)),
            // With exempt addresses the accept policy below counts per address instead.
            option(.PER_IP_CONNECTION_LIMIT), CUnsignedInt(countsPerAddress ? 0 : max(0, configuration.connectionLimitPerIP)),
            option(.CONNECTION_MEMORY_LIMIT), Int(max(8 * 1024, configuration.memoryLimitPerConnection)),
            option(.NOTIFY_COMPLETED), unsafeBitCast(requestCompleted, to: OpaquePointer.self), OpaquePointer(cls)
        ]
        if deadlines != nil || countsPerAddress {
            options += [option(.NOTIFY_CONNECTION), unsafeBitCast(connectionNotified, to: OpaquePointer.self), OpaquePointer(cls)]
        }
        if deadlines != nil {
            options += [option(.URI_LOG_CALLBACK), unsafeBitCast(requestLineArrived, to: OpaquePointer.self), OpaquePointer(cls)]
        }
        options.append(option(.END))

        let policy: MHD_AcceptPolicyCallback? = countsPerAddress ? acceptPolicy : nil
        let daemon = withVaList(options) { arguments in
            MHD_start_daemon_va(flags, 0, policy, policy == nil ? nil : cls, accessHandler, cls, arguments)
        }
        guard let daemon else {
            retained.release()
            return nil
        }
        unmanagedSelf = retained
        deadlines?.start()
        return DaemonHandle(raw: daemon)
    }

    /// After MHD_stop_daemon: no callback can run any more, drop the C side's reference.
    func daemonStopped() {
        deadlines?.stop()
        unmanagedSelf?.release()
        unmanagedSelf = nil
    }

    /// Drain timed out: answer every request still waiting (503) so none stays suspended.
    func forceAnswerAll() {
        forcing.store(true, ordering: .sequentiallyConsistent)
        let waiting = contexts.withLock { Array($0.values) }
        for context in waiting { context.respond(Self.drainResponse) }
    }

    static var drainResponse: HTTPResponse {
        .error(status: 503, code: "shutting_down", message: "the server is shutting down", headers: [("Connection", "close")])
    }

    // MARK: Access handler (MHD thread)

    func handleAccess(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>,
        slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        // Call 1: headers are in. Allocate the context; MHD hands it back on every later call.
        guard let raw = slot.pointee else {
            return beginRequest(connection: connection, url: url, method: method, slot: slot)
        }
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()

        // Call 2..n: a piece of body. We always consume all of it.
        let size = uploadDataSize.pointee
        if size > 0 {
            uploadDataSize.pointee = 0
            let piece = UnsafeRawBufferPointer(start: uploadData, count: size)
            if context.bodyOverBudget && !context.handlerCalled {
                // Refused by the budget at its headers: dropped as it comes; answered at the final call.
                context.discarded += size
                return context.discarded > discardLimit ? MHD_Result.NO : MHD_Result.YES
            }
            if !context.handlerCalled {
                if context.body.count + size <= configuration.maxBodyBytes {
                    if hasBudget, !budget.withLock({ $0.take(size, for: &context.share) }) {
                        // Past the body budget: nothing of it is kept; the handler answers 503 now and the rest is
                        // read and dropped, as for a body too large.
                        context.body = []
                        context.bodyOverBudget = true
                        releaseShare(context)
                        return dispatch(context, inUpload: true)
                    }
                    context.body.append(contentsOf: piece)
                    return MHD_Result.YES
                }
                // Too large as received (chunked, or more than Content-Length allowed): keep a prefix and
                // call the handler now. MHD refuses a response during an upload call, so the answer is queued
                // at the final call; the rest is read and discarded, up to a bound.
                let room = max(0, Self.tooLargePrefix - context.body.count)
                context.body.append(contentsOf: piece.prefix(room))
                if context.body.count > Self.tooLargePrefix { context.body.removeLast(context.body.count - Self.tooLargePrefix) }
                context.bodyTooLarge = true
                releaseShare(context)  // the prefix kept is bounded (64 KiB); the rest is dropped as it comes
                return dispatch(context, inUpload: true)
            }
            context.discarded += size
            // A client that keeps streaming after the limit is cut off rather than read forever.
            if context.discarded > discardLimit { return MHD_Result.NO }
            return settle(context, inUpload: true)
        }

        // Final call: the body is complete.
        if !context.handlerCalled { return dispatch(context, inUpload: false) }
        return settle(context, inUpload: false)
    }

    /// Sets up a request whose headers are in: its context in `slot`, and what its declared length calls for.
    private func beginRequest(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let context = RequestContext(
            core: self, connection: connection,
            method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/")
        contexts.withLock { $0[ObjectIdentifier(context)] = context }
        slot.pointee = Unmanaged.passRetained(context).toOpaque()  // released in requestCompleted
        if let length = contentLength(connection) {
            if length > discardLimit {
                // Far too large by declaration: answer before reading any of it (MHD then closes).
                context.bodyTooLarge = true
                return dispatch(context, inUpload: false)
            }
            if hasBudget, length <= configuration.maxBodyBytes, !budget.withLock({ $0.fits(length) }) {
                // The body budget has no room for what it declares: none of it is kept; it is read and dropped
                // (up to the discard bound) and answered 503 when complete, so the sender, or a proxy in front,
                // reads the answer rather than a reset.
                context.bodyOverBudget = true
                return MHD_Result.YES
            }
            // Over the limit but within what we read and drop: read it (keeping a prefix), then answer 413,
            // so a sender that does not wait for 100-continue reads the answer instead of a broken pipe.
            // At most 64 KiB ahead of the bytes: a declared length is only a claim, and a sender that declares the
            // limit on every connection and sends nothing must not make us set aside the limit for each.
            context.body.reserveCapacity(min(length, configuration.maxBodyBytes, Self.tooLargePrefix))
        }
        return MHD_Result.YES
    }

    /// What the request's body held of the budget is free again (its body was dropped, or the request ended).
    private func releaseShare(_ context: RequestContext) {
        guard hasBudget, context.share.bytes > 0 else { return }
        budget.withLock { $0.release(context.share) }
        context.share = BodyBudget.Share()
    }

    /// How much body we read and drop after the limit before closing the connection.
    private var discardLimit: Int { max(configuration.maxBodyBytes, 1_048_576) * 4 }

    /// Calls the application's handler, then settles.
    private func dispatch(_ context: RequestContext, inUpload: Bool) -> MHD_Result {
        context.handlerCalled = true
        let request = context.makeRequest()
        context.body = []  // the request owns the bytes now
        context.machine.withLock { $0.dispatch() }
        invokeHandler(request, context)
        return settle(context, inUpload: inUpload)
    }

    /// Separate frame so our responder reference is gone before settling (a responder the app dropped
    /// without answering has answered 500 by then).
    @inline(never)
    private func invokeHandler(_ request: HTTPRequest, _ context: RequestContext) {
        handler(request, HTTPResponder(context: context))
    }

    /// Queue the answer if there is one, else suspend until the responder resumes us.
    private func settle(_ context: RequestContext, inUpload: Bool) -> MHD_Result {
        let draining = forcing.load(ordering: .sequentiallyConsistent)
        let action = context.machine.withLock { machine in
            let action = machine.settle(inUpload: inUpload, draining: draining, drainResponse: Self.drainResponse)
            // Under the lock: a responder must not see `.suspended` before the connection really is.
            if action == .suspend { MHD_suspend_connection(context.connection.raw) }
            return action
        }
        if case .queue(let response) = action { return queue(response, on: context.connection.raw) }
        return MHD_Result.YES
    }

    /// The declared Content-Length, if any (MHD rejects malformed ones itself).
    private func contentLength(_ connection: OpaquePointer) -> Int? {
        guard let value = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length") else { return nil }
        return Int(String(cString: value).trimmingCharacters(in: .whitespaces))
    }

    // MARK: Completion (MHD thread)

    func completed(_ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let raw = slot.pointee else { return }  // the access handler never ran for this request
        slot.pointee = nil
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        context.machine.withLock { $0.close() }
        releaseShare(context)
        _ = contexts.withLock { $0.removeValue(forKey: ObjectIdentifier(context)) }
    }

    private func option(_ option: MHD_OPTION) -> CInt { CInt(bitPattern: option.rawValue) }
}

/// Builds an MHD response from ours and queues it (MHD thread, inside the access handler).
private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
    let created: OpaquePointer? = response.body.withUnsafeBytes { bytes in
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            return MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
        }
        return MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: base), .RESPMEM_MUST_COPY)
    }
    guard let mhdResponse = created else { return MHD_Result.NO }
    defer { MHD_destroy_response(mhdResponse) }
    for (name, value) in response.headers {
        let lower = name.lowercased()
        if lower == "content-length" || lower == "transfer-encoding" { continue }  // MHD owns framing
        _ = MHD_add_response_header(mhdResponse, name, value)  // MHD_Result.NO for invalid names/values: dropped
    }
    let status = UInt32(clamping: response.status < 100 || response.status > 999 ? 500 : response.status)
    return MHD_queue_response(connection, status, mhdResponse)
}

/// One request's state. Fields marked "MHD thread" are only touched by the MHD thread serving the
/// connection (MHD never runs one connection on two threads at once); `machine` is shared with responders.
final class RequestContext: @unchecked Sendable {
    let core: ServerCore
    let connection: ConnectionHandle
    let method: String
    let path: String
    let machine = Mutex(RequestStateMachine())

    // MHD thread only.
    var body: [UInt8] = []
    var bodyTooLarge = false
    var handlerCalled = false
    var discarded = 0
    var bodyOverBudget = false
    /// What the body holds of the server's body budget, released when the request completes.
    var share = BodyBudget.Share()

    init(core: ServerCore, connection: OpaquePointer, method: String, path: String) {
        self.core = core
        self.connection = ConnectionHandle(raw: connection)
        self.method = method
        self.path = path
    }

    /// MHD thread: the request as the application sees it.
    func makeRequest() -> HTTPRequest {
        let connection = self.connection.raw
        var collected = KeyValues()
        withUnsafeMutablePointer(to: &collected) { pointer in
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, collectKeyValue, pointer)
            pointer.pointee.kind = 1
            _ = MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, collectKeyValue, pointer)
        }
        var query: [String: String] = [:]
        for (key, value) in collected.query where query[key] == nil { query[key] = value }
        let remote = payrecon_mhd_client_address(connection).flatMap { ListenSocket.describe($0) }
        var request = HTTPRequest(
            method: method, path: path, query: query, headers: HTTPHeaders(collected.headers),
            body: body, bodyTooLarge: bodyTooLarge, remoteAddress: remote)
        request.bodyOverBudget = bodyOverBudget
        return request
    }

    /// Any thread (via HTTPResponder or the shutdown sweep).
    func respond(_ response: HTTPResponse) {
        machine.withLock { machine in
            // Resume under the lock: shutdown's sweep then never finds an answered-but-suspended connection
            // (MHD_stop_daemon must not see one), and MHD_resume_connection is safe from any thread.
            if machine.respond(response) == .resume { MHD_resume_connection(connection.raw) }
        }
    }
}

/// An `MHD_Connection *`; only used while MHD guarantees it is alive (before NOTIFY_COMPLETED).
struct ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// Scratch for MHD_get_connection_values_n.
private struct KeyValues {
    var kind = 0  // 0: headers, 1: query
    var headers: [(String, String)] = []
    var query: [(String, String)] = []
}

// MARK: C callbacks (no captures; the context arrives as an opaque pointer)

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadDataSize, slot in
    guard let cls, let connection, let uploadDataSize, let slot else { return MHD_Result.NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    return core.handleAccess(
        connection: connection, url: url, method: method, uploadData: uploadData, uploadDataSize: uploadDataSize, slot: slot)
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, slot, _ in
    guard let cls, let slot else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    core.completed(slot)
    if let connection { core.deadlines?.requestCompleted(connection) }
}

/// MHD_OPTION_URI_LOG_CALLBACK: a request's line has arrived. What it returns becomes the request's initial context
/// slot, so nil: the access handler sees its first call as before.
private let requestLineArrived:
    @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
        cls, _, connection in
        if let cls, let connection { Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().deadlines?.requestStarted(connection) }
        return nil
    }

private let connectionNotified: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    switch code {
    case .CONNECTION_NOTIFY_STARTED:
        core.deadlines?.opened(connection)
        if core.countsPerAddress, let address = payrecon_mhd_client_address(connection).flatMap({ ListenSocket.describe($0) }) {
            core.perAddress.withLock { $0.opened(UInt(bitPattern: connection), address: address) }
        }
    case .CONNECTION_NOTIFY_CLOSED:
        core.deadlines?.closed(connection)
        if core.countsPerAddress { core.perAddress.withLock { $0.closed(UInt(bitPattern: connection)) } }
    default: break
    }
}

/// MHD's accept policy: with exempt addresses configured, the per-address limit is counted here.
private let acceptPolicy: MHD_AcceptPolicyCallback = { cls, address, _ in
    guard let cls, let address, let text = ListenSocket.describe(address) else { return MHD_Result.YES }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    return core.perAddress.withLock { $0.admit(text) } ? MHD_Result.YES : MHD_Result.NO
}

private let collectKeyValue: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
    guard let cls else { return MHD_Result.NO }
    let target = cls.assumingMemoryBound(to: KeyValues.self)
    func text(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
        guard let pointer else { return "" }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }
    }
    let pair = (text(key, keySize), text(value, valueSize))
    if target.pointee.kind == 0 { target.pointee.headers.append(pair) } else { target.pointee.query.append(pair) }
    return MHD_Result.YES
}

private let errorLogger: MHD_LogCallback = { cls, format, arguments in
    guard let cls, let format, let arguments else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    var buffer = [CChar](repeating: 0, count: 512)
    _ = vsnprintf(&buffer, buffer.count, format, arguments)
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    core.configuration.errorLog?(line)
}
