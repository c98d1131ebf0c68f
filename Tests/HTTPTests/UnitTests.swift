import Foundation
import PayreconTesting
import Synchronization
import Testing

@testable import HTTP

@Suite("RequestStateMachine")
struct RequestStateMachineTests {
    let answer = HTTPResponse.text("answer")
    let drain = HTTPResponse(status: 503)

    @Test func answeredDuringTheHandlerIsQueuedWithoutSuspending() {
        var machine = RequestStateMachine()
        machine.dispatch()
        #expect(machine.respond(answer) == .stored)
        #expect(machine.settle(inUpload: false, draining: false, drainResponse: drain) == .queue(answer))
        #expect(machine.respond(.text("again")) == .ignored)
    }

    @Test func answeredLaterResumesTheSuspendedConnection() {
        var machine = RequestStateMachine()
        machine.dispatch()
        #expect(machine.settle(inUpload: false, draining: false, drainResponse: drain) == .suspend)
        #expect(machine.isSuspended)
        #expect(machine.respond(answer) == .resume)
        #expect(machine.respond(.text("again")) == .ignored)
        // MHD calls back after the resume: that call queues the answer, once.
        #expect(machine.settle(inUpload: false, draining: false, drainResponse: drain) == .queue(answer))
        #expect(machine.settle(inUpload: false, draining: false, drainResponse: drain) == .none)
    }

    @Test func answeredWhileSuspendedMidUploadWaitsForTheFinalCall() {
        var machine = RequestStateMachine()
        machine.dispatch()
        _ = machine.settle(inUpload: false, draining: false, drainResponse: drain)
        #expect(machine.respond(answer) == .resume)
        #expect(machine.settle(inUpload: true, draining: false, drainResponse: drain) == .keepReading)
        #expect(machine.settle(inUpload: false, draining: true, drainResponse: drain) == .queue(answer))
    }

    @Test func duringUploadNothingIsQueuedUntilTheFinalCall() {
        var machine = RequestStateMachine()
        machine.dispatch()
        #expect(machine.settle(inUpload: true, draining: false, drainResponse: drain) == .keepReading)
        #expect(machine.respond(answer) == .stored)
        #expect(machine.settle(inUpload: true, draining: false, drainResponse: drain) == .keepReading)
        #expect(machine.settle(inUpload: false, draining: false, drainResponse: drain) == .queue(answer))
    }

    @Test func drainingAnswersInsteadOfSuspending() {
        var machine = RequestStateMachine()
        machine.dispatch()
        #expect(machine.settle(inUpload: false, draining: true, drainResponse: drain) == .queue(drain))
        #expect(machine.respond(answer) == .ignored)
    }

    @Test func answersBeforeDispatchOrAfterCloseAreIgnored() {
        var machine = RequestStateMachine()
        #expect(machine.respond(answer) == .ignored)  // still reading the body
        machine.dispatch()
        _ = machine.settle(inUpload: false, draining: false, drainResponse: drain)
        machine.close()
        #expect(machine.respond(answer) == .ignored)
        #expect(!machine.isSuspended)
    }
}

@Suite("AsyncSemaphore")
struct AsyncSemaphoreTests {
    @Test func waitersAreServedInOrder() async throws {
        let semaphore = AsyncSemaphore(permits: 1)
        try await semaphore.acquire()
        let order = Shared<[Int]>([])
        var tasks: [Task<Void, any Error>] = []
        for index in 0..<5 {
            tasks.append(
                Task {
                    try await semaphore.acquire()
                    order.update { $0.append(index) }
                    semaphore.release()
                })
            // Let each waiter enqueue before the next.
            #expect(await eventually { semaphore.availablePermits == 0 })
            try await Task.sleep(for: .milliseconds(20))
        }
        semaphore.release()
        for task in tasks { try await task.value }
        #expect(order.get() == [0, 1, 2, 3, 4])
        #expect(semaphore.availablePermits == 1)
    }

    @Test func cancelledWaiterLeavesWithoutTakingAPermit() async throws {
        let semaphore = AsyncSemaphore(permits: 1)
        try await semaphore.acquire()
        let waiter = Task { try await semaphore.acquire() }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        semaphore.release()
        #expect(semaphore.availablePermits == 1)
        try await semaphore.acquire()  // still usable
        semaphore.release()
    }

    @Test func alreadyCancelledTaskDoesNotAcquire() async throws {
        let semaphore = AsyncSemaphore(permits: 2)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await semaphore.acquire()
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(semaphore.availablePermits == 2)
    }
}

@Suite("HTTPHeaders and HTTPResponse")
struct HeadersTests {
    @Test func lookupIsCaseInsensitiveAndKeepsOrder() {
        var headers = HTTPHeaders([("PAYPAL-TRANSMISSION-ID", "abc"), ("Accept", "a"), ("accept", "b")])
        #expect(headers["paypal-transmission-id"] == "abc")
        #expect(headers["Paypal-Transmission-Id"] == "abc")
        #expect(headers["missing"] == nil)
        #expect(headers.values(for: "ACCEPT") == ["a", "b"])
        #expect(headers.lowercasedDictionary["accept"] == "a, b")
        headers.replace("accept", "c")
        #expect(headers.values(for: "Accept") == ["c"])
        #expect(headers.pairs.map(\.name) == ["PAYPAL-TRANSMISSION-ID", "accept"])
    }

    @Test func errorBodyHasTheProjectShape() throws {
        let response = HTTPResponse.error(status: 413, code: "body_too_large", message: "body over 1048576 bytes")
        #expect(response.status == 413)
        #expect(
            String(decoding: response.body, as: UTF8.self) == #"{"error":{"code":"body_too_large","message":"body over 1048576 bytes"}}"#)
        #expect(response.header("content-type") == "application/json")
    }

    @Test func jsonAndTextHelpers() {
        struct Accepted: Encodable { var status = "accepted"; var event_id = 7 }
        let json = HTTPResponse.json(Accepted())
        #expect(String(decoding: json.body, as: UTF8.self) == #"{"event_id":7,"status":"accepted"}"#)
        #expect(json.status == 200)
        let text = HTTPResponse.text(status: 404, "nö")
        #expect(text.body == Array("nö".utf8))
        #expect(text.header("Content-Type") == "text/plain; charset=utf-8")
    }
}
