import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// Readings of what the providers leave undocumented, safe whichever way the provider shows it
/// (docs/PROVIDER-FACTS.md PXP-33, PXP-34, PAYPAL-27).
@Suite struct UndocumentedReadingsTests {
    /// PXP may show the parent Captured after a partial capture. C is what the captures hold (6.00 of 10.00
    /// here), not the whole value, and the rest can still be captured: the same snapshot as when PXP keeps the parent
    /// Authorised.
    @Test(arguments: ["Authorised", "Captured"]) func aPartialCaptureReadsTheSameWhicheverWayPXPShowsTheParent(_ parentState: String) throws
    {
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: parentState, value: "10.00"),
            modifications: [child("c1", .capture, 600, "Captured")], transactionRef: "r")
        #expect((s.authorised, s.captured, s.state) == (1000, 600, .authorised))
        // A full capture reads captured either way.
        let full = try PXPMapping.snapshot(
            transaction: try pxpAnswer(state: parentState, value: "10.00"),
            modifications: [child("c1", .capture, 1000, "Captured")], transactionRef: "r")
        #expect((full.captured, full.state) == (1000, .captured))
    }

    /// PXP-34: an increment payrecon sent (10.00 raised to 12.00) reads A = 12.00 whether PXP shows the new total on
    /// authorisedAmount, on transactionValue too, or on neither.
    @Test(arguments: [("10.00", nil), ("10.00", "12.00"), ("12.00", "12.00"), ("12.00", nil)] as [(String, String?)])
    func anIncrementPayreconSentCountsOnce(_ value: String, _ authorised: String?) throws {
        var increment = child("i1", .incremental, 200, "Authorised")
        increment.newTotal = 1200
        let s = try PXPMapping.snapshot(
            transaction: try pxpAnswer(value: value, authorisedAmount: authorised),
            modifications: [increment], transactionRef: "r")
        #expect(s.authorised == 1200, "value \(value), authorisedAmount \(authorised ?? "absent")")
    }

    /// A PayPal order of two purchase units, one captured and one still authorised. It reads authorised (it was
    /// read as captured, so the second unit was silently never captured), and the capture spreads over the open
    /// authorizations.
    @Test func anOpenAuthorizationBesideCapturedMoneyIsAuthorisedAndCapturable() throws {
        let order = try JSONValue.parse(
            #"""
            {"id":"O2","status":"COMPLETED","intent":"AUTHORIZE","create_time":"2026-11-01T10:00:00Z","purchase_units":[
              {"reference_id":"A","amount":{"currency_code":"USD","value":"60.00"},"payee":{"merchant_id":"M1"},"payments":{
                "authorizations":[{"id":"AUTH-A","status":"CAPTURED","amount":{"currency_code":"USD","value":"60.00"}}],
                "captures":[{"id":"CAP-A","status":"COMPLETED","amount":{"currency_code":"USD","value":"60.00"},
                             "links":[{"rel":"up","href":"https://api.paypal.com/v2/payments/authorizations/AUTH-A"}]}]}},
              {"reference_id":"B","amount":{"currency_code":"USD","value":"40.00"},"payee":{"merchant_id":"M1"},"payments":{
                "authorizations":[{"id":"AUTH-B","status":"CREATED","amount":{"currency_code":"USD","value":"40.00"}}]}}]}
            """#)
        let s = try PayPalMapping.snapshot(order: order)
        #expect((s.authorised, s.captured, s.state) == (10000, 6000, .authorised))
        #expect(s.capabilities.capture == .allowed(target: "AUTH-B"))
        // The planner wants the rest captured, on the open authorization.
        let o = Order(
            provider: .paypal, orderID: "ORD", merchant: nil, site: nil, transactionRef: "O2", intent: .authorisation,
            amount: Money(minorUnits: 10000, currency: Currency(code: "USD")!), fulfilment: .fulfilled)
        let plan = Planner.plan(order: o, snapshot: s, emitted: [], now: 1_800_000_000, pendingMax: 86_400)
        #expect(plan.actions.map(\.idempotencyKey) == ["paypal:ORD:capture:10000"])
        #expect(plan.actions.first?.amount == 4000 && plan.actions.first?.providerTarget == "AUTH-B")
    }

    /// Two purchase units both authorised: a capture of the whole spreads over both, a void voids each.
    @Test func twoOpenAuthorizationsAreCaptureSources() throws {
        let order = try JSONValue.parse(
            #"""
            {"id":"O3","status":"COMPLETED","intent":"AUTHORIZE","create_time":"2026-11-01T10:00:00Z","purchase_units":[
              {"reference_id":"A","amount":{"currency_code":"USD","value":"60.00"},"payee":{"merchant_id":"M1"},"payments":{
                "authorizations":[{"id":"AUTH-A","status":"CREATED","amount":{"currency_code":"USD","value":"60.00"}}]}},
              {"reference_id":"B","amount":{"currency_code":"USD","value":"40.00"},"payee":{"merchant_id":"M1"},"payments":{
                "authorizations":[{"id":"AUTH-B","status":"CREATED","amount":{"currency_code":"USD","value":"40.00"}}]}}]}
            """#)
        let s = try PayPalMapping.snapshot(order: order)
        #expect((s.authorised, s.captured, s.state) == (10000, 0, .authorised))
        #expect(s.capabilities.captureSources.map(\.id) == ["AUTH-A", "AUTH-B"])
        #expect(s.capabilities.captureSources.map(\.amount) == [6000, 4000])
    }
}
