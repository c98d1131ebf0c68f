import Foundation
import Observability
import Store
import Synchronization

/// Executes the group-commit state machine: keeps up to `maxInFlight` transactions going on their own threads and
/// calls each delivery's completion after its transaction committed (or failed).
final class GroupCommitter: Sendable {
    enum Outcome: Sendable {
        case stored(StoredDelivery)
        /// Not stored: the database is unreachable (`databaseDown`) or refused the write, or the queue was full;
        /// answer 503.
        case unavailable(String, databaseDown: Bool = false)
    }

    /// A delivery and what to call once its transaction ended. (Rejections never come here: they travel in the
    /// `RejectionLane`, so a flood of them cannot make a delivery wait.)
    struct Item: Sendable {
        var delivery: NewDelivery
        var completion: @Sendable (Outcome) -> Void
    }

    private let machine: Mutex<GroupCommitStateMachine<Item>>
    private let storage: any ReceiverStorage
    /// One thread per transaction that may be in flight, round robin: never GCD's shared pool (DedicatedThread).
    private let threads: [DedicatedThread]
    private let nextThread = Atomic<Int>(0)
    private let batchSize = Metrics.shared.histogram(
        "payrecon_commit_batch_size", help: "Deliveries per group commit.",
        buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])

    private let logger: Logger

    init(storage: any ReceiverStorage, maxBatch: Int = 256, maxInFlight: Int = 1, maxQueued: Int = 8192, logger: Logger) {
        self.storage = storage
        self.logger = logger
        self.machine = Mutex(GroupCommitStateMachine(maxBatch: maxBatch, maxInFlight: maxInFlight, maxQueued: maxQueued))
        self.threads = (0..<max(1, maxInFlight)).map { DedicatedThread(name: "group-commit-\($0)") }
        batchSize.initialise()  // at 0 from the start: the first commits show in rate()
    }

    /// Stores `delivery`; `completion` runs on a committer thread once the outcome is known.
    func store(_ delivery: NewDelivery, completion: @escaping @Sendable (Outcome) -> Void) {
        switch machine.withLock({ $0.enqueue(Item(delivery: delivery, completion: completion)) }) {
        case .rejected: completion(.unavailable("the receiver's commit queue is full or closing"))  // not the database's doing
        case .accepted(let action): run(action)
        }
    }

    /// Stops taking new items and waits until everything queued has been committed or failed; then lets the
    /// committer threads end.
    func drain(timeout: DispatchTime) -> Bool {
        machine.withLock { $0.close() }
        defer { threads.forEach { $0.stop() } }
        while true {
            if machine.withLock({ $0.isIdle }) { return true }
            if DispatchTime.now() >= timeout { return false }
            usleep(2_000)
        }
    }

    private func run(_ action: GroupCommitStateMachine<Item>.Action) {
        guard case .flush(let batch) = action else { return }
        let thread = threads[nextThread.wrappingAdd(1, ordering: .relaxed).oldValue % threads.count]
        thread.async { [self] in
            flush(batch)
            run(machine.withLock { $0.flushCompleted() })
        }
    }

    private func flush(_ batch: [Item]) {
        let deliveries = batch.map(\.delivery), completions = batch.map(\.completion)
        batchSize.observe(seconds: Double(batch.count))
        do {
            let stored = try storage.commit(deliveries)
            for (c, s) in zip(completions, stored) { c(.stored(s)) }
        } catch  where !storage.isUnavailable(error) && batch.count > 1 {
            // One bad item must not fail its neighbours: commit each alone, so only the culprit is refused.
            logger.warning("group commit failed; retrying items one by one", ["error": String(describing: error), "items": batch.count])
            for item in batch { flush([item]) }
        } catch {
            logger.error("could not store deliveries", ["error": String(describing: error), "deliveries": deliveries.count])
            let down = storage.isUnavailable(error)
            for c in completions { c(.unavailable(String(describing: error), databaseDown: down)) }
        }
    }
}
