/// What made a check, as its evidence records it (`evidence.source`).
public enum CheckSource: String, Sendable, Hashable, CaseIterable {
    /// A delivery the worker processed.
    case webhook
    /// The nightly sweep (`payrecon reconcile`).
    case sweep
    /// The executor's re-fetch before a call.
    case executor
    /// A command run by hand (`payrecon check`, `recheck`...), and anything outside the three above.
    case command
    /// A settlement file's import: the line that stated the money.
    case settlement

    /// How the timeline names it.
    public var words: String {
        switch self {
        case .settlement: "settlement import"
        default: rawValue + " check"
        }
    }
}
