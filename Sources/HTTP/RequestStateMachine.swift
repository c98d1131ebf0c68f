/// The life of one request between libmicrohttpd's thread and the application's responder.
///
/// A value type: every transition returns the side effect to perform, so the races
/// (respond before/after the MHD thread suspends, respond twice, respond after close) are plain unit
/// tests. The owner (`RequestContext`) holds it in a `Mutex` and performs the effect; `.suspend` must be
/// performed while still holding the lock, so a responder can never resume a connection that is not
/// suspended yet.
package struct RequestStateMachine: Sendable {
    package enum Phase: Sendable {
        /// Receiving the body; the handler has not been called.
        case reading
        /// The handler has been called, no response yet, connection not suspended.
        case dispatched
        /// The handler has been called and the connection is suspended waiting for the responder.
        case suspended
        /// A response arrived; the MHD thread queues it on its next call (only MHD threads queue).
        case responded(HTTPResponse)
        /// A response was queued (or the request is over).
        case done
        /// libmicrohttpd finished the request (NOTIFY_COMPLETED); nothing may touch the connection.
        case closed
    }

    package private(set) var phase: Phase = .reading

    package init() {}

    /// What the MHD thread does after calling the handler (or on a later final call).
    package enum SettleAction: Equatable, Sendable {
        /// Queue this response now.
        case queue(HTTPResponse)
        /// Suspend the connection (while holding the lock) until the responder resumes it.
        case suspend
        /// Nothing now: keep reading (and discarding) the body; decide again at the final call.
        case keepReading
        /// Nothing to do (already answered).
        case none
    }

    /// What the responder does with its response.
    package enum RespondAction: Equatable, Sendable {
        /// Stored; the MHD thread will queue it (it is between calling the handler and settling).
        case stored
        /// Stored, and the connection is suspended: resume it so MHD calls us back to queue the response.
        case resume
        /// Too late or a second answer: ignored.
        case ignored
    }

    /// The handler is about to be called.
    package mutating func dispatch() {
        if case .reading = phase { phase = .dispatched }
    }

    /// The MHD thread settles the request: after the handler returned, or at a later access-handler call.
    /// - Parameters:
    ///   - inUpload: the current call carries upload data (libmicrohttpd refuses a response then).
    ///   - draining: the server is force-closing; a request still unanswered gets `drainResponse`.
    package mutating func settle(inUpload: Bool, draining: Bool, drainResponse: @autoclosure () -> HTTPResponse) -> SettleAction {
        switch phase {
        case .responded(let response):
            if inUpload { return .keepReading }
            phase = .done
            return .queue(response)
        case .dispatched:
            if inUpload { return .keepReading }
            if draining {
                phase = .done
                return .queue(drainResponse())
            }
            phase = .suspended
            return .suspend
        case .reading, .suspended, .done, .closed:
            return .none
        }
    }

    /// The responder answers (from any thread).
    package mutating func respond(_ response: HTTPResponse) -> RespondAction {
        switch phase {
        case .dispatched:
            phase = .responded(response)
            return .stored
        case .suspended:
            phase = .responded(response)
            return .resume
        case .reading, .responded, .done, .closed:
            return .ignored
        }
    }

    /// libmicrohttpd completed the request.
    package mutating func close() {
        phase = .closed
    }

    /// Whether the connection is suspended waiting for the responder.
    package var isSuspended: Bool {
        if case .suspended = phase { return true }
        return false
    }
}

extension HTTPResponse: Equatable {
    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.headers.count == rhs.headers.count
            && zip(lhs.headers, rhs.headers).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
