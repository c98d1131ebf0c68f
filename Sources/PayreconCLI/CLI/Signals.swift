import Dispatch
import Foundation

enum Signals {
    /// Suspends until SIGTERM or SIGINT arrives; returns its name.
    static func waitForTermination() async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let queue = DispatchQueue(label: "payrecon.signals")
            let once = OnceFlag()
            var sources: [DispatchSourceSignal] = []
            for (sig, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
                source.setEventHandler {
                    if once.set() { continuation.resume(returning: name) }
                }
                source.resume()
                sources.append(source)
            }
            Signals.keep(sources)
        }
    }

    /// Runs `handler` (on a queue of its own) each time SIGHUP arrives: `serve` and `work` re-read the secrets given as
    /// files then.
    static func onHangup(_ handler: @escaping @Sendable () -> Void) {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "payrecon.sighup"))
        source.setEventHandler(handler: handler)
        source.resume()
        keep([source])
    }

    private nonisolated(unsafe) static var retained: [DispatchSourceSignal] = []
    private static func keep(_ s: [DispatchSourceSignal]) { retained.append(contentsOf: s) }
}

import Synchronization
final class OnceFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    /// True the first time only.
    func set() -> Bool { flag.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged }
}
