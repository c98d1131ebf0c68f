import Foundation
import Observability
import Store
import Synchronization

/// Rejected deliveries travel here, never with genuine ones: each is counted per (provider, reason,
/// source address, hour), and only the first `samplesPerHour` of each (provider, reason, hour) are kept as samples.
/// What waits to be written is bounded in bytes (`maxBytes` of samples) and in count keys (`maxKeys`); beyond
/// that a rejection is still answered, and counted in `payrecon_rejections_not_recorded_total`, but not written.
/// A flood of bad requests can therefore neither fill the disk nor make a genuine delivery wait or get 503: the lane
/// flushes in its own short transactions on its own queue.
final class RejectionLane: Sendable {
    struct SampleKey: Hashable { var provider: String; var reason: String; var hour: Int64 }

    private struct State {
        var counts: [RejectionCount.Key: Int64] = [:]
        var samples: [Rejection] = []
        var bytes = 0
        var sampled: [SampleKey: Int] = [:]
        var flushing = false
    }

    let storage: any ReceiverStorage
    let maxBytes: Int
    let maxKeys: Int
    let samplesPerHour: Int
    private let state = Mutex(State())
    private let thread = DedicatedThread(name: "rejection-lane")
    private let notRecorded = Metrics.shared.counter("payrecon_rejections_not_recorded_total",
                                                     help: "Rejected deliveries not recorded because the rejection lane was full.")
    private let clock: @Sendable () -> Int64

    /// How long rejections gather before they are written (one transaction for all of them).
    let flushInterval: Double

    init(storage: any ReceiverStorage, maxBytes: Int = 4 << 20, maxKeys: Int = 10_000, samplesPerHour: Int = DeliveryStore.samplesPerHour,
         flushInterval: Double = 1, clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.storage = storage; self.maxBytes = maxBytes; self.maxKeys = maxKeys; self.samplesPerHour = samplesPerHour; self.clock = clock
        self.flushInterval = flushInterval
    }

    func record(_ r: Rejection) {
        let hour = clock() / 3600 * 3600
        let (accepted, flush): (Bool, Bool) = state.withLock { s in
            let key = RejectionCount.Key(provider: r.provider, reason: r.reason, source: r.remoteAddress ?? "", hour: hour)
            guard s.counts[key] != nil || s.counts.count < maxKeys else { return (false, false) }
            s.counts[key, default: 0] += 1
            let start = !s.flushing
            s.flushing = true
            let sampleKey = SampleKey(provider: r.provider, reason: r.reason, hour: hour)
            let size = r.bodyPrefix.count + r.headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count } + r.message.utf8.count
            if s.sampled[sampleKey, default: 0] < samplesPerHour {
                guard s.bytes + size <= maxBytes else { return (true, start) }   // counted; the sample is dropped
                s.sampled[sampleKey, default: 0] += 1
                s.samples.append(r)
                s.bytes += size
            }
            if s.sampled.count > 4 * maxKeys { s.sampled = s.sampled.filter { $0.key.hour == hour } }
            return (true, start)
        }
        if !accepted { notRecorded.increment([("provider", r.provider), ("reason", r.reason)]) }
        // Written at most once per `flushInterval`: a flood then updates each count row once a second, not once per
        // request (each update leaves a dead row version for vacuum; per request that was ~300 KiB a minute).
        if flush { thread.after(flushInterval) { [self] in self.flush() } }
    }

    /// Writes what is waiting; if more arrives meanwhile, writes again one `flushInterval` later.
    private func flush() {
        let (counts, samples) = state.withLock { s -> ([RejectionCount], [Rejection]) in
            let counts = s.counts.map { RejectionCount(provider: $0.key.provider, reason: $0.key.reason, source: $0.key.source,
                                                       hour: $0.key.hour, count: $0.value) }
            let samples = s.samples
            s.counts = [:]; s.samples = []; s.bytes = 0
            if counts.isEmpty && samples.isEmpty { s.flushing = false }
            return (counts, samples)
        }
        if counts.isEmpty && samples.isEmpty { return }
        do { try storage.recordRejections(counts, samples: samples) } catch {
            // Not retried: a store that is down must not make the lane grow; the loss is counted.
            let total = counts.reduce(Int64(0)) { $0 + $1.count }
            notRecorded.increment([("provider", "any"), ("reason", "store_unavailable")], by: total)
            Log.warning("could not record rejected deliveries", ["error": String(describing: error), "rejections": Int(total)])
        }
        // Still `flushing`: what arrived meanwhile waits for the next round (which ends the flushing if it finds none).
        thread.after(flushInterval) { [self] in self.flush() }
    }

    /// Waits (until `timeout`) for what is waiting to be written, then lets the lane's thread end.
    func drain(timeout: DispatchTime) {
        while state.withLock({ $0.flushing }), DispatchTime.now() < timeout { usleep(2_000) }
        thread.stop()
    }
}

extension RejectionCount {
    struct Key: Hashable { var provider: String; var reason: String; var source: String; var hour: Int64 }
}
