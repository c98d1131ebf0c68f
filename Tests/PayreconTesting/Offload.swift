import Foundation

/// Runs blocking work (libpq, RSA key generation, a server's blocking shutdown) on a thread of its own, so async
/// tests never block Swift's cooperative pool: it has as many threads as cores (2 here), and tests run in parallel.
public func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

public func offload(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread {
            body(); continuation.resume()
        }.start()
    }
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass (never a sleep as the assertion itself).
public func eventually(_ seconds: Double = 15, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}

/// A test could not set up what it needs (not a finding about the code under test).
public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// `eventually` for a plain condition (thread-safe state read from another thread), polled every 10 ms.
public func eventually(_ seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
