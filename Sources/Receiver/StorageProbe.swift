import Foundation
import Synchronization

/// Reads the store's readiness and backlog off the request path, every `interval`, on a queue of its own.
final class StorageProbe: Sendable {
    let storage: any ReceiverStorage
    let interval: Duration
    private let readyFlag = Atomic<Bool>(false)
    private let pendingValue = Atomic<Int64>(-1)
    private let migrations = Mutex<[String]?>(nil)
    private let thread = DedicatedThread(name: "storage-probe")
    private let running = Atomic<Bool>(false)

    init(storage: any ReceiverStorage, interval: Duration = .seconds(2)) { self.storage = storage; self.interval = interval }

    var ready: Bool { readyFlag.load(ordering: .relaxed) }

    /// A commit failed because the database is unreachable: not ready until the next probe says otherwise.
    func markUnavailable() { readyFlag.store(false, ordering: .relaxed) }
    var pending: Int64? { let n = pendingValue.load(ordering: .relaxed); return n < 0 ? nil : n }
    /// The migrations the database lacks, as last read (nil: not read, or the database was unreachable).
    var migrationsPending: [String]? { migrations.withLock { $0 } }

    func refresh() {
        let ready = storage.isReady()
        let lacking = ready ? storage.pendingMigrations() : nil
        migrations.withLock { $0 = lacking }
        let migrated = ready && lacking?.isEmpty != false
        readyFlag.store(migrated, ordering: .relaxed)
        pendingValue.store(migrated ? (storage.pendingCount() ?? -1) : -1, ordering: .relaxed)
    }

    /// Probes once now (before the receiver listens), then every `interval`.
    func start() {
        refresh()
        running.store(true, ordering: .releasing)
        schedule()
    }

    private func schedule() {
        thread.after(interval) { [self] in
            guard running.load(ordering: .acquiring) else { return }
            refresh()
            schedule()
        }
    }

    func stop() {
        running.store(false, ordering: .releasing)
        thread.stop()
    }
}
