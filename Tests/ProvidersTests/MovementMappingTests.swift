import Foundation
import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// The money each answer states moved, with its fee and net: what `report --view fees` sums and settlement lines are
/// matched to.
@Suite struct MovementMappingTests {
    static func paypalSample() throws -> JSONValue {
        // PayPal's own CHECKOUT.ORDER.COMPLETED (its simulator, 2021): one capture of 100.00 USD, paypal_fee 3.00, net 97.00.
        let event = try JSONValue.parse(Fixture.bytes("paypal/samples/CHECKOUT.ORDER.COMPLETED.v2.simulator-2021.body.bin"))
        return try #require(event["resource"])
    }

    @Test func aPayPalCaptureCarriesTheFeeAndNetOfItsSellerReceivableBreakdown() throws {
        let s = try PayPalMapping.snapshot(order: try Self.paypalSample())
        #expect(
            s.movements == [
                Movement(
                    id: "3C679366HH908993F", kind: .capture, at: 1_522_617_649, currency: Currency(code: "USD")!,
                    gross: 10_000, fee: 300, net: 9_700)
            ])
    }

    /// A refund's seller_payable_breakdown (payments_payment_v2.json): the fee given back may differ from the fee charged.
    @Test func aPayPalRefundCarriesTheFeeItGaveBack() throws {
        var order = paypalOrder(
            captures: [PP(id: "CAP1", status: "PARTIALLY_REFUNDED", value: "100.00")],
            refunds: [
                PP(id: "REF1", status: "COMPLETED", value: "40.00", up: captureUp + "CAP1"),
                PP(id: "REF2", status: "PENDING", value: "10.00", up: captureUp + "CAP1")
            ])
        order = try Self.setting(
            order, refund: 0, "seller_payable_breakdown",
            #"""
            {"gross_amount":{"currency_code":"USD","value":"40.00"},"paypal_fee":{"currency_code":"USD","value":"1.40"},
             "net_amount":{"currency_code":"USD","value":"38.60"},"total_refunded_amount":{"currency_code":"USD","value":"40.00"}}
            """#)
        let s = try PayPalMapping.snapshot(order: order)
        let usd = Currency(code: "USD")!
        // The capture has no breakdown here: its fee is not known (nil), never taken as 0.
        #expect(
            s.movements == [
                Movement(id: "CAP1", kind: .capture, at: 1_522_617_649, currency: usd, gross: 10_000),
                Movement(id: "REF1", kind: .refund, at: 1_522_617_649, currency: usd, gross: 4_000, fee: 140, net: 3_860)
            ])
    }

    @Test func aBreakdownWithoutAFeeIsAFeeOfNothingAndWithoutANetNetsGrossLessFee() throws {
        var order = paypalOrder(captures: [PP(id: "CAP1", status: "COMPLETED", value: "10.00")])
        order = try Self.setting(
            order, capture: 0, "seller_receivable_breakdown", #"{"gross_amount":{"currency_code":"USD","value":"10.00"}}"#)
        let free = try #require(try PayPalMapping.snapshot(order: order).movements.first)
        #expect(free.fee == 0 && free.net == 1_000)
        order = try Self.setting(
            order, capture: 0, "seller_receivable_breakdown",
            #"{"gross_amount":{"currency_code":"USD","value":"10.00"},"paypal_fee":{"currency_code":"USD","value":"0.64"}}"#)
        let charged = try #require(try PayPalMapping.snapshot(order: order).movements.first)
        #expect(charged.fee == 64 && charged.net == 936)
    }

    @Test func pendingDeclinedAndReversedPayPalPaymentsMoveWhatTheyMoved() throws {
        // The reversal record as PayPal's answer shows it: its note says the payment was reversed.
        let order = try Self.setting(
            paypalOrder(
                captures: [
                    PP(id: "CAP1", status: "REFUNDED", value: "20.00"), PP(id: "CAP2", status: "PENDING", value: "5.00"),
                    PP(id: "CAP3", status: "DECLINED", value: "7.00")
                ],
                refunds: [PP(id: "REV1", status: "COMPLETED", value: "20.00", up: captureUp + "CAP1")]),
            refund: 0, "note_to_payer", #""Payment reversed""#)
        let links = [
            TransactionLink(
                externalID: "REV1", parentExternalID: "CAP1", orderID: nil,
                kind: TransactionLink.Kind.reversal, source: .learned)
        ]
        let s = try PayPalMapping.snapshot(order: order, links: links)
        #expect(s.movements.map { $0.id } == ["CAP1", "REV1"])
        #expect(s.movements.map { $0.kind } == [Movement.Kind.capture, .reversal])
    }

    /// A fee in another currency than the transaction's is a mapping error naming the field: paypal_fee is "in the
    /// currency of the transaction" (the receivable currency has a field of its own).
    @Test func aPayPalFeeInAnotherCurrencyIsRefusedByName() throws {
        var order = paypalOrder(captures: [PP(id: "CAP1", status: "COMPLETED", value: "10.00")])
        order = try Self.setting(
            order, capture: 0, "seller_receivable_breakdown", #"{"paypal_fee":{"currency_code":"EUR","value":"0.30"}}"#)
        let error = #expect(throws: ProviderMappingError.self) { try PayPalMapping.snapshot(order: order) }
        #expect(error?.field == "purchase_units[0].payments.captures[0].seller_receivable_breakdown.paypal_fee.currency_code")
        order = try Self.setting(order, capture: 0, "seller_receivable_breakdown", #""3.00""#)
        #expect(throws: ProviderMappingError.self) { try PayPalMapping.snapshot(order: order) }
    }

    /// JPY: PayPal takes no decimals and neither does the fee; HUF: PayPal's amounts are whole forints, ISO's have two.
    @Test func feesFollowPayPalsOwnDecimalsPerCurrency() throws {
        var order = paypalOrder(value: "1000", currency: "JPY", captures: [PP(id: "CAP1", status: "COMPLETED", value: "1000")])
        order = try Self.setting(
            order, capture: 0, "seller_receivable_breakdown",
            #"{"paypal_fee":{"currency_code":"JPY","value":"75"},"net_amount":{"currency_code":"JPY","value":"925"}}"#)
        let yen = try #require(try PayPalMapping.snapshot(order: order).movements.first)
        #expect(yen.gross == 1_000 && yen.fee == 75 && yen.net == 925)
        order = paypalOrder(value: "1000", currency: "HUF", captures: [PP(id: "CAP1", status: "COMPLETED", value: "1000")])
        order = try Self.setting(order, capture: 0, "seller_receivable_breakdown", #"{"paypal_fee":{"currency_code":"HUF","value":"45"}}"#)
        let forint = try #require(try PayPalMapping.snapshot(order: order).movements.first)
        #expect(forint.gross == 100_000 && forint.fee == 4_500 && forint.net == 95_500)
    }

    @Test func aV1SaleCarriesItsTransactionFee() throws {
        let sale = try JSONValue.parse(
            Array(
                #"""
                {"id":"80021663DE681814L","state":"completed","amount":{"total":"12.00","currency":"USD"},"parent_payment":"PAY-1",
                 "transaction_fee":{"value":"0.65","currency":"USD"},"create_time":"2026-11-01T10:00:00Z"}
                """#.utf8))
        let s = try PayPalSaleMapping.snapshot(sales: [sale], refunds: [], transactionRef: "80021663DE681814L")
        #expect(
            s.movements == [
                Movement(
                    id: "80021663DE681814L", kind: .capture, at: 1_793_527_200, currency: Currency(code: "USD")!,
                    gross: 1_200, fee: 65, net: 1_135)
            ])
    }

    @Test func aPaypercutPaymentCarriesItsBalanceTransaction() throws {
        let intent = try PaypercutMappingTests.intent(status: "succeeded", received: 2000)
        let payment = try JSONValue.parse(
            Array(
                #"""
                {"id":"pay_1","status":"succeeded","amount_captured":2000,"amount_refunded":500,"payment_method":"blik","payment_intent":"pi_1",
                 "balance_transaction":{"id":"bt_1","amount":2000,"fee":48,"net":1952,"exchange_rate":null,"currency":"eur","created":"2026-11-20T10:31:00Z"}}
                """#.utf8))
        let s = try PaypercutMapping.snapshot(intent: intent, payment: payment, account: nil)
        let eur = Currency(code: "EUR")!
        #expect(
            s.movements == [
                Movement(id: "pay_1", kind: .capture, at: 1_795_170_660, currency: eur, gross: 2_000, fee: 48, net: 1_952),
                Movement(id: "pay_1", kind: .refund, at: nil, currency: eur, gross: 500)
            ])
    }

    /// A balance transaction in another currency is the settled side of a conversion: its amounts are not the
    /// payment's, so the capture states no fee rather than a wrong one. A bad fee is an error naming the field.
    @Test func aPaypercutBalanceTransactionInAnotherCurrencyIsNotTheCapturesFee() throws {
        let intent = try PaypercutMappingTests.intent(status: "succeeded", received: 2000)
        let converted = try JSONValue.parse(
            Array(
                #"""
                {"id":"pay_1","status":"succeeded","amount_captured":2000,"payment_intent":"pi_1",
                 "balance_transaction":{"amount":8600,"fee":200,"net":8400,"exchange_rate":4.3,"currency":"pln"}}
                """#.utf8))
        let moved = try PaypercutMapping.snapshot(intent: intent, payment: converted, account: nil).movements
        #expect(moved.count == 1 && moved[0].gross == 2000 && moved[0].fee == nil && moved[0].net == nil)
        let bad = try JSONValue.parse(
            Array(#"{"id":"pay_1","status":"succeeded","amount_captured":2000,"balance_transaction":{"fee":"1.5"}}"#.utf8))
        let error = #expect(throws: ProviderMappingError.self) { try PaypercutMapping.snapshot(intent: intent, payment: bad, account: nil) }
        #expect(error?.field == "payment.balance_transaction.fee")
    }

    /// Snapshots stored before movements decode with none, and a snapshot's movements survive the store's JSON.
    @Test func movementsRoundTripThroughTheStoredSnapshot() throws {
        let s = try PayPalMapping.snapshot(order: try Self.paypalSample())
        let decoded = try JSONDecoder().decode(Snapshot.self, from: JSONEncoder().encode(s))
        #expect(decoded.movements == s.movements)
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(s)) as? [String: Any])
        object["movements"] = nil
        #expect(try JSONDecoder().decode(Snapshot.self, from: JSONSerialization.data(withJSONObject: object)).movements.isEmpty)
    }

    // MARK: helpers

    static func setting(_ order: JSONValue, capture: Int? = nil, refund: Int? = nil, _ key: String, _ json: String) throws -> JSONValue {
        let list = capture != nil ? "captures" : "refunds"
        let index = capture ?? refund!
        let value = try JSONValue.parse(Array(json.utf8))
        var o = try #require(try JSONSerialization.jsonObject(with: Data(order.serialized())) as? [String: Any])
        var units = try #require(o["purchase_units"] as? [[String: Any]])
        var payments = try #require(units[0]["payments"] as? [String: Any])
        var items = try #require(payments[list] as? [[String: Any]])
        items[index][key] = try JSONSerialization.jsonObject(with: Data(value.serialized()), options: .fragmentsAllowed)
        payments[list] = items; units[0]["payments"] = payments; o["purchase_units"] = units
        return try JSONValue.parse(Array(try JSONSerialization.data(withJSONObject: o)))
    }
}
