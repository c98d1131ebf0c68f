import Foundation

/// Runs blocking work (libpq, RSA key generation, a server's blocking shutdown) on a thread of its own, so async
/// tests never block Swift's cooperative pool: it has as many threads as cores (2 here), and tests run in parallel.
func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

func offload(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread { body(); continuation.resume() }.start()
    }
}
