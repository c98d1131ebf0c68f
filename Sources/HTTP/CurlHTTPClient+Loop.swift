import CCurl
import Foundation
import Observability
import Synchronization

/// The thread that owns a curl multi handle and runs every transfer of one `CurlHTTPClient`.
///
/// Other threads only `submit` commands (a Mutex-guarded queue, then `curl_multi_wakeup`); everything else —
/// the multi handle's transfers, `active`, `idle`, the transfers' buffers and continuations — is touched on the
/// loop thread alone, which is what makes the `@unchecked Sendable` sound.
final class CurlLoop: @unchecked Sendable {
    enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
    }

    private struct Inbox {
        var commands: [Command] = []
        /// Set by `shutdown`; afterwards nothing is queued and the multi handle is not woken again.
        var closed = false
    }

    private let inbox = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    private let maxIdleHandles: Int
    // Loop thread only.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var idle: [CurlEasy] = []

    init(maxConnectionsPerHost: Int, maxCachedConnections: Int, maxIdleHandles: Int) {
        _ = curlGlobalInit
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        self.maxIdleHandles = maxIdleHandles
        _ = payrecon_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        _ = payrecon_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxCachedConnections)
        let thread = Thread { [self] in  // the thread keeps the loop alive until `run` returns
            ThreadName.set("curl-loop")
            run()
        }
        thread.start()
    }

    /// Queues a command for the loop thread. An `add` after shutdown fails its transfer at once.
    func submit(_ command: Command) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.closed else { return false }
            // A non-empty queue means a wakeup is already pending: the loop drains the whole queue at once.
            if inbox.commands.isEmpty { _ = curl_multi_wakeup(multi) }
            inbox.commands.append(command)
            return true
        }
        if !accepted, case .add(let transfer) = command {
            transfer.finish(.failure(HTTPClientError.connection(transfer.url, "client shut down")))
        }
    }

    /// Stops the loop: transfers still running fail with `.connection`, then the handles are freed.
    func shutdown() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.closed = true
            _ = curl_multi_wakeup(multi)
        }
    }

    private func run() {
        var running: Int32 = 0
        while true {
            let (commands, closed) = inbox.withLock { inbox -> ([Command], Bool) in
                defer { inbox.commands.removeAll(keepingCapacity: true) }
                return (inbox.commands, inbox.closed)
            }
            for command in commands {
                switch command {
                case .add(let transfer): attach(transfer)
                case .cancel(let transfer): detach(transfer, with: CancellationError())
                }
            }
            if closed {
                close()
                return
            }
            _ = curl_multi_perform(multi, &running)
            collectCompleted()
            // Returns on socket activity, curl's next internal timeout, a wakeup, or after a second.
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }

    private func attach(_ transfer: CurlTransfer) {
        let easy = idle.popLast() ?? CurlEasy()
        if let error = transfer.configure(easy) {
            recycle(easy)
            transfer.finish(.failure(error))
            return
        }
        active[easy.handle] = transfer
        transfer.easy = easy
        let code = curl_multi_add_handle(multi, easy.handle)
        if code != CURLM_OK {
            active[easy.handle] = nil
            transfer.easy = nil
            recycle(easy)
            transfer.finish(.failure(HTTPClientError.connection(transfer.url, String(cString: curl_multi_strerror(code)))))
        }
    }

    /// Takes a running transfer off the multi handle and fails it (a cancel after completion finds nothing).
    private func detach(_ transfer: CurlTransfer, with error: any Error) {
        guard let easy = transfer.easy, active[easy.handle] === transfer else { return }
        active[easy.handle] = nil
        transfer.easy = nil
        _ = curl_multi_remove_handle(multi, easy.handle)
        recycle(easy)
        transfer.finish(.failure(error))
    }

    private func collectCompleted() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result  // read before remove_handle frees the message
            guard let transfer = active.removeValue(forKey: handle), let easy = transfer.easy else { continue }
            transfer.easy = nil
            _ = curl_multi_remove_handle(multi, handle)
            let result = transfer.result(of: code, easy: easy)
            recycle(easy)
            transfer.finish(result)
        }
    }

    /// Keeps a handle for the next transfer (its settings cleared; connections live in the multi handle's cache).
    private func recycle(_ easy: CurlEasy) {
        if idle.count < maxIdleHandles {
            curl_easy_reset(easy.handle)
            idle.append(easy)
        } else {
            easy.cleanup()
        }
    }

    private func close() {
        for transfer in Array(active.values) {
            detach(transfer, with: HTTPClientError.connection(transfer.url, "client shut down"))
        }
        for easy in idle { easy.cleanup() }
        idle = []
        _ = curl_multi_cleanup(multi)
    }
}

/// One curl easy handle and its error buffer (loop thread only).
final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let handle = curl_easy_init() else { fatalError("curl_easy_init failed") }
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// The last error curl wrote for this handle, if any.
    var errorMessage: String? {
        errorBuffer[0] == 0 ? nil : String(cString: errorBuffer)
    }

    func cleanup() {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }
}
