import Providers
import Wiring
import Worker

let actionsExecuteCommand = Command(
    name: "actions execute",
    summary: "Execute pending actions at the provider, each once, with its idempotency key.",
    details: "Transient provider failures leave an action pending for the next run; other failures mark it failed with the provider's answer."
) { _ in
    let context = try WorkerContext(Environment())
    let t = await context.executor.executePending(limit: 100_000)
    print("actions executed: \(t.succeeded) succeeded, \(t.failed) failed, \(t.deferred) left pending")
    context.pool.close()
    return t.failed > 0 || t.deferred > 0 ? Exit.finding : Exit.ok
}
