import Foundation
import Observability
import Providers
import Reconciliation
import Store
import Synchronization

/// Rejected deliveries travel here, never with genuine ones: each is counted per (provider, reason,
/// source address, hour), and only the first `samplesPerHour` of each (provider, reason, hour), at most `samplesPerDay`
/// of each (provider, reason, day), are kept as samples. Only the first `logsPerMinute` of each (provider, reason) a
/// minute are logged; the rest are summed into one line when the minute ends (`RejectionLogBudget`), so a flood never
/// drives journald's rate limit into dropping the lines that matter.
/// What waits to be written is bounded in bytes (`maxBytes` of samples) and in count keys (`maxKeys`); beyond
/// that a rejection is still answered, and counted in `payrecon_rejections_not_recorded_total`, but not written.
/// A flood of bad requests can therefore neither fill the disk nor make a genuine delivery wait or get 503: the lane
/// flushes in its own short transactions on its own queue.
final class RejectionLane: Sendable {
    struct SampleKey: Hashable { var provider: Provider; var reason: String; var hour: Int64 }
    struct DayKey: Hashable { var provider: Provider; var reason: String; var day: Int64 }

    private struct State {
        var counts: [RejectionCount.Key: Int64] = [:]
        var samples: [Rejection] = []
        var bytes = 0
        var sampled: [SampleKey: Int] = [:]
        var sampledToday: [DayKey: Int] = [:]
        /// Source addresses counted this hour per (provider, reason): past `sourcesPerHour`, a new source counts as
        /// `other` (a sender rotating addresses must not add a row per address).
        var sources: [SampleKey: Set<String>] = [:]
        var flushing = false
        var logs: RejectionLogBudget
    }

    let storage: any ReceiverStorage
    let maxBytes: Int
    let maxKeys: Int
    let samplesPerHour: Int
    let samplesPerDay: Int
    /// Distinct sources counted per (provider, reason, hour); the rest count as `other`.
    let sourcesPerHour = 1000
    private let state: Mutex<State>
    private let thread = DedicatedThread(name: "rejection-lane")
    private let notRecorded = Metrics.shared.counter(
        "payrecon_rejections_not_recorded_total",
        help: "Rejected deliveries not recorded because the rejection lane was full.")
    private let clock: @Sendable () -> Int64

    /// How long rejections gather before they are written (one transaction for all of them).
    let flushInterval: Duration

    init(
        storage: any ReceiverStorage, maxBytes: Int = 4 << 20, maxKeys: Int = 10_000, samplesPerHour: Int = DeliveryStore.samplesPerHour,
        samplesPerDay: Int = DeliveryStore.samplesPerDay, logsPerMinute: Int = 10,
        flushInterval: Duration = .seconds(1), clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        logger: Logger, log: (@Sendable (_ summary: RejectionLogBudget.Summary) -> Void)? = nil
    ) {
        self.logger = logger
        self.storage = storage; self.maxBytes = maxBytes; self.maxKeys = maxKeys; self.samplesPerHour = samplesPerHour
        self.samplesPerDay = samplesPerDay; self.clock = clock
        self.flushInterval = flushInterval
        self.logSummary = log ?? { RejectionLane.logSummary($0, logger) }
        self.state = Mutex(State(logs: RejectionLogBudget(perMinute: logsPerMinute)))
    }

    private let logSummary: @Sendable (RejectionLogBudget.Summary) -> Void
    private let logger: Logger

    /// The summary line of a minute's rejections that were not logged one by one.
    static func logSummary(_ summary: RejectionLogBudget.Summary, _ logger: Logger) {
        logger.warning(
            "deliveries rejected without a line of their own",
            [
                "provider": summary.provider.rawValue, "reason": summary.reason,
                "not_logged": summary.suppressed, "minute": ISO8601.format(Date(timeIntervalSince1970: TimeInterval(summary.minute)))
            ])
    }

    /// Counts `r` (and keeps it as a sample while its hour's and day's share lasts); whether it may have a log line of
    /// its own.
    @discardableResult
    func record(_ r: Rejection) -> Bool {
        let now = clock()
        let hour = now / 3600 * 3600
        let (accepted, flush, logIt, summaryDue): (Bool, Bool, Bool, Int64?) = state.withLock { s in
            let admitted = s.logs.admit(provider: r.provider, reason: r.reason, at: now)
            let sampleKey = SampleKey(provider: r.provider, reason: r.reason, hour: hour)
            var source = r.remoteAddress ?? ""
            if s.sources[sampleKey]?.contains(source) != true {
                if s.sources[sampleKey, default: []].count < sourcesPerHour {
                    s.sources[sampleKey, default: []].insert(source)
                } else {
                    source = "other"
                }
                if s.sources.count > 64 { s.sources = s.sources.filter { $0.key.hour == hour } }
            }
            let key = RejectionCount.Key(provider: r.provider, reason: r.reason, source: source, hour: hour)
            guard s.counts[key] != nil || s.counts.count < maxKeys else { return (false, false, admitted.log, admitted.summaryAt) }
            s.counts[key, default: 0] += 1
            let start = !s.flushing
            s.flushing = true
            let dayKey = DayKey(provider: r.provider, reason: r.reason, day: now / 86_400)
            let size = r.bodyPrefix.count + r.headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count } + r.message.utf8.count
            if s.sampled[sampleKey, default: 0] < samplesPerHour, s.sampledToday[dayKey, default: 0] < samplesPerDay {
                // Counted; the sample is dropped.
                guard s.bytes + size <= maxBytes else { return (true, start, admitted.log, admitted.summaryAt) }
                s.sampled[sampleKey, default: 0] += 1
                s.sampledToday[dayKey, default: 0] += 1
                s.samples.append(r)
                s.bytes += size
            }
            if s.sampled.count > 4 * maxKeys { s.sampled = s.sampled.filter { $0.key.hour == hour } }
            if s.sampledToday.count > 4 * maxKeys { s.sampledToday = s.sampledToday.filter { $0.key.day == dayKey.day } }
            return (true, start, admitted.log, admitted.summaryAt)
        }
        if let summaryDue {
            // The first rejection this minute not logged on its own: its minute's summary is written when it ends.
            thread.after(.seconds(max(0, summaryDue - clock()))) { [self] in writeSummaries() }
        }
        if !accepted { notRecorded.increment([("provider", r.provider.rawValue), ("reason", r.reason)]) }
        // Written at most once per `flushInterval`: a flood then updates each count row once a second, not once per
        // request (each update leaves a dead row version for vacuum; per request that was ~300 KiB a minute).
        if flush { thread.after(flushInterval) { [self] in self.flush() } }
        return logIt
    }

    /// Writes the summary line of every (provider, reason) whose minute ended with rejections not logged.
    private func writeSummaries() {
        let now = clock()
        for summary in state.withLock({ $0.logs.ended(at: now) }) { logSummary(summary) }
    }

    /// Writes what is waiting; if more arrives meanwhile, writes again one `flushInterval` later.
    private func flush() {
        let (counts, samples) = state.withLock { s -> ([RejectionCount], [Rejection]) in
            let counts = s.counts.map {
                RejectionCount(
                    provider: $0.key.provider, reason: $0.key.reason, source: $0.key.source,
                    hour: $0.key.hour, count: $0.value)
            }
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
            logger.warning("could not record rejected deliveries", ["error": String(describing: error), "rejections": Int(total)])
        }
        // Still `flushing`: what arrived meanwhile waits for the next round (which ends the flushing if it finds none).
        thread.after(flushInterval) { [self] in self.flush() }
    }

    /// Waits (until `timeout`) for what is waiting to be written, then lets the lane's thread end.
    func drain(timeout: DispatchTime) {
        while state.withLock({ $0.flushing }), DispatchTime.now() < timeout { usleep(2_000) }
        for summary in state.withLock({ $0.logs.ended(at: .max) }) { logSummary(summary) }
        thread.stop()
    }
}

extension RejectionCount {
    struct Key: Hashable { var provider: Provider; var reason: String; var source: String; var hour: Int64 }
}

/// Which rejections get a log line of their own: the first `perMinute` of each (provider, reason) in each clock minute.
/// The others are counted, and `ended(at:)` gives one summary per (provider, reason) whose minute is over. Pure: the
/// lane holds it under its lock and passes the time in.
struct RejectionLogBudget: Sendable {
    struct Key: Hashable, Sendable { var provider: Provider; var reason: String }
    struct Summary: Sendable, Equatable { var provider: Provider; var reason: String; var minute: Int64; var suppressed: Int }
    private struct Window { var minute: Int64; var logged: Int; var suppressed: Int }

    let perMinute: Int
    private var windows: [Key: Window] = [:]
    init(perMinute: Int) { self.perMinute = max(0, perMinute) }

    /// Whether a rejection at `now` (unix seconds) gets its own line; `summaryAt`, when it is the first of its minute
    /// not to: the time its minute's summary is due.
    mutating func admit(provider: Provider, reason: String, at now: Int64) -> (log: Bool, summaryAt: Int64?) {
        let key = Key(provider: provider, reason: reason)
        let minute = now / 60 * 60
        var window = windows[key] ?? Window(minute: minute, logged: 0, suppressed: 0)
        if window.minute != minute {
            // A window left unsummarised (its timer not run yet) keeps its count for `ended`; a new one starts.
            if window.suppressed > 0 {
                pending.append(Summary(provider: provider, reason: reason, minute: window.minute, suppressed: window.suppressed))
            }
            window = Window(minute: minute, logged: 0, suppressed: 0)
        }
        defer { windows[key] = window }
        if window.logged < perMinute { window.logged += 1; return (true, nil) }
        window.suppressed += 1
        return (false, window.suppressed == 1 ? minute + 60 : nil)
    }

    /// Summaries of windows that ended before a later one began.
    private var pending: [Summary] = []

    /// One summary per (provider, reason) whose minute ended by `now` with rejections not logged; each given once.
    mutating func ended(at now: Int64) -> [Summary] {
        var out = pending
        pending = []
        for (key, window) in windows where window.minute + 60 <= now {
            if window.suppressed > 0 {
                out.append(Summary(provider: key.provider, reason: key.reason, minute: window.minute, suppressed: window.suppressed))
            }
            windows[key] = nil
        }
        return out.sorted { ($0.minute, $0.provider.rawValue, $0.reason) < ($1.minute, $1.provider.rawValue, $1.reason) }
    }
}
