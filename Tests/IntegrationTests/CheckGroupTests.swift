import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Synchronization
import Testing
@testable import Worker

/// Many checks recorded in one transaction (`PlannedCheck.record(_:on:)`, grouped by `CheckRecorder`) record what
/// each would alone.
@Suite struct CheckGroupTests {
    static let gbp = Currency(code: "GBP")!
    static let mismatch = Finding(
        kind: .amountMismatch, expected: ["amount": "10.00"], actual: ["amount": "9.00"], detail: "d", amountAtRisk: 100)

    static func order(_ id: String) -> Order {
        Order(
            provider: .pxp, orderID: id, merchant: "M1", site: "S1", transactionRef: "TX-\(id)", intent: .authorisation,
            amount: Money(minorUnits: 1000, currency: gbp), fulfilment: .fulfilled)
    }

    static func snapshot(_ id: String) -> Snapshot {
        Snapshot(
            provider: .pxp, transactionRef: "TX-\(id)", merchant: "M1", site: "S1", intent: .authorisation, currency: gbp,
            value: 1000, authorised: 1000, captured: 0, refunded: 0, state: .authorised, rawState: "Authorised", createdAt: nil)
    }

    static func check(
        _ id: String, at second: TimeInterval, findings: [Finding] = [], capture: Bool = false,
        snapshotJSON: String? = nil
    ) -> PlannedCheck {
        let order = order(id)
        let check = FindingStore.Check(
            provider: .pxp, order: order, transactionRef: order.transactionRef, snapshot: snapshot(id),
            fetchedAt: Date(timeIntervalSince1970: 1_800_000_000 + second), snapshotJSON: snapshotJSON)
        return PlannedCheck(
            check,
            plan: { current, emitted in
                var actions: [PlannedAction] = []
                if capture, let current, emitted.isEmpty {
                    actions.append(
                        PlannedAction(
                            kind: .capture, amount: current.amount.minorUnits, currency: gbp, target: current.amount.minorUnits,
                            idempotencyKey: "pxp:\(id):capture:1000", providerTarget: nil))
                }
                return Plan(findings: findings, actions: actions)
            })
    }

    @Test func aGroupRecordsEachCheckAsItWouldAlone() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert(["A", "B", "C"].map(Self.order), on: conn)
            // TX-C was seen before its order was imported: its unknown_order is resolved by C's first check.
            _ = try PlannedCheck.record(
                provider: .pxp, order: nil, transactionRef: "TX-C", snapshot: nil, fetchedAt: Date(),
                plan: { _, _ in
                    Plan(findings: [Finding(kind: .unknownOrder, expected: [:], actual: [:], detail: "u", amountAtRisk: 0)])
                }, on: conn)
            let first = try PlannedCheck.record(
                [
                    Self.check("A", at: 1, findings: [Self.mismatch]), Self.check("B", at: 1),
                    Self.check("C", at: 1, capture: true)
                ], on: conn)
            #expect(first.map { $0?.outcome.opened } == [1, 0, 0])
            #expect(first.map { $0?.outcome.resolved } == [0, 0, 1])
            #expect(first.map { $0?.outcome.actionsEmitted } == [0, 0, 1])
            #expect(first.map { $0?.plan.findings.count } == [1, 0, 0])
            // Each planned from what the one before it recorded: C's capture is emitted once.
            let second = try PlannedCheck.record(
                [Self.check("C", at: 2, capture: true), Self.check("A", at: 2), Self.check("B", at: 2)], on: conn)
            #expect(second.map { $0?.outcome.resolved } == [0, 1, 0])
            #expect(second.map { $0?.outcome.actionsEmitted } == [0, 0, 0])
            #expect(try db.count("SELECT count(*) FROM snapshots WHERE fetched_at = to_timestamp(1800000002)") == 3)
            #expect(try db.count("SELECT count(*) FROM actions") == 1)
            #expect(try db.count("SELECT count(*) FROM discrepancies WHERE status = 'resolved'") == 2)
        }
    }

    /// An unknown_order recorded just after the order's clean check of the same transaction (the order imported
    /// meanwhile) is resolved by the order's next check, although a clean last check lets a check skip resolving: the
    /// unknown_order marks the order's snapshot open.
    @Test func anUnknownOrderRecordedAfterTheOrdersCleanCheckIsResolvedByItsNextCheck() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert([Self.order("D")], on: conn)
            _ = try PlannedCheck.record([Self.check("D", at: 1)], on: conn)  // clean: nothing left open
            _ = try PlannedCheck.record(
                provider: .pxp, order: nil, transactionRef: "TX-D", snapshot: nil, fetchedAt: Date(),
                plan: { _, _ in
                    Plan(findings: [Finding(kind: .unknownOrder, expected: [:], actual: [:], detail: "u", amountAtRisk: 0)])
                }, on: conn)
            #expect(try db.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order' AND status = 'open'") == 1)
            let next = try PlannedCheck.record([Self.check("D", at: 2)], on: conn)
            #expect(next.first??.outcome.resolved == 1)
            #expect(try db.count("SELECT count(*) FROM discrepancies WHERE kind = 'unknown_order' AND status = 'open'") == 0)
        }
    }

    /// A check that found the transaction gone (missing_at_provider) is newer news than an answer fetched before it
    /// and recorded after it: that older answer does not resolve it.
    @Test func anOlderAnswerRecordedLaterDoesNotReplaceANewerMissingAtProvider() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert([Self.order("M")], on: conn)
            _ = try PlannedCheck.record([Self.check("M", at: 1)], on: conn)
            let missing = Finding(
                kind: .missingAtProvider, expected: ["transaction_ref": "TX-M"], actual: [:], detail: "gone", amountAtRisk: 1000)
            var gone = Self.check("M", at: 10, findings: [missing])
            gone.check.snapshot = nil
            _ = try PlannedCheck.record([gone], on: conn)
            #expect(try db.count("SELECT count(*) FROM discrepancies WHERE kind = 'missing_at_provider' AND status = 'open'") == 1)
            let older = try PlannedCheck.record([Self.check("M", at: 5)], on: conn)
            #expect(older[0] == nil, "fetched before the check that found it gone: older news")
            #expect(try db.count("SELECT count(*) FROM discrepancies WHERE kind = 'missing_at_provider' AND status = 'open'") == 1)
        }
    }

    /// A group refused before anything is sent (two checks sharing a lock) sends no ROLLBACK: a caller's own open
    /// transaction, and what it wrote, are left as they were.
    @Test func aGroupRefusedBeforeItBeginsLeavesTheCallersTransactionAlone() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try conn.transaction { tx in
                try OrderStore.upsert(["A"].map(Self.order), on: tx)
                #expect(throws: PostgresError.self) { try PlannedCheck.record([Self.check("A", at: 1), Self.check("A", at: 2)], on: tx) }
                #expect(tx.inTransaction, "the caller's transaction is still open")
            }
            #expect(try db.count("SELECT count(*) FROM orders WHERE order_id = 'A'") == 1, "what the caller wrote committed")
        }
    }

    @Test func aStaleCheckOrAGoneOrderInAGroupRecordsNothingAndTheOthersAreRecorded() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert(["A", "B"].map(Self.order), on: conn)
            _ = try PlannedCheck.record([Self.check("A", at: 10)], on: conn)
            let group = try PlannedCheck.record(
                [
                    Self.check("A", at: 5, findings: [Self.mismatch]), Self.check("B", at: 5),
                    Self.check("GONE", at: 5)
                ], on: conn)
            #expect(group[0] == nil, "fetched before the stored snapshot: older news")
            #expect(group[1] != nil)
            #expect(group[2] == nil, "no such order")
            #expect(try db.count("SELECT count(*) FROM discrepancies") == 0)
            #expect(try db.count("SELECT count(*) FROM snapshots") == 2)
        }
    }

    @Test func twoChecksOfOneOrderInOneGroupAreRefusedWithNothingWritten() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(); defer { conn.close() }
            try OrderStore.upsert([Self.order("A")], on: conn)
            #expect(throws: PostgresError.self) {
                try PlannedCheck.record([Self.check("A", at: 1), Self.check("A", at: 2)], on: conn)
            }
            #expect(try db.count("SELECT count(*) FROM snapshots") == 0)
            #expect(try conn.query("SELECT 1 AS one").first?.int64("one") == 1, "the connection is usable after")
        }
    }

    /// Records `checks` at once through `recorder` while the pool's one connection is held until every check waits.
    static func recordHeld(
        _ checks: [PlannedCheck], _ recorder: CheckRecorder, _ pool: PostgresPool
    ) async throws
        -> [String: Result<CheckRecorder.Recorded, any Error>]
    {
        let release = Mutex(false)
        let holder = Task { try await pool.run { _ in while !release.withLock({ $0 }) { usleep(5_000) } } }
        let results = try await withThrowingTaskGroup(of: (String, Result<CheckRecorder.Recorded, any Error>).self) { group in
            for check in checks {
                group.addTask {
                    do { return (check.check.order!.orderID, .success(try await recorder.record(check))) } catch {
                        return (check.check.order!.orderID, .failure(error))
                    }
                }
            }
            while recorder.waitingCount < checks.count { try await Task.sleep(for: .milliseconds(5)) }
            release.withLock { $0 = true }
            var out: [String: Result<CheckRecorder.Recorded, any Error>] = [:]
            for try await (id, result) in group { out[id] = result }
            return out
        }
        try await holder.value
        return results
    }

    /// Checks that wait while the connection is busy go in one group; one that cannot be written (here a snapshot
    /// that is no JSON) fails alone, and the rest of its group is recorded.
    @Test func theRecorderGroupsWaitingChecksAndABadOneFailsAlone() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let pool = PostgresPool(conninfo: db.url, size: 1, acquireTimeout: .seconds(30))
        defer { pool.close() }
        let ids = (1...20).map { "O-\($0)" }
        _ = try await pool.run { try OrderStore.upsert((ids + ["P-1", "P-2", "P-3"]).map(Self.order), on: $0) }
        let recorder = CheckRecorder(pool: pool, flushers: 1, maxGroup: 64)

        let first = try await Self.recordHeld(
            ids.map { Self.check($0, at: 1, findings: $0 == "O-7" ? [Self.mismatch] : []) }, recorder, pool)
        #expect(recorder.groupsRecorded == 1, "20 waiting checks, one transaction")
        #expect(ids.allSatisfy { id in (try? first[id]?.get())??.outcome.opened == (id == "O-7" ? 1 : 0) }, "\(first)")
        #expect(try db.count("SELECT count(*) FROM snapshots") == 20)

        let second = try await Self.recordHeld(
            [
                Self.check("P-1", at: 1), Self.check("P-2", at: 1, snapshotJSON: "{not json"),
                Self.check("P-3", at: 1, findings: [Self.mismatch])
            ], recorder, pool)
        #expect(recorder.groupsRecorded == 1, "the group failed; its checks were recorded one by one")
        #expect((try? second["P-1"]?.get()) != nil)
        #expect((try? second["P-3"]?.get())??.outcome.opened == 1)
        guard case .failure(let error)? = second["P-2"] else { Issue.record("the bad check did not fail: \(second)"); return }
        #expect("\(error)".contains("json"), "\(error)")
        #expect(try db.count("SELECT count(*) FROM snapshots") == 22)
    }
    /// An order's check also takes the unknown-transaction locks of its transactions (it may resolve their
    /// unknown_order rows): two groups then cannot each hold a row the other is resolving.
    @Test func anOrdersCheckWaitsForTheUnknownTransactionLockOfItsTransaction() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        try await offload {
            let conn = try db.connect(), other = try db.connect()
            defer { conn.close(); other.close() }
            try OrderStore.upsert([Self.order("A")], on: conn)
            _ = try other.execute("BEGIN")
            _ = try other.query("SELECT pg_advisory_xact_lock(hashtext('pxp:?TX-A'))")  // an unknown check of TX-A
            _ = try conn.execute("SET statement_timeout = '1s'")
            #expect(throws: PostgresError.self, "the check of A did not wait for TX-A's unknown-transaction lock") {
                try PlannedCheck.record([Self.check("A", at: 1)], on: conn)
            }
            _ = try other.execute("ROLLBACK")
            _ = try conn.execute("SET statement_timeout = 0")
            #expect(try PlannedCheck.record([Self.check("A", at: 1)], on: conn)[0] != nil)
        }
    }

    /// The flusher's connection dies while checks wait for it: they are recorded on a fresh connection, not failed.
    @Test func checksWaitingOnAConnectionThatDiesAreRecordedOnAFreshOne() async throws {
        let db = try await offload { try TestDatabase.create() }
        defer { db.drop() }
        let pool = PostgresPool(conninfo: db.url, size: 1, acquireTimeout: .seconds(30))
        defer { pool.close() }
        let ids = (1...5).map { "D-\($0)" }
        _ = try await pool.run { try OrderStore.upsert(ids.map(Self.order), on: $0) }
        let recorder = CheckRecorder(pool: pool, flushers: 1, maxGroup: 64)
        // The pool's one connection, its server process ended while the checks wait for it.
        let pid = try await pool.run { try $0.query("SELECT pg_backend_pid() AS pid")[0].int64("pid") }
        let release = Mutex(false), held = Mutex(false)
        let holder = Task {
            try await pool.run { _ in
                held.withLock { $0 = true }; while !release.withLock({ $0 }) { usleep(5_000) }
            }
        }
        // The checks start only once the holder has the connection: a flusher that took it first would record them
        // before the connection dies, and they would never all wait (the test hung on that race).
        let deadline = ContinuousClock.now + .seconds(30)
        while !held.withLock({ $0 }) {
            guard ContinuousClock.now < deadline else {
                release.withLock { $0 = true }; Issue.record("the holder never got the connection"); return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let results = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for id in ids {
                group.addTask { (id, (try? await recorder.record(Self.check(id, at: 1))) != nil) }
            }
            while recorder.waitingCount < ids.count {
                guard ContinuousClock.now < deadline else { release.withLock { $0 = true }; break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(recorder.waitingCount == ids.count, "the checks did not all wait for the held connection")
            try await offload {
                let admin = try db.connect(); defer { admin.close() }
                _ = try admin.query("SELECT pg_terminate_backend($1::int)", [.int64(pid)])
            }
            release.withLock { $0 = true }
            var out: [String: Bool] = [:]
            for try await (id, ok) in group { out[id] = ok }
            return out
        }
        try await holder.value
        #expect(results == Dictionary(uniqueKeysWithValues: ids.map { ($0, true) }), "\(results)")
        #expect(try db.count("SELECT count(*) FROM snapshots") == 5)
    }
}
