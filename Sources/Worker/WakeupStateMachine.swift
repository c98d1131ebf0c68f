/// The worker's wake-up as a value: `Wakeup` executes the actions it returns, so every transition is a plain unit
/// test (no threads, no sleeps).
///
/// A wait ends when it is signalled, when the wake-up is stopped, or when *its own* deadline passes. Each wait has a
/// number; a timer that fires for a wait that has already ended (or for an older wait) does nothing, and a timer
/// is never a signal: it cannot make the next wait return early. (The old wake-up let a cancelled timer call
/// `signal()`, so every wait after the first one returned at once and an idle worker polled ~1,700 times a second.)
struct WakeupStateMachine: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// No one waits; `signalled` remembers a signal for the next wait.
        case idle(signalled: Bool)
        /// Wait number `id` is suspended.
        case waiting(id: UInt64)
        case stopped
    }

    enum WaitAction: Sendable, Equatable {
        /// Return at once (a signal came before the wait, or the wake-up is stopped).
        case returnNow
        /// Suspend, and arm a timer for wait `id`.
        case suspend(id: UInt64)
    }

    enum ResumeAction: Sendable, Equatable {
        /// Resume the suspended wait `id`.
        case resume(id: UInt64)
        case none
    }

    private(set) var state: State = .idle(signalled: false)
    private var nextID: UInt64 = 0

    /// A wait begins.
    mutating func beginWait() -> WaitAction {
        switch state {
        case .stopped:
            return .returnNow
        case .idle(signalled: true):
            state = .idle(signalled: false)
            return .returnNow
        case .idle(signalled: false):
            nextID &+= 1
            state = .waiting(id: nextID)
            return .suspend(id: nextID)
        case .waiting:
            // One waiter at a time (the worker's loop); a second one is a programming error.
            preconditionFailure("Wakeup.wait called while another wait is suspended")
        }
    }

    /// Work may be there (a notification, a reconnect): wake the current wait, or the next one.
    mutating func signal() -> ResumeAction {
        switch state {
        case .stopped:
            return .none
        case .idle:
            state = .idle(signalled: true)
            return .none
        case .waiting(let id):
            state = .idle(signalled: false)
            return .resume(id: id)
        }
    }

    /// The deadline of wait `id` passed. Only that wait, if it is still suspended, is resumed; nothing is remembered.
    mutating func timerFired(id: UInt64) -> ResumeAction {
        guard case .waiting(let current) = state, current == id else { return .none }
        state = .idle(signalled: false)
        return .resume(id: id)
    }

    /// Every wait from now on returns at once; a suspended one is resumed.
    mutating func stop() -> ResumeAction {
        let action: ResumeAction
        if case .waiting(let id) = state { action = .resume(id: id) } else { action = .none }
        state = .stopped
        return action
    }

    var isStopped: Bool { state == .stopped }
}
