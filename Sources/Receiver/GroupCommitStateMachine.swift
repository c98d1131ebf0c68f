/// The receiver's group-commit policy as a value type (postgres-nio style: events in, actions out).
///
/// Deliveries arrive on many HTTP threads. While a commit is in flight, new ones wait; when a commit finishes, all
/// that waited go together in the next transaction (up to `maxBatch`). Batches grow with the load and shrink to one
/// when idle, so a lone delivery is never delayed and a busy receiver pays one fsync for many deliveries.
struct GroupCommitStateMachine<Item> {
    enum Action {
        case none
        /// Commit these items now, on a free connection.
        case flush([Item])
    }

    let maxBatch: Int
    let maxInFlight: Int
    let maxQueued: Int
    private(set) var queued: [Item] = []
    private(set) var inFlight = 0
    private(set) var closed = false

    init(maxBatch: Int, maxInFlight: Int, maxQueued: Int) {
        precondition(maxBatch > 0 && maxInFlight > 0 && maxQueued >= maxBatch)
        self.maxBatch = maxBatch; self.maxInFlight = maxInFlight; self.maxQueued = maxQueued
    }

    enum EnqueueResult {
        case accepted(Action)
        /// The queue is full (the database is slower than the traffic) or the batcher is closed: answer 503.
        case rejected
    }

    mutating func enqueue(_ item: Item) -> EnqueueResult {
        guard !closed, queued.count < maxQueued else { return .rejected }
        queued.append(item)
        return .accepted(nextFlush())
    }

    /// A commit finished (successfully or not); start the next if anything waits.
    mutating func flushCompleted() -> Action {
        precondition(inFlight > 0, "flushCompleted without a flush in flight")
        inFlight -= 1
        return nextFlush()
    }

    /// Stop taking new items; what is queued still flushes.
    mutating func close() { closed = true }

    var isIdle: Bool { queued.isEmpty && inFlight == 0 }

    private mutating func nextFlush() -> Action {
        guard inFlight < maxInFlight, !queued.isEmpty else { return .none }
        let n = min(maxBatch, queued.count)
        let batch = Array(queued.prefix(n))
        queued.removeFirst(n)
        inFlight += 1
        return .flush(batch)
    }
}
