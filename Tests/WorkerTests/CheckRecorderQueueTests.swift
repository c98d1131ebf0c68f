import Testing
@testable import Worker

/// How the check recorder groups what waits: the queue alone, no database.
@Suite struct CheckRecorderQueueTests {
    typealias Queue = CheckRecorder.Queue<Int>

    @Test func aCheckStartsAFlusherUntilTheLimitRuns() {
        var q = Queue(maxFlushers: 2, maxGroup: 64)
        let first = q.add(1, key: "a"), second = q.add(2, key: "b"), third = q.add(3, key: "c")
        #expect(first && second)
        #expect(!third, "two flushers run: the third check waits for one of them")
        #expect(q.flushers == 2)
    }

    @Test func aGroupTakesWhatWaitsOldestFirstUpToItsSize() {
        var q = Queue(maxFlushers: 1, maxGroup: 3)
        for i in 1...5 { _ = q.add(i, key: "k\(i)") }
        let groups = [q.takeGroup(), q.takeGroup()]
        #expect(groups == [[1, 2, 3], [4, 5]])
        #expect(q.flushers == 1)
        let last = q.takeGroup()
        #expect(last.isEmpty)
        #expect(q.flushers == 0, "a flusher that finds nothing stops")
        let restarted = q.add(6, key: "k6")
        #expect(restarted, "and the next check starts one again")
    }

    /// Two checks of one order never share a group: the later plans from what the earlier recorded.
    @Test func aSecondCheckOfAnOrderWaitsForTheNextGroupKeepingItsPlace() {
        var q = Queue(maxFlushers: 1, maxGroup: 64)
        _ = q.add(1, key: "pxp:O-1")
        _ = q.add(2, key: "pxp:O-2")
        _ = q.add(3, key: "pxp:O-1")
        _ = q.add(4, key: "pxp:O-3")
        _ = q.add(5, key: "pxp:O-1")
        let groups = (0..<4).map { _ in q.takeGroup() }
        #expect(groups == [[1, 2, 4], [3], [5], []])
    }

    /// The last flusher without a connection fails what waits; while another runs, that one records it.
    @Test func onlyTheLastFlusherWithoutAConnectionTakesWhatWaits() {
        var q = Queue(maxFlushers: 2, maxGroup: 2)
        _ = q.add(1, key: "a"); _ = q.add(2, key: "a"); _ = q.add(3, key: "b")
        #expect(q.flushers == 2)
        let first = q.stopWithoutConnection()
        #expect(first.isEmpty, "another flusher runs: it records them")
        #expect(q.flushers == 1)
        let last = q.stopWithoutConnection()
        #expect(last == [1, 2, 3])
        #expect(q.flushers == 0)
        let none = q.takeGroup()
        #expect(none.isEmpty)
    }

    /// A group whose connection broke goes back ahead of what came after it, in its order.
    @Test func aGroupPutBackIsTakenFirst() {
        var q = Queue(maxFlushers: 1, maxGroup: 64)
        _ = q.add(1, key: "a"); _ = q.add(2, key: "b")
        let group = q.takeGroup()
        _ = q.add(3, key: "a")
        q.requeueFront([(["a"], 1), (["b"], 2)])
        let again = [q.takeGroup(), q.takeGroup()]
        #expect(group == [1, 2])
        #expect(again == [[1, 2], [3]], "the put-back check of a goes before the later one of a")
    }

    /// An unknown transaction's check and the check of an order holding that transaction share a lock (the order's
    /// check takes its transactions' unknown-order keys): never one group, in either order (second review: one resolved
    /// what the other wrote, and its evidence did not say so).
    @Test func checksSharingAnyLockNeverShareAGroup() {
        var q = Queue(maxFlushers: 1, maxGroup: 64)
        _ = q.add(1, keys: ["pxp:?TX-1"])
        _ = q.add(2, keys: ["pxp:ORD-1", "pxp:?TX-1"])
        _ = q.add(3, keys: ["pxp:ORD-2", "pxp:?TX-2"])
        _ = q.add(4, keys: ["pxp:?TX-2"])
        #expect([q.takeGroup(), q.takeGroup(), q.takeGroup()] == [[1, 3], [2, 4], []])
    }
}
