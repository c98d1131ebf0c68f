// libFuzzer harness: PayPalEvent.parse (and the Paypercut event parser, same shape of input) on arbitrary bodies.
// Property: a parsed event has a non-empty-or-not id taken as written; parsing twice gives the same event.
import Providers

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    if let e = try? PayPalEvent.parse(body: body) {
        precondition((try? PayPalEvent.parse(body: body)) == e, "parsing is not deterministic")
        _ = e.orderID
    }
    _ = try? PaypercutEvent.parse(body: body)
    _ = try? WebhookDeliverySummary.parse(provider: .paypal, body: body, headers: [:])
    _ = try? WebhookDeliverySummary.parse(provider: .paypercut, body: body, headers: [:])
    return 0
}
