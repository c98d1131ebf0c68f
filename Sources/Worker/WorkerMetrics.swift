import Foundation
import Observability
import Postgres
import Providers
import Reconciliation
import Synchronization

/// What the worker exports on its own `/metrics` (`payrecon work --metrics-listen`), beside the processed
/// deliveries counted by `QueueWorker`: provider calls at the seam, actions, the queue, open discrepancies and
/// money at risk, and when the nightly sweep last succeeded. The database-backed values are refreshed in the
/// background (`refresh`), never by a scrape.
public enum WorkerMetrics {
    static let calls = Metrics.shared.counter(
        "payrecon_provider_calls_total",
        help:
            "Provider API calls at the seam, by provider, operation (fetch, lookup, resolve, action) and status (found, not_found, transient, permanent)"
    )
    static let callSeconds = Metrics.shared.histogram(
        "payrecon_provider_call_seconds",
        help: "Provider API call latency (retries included), by provider and operation",
        buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
    static let actions = Metrics.shared.counter(
        "payrecon_actions_total",
        help: "Actions the executor recorded an outcome for, by provider, kind and status")
    static let backlog = Metrics.shared.gauge("payrecon_deliveries_backlog", help: "Deliveries pending processing")
    static let oldest = Metrics.shared.gauge(
        "payrecon_oldest_pending_delivery_age_seconds",
        help: "Age of the oldest pending delivery (0 when none)")
    static let dead = Metrics.shared.gauge(
        "payrecon_deliveries_dead", help: "Deliveries dead after their last attempt, waiting for an operator")
    static let open = Metrics.shared.gauge("payrecon_discrepancies_open", help: "Open discrepancies by kind")
    static let atRisk = Metrics.shared.gauge(
        "payrecon_money_at_risk_minor",
        help: "Money at risk in open discrepancies, in minor units of the currency (2500 USD = 25.00)")
    static let actionsWaiting = Metrics.shared.gauge(
        "payrecon_actions_pending",
        help: "Actions in the outbox by state: pending (to run), in_doubt (a call whose outcome is unknown yet)")
    static let failedActions = Metrics.shared.gauge(
        "payrecon_actions_failed",
        help:
            "Actions that failed (the provider refused them, or they failed after their retries) and wait for an operator (payrecon actions retry)"
    )
    /// 1 when this worker executes actions (PAYRECON_ACTIONS=execute); 0 when it only plans them for a person.
    public static let executes = Metrics.shared.gauge(
        "payrecon_actions_execute",
        help: "1 when this worker executes planned actions (PAYRECON_ACTIONS=execute), 0 when they wait for payrecon actions execute")
    static let oldestAction = Metrics.shared.gauge(
        "payrecon_oldest_pending_action_age_seconds",
        help: "Age of the oldest pending action (0 when none): the executor is stopped or every call fails")
    static let installed = Metrics.shared.gauge(
        "payrecon_installed_timestamp_seconds",
        help: "Unix time the database was first migrated: when a nightly run that never succeeded is counted from")
    static let lastSweep = Metrics.shared.gauge(
        "payrecon_last_reconcile_success_timestamp_seconds",
        help: "Unix time the last payrecon reconcile run finished with exit 0 (0: never)")
    static let lastSettlementFile = Metrics.shared.gauge(
        "payrecon_settlement_last_file_timestamp_seconds",
        help: "Unix time the newest settlement file was imported (payrecon settlement import), per provider (0: never)")
    static let fees24h = Metrics.shared.gauge(
        "payrecon_fees_last_day_minor",
        help:
            "Fees the providers' answers stated on money moved in the last 24 hours, less fees given back, per provider and currency, in minor units"
    )
    /// The (provider, currency) pairs the last refresh exported fees for.
    static let feeSeries = Mutex<Set<[String]>>([])

    /// The currencies the last refresh exported money at risk for.
    static let riskCurrencies = Mutex<Set<String>>([])

    /// Registers every family now, and every counter's series at 0 for the label sets it can have, so `/metrics`
    /// names them before the first observation and `increase()` sees the first action, call or delivery (a series
    /// born at 1 reads as no increase).
    public static func register() {
        _ = (
            calls, callSeconds, actions, backlog, oldest, dead, open, atRisk, lastSweep, QueueWorker.processedMetric, actionsWaiting,
            oldestAction, installed,
            lastSettlementFile, fees24h, failedActions, executes
        )
        for definition in ProviderRegistry.definitions where definition.settlementReports != nil {
            lastSettlementFile.set(0, [("provider", definition.provider.rawValue)])
        }
        for kind in DiscrepancyKind.allCases { open.add(0, [("kind", kind.rawValue)]) }
        for provider in Provider.allCases {
            for operation in ["fetch", "lookup", "resolve", "action", "inquire"] {
                callSeconds.initialise([("provider", provider.rawValue), ("operation", operation)])
                for status in ["found", "not_found", "transient", "permanent"] {
                    calls.initialise([("provider", provider.rawValue), ("operation", operation), ("status", status)])
                }
            }
            for kind in ActionKind.allCases {
                for status in ActionStatus.allCases where status != .pending {
                    actions.initialise([("provider", provider.rawValue), ("kind", kind.rawValue), ("status", status.rawValue)])
                }
            }
            for outcome in ["done", "ignored", "retry", "dead"] {
                QueueWorker.processedMetric.initialise([("provider", provider.rawValue), ("outcome", outcome)])
            }
        }
        CountedTransport.initialise(providers: Provider.allCases)
    }

    static func call<T>(_ provider: Provider, _ operation: String, _ outcome: ProviderOutcome<T>, since start: DispatchTime) {
        let status =
            switch outcome {
            case .found: "found"
            case .notFound: "not_found"
            case .transient: "transient"
            case .permanent: "permanent"
            }
        calls.increment([("provider", provider.rawValue), ("operation", operation), ("status", status)])
        callSeconds.observe(
            seconds: Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9,
            [("provider", provider.rawValue), ("operation", operation)])
    }

    static func action(_ provider: Provider, _ kind: ActionKind, _ status: ActionStatus) {
        actions.increment([("provider", provider.rawValue), ("kind", kind.rawValue), ("status", status.rawValue)])
    }

    /// Reads the queue, the open discrepancies and their money at risk, the actions, the last sweep and settlement
    /// file, and the day's fees: a few short queries.
    public static func refresh(on conn: PostgresConnection) throws {
        try refreshQueue(on: conn)
        try refreshDiscrepancies(on: conn)
        try refreshActions(on: conn)
        try refreshTimes(on: conn)
        try refreshFees(on: conn)
    }

    static func refreshQueue(on conn: PostgresConnection) throws {
        let queue = try conn.query(
            """
            SELECT count(*) FILTER (WHERE status = 'pending') AS pending, count(*) FILTER (WHERE status = 'dead') AS dead,
                   coalesce(extract(epoch FROM now() - min(received_at) FILTER (WHERE status = 'pending')), 0)::bigint AS oldest
            FROM deliveries WHERE status IN ('pending', 'dead')
            """)
        if let row = queue.first {
            backlog.set(try row.int64("pending")); dead.set(try row.int64("dead")); oldest.set(try row.int64("oldest"))
        }
    }

    static func refreshDiscrepancies(on conn: PostgresConnection) throws {
        var counts = Dictionary(uniqueKeysWithValues: DiscrepancyKind.allCases.map { ($0.rawValue, Int64(0)) })
        for row in try conn.query("SELECT kind, count(*) AS n FROM discrepancies WHERE status = 'open' GROUP BY kind") {
            counts[try row.string("kind"), default: 0] += try row.int64("n")
        }
        // Money at risk with each order counted once, as `payrecon report` counts it (an order's largest finding).
        var risk: [String: Int64] = [:]
        for row in try conn.query(
            """
            SELECT currency, sum(m)::text AS risk FROM (
                SELECT currency, max(amount_at_risk_minor) AS m FROM discrepancies WHERE status = 'open' AND currency IS NOT NULL
                GROUP BY provider, coalesce(order_id, '?' || transaction_ref), currency) per_order
            GROUP BY currency
            """)
        {
            risk[try row.string("currency")] = Int64(try row.string("risk")) ?? .max
        }
        for (kind, n) in counts { open.set(n, [("kind", kind)]) }
        // A currency whose money at risk went to zero reads 0, never its last value.
        let gone = riskCurrencies.withLock { seen in
            let gone = seen.subtracting(risk.keys)
            seen = Set(risk.keys)
            return gone
        }
        for currency in gone { atRisk.set(0, [("currency", currency)]) }
        for (currency, minor) in risk { atRisk.set(minor, [("currency", currency)]) }
    }

    static func refreshActions(on conn: PostgresConnection) throws {
        if let row = try conn.query(
            """
            SELECT count(*) FILTER (WHERE status = 'pending' AND NOT in_doubt) AS pending,
                   count(*) FILTER (WHERE status = 'pending' AND in_doubt) AS in_doubt,
                   count(*) FILTER (WHERE status = 'failed') AS failed,
                   coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending')), 0)::bigint AS oldest
            FROM actions WHERE status IN ('pending', 'failed')
            """
        ).first {
            actionsWaiting.set(try row.int64("pending"), [("state", "pending")])
            actionsWaiting.set(try row.int64("in_doubt"), [("state", "in_doubt")])
            failedActions.set(try row.int64("failed"))
            oldestAction.set(try row.int64("oldest"))
        }
    }

    /// When the schema was installed, the last successful sweep, and each provider's last settlement file.
    static func refreshTimes(on conn: PostgresConnection) throws {
        if let row = try conn.query("SELECT coalesce(extract(epoch FROM min(applied_at)), 0)::bigint AS t FROM schema_migrations").first {
            installed.set(try row.int64("t"))
        }
        let last = try conn.query(
            """
            SELECT coalesce(extract(epoch FROM max(finished_at)), 0)::bigint AS t FROM runs WHERE exit_code = 0
            """
        ).first
        lastSweep.set(try last?.int64("t") ?? 0)
        for row in try conn.query(
            "SELECT provider, extract(epoch FROM max(imported_at))::bigint AS t FROM settlement_files GROUP BY provider")
        {
            lastSettlementFile.set(try row.int64("t"), [("provider", try row.string("provider"))])
        }
    }

    /// Each provider's and currency's fees over the last 24 hours.
    static func refreshFees(on conn: PostgresConnection) throws {
        var fees: [[String]: Int64] = [:]
        for row in try conn.query(
            """
            SELECT provider, currency, (coalesce(sum(fee_minor) FILTER (WHERE kind = 'capture'), 0)
                                        - coalesce(sum(fee_minor) FILTER (WHERE kind <> 'capture'), 0))::text AS fees
            FROM movements WHERE coalesce(occurred_at, first_seen) >= now() - interval '24 hours' GROUP BY provider, currency
            """)
        {
            fees[[try row.string("provider"), try row.string("currency")]] = Int64(try row.string("fees")) ?? .max
        }
        // A pair with no fees in the last 24 hours reads 0, never its last value.
        let stale = feeSeries.withLock { seen in
            let stale = seen.subtracting(fees.keys)
            seen = Set(fees.keys)
            return stale
        }
        for key in stale { fees24h.set(0, [("provider", key[0]), ("currency", key[1])]) }
        for (key, minor) in fees { fees24h.set(minor, [("provider", key[0]), ("currency", key[1])]) }
    }
}

/// A provider's API with every call counted and timed (`WorkerMetrics`).
struct MeteredProviderAPI: ProviderAPI {
    let provider: Provider
    let base: any ProviderAPI

    var isConfigured: Bool { base.isConfigured }
    var deduplicatesIdempotencyKeys: Bool { base.deduplicatesIdempotencyKeys }
    var unapprovedAttemptsExpire: Bool { base.unapprovedAttemptsExpire }
    var transactionSearch: (any TransactionSearching)? { base.transactionSearch }
    var eventList: (any EventListing)? { base.eventList }

    func inquire(_ transaction: TransactionQuery) async -> ProviderOutcome<CallOutcomes> {
        let start = DispatchTime.now()
        let outcome = await base.inquire(transaction)
        WorkerMetrics.call(provider, "inquire", outcome, since: start)
        return outcome
    }

    func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> {
        let start = DispatchTime.now()
        let outcome = await base.references(in: event)
        WorkerMetrics.call(provider, "resolve", outcome, since: start)
        return outcome
    }

    func snapshot(of transaction: TransactionQuery) async -> ProviderOutcome<Snapshot> {
        let start = DispatchTime.now()
        let outcome = await base.snapshot(of: transaction)
        WorkerMetrics.call(provider, "fetch", outcome, since: start)
        return outcome
    }

    func lookup(_ transaction: TransactionQuery) async -> ProviderOutcome<TransactionLookup> {
        let start = DispatchTime.now()
        let outcome = await base.lookup(transaction)
        WorkerMetrics.call(provider, "lookup", outcome, since: start)
        return outcome
    }

    func prepare(_ call: ActionCall) -> [TransactionLink] { base.prepare(call) }

    func doctor(_ context: DoctorContext) async -> [DoctorCheck] { await base.doctor(context) }

    func execute(_ call: ActionCall) async -> ActionCallResult {
        let start = DispatchTime.now()
        let result = await base.execute(call)
        WorkerMetrics.call(provider, "action", result.outcome, since: start)
        return result
    }
}
