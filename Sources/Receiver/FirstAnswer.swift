import Foundation
import Synchronization

/// The first of a delivery's two racing answers wins: the commit's, or the deadline's 503. The deadline's answer is
/// kept only until one of them wins, so what it captured is released as soon as the commit ends.
final class FirstAnswer: Sendable {
    private struct State { var answered = false; var deadline: (@Sendable () -> Void)? }
    private let state: Mutex<State>
    init(deadline: @escaping @Sendable () -> Void) { state = Mutex(State(deadline: deadline)) }

    /// The deadline passed: its answer goes out unless the commit's did.
    func deadlinePassed() {
        let answer = state.withLock { s -> (@Sendable () -> Void)? in
            defer { s.answered = true; s.deadline = nil }
            return s.answered ? nil : s.deadline
        }
        answer?()
    }

    /// The commit ended: whether its answer is the one to send.
    func commitEnded() -> Bool {
        state.withLock { s in
            defer { s.answered = true; s.deadline = nil }
            return !s.answered
        }
    }
}
