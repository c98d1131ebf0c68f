import Observability
import Providers
import Wiring
import Worker

private let actionLease = Options.lease.help("Lease on a claimed action, renewed while its call is in flight (default 120s).")

struct ActionsExecuteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "actions execute",
        summary: "Execute pending actions at the provider, each once, with its idempotency key.",
        options: [actionLease, Options.databaseURL],
        details: """
            Each action is re-planned just before its call (sent only if the order still calls for it, with the fresh
            amount). Transient provider failures leave an action pending for the next run; other failures mark it failed
            with the provider's answer.
            """
    )

    var lease: Duration
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        lease = try args.value(actionLease, default: .seconds(120))
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment(databaseURL: databaseURL)
        let context = try WorkerContext(env, logger: logger)
        try context.requireReadyDatabase(env)
        let executor = ActionExecutor(
            pool: context.pool, gateway: context.gateway, checker: context.checker, lease: lease,
            inDoubtGrace: context.inDoubtGrace, logger: context.logger)
        let t = await executor.executePending(limit: 100_000)
        print("actions executed: \(t.succeeded) succeeded, \(t.failed) failed, \(t.deferred) left pending")
        context.pool.close()
        return t.failed > 0 || t.deferred > 0 ? Exit.finding : Exit.ok
    }
}
