@_spi(Positional) import Postgres
import Foundation
import Testing
@testable import Postgres

@Suite struct PostgresNotificationTests {
    @Test func deliversAPayloadFromAnotherConnection() throws {
        let listener = try connect()
        let sender = try connect()
        let channel = "payrecon \"deliveries\" ü " + uniqueName("c")  // needs quoting
        try listener.listen(channel)
        try sender.notify(channel: channel, payload: "event 42 ✓")
        let received = try listener.waitForNotifications(timeout: .seconds(5))
        #expect(received == [PostgresNotification(channel: channel, payload: "event 42 ✓", pid: sender.backendPID)])
    }

    @Test func timeoutReturnsEmpty() throws {
        let listener = try connect()
        try listener.listen(uniqueName("quiet"))
        let start = ContinuousClock.now
        let received = try listener.waitForNotifications(timeout: .milliseconds(200))
        let elapsed = start.duration(to: .now)
        #expect(received.isEmpty)
        #expect(elapsed >= .milliseconds(150))
        #expect(elapsed < .seconds(3))
        #expect(try listener.waitForNotifications(timeout: .zero).isEmpty)
    }

    @Test func wakesUpWhenANotificationArrivesWhileWaiting() throws {
        let listener = try connect()
        let channel = uniqueName("wake")
        try listener.listen(channel)
        let sender = try connect()
        let thread = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            try? sender.notify(channel: channel, payload: "late")
        }
        thread.start()
        let start = ContinuousClock.now
        let received = try listener.waitForNotifications(timeout: .seconds(10))
        #expect(received.map(\.payload) == ["late"])
        #expect(start.duration(to: .now) < .seconds(5))
    }

    @Test func notificationsSentInATransactionArriveAtCommitAndAllAtOnce() throws {
        let listener = try connect()
        let sender = try connect()
        let channel = uniqueName("tx")
        try listener.listen(channel)
        try sender.transaction { tx in
            try tx.notify(channel: channel, payload: "a")
            try tx.notify(channel: channel, payload: "b")
            #expect(try listener.waitForNotifications(timeout: .milliseconds(200)).isEmpty)
        }
        var payloads: [String] = []
        while payloads.count < 2 {
            let batch = try listener.waitForNotifications(timeout: .seconds(5))
            if batch.isEmpty { break }
            payloads += batch.map(\.payload)
        }
        #expect(payloads == ["a", "b"])
    }

    @Test func notificationsReceivedDuringQueriesAreNotLost() throws {
        let listener = try connect()
        let sender = try connect()
        let channel = uniqueName("during")
        try listener.listen(channel)
        try sender.notify(channel: channel)
        Thread.sleep(forTimeInterval: 0.1)
        _ = try listener.query("SELECT pg_sleep(0.05)")
        #expect(try listener.waitForNotifications(timeout: .zero).map(\.channel) == [channel])
    }

    @Test func unlistenStopsDeliveryAndListenSurvivesReset() throws {
        let listener = try connect()
        let sender = try connect()
        let kept = uniqueName("kept")
        let dropped = uniqueName("dropped")
        try listener.listen(kept)
        try listener.listen(dropped)
        try listener.unlisten(dropped)
        try listener.reset()
        try sender.notify(channel: dropped, payload: "no")
        try sender.notify(channel: kept, payload: "yes")
        let received = try listener.waitForNotifications(timeout: .seconds(5))
        #expect(received.map(\.payload) == ["yes"])
    }

    @Test func aDeadConnectionIsReportedWhileWaiting() throws {
        let listener = try connect()
        try listener.listen(uniqueName("dead"))
        try terminateBackend(listener.backendPID)
        let error = postgresError { _ = try listener.waitForNotifications(timeout: .seconds(5)) }
        #expect(error?.isConnectionFailure == true)
    }
}
