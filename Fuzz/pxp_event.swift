// libFuzzer harness: PXPNotification.parse on arbitrary bodies, with and without X-Request-Id.
// Property: a parsed notification has at least one event, and its dedupe key is the request id or the body's SHA-256 hex.
import Providers

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    if let n = try? PXPNotification.parse(body: body, headers: [:]) {
        precondition(!n.events.isEmpty, "a parsed notification has no event")
        precondition(n.dedupeKey == SHA256.hex(body), "dedupe key is not the body hash")
    }
    if let n = try? PXPNotification.parse(body: body, headers: ["x-request-id": "req-1"]) {
        precondition(n.dedupeKey == "req-1", "dedupe key is not the request id")
    }
    _ = try? WebhookDeliverySummary.parse(provider: .pxp, body: body, headers: [:])
    return 0
}
