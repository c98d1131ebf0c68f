import Synchronization

/// A counting semaphore for async code: FIFO, and a waiter whose task is cancelled leaves the queue
/// (throwing `CancellationError`) without consuming a permit.
package final class AsyncSemaphore: Sendable {
    private struct State {
        var permits: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
        /// Waiters whose cancellation ran before they could enqueue.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state: Mutex<State>

    package init(permits: Int) {
        precondition(permits > 0, "AsyncSemaphore needs at least one permit")
        state = Mutex(State(permits: permits))
    }

    /// Waits for a permit. Every successful `acquire` must be balanced by one `release`.
    package func acquire() async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        defer { _ = state.withLock { $0.cancelledEarly.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelledEarly.contains(id) { return .failure(CancellationError()) }
                    if state.permits > 0 {
                        state.permits -= 1
                        return .success(())
                    }
                    state.waiters.append((id: id, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Void, any Error>? = state.withLock { state in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    return state.waiters.remove(at: index).continuation
                }
                state.cancelledEarly.insert(id)  // not queued yet (or already granted: harmless)
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Returns a permit, handing it to the longest waiter if any.
    package func release() {
        let next: CheckedContinuation<Void, any Error>? = state.withLock { state in
            if state.waiters.isEmpty {
                state.permits += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }

    /// Permits currently free (for tests and metrics).
    package var availablePermits: Int { state.withLock { $0.permits } }
}
