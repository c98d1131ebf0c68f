import Observability
import Foundation
import Providers
import Reconciliation
import Reporting
import Store
import Wiring
import Worker

private let checkFormat = Options.format(["table", "json"])

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "check",
        summary: "May this order be fulfilled now? A fresh check of it at the provider, and the verdict: fulfil, wait or refuse.",
        arguments: [.init(name: "PROVIDER:ORDER_ID", help: "The order to verify (pxp:ORD-1).")],
        options: [checkFormat, Options.databaseURL],
        details: """
            Re-fetches the order's transactions now (the worker's check, recorded the same way, with its evidence:
            payrecon explain --order shows it) and answers whether the merchant may fulfil it (ship, release, confirm a
            payout): fulfil (the provider holds the order's money as its intent requires, on transactions the merchant
            listed or payrecon made, for the amount it keeps, nothing disputed, reversed, pending or in doubt), wait
            (something is still to happen: what is awaited is listed) or refuse (every reason, in words). With the
            figures the verdict saw (A, C, R, V, D, state). Exit 0 fulfil, 1 wait or refuse, 2 when the order is unknown
            or the check could not be made (the provider or the database out of reach: never a guess).
            """
    )

    var provider: Provider
    var orderID: String
    var format: String
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        guard let key = args.positionals.first else { throw UsageError("give the order as PROVIDER:ORDER_ID (pxp:ORD-1)") }
        (provider, orderID) = try Options.orderKey(key, what: "the order")
        format = try args.value(checkFormat) ?? "table"
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let context = try WorkerContext(Environment(databaseURL: databaseURL), poolSize: 2, maxConcurrentRequests: 4, logger: logger)
        defer { context.pool.close() }
        let order: Order?
        do {
            order = try await context.pool.run { [provider, orderID] in try OrderStore.find(provider: provider, orderID: orderID, on: $0) }
        } catch {
            throw FatalError("cannot read the order: \(error). Check DATABASE_URL and that the server is running")
        }
        guard let order else {
            throw FatalError(
                "payrecon holds no \(provider.rawValue) order \(orderID.terminalSafe): import it first (payrecon orders import)")
        }
        let checkedAt = Int64(Date().timeIntervalSince1970)
        let (result, verdict, current) = await context.checker.verify(order, logger: context.logger)
        guard let verdict else {
            let why: String
            switch result {
            case .transient(let t): why = "the provider or the database is out of reach (\(t.reason)); try again"
            case .unreadable(let reason): why = "the provider's answer could not be read (\(reason))"
            case .failed(let reason): why = reason
            case .checked: why = "another check of the order was recorded at the same moment, or the order changed during it; try again"
            }
            throw FatalError("no verdict for \(provider.rawValue):\(orderID.terminalSafe): \(why.terminalSafe)")
        }
        let report = VerdictReport(order: current, verdict: verdict, checkedAt: checkedAt)
        switch format {
        case "json": FileHandle.standardOutput.write(Data(report.json()))
        default: FileHandle.standardOutput.write(Data(TextTable.safeMultiline(report.table()).utf8))
        }
        return verdict.outcome == .fulfil ? Exit.ok : Exit.finding
    }
}
