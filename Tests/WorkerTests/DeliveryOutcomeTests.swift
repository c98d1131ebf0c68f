import Testing
import Store
@testable import Worker

/// How a delivery ends from what its references came to: done with the orders it re-checked, ignored
/// with why it names no payment, never done having done nothing; an unreadable answer fails the order's check, not
/// the delivery; a transient failure anywhere retries the whole delivery.
@Suite struct DeliveryOutcomeTests {
    typealias Step = DeliveryProcessor.Step
    let checked = OrderChecker.Result.checked(CheckOutcome(), matched: true)

    @Test func checkedOrdersAreListedOnce() {
        let r = DeliveryProcessor.combine(
            [.checked(orderID: "A", checked), .checked(orderID: "B", checked), .checked(orderID: "A", checked)],
            provider: .pxp)
        #expect(r == .processed(.done("re-checked pxp orders A, B")))
    }

    @Test func onlyIgnoredStepsEndIgnoredWithTheirReasons() {
        let r = DeliveryProcessor.combine(
            [.ignored("X names no payment"), .ignored("paypal does not know transaction T")], provider: .paypal)
        #expect(r == .processed(.ignored("X names no payment; paypal does not know transaction T")))
    }

    @Test func anUnknownOrderIsWorkDone() {
        let r = DeliveryProcessor.combine([.unknown(transactionRef: "T9", checked), .ignored("a Verification")], provider: .pxp)
        #expect(r == .processed(.done("unknown_order T9; a Verification")))
    }

    @Test func anUnreadableAnswerFailsTheOrderNotTheDelivery() {
        let r = DeliveryProcessor.combine(
            [.checked(orderID: "A", .unreadable(reason: "paypal answer: status = \"NEW\": unknown order status"))],
            provider: .paypal)
        #expect(r == .processed(.done("order A could not be checked: paypal answer: status = \"NEW\": unknown order status")))
    }

    @Test func transientAnywhereRetriesAndPermanentIsKept() {
        let t = DeliveryProcessor.combine(
            [.checked(orderID: "A", checked), .checked(orderID: "B", .transient(reason: "429", retryAfter: .seconds(30)))],
            provider: .pxp)
        #expect(t == .transient(reason: "429", retryAfter: .seconds(30)))
        let p = DeliveryProcessor.combine([.checked(orderID: "A", .failed(reason: "provider answered 403: forbidden"))], provider: .pxp)
        #expect(p == .permanent(reason: "provider answered 403: forbidden"))
    }

    /// The orders a delivery named (what `explain` finds it by): every order checked, whatever its check came to,
    /// once and in order; an unknown transaction, an ignored reference and orders that could not be read name none.
    @Test func theOrdersNamedAreTheOrdersChecked() {
        let transient = OrderChecker.Result.transient(reason: "429", retryAfter: .seconds(30))
        let steps: [Step] = [
            .checked(orderID: "B", checked), .unknown(transactionRef: "T9", checked), .checked(orderID: "A", transient),
            .ignored("a Verification"), .unfound(.transient(reason: "database", retryAfter: nil)),
            .checked(orderID: "B", .unreadable(reason: "x"))
        ]
        #expect(DeliveryProcessor.namedOrders(steps) == ["B", "A"])
        #expect(DeliveryProcessor.namedOrders([.unknown(transactionRef: "T9", checked), .ignored("x")]).isEmpty)
    }

    /// Orders that could not be read (the database) retry the delivery, and name no order: nothing stands in for an id.
    @Test func ordersThatCouldNotBeReadRetryTheDelivery() {
        let r = DeliveryProcessor.combine(
            [.checked(orderID: "A", checked), .unfound(.transient(reason: "database: connection lost", retryAfter: nil))],
            provider: .paypal)
        #expect(r == .transient(reason: "database: connection lost", retryAfter: nil))
        let alone = DeliveryProcessor.combine([.unfound(.transient(reason: "database: timeout", retryAfter: nil))], provider: .pxp)
        #expect(alone == .transient(reason: "database: timeout", retryAfter: nil))
    }
}
