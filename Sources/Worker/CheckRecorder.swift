import Postgres
import Reconciliation
import Store
import Synchronization

/// Records checks in groups, as the receiver commits deliveries: every check waiting when a connection is free goes
/// into one transaction (two round trips and one commit for the group, `PlannedCheck.record(_:on:)`). A check with
/// nothing ahead of it is recorded at once, alone; under load the groups grow by themselves while the one before
/// commits.
///
/// At most `flushers` connections record at a time, each draining what waits. No group holds two checks of one order
/// (the second waits for the next group: it must plan from what the first wrote). A group that fails is recorded
/// again one check at a time, so one bad check fails only itself.
final class CheckRecorder: Sendable {
    typealias Recorded = (outcome: CheckOutcome, plan: Plan)?

    private struct Waiting {
        var check: PlannedCheck
        var continuation: CheckedContinuation<Result<Recorded, any Error>, Never>
    }

    /// What waits, and how many flushers run: a pure value, so taking a group is testable without a database.
    struct Queue<Item> {
        private(set) var waiting: [(keys: [String], item: Item)] = []
        private(set) var flushers = 0
        let maxFlushers: Int
        let maxGroup: Int

        init(maxFlushers: Int, maxGroup: Int) { self.maxFlushers = max(1, maxFlushers); self.maxGroup = max(1, maxGroup) }

        /// Adds an item; true when the caller is to start a flusher for it.
        mutating func add(_ item: Item, key: String) -> Bool { add(item, keys: [key]) }

        /// Adds an item under every lock it takes (a check of an order also takes its transactions' unknown-order keys).
        mutating func add(_ item: Item, keys: [String]) -> Bool {
            waiting.append((keys, item))
            guard flushers < maxFlushers else { return false }
            flushers += 1
            return true
        }

        /// The next group, oldest first, no two items sharing a key (a later one keeps its place for the next group): an
        /// unknown transaction's check and the check of an order that now holds it are never recorded together, since
        /// one would resolve what the other writes, unseen by what each decided from. Empty when nothing waits: the
        /// flusher asking then stops.
        mutating func takeGroup() -> [Item] {
            var keys = Set<String>()
            var group: [Item] = []
            var kept: [(keys: [String], item: Item)] = []
            for entry in waiting {
                if group.count < maxGroup, keys.isDisjoint(with: entry.keys) {
                    keys.formUnion(entry.keys)
                    group.append(entry.item)
                } else {
                    kept.append(entry)
                }
            }
            waiting = kept
            if group.isEmpty { flushers -= 1 }
            return group
        }

        /// Puts a group back ahead of everything, in its order (its connection broke before it was recorded).
        mutating func requeueFront(_ entries: [(keys: [String], item: Item)]) { waiting.insert(contentsOf: entries, at: 0) }

        /// A flusher that could not get a working connection stops. The last one takes everything waiting, to fail
        /// it; while another runs, what waits is left for that one to record.
        mutating func stopWithoutConnection() -> [Item] {
            flushers -= 1
            guard flushers == 0 else { return [] }
            defer { waiting = [] }
            return waiting.map(\.item)
        }
    }

    private let queue: Mutex<Queue<Waiting>>
    private let pool: PostgresPool
    private let groups = Atomic<Int>(0)

    /// Groups recorded in one transaction so far (a group that failed and was recorded check by check is not one).
    var groupsRecorded: Int { groups.load(ordering: .relaxed) }
    /// Checks waiting for a flusher to take them.
    var waitingCount: Int { queue.withLock { $0.waiting.count } }

    init(pool: PostgresPool, flushers: Int = 2, maxGroup: Int = 64) {
        self.pool = pool
        queue = Mutex(Queue(maxFlushers: flushers, maxGroup: maxGroup))
    }

    func record(_ check: PlannedCheck) async throws -> Recorded { try await record { check } }

    /// Records the check `make` builds. Built inside the enqueueing, so the check (640 bytes, and more for what
    /// building it makes) is never in the async frame of a check waiting for its group (see `OrderChecker.makeCheck`).
    func record(building make: () -> PlannedCheck) async throws -> Recorded {
        try await withCheckedContinuation { enqueue(make, $0) }.get()
    }

    /// Not inlined into `record`, so its temporaries (the waiting entry, the lock keys) are not in that frame either.
    @inline(never)
    private func enqueue(_ make: () -> PlannedCheck, _ continuation: CheckedContinuation<Result<Recorded, any Error>, Never>) {
        let check = make()
        let start = queue.withLock { $0.add(Waiting(check: check, continuation: continuation), keys: check.check.lockKeys) }
        if start { Task { await self.flush() } }
    }

    /// One flusher: a pooled connection, held while groups keep coming. A connection that breaks is dropped (the pool
    /// discards it) with what it held put back, and the flusher goes on with a fresh one: a broken connection must not
    /// fail every check that waits. After three tries without a working connection, what waits fails with why
    /// (unless another flusher runs); the next check starts a flusher again.
    private func flush() async {
        var tries = 0
        while true {
            do {
                try await pool.run { conn in try self.drain(conn) }
                return
            } catch {
                tries += 1
                if tries < 3, Self.isBroken(error) { continue }
                for waiting in queue.withLock({ $0.stopWithoutConnection() }) { waiting.continuation.resume(returning: .failure(error)) }
                return
            }
        }
    }

    static func isBroken(_ error: any Error) -> Bool { (error as? PostgresError)?.isConnectionFailure ?? false }

    /// Records groups until none waits. Throws (having put back what was not recorded) when the connection broke.
    private func drain(_ conn: PostgresConnection) throws {
        while true {
            let group = queue.withLock { $0.takeGroup() }
            if group.isEmpty { return }
            do {
                let recorded = try PlannedCheck.record(group.map(\.check), on: conn)
                groups.add(1, ordering: .relaxed)
                for (waiting, result) in zip(group, recorded) { waiting.continuation.resume(returning: .success(result)) }
            } catch  where Self.isBroken(error) {
                queue.withLock { $0.requeueFront(group.map { ($0.check.check.lockKeys, $0) }) }
                throw error
            } catch {
                // One check can fail the group (a statement error): each is recorded alone, so only that one fails.
                for (i, waiting) in group.enumerated() {
                    do {
                        guard group.count > 1 else { throw error }
                        waiting.continuation.resume(returning: .success(try PlannedCheck.record([waiting.check], on: conn)[0]))
                    } catch  where Self.isBroken(error) {
                        queue.withLock { $0.requeueFront(group[i...].map { ($0.check.check.lockKeys, $0) }) }
                        throw error
                    } catch {
                        waiting.continuation.resume(returning: .failure(error))
                    }
                }
            }
        }
    }
}
