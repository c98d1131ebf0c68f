import Foundation
import Receiver
import Reconciliation
import Store
import Synchronization

/// The receiver's storage in memory, for in-process receiver tests without PostgreSQL: deliveries deduplicated by
/// (provider, dedupe key) as `DeliveryStore` does, rejections kept, and a switch to make it unavailable.
public final class InMemoryReceiverStorage: ReceiverStorage {
    public struct Stored: Sendable {
        public var id: Int64
        public var delivery: NewDelivery
        public var redeliveries: Int
    }
    private struct State {
        var rows: [Stored] = []
        var rejections: [Rejection] = []
        var rejectionCounts: [RejectionCount] = []
        var rejectionWrites = 0
        var available = true
    }
    private let state = Mutex(State())
    public struct Unavailable: Error, CustomStringConvertible { public var description: String { "storage unavailable (test)" } }

    public init() {}

    public var deliveries: [Stored] { state.withLock { $0.rows } }
    public var rejections: [Rejection] { state.withLock { $0.rejections } }
    /// Rejections counted by the rejection lane (every one, sampled or not).
    public var rejectionCount: Int64 { state.withLock { $0.rejectionCounts.reduce(0) { $0 + $1.count } } }

    /// Transactions the rejection lane wrote.
    public var rejectionWrites: Int { state.withLock { $0.rejectionWrites } }

    public func recordRejections(_ counts: [RejectionCount], samples: [Rejection]) throws {
        try state.withLock { s in
            guard s.available else { throw Unavailable() }
            s.rejectionWrites += 1
            s.rejectionCounts += counts
            s.rejections += samples
        }
    }
    public func setAvailable(_ available: Bool) { state.withLock { $0.available = available } }
    /// While set, commits fail with an error that is not the database being unreachable (a write it refuses).
    public func setRefusesWrites(_ refuses: Bool) { refusing.withLock { $0 = refuses } }
    private let refusing = Mutex<Bool>(false)
    public struct Refused: Error, CustomStringConvertible { public var description: String { "write refused (test)" } }
    /// Each commit takes this long (a slow disk, a lock): for the commit deadline.
    public func setCommitDelay(_ seconds: Double) { delay.withLock { $0 = seconds } }
    private let delay = Mutex<Double>(0)
    /// While held, commits wait until `releaseCommits()` (a slow database the test controls, without timing).
    public func holdCommits() { held.withLock { $0 = true } }
    public func releaseCommits() { held.withLock { $0 = false } }
    private let held = Mutex<Bool>(false)

    public func commit(_ deliveries: [NewDelivery]) throws -> [StoredDelivery] {
        let wait = delay.withLock { $0 }
        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        while held.withLock({ $0 }) { usleep(5_000) }
        if refusing.withLock({ $0 }) { throw Refused() }
        return try state.withLock { s in
            guard s.available else { throw Unavailable() }
            return deliveries.map { d in
                // As the PostgreSQL store: a transmission id stored with another body refuses the delivery.
                if let tid = d.transmissionID,
                    s.rows.contains(where: {
                        $0.delivery.provider == d.provider && $0.delivery.transmissionID == tid && $0.delivery.body != d.body
                    })
                {
                    return .refused("\(d.provider.rawValue) transmission id \(tid) is already stored with another body")
                }
                if let i = s.rows.firstIndex(where: { $0.delivery.provider == d.provider && $0.delivery.dedupeKey == d.dedupeKey }) {
                    s.rows[i].redeliveries += 1
                    return StoredDelivery(id: s.rows[i].id, inserted: false)
                }
                let id = Int64(s.rows.count + 1)
                s.rows.append(Stored(id: id, delivery: d, redeliveries: 0))
                return StoredDelivery(id: id, inserted: true)
            }
        }
    }

    public func isReady() -> Bool { state.withLock { $0.available } }
    public func pendingCount() -> Int64? { state.withLock { Int64($0.rows.count) } }
    public func isUnavailable(_ error: any Error) -> Bool { error is Unavailable }

    /// Webhook verification material, as `webhook_material` keeps it (provider, key) → (value, keep until).
    private let material = Mutex<[String: (value: [UInt8], keepUntil: Date, saved: Int)]>([:])
    public func loadWebhookMaterial(_ provider: Provider) throws -> [(key: String, value: [UInt8])] {
        guard isReady() else { throw Unavailable() }
        let prefix = provider.rawValue + "\u{0}"
        return material.withLock { $0 }.filter { $0.key.hasPrefix(prefix) && $0.value.keepUntil > Date() }
            .sorted { $0.value.saved > $1.value.saved }.map { (key: String($0.key.dropFirst(prefix.count)), value: $0.value.value) }
    }
    public func saveWebhookMaterial(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date) throws {
        guard isReady() else { throw Unavailable() }
        material.withLock { $0[provider.rawValue + "\u{0}" + key] = (value, keepUntil, $0.count) }
    }
    /// What `pendingMigrations` answers (the migrations the database lacks).
    public func setPendingMigrations(_ versions: [String]) { migrations.withLock { $0 = versions } }
    private let migrations = Mutex<[String]>([])
    public func pendingMigrations() -> [String]? { migrations.withLock { $0 } }

    /// Keys of what was saved for `provider`.
    public func webhookMaterialKeys(_ provider: Provider) -> [String] {
        let prefix = provider.rawValue + "\u{0}"
        return material.withLock { $0.keys.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) } }
    }
}
