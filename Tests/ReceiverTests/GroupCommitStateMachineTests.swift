import Testing
@testable import Receiver

/// The receiver's group-commit policy (`GroupCommitStateMachine`), event by event: each row is a sequence of events
/// with what the machine returns after each. No database: the committer that performs the flushes is tested against
/// PostgreSQL in ReceiverTests and IntegrationTests.
@Suite struct GroupCommitStateMachineTests {
    enum Event: Sendable, CustomStringConvertible {
        case enqueue(Int), flushCompleted, close
        var description: String { "\(self)" }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var maxBatch = 3, maxInFlight = 1, maxQueued = 5
        var steps: [(Event, String)]
        var idleAtEnd: Bool
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "a lone delivery is flushed at once", steps: [(.enqueue(1), "flush[1]"), (.flushCompleted, "none")], idleAtEnd: true),
        Row(
            name: "deliveries that wait while a commit is in flight go together, at most maxBatch",
            steps: [
                (.enqueue(1), "flush[1]"), (.enqueue(2), "none"), (.enqueue(3), "none"), (.enqueue(4), "none"), (.enqueue(5), "none"),
                (.flushCompleted, "flush[2, 3, 4]"), (.flushCompleted, "flush[5]"), (.flushCompleted, "none")
            ], idleAtEnd: true),
        Row(
            name: "a full queue refuses (the receiver answers 503)", maxQueued: 3,
            steps: [
                (.enqueue(1), "flush[1]"), (.enqueue(2), "none"), (.enqueue(3), "none"), (.enqueue(4), "none"), (.enqueue(5), "rejected"),
                (.flushCompleted, "flush[2, 3, 4]")
            ], idleAtEnd: false),
        Row(
            name: "two commits in flight at once", maxInFlight: 2,
            steps: [
                (.enqueue(1), "flush[1]"), (.enqueue(2), "flush[2]"), (.enqueue(3), "none"), (.flushCompleted, "flush[3]"),
                (.flushCompleted, "none"), (.flushCompleted, "none")
            ], idleAtEnd: true),
        Row(
            name: "closed: refuses new deliveries, flushes what waits",
            steps: [
                (.enqueue(1), "flush[1]"), (.enqueue(2), "none"), (.close, "closed"), (.enqueue(3), "rejected"),
                (.flushCompleted, "flush[2]"), (.flushCompleted, "none")
            ], idleAtEnd: true)
    ]

    static func describe(_ action: GroupCommitStateMachine<Int>.Action) -> String {
        switch action {
        case .none: "none"
        case .flush(let items): "flush\(items)"
        }
    }

    @Test(arguments: rows)
    func transitions(_ row: Row) {
        var m = GroupCommitStateMachine<Int>(maxBatch: row.maxBatch, maxInFlight: row.maxInFlight, maxQueued: row.maxQueued)
        for (i, (event, expected)) in row.steps.enumerated() {
            let got: String
            switch event {
            case .enqueue(let n):
                switch m.enqueue(n) {
                case .accepted(let action): got = Self.describe(action)
                case .rejected: got = "rejected"
                }
            case .flushCompleted: got = Self.describe(m.flushCompleted())
            case .close: m.close(); got = "closed"
            }
            #expect(got == expected, "step \(i + 1): \(event)")
        }
        #expect(m.isIdle == row.idleAtEnd)
    }
}
