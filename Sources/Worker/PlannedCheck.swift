import Foundation
import Postgres
import Reconciliation
import Store

/// One check and the pure planner that decides it. Recording runs the planner between Store's read under the order's
/// lock and Store's write, so the plan is made from the order and actions as stored then; Store itself never plans.
public struct PlannedCheck: Sendable {
    public var check: FindingStore.Check
    /// Given the order as stored under its lock (nil for a transaction no order holds) and its actions.
    public var plan: @Sendable (Order?, [EmittedAction]) -> Plan

    public init(_ check: FindingStore.Check, plan: @escaping @Sendable (Order?, [EmittedAction]) -> Plan) {
        self.check = check
        self.plan = plan
    }

    /// Plans and records checks, each under its order's lock, so checks of one order in any number of processes are
    /// serialized and each plans from what the one before it recorded. Many checks share one transaction (the
    /// sweep's and the worker's checks are grouped by `CheckRecorder`); no two may share a lock key, since the
    /// second would plan from reads taken before the first wrote.
    ///
    /// Two round trips, whatever the group's size: `FindingStore.lockAndRead` (BEGIN, every check's advisory lock in
    /// one statement, then the orders as stored now, their actions and their stored snapshots), then `plan` (pure)
    /// per check, then `FindingStore.write` (the writes and COMMIT). A snapshot fetched before the stored one is
    /// older news: that check records nothing and its result is nil (the newer check planned already), as when its
    /// order is gone. One failing statement rolls back the whole group.
    public static func record(_ checks: [PlannedCheck], on conn: PostgresConnection) throws -> [(outcome: CheckOutcome, plan: Plan)?] {
        guard !checks.isEmpty else { return [] }
        // Refused before BEGIN: nothing to roll back (a ROLLBACK here would end a caller's own transaction).
        try FindingStore.refuseSharedLocks(checks.map(\.check))
        do {
            let locked = try FindingStore.lockAndRead(checks.map(\.check), on: conn)
            let plans = zip(checks, locked.inputs).map { check, input in input.map { check.plan($0.order, $0.emitted) } }
            return try FindingStore.write(locked, plans: plans, on: conn)
        } catch {
            FindingStore.rollBack(on: conn)
            throw error
        }
    }

    /// Plans and records one check under its order's lock (see `record(_:on:)`).
    public static func record(
        provider: Provider, order: Order?, transactionRef: String, snapshot: Snapshot?, fetchedAt: Date,
        currency: String? = nil, transactionRefs: [String]? = nil, snapshotJSON: String? = nil,
        plan: @escaping @Sendable (Order?, [EmittedAction]) -> Plan,
        on conn: PostgresConnection
    ) throws -> (outcome: CheckOutcome, plan: Plan)? {
        let check = FindingStore.Check(
            provider: provider, order: order, transactionRef: transactionRef, snapshot: snapshot, fetchedAt: fetchedAt,
            currency: currency, transactionRefs: transactionRefs, snapshotJSON: snapshotJSON)
        return try record([PlannedCheck(check, plan: plan)], on: conn)[0]
    }
}
