import Synchronization

/// Answers one request, once, from any thread.
///
/// Later calls are ignored. A responder released without having answered answers 500, so a forgotten
/// path in the application cannot leave a connection suspended forever.
public final class HTTPResponder: Sendable {
    private let context: RequestContext
    private let answered = Atomic<Bool>(false)

    init(context: RequestContext) {
        self.context = context
    }

    /// Sends `response`. Only the first call counts.
    public func respond(_ response: HTTPResponse) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        context.respond(response)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            context.respond(.error(status: 500, code: "internal_error", message: "the request was not answered"))
        }
    }
}
