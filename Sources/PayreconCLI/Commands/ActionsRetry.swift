import Foundation
import Observability
import Providers
import Reconciliation
import Store
import Wiring
import Worker

private let failedFlag = FlagKey("--failed", "Every failed action.")

struct ActionsRetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "actions retry",
        summary: "Re-plan a failed action and make it pending again if the order still calls for it.",
        arguments: [.init(name: "ID", help: "The action id (actions list).", optional: true)],
        options: [failedFlag, Options.databaseURL],
        details: """
            For after an operator fixed the cause of a failure: a missing permission, a provider-side state, or a call
            whose outcome was unknown and was checked at the provider (it was not applied). --failed leaves actions whose
            last call's outcome is unknown: those are retried only by their ID. The transaction is fetched
            again and the order re-planned: an action the fresh plan still wants is pending again with the plan's amount
            (the next `actions execute` or worker sends it); one it no longer wants is superseded. Exit 0 when every action
            was re-planned, 1 when one could not be (it is not failed, or the provider or the database could not be asked
            now), 2 when the ID given is no action's, on a usage error, or when the database is unreachable or unmigrated.
            """
    )

    /// The action given by its id, or nil with `--failed`.
    var id: Int64?
    var everyFailed: Bool
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        everyFailed = args.flag(failedFlag)
        if everyFailed && !args.positionals.isEmpty { throw UsageError("give either ID or --failed, not both") }
        id = try args.positionals.first.map { (text: String) throws(UsageError) -> Int64 in try Options.id(text, of: "an action id") }
        databaseURL = try args.value(Options.databaseURL)
    }

    func validate() throws(UsageError) {
        if everyFailed && id != nil { throw UsageError("give either ID or --failed, not both") }
        if !everyFailed && id == nil { throw UsageError("give an action ID or --failed") }
    }

    func run(logger: Logger) async throws -> Int32 {
        let env = Environment(databaseURL: databaseURL)
        let context = try WorkerContext(env, logger: logger)
        defer { context.pool.close() }
        try context.requireReadyDatabase(env)
        let executor = ActionExecutor(
            pool: context.pool, gateway: context.gateway, checker: context.checker,
            inDoubtGrace: context.inDoubtGrace, logger: context.logger)
        var ids: [Int64] = []
        if let id {
            ids = [id]
        } else {
            let failed = try await context.pool.run { try ActionStore.list(status: .failed, limit: 100_000, on: $0) }
            // A call whose outcome is unknown is retried only by its id, once someone checked it was not applied.
            let unknown = failed.filter(\.inDoubt)
            ids = failed.filter { !$0.inDoubt }.map(\.id)
            if !unknown.isEmpty {
                CLI.printError(
                    "\(unknown.count) failed actions whose last call's outcome is unknown are left as they are ("
                        + unknown.prefix(10).map { String($0.id) }.joined(separator: ", ")
                        + "): check each at the provider, and retry it by its ID if it was not applied")
            }
            if ids.isEmpty { print("no failed actions to retry"); return unknown.isEmpty ? Exit.ok : Exit.finding }
        }
        var partial = false
        for id in ids {
            switch await executor.retry(id: id) {
            case .pending(let amount):
                let a = try await context.pool.run { try ActionStore.find(id: id, on: $0) }
                let shown =
                    a.map { Money.format(minorUnits: amount, exponent: $0.amount.currency.exponent) + " " + $0.amount.currency.code }
                    ?? String(amount)
                print("action \(id) is pending again (\(shown))")
            case .retired(let why): print("action \(id) is no longer wanted and was superseded: \(why)")
            case .notNow(let why): CLI.printError("action \(id) was not retried: \(why); try again later"); partial = true
            case .notFailed(let why): CLI.printError(why); partial = true
            case .noSuchAction(let why):
                // Asked for by id: the id is wrong (exit 2, as events retry and explain say of one). Listed by --failed
                // and gone since (pruned meanwhile): nothing left to retry.
                guard everyFailed else { throw FatalError(why) }
                CLI.printError(why); partial = true
            }
        }
        return partial ? Exit.finding : Exit.ok
    }
}
