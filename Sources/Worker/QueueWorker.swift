import CivilTime
import Foundation
import Observability
import Postgres
import Store
import Synchronization

/// `payrecon work`: claims due deliveries (FOR UPDATE SKIP LOCKED, under a lease renewed while it works),
/// processes them, and records done / retry-after-backoff / dead. Several workers may share one database: a
/// delivery is held by one at a time, and a dead worker's lease runs out so another picks the delivery up.
public final class QueueWorker: Sendable {
    public struct Configuration: Sendable {
        public var owner: String
        public var lease: Duration
        public var batchSize: Int
        public var poll: Duration
        public var attempt: DeliveryAttempt
        public var executeActions: Bool

        public init(
            owner: String = QueueWorker.defaultOwner(), lease: Duration = .seconds(60), batchSize: Int = 8, poll: Duration = .seconds(5),
            attempt: DeliveryAttempt = DeliveryAttempt(), executeActions: Bool = false
        ) {
            self.owner = owner; self.lease = lease; self.batchSize = batchSize; self.poll = poll
            self.attempt = attempt; self.executeActions = executeActions
        }
    }

    public static func defaultOwner() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(UUID().uuidString.prefix(8))"
    }

    public struct Totals: Sendable, Equatable {
        public var done = 0, retried = 0, dead = 0, lostLease = 0
        public init() {}
    }

    let configuration: Configuration
    let pool: PostgresPool
    /// Where to LISTEN for new deliveries; nil: poll only (behind a transaction-mode pooler without a direct URL).
    let conninfo: String?
    let processor: DeliveryProcessor
    let executor: ActionExecutor?
    let wakeup = Wakeup()
    let held = Mutex<Set<Int64>>([])
    let stopping = Atomic<Bool>(false)
    let totals = Mutex(Totals())
    /// Done deliveries not yet marked so: completions are committed together (one statement, one commit for many
    /// deliveries), within `completionFlushMilliseconds`. A crash before the flush only means the delivery is
    /// processed again after its lease ends, which is idempotent.
    let completions = Mutex<[DeliveryQueue.Completion]>([])
    /// Completions that could not be recorded (the database out of reach): when it began, and whether a retry is
    /// scheduled. They are retried with backoff until recorded (not left for their leases to run out and be processed
    /// again), with one warning per outage and one line when they are recorded again.
    let flushFailure = Mutex(FlushRetry())
    /// The worker's context (`owner`); each delivery adds `delivery_id` and `provider`.
    let logger: Logger
    static let completionFlushMilliseconds = 50
    static let completionBatch = 32
    /// The shortest idle wait, whatever `secondsUntilNextDue` says.
    static let minimumWait = Duration.milliseconds(50)

    public init(
        configuration: Configuration, conninfo: String?, pool: PostgresPool, processor: DeliveryProcessor, executor: ActionExecutor?,
        logger: Logger
    ) {
        self.configuration = configuration; self.conninfo = conninfo; self.pool = pool; self.processor = processor
        self.executor = executor; self.logger = logger.with(["owner": configuration.owner])
        _ = Self.processedMetric  // registered now, so /metrics names the family before the first delivery
    }

    /// Asks `run` to finish the deliveries in hand and return.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        wakeup.stop()
    }

    /// Works until `stop()`; with `once`, until nothing is due. Returns what it did.
    @discardableResult
    public func run(once: Bool) async -> Totals {
        if !once {
            if let conninfo {
                wakeup.listen(conninfo: conninfo, channel: DeliveryStore.channel, logger: logger)
            } else {
                logger.info(
                    "polling for deliveries: no connection to LISTEN on (set PAYRECON_LISTEN_DATABASE_URL to a direct one)",
                    ["poll_s": configuration.poll.inSeconds])
            }
        }
        let loops = startLoops(once: once)
        // Leases are renewed until the very end: through the wait for an action under way and the last flush.
        defer { loops.renewer.cancel(); loops.signalStop(); wakeup.stop() }
        logger.info("worker started", ["once": once])
        await pump(once: once)
        loops.signalStop()
        _ = await loops.actions.value  // an action under way finishes and records its outcome
        _ = await loops.flusher.value  // a flush it had begun is counted before the last one
        await flushCompletions(force: true)
        if let executor, configuration.executeActions, once { _ = await executor.executePending() }
        let t = totals.withLock { $0 }
        logger.info("worker stopped", ["done": t.done, "retried": t.retried, "dead": t.dead])
        return t
    }

    /// What runs beside the deliveries while the worker works: lease renewal, the completions' flush, and actions.
    struct Loops: Sendable {
        final class Flags: Sendable { let flusherDone = Atomic<Bool>(false), actionsDone = Atomic<Bool>(false) }
        let flags: Flags
        let renewer: Task<Void, Never>, flusher: Task<Void, Never>, actions: Task<Void, Never>
        /// Ends the flush and action loops (each finishes what it is doing); the lease renewer is cancelled apart, last.
        func signalStop() {
            flags.flusherDone.store(true, ordering: .relaxed); flags.actionsDone.store(true, ordering: .relaxed)
        }
    }

    private func startLoops(once: Bool) -> Loops {
        let flags = Loops.Flags()
        let renewer = Task { await renewLeases() }
        // Stopped by a flag, not by cancelling it: a cancelled flush's pool.run fails with CancellationError, which
        // would log "could not record completed deliveries" at the end of every `work --once` (harmless, since the
        // final flush records them, but a warning an operator would chase).
        let flusher = Task { [self] in
            while !flags.flusherDone.load(ordering: .relaxed) {
                try? await Task.sleep(for: .milliseconds(Self.completionFlushMilliseconds))
                await flushCompletions()
            }
        }
        // Actions run beside deliveries, in a loop of their own: a queue that is never empty does not starve them.
        let runsActions = !once && configuration.executeActions && executor != nil
        let actions = Task { [self] in
            guard runsActions, let executor else { return }
            while !flags.actionsDone.load(ordering: .relaxed) && !stopping.load(ordering: .relaxed) {
                let t = await executor.executePending()
                if t.succeeded + t.failed == 0 { try? await Task.sleep(for: .milliseconds(Self.actionIdleMilliseconds)) }
            }
        }
        return Loops(flags: flags, renewer: renewer, flusher: flusher, actions: actions)
    }

    /// Claims deliveries and handles them until stopped (or, with `once`, until nothing is due).
    private func pump(once: Bool) async {
        // A pipeline, not batches: as soon as a delivery finishes, another is claimed, so one slow provider call
        // never holds up the deliveries behind it.
        // Claims come in chunks of at least a quarter batch: one claim (a round trip and a commit) per finished
        // delivery would cap the worker at one claim's latency.
        let refill = max(1, configuration.batchSize / 4)
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            while !stopping.load(ordering: .relaxed) {
                var claimed: [QueuedDelivery] = []
                if configuration.batchSize - inFlight >= refill {
                    let room = configuration.batchSize - inFlight
                    do {
                        claimed = try await pool.run { [configuration] conn in
                            try DeliveryQueue.claim(
                                owner: configuration.owner, lease: configuration.lease, limit: room, on: conn)
                        }
                    } catch {
                        logger.warning("cannot claim deliveries; retrying", ["error": String(describing: error)])
                        if inFlight == 0 {
                            if once { break }
                            await wakeup.wait(for: configuration.poll)
                            continue
                        }
                    }
                }
                held.withLock { $0.formUnion(claimed.map(\.id)) }
                for delivery in claimed { group.addTask { await self.handle(delivery) } }
                inFlight += claimed.count
                if inFlight > 0 && (claimed.isEmpty || configuration.batchSize - inFlight < refill) {
                    await group.next()  // wait for one to finish, then top up
                    inFlight -= 1
                    continue
                }
                if inFlight > 0 { continue }
                // Nothing in hand and nothing due.
                if once { break }
                // A delivery due now that another transaction holds locked (SKIP LOCKED passed it) must not make
                // this loop spin: wait at least `minimumWait`.
                let due = (try? await pool.run { try DeliveryQueue.secondsUntilNextDue(on: $0) }) ?? nil
                // In whole milliseconds, rounded up; anything past the poll interval (or not a number) is the interval.
                let dueIn = due.flatMap { s in
                    s < configuration.poll.inSeconds ? Duration.milliseconds(Int64((s * 1000).rounded(.up))) : nil
                }
                await wakeup.wait(for: min(configuration.poll, max(Self.minimumWait, dueIn ?? configuration.poll)))
            }
            await group.waitForAll()
        }
    }

    /// How long the action loop waits after a pass that finished nothing (none due, or every one deferred: a provider
    /// that is down is asked again a second later, not in a loop).
    static let actionIdleMilliseconds = 1000

    /// Processed deliveries by provider and outcome (`done`, `ignored`, `retry`, `dead`).
    static let processedMetric = Metrics.shared.counter(
        "payrecon_deliveries_processed_total",
        help: "Deliveries the worker processed, by provider and outcome (done, ignored, retry, dead)")

    private func handle(_ delivery: QueuedDelivery) async {
        let log = logger.with(["delivery_id": delivery.id, "provider": delivery.provider.rawValue])
        // The orders it named (`payrecon explain`) are written with its completion in the worker's batch: recorded on the
        // delivery's own path, they would make every delivery's lookup a write that waits for its commit.
        let processed = await CheckContext.$current.withValue(CheckContext(source: .webhook, deliveryID: delivery.id)) {
            await processor.process(delivery, logger: log)
        }
        let result = processed.result
        // A retry carries its delay; dead is the last attempt (no delay).
        let failure: (retryAfter: Duration?, reason: String)
        let decision = configuration.attempt.decide(result, attempts: delivery.attempts, random: Double.random(in: 0..<1))
        let outcomeLabel: String =
            switch decision {
            case .done(let o): o.status
            case .retry: "retry"
            case .dead: "dead"
            }
        Self.processedMetric.increment([("provider", delivery.provider.rawValue), ("outcome", outcomeLabel)])
        switch decision {
        case .done(let outcome):
            // Still held (its lease renewed) until the batch that completes it is committed.
            log.debug("delivery processed", ["status": outcome.status])
            let completion = DeliveryQueue.Completion(
                id: delivery.id, status: outcome.status, outcome: outcome.text,
                provider: delivery.provider, orderIDs: processed.orderIDs)
            let full = completions.withLock {
                $0.append(completion); return $0.count >= Self.completionBatch
            }
            if full { await flushCompletions(force: false) }
            return
        case .retry(let after, let reason): failure = (after, reason)
        case .dead(let reason): failure = (nil, reason)
        }
        defer { held.withLock { _ = $0.remove(delivery.id) } }
        let owner = configuration.owner
        do {
            let kept = try await pool.run { conn in
                try DeliveryQueue.fail(
                    id: delivery.id, owner: owner, error: failure.reason, retryAfter: failure.retryAfter,
                    provider: delivery.provider, orderIDs: processed.orderIDs, on: conn)
            }
            noteFailureRecorded(delivery, kept: kept, failure: failure, result: result, log: log)
        } catch {
            // The lease expires and the delivery comes back: processing is idempotent (unique action keys).
            log.warning("could not record a delivery's outcome", ["error": String(describing: error)])
        }
    }

    /// Counts and says what came of a delivery whose failure was recorded (`kept`: its lease was still this worker's).
    /// Not inlined into `handle`, so the log lines' values are not in that async frame (see `OrderChecker.makeCheck`).
    @inline(never)
    private func noteFailureRecorded(
        _ delivery: QueuedDelivery, kept: Bool, failure: (retryAfter: Duration?, reason: String), result: DeliveryAttempt.Result,
        log: Logger
    ) {
        totals.withLock { t in
            if !kept { t.lostLease += 1 } else if failure.retryAfter != nil { t.retried += 1 } else { t.dead += 1 }
        }
        if !kept {
            log.warning("lease lost before the result was recorded; another worker has the delivery")
        } else if let after = failure.retryAfter, case .permanent = result {
            // Retrying as it is will not help (the provider refused the credentials, a 4xx): said as a warning, with
            // what to do; it is still retried, since credentials and configuration get fixed.
            log.warning(
                "delivery will be retried, but the provider refused it as it is: fix what the reason names (credentials or permissions: payrecon doctor), then restart the worker, or reload it (systemctl reload payrecon-work) when the secret is given as a file (NAME_FILE), which also makes the deliveries waiting for a retry due at once; payrecon events retry ID retries one now",
                ["attempt": delivery.attempts, "after_s": Int(after.inSeconds.rounded(.up)), "reason": failure.reason])
        } else if let after = failure.retryAfter {
            log.info(
                "delivery will be retried",
                ["attempt": delivery.attempts, "after_s": Int(after.inSeconds.rounded(.up)), "reason": failure.reason]
            )
        } else {
            log.error("delivery is dead", ["reason": failure.reason])
        }
    }

    /// Commits the pending completions in one statement.
    /// `force`: the last flush, at stop, whatever the backoff (a failure then leaves the deliveries to their leases).
    private func flushCompletions(force: Bool = false) async {
        // While the database would not take them, completions wait out the backoff (the flusher's 50 ms timer and
        // a full batch do not retry sooner).
        if !force, flushFailure.withLock({ !$0.due(at: Date()) }) { return }
        let batch = completions.withLock { c -> [DeliveryQueue.Completion] in
            let b = c; c.removeAll(); return b
        }
        guard !batch.isEmpty else { return }
        let ids = batch.map(\.id)
        let owner = configuration.owner
        do {
            let completed = try await pool.run { try DeliveryQueue.complete(batch, owner: owner, on: $0) }
            if let since = flushFailure.withLock({ $0.succeeded() }) {
                logger.info(
                    "completed deliveries recorded again", ["deliveries": ids.count, "after_seconds": Int(Date().timeIntervalSince(since))])
            }
            held.withLock { $0.subtract(ids) }
            totals.withLock {
                $0.done += completed.count; $0.lostLease += ids.count - completed.count
            }
            if completed.count < ids.count {
                logger.warning(
                    "lease lost before completion was recorded; another worker has the delivery",
                    ["deliveries": ids.count - completed.count])
            }
        } catch {
            // Put them back, and retry with backoff (1 s, doubling to 30 s) whether or not another completes: left for
            // a later completion, they would wait for their leases to run out and be processed again.
            completions.withLock { $0.append(contentsOf: batch) }
            let first = flushFailure.withLock { $0.failed(at: Date()) }
            if first {
                logger.warning(
                    "could not record completed deliveries; retrying with backoff until the database answers",
                    ["deliveries": ids.count, "error": String(describing: error)])
            }
        }
    }

    /// Renews the leases of held deliveries every third of the lease, so slow providers don't cause double work.
    private func renewLeases() async {
        let interval = max(.seconds(1), configuration.lease / 3)
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            let ids = Array(held.withLock { $0 })
            guard !ids.isEmpty else { continue }
            _ = try? await pool.run { [configuration] conn in
                try DeliveryQueue.renew(ids: ids, owner: configuration.owner, lease: configuration.lease, on: conn)
            }
        }
    }
}

/// When completions that could not be recorded are tried again: by the flusher, once their backoff (1 s, doubling to
/// 30 s) has passed, not on its 50 ms timer; the first failure of an outage is the one said.
struct FlushRetry: Equatable {
    private(set) var since: Date?
    private(set) var nextAt: Date?
    private(set) var attempt = 0

    /// Whether a flush may be tried at `now`.
    func due(at now: Date) -> Bool { nextAt.map { now >= $0 } ?? true }

    /// A flush failed at `now`: whether it is the first of an outage (to warn). The next is due after the backoff.
    mutating func failed(at now: Date) -> Bool {
        let first = since == nil
        if first { since = now }
        attempt += 1
        nextAt = now.addingTimeInterval(Double(Self.delay(attempt)))
        return first
    }

    /// Seconds before the retry after the `attempt`th failure in a row.
    static func delay(_ attempt: Int) -> Int { min(30, 1 << min(max(attempt, 1) - 1, 5)) }

    /// A flush succeeded: when the outage it ends began (nil: there was none).
    mutating func succeeded() -> Date? {
        defer { since = nil; nextAt = nil; attempt = 0 }
        return since
    }
}
