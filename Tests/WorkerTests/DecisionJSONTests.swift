import Foundation
import Reconciliation
@testable import Store
import Testing
import TextFormats

/// The decision a deciding check keeps is written without Foundation's encoder (`DecisionJSON`, for the sweep's CPU):
/// it must be the very document `JSONEncoder` made of it, which `payrecon explain` decodes, for every field, row and
/// string.
@Suite struct DecisionJSONTests {
    static let awkward = SnapshotJSONTests.awkward

    static func figures() -> Decision.Figures {
        let order = Order(
            provider: .paypal, orderID: "O-1", merchant: "M", site: nil, transactionRef: "T-1", intent: .estimatedAuthorisation,
            amount: Money(minorUnits: 1_250, currency: Currency(code: "BHD")!), fulfilment: .fulfilled, refundAmount: 260)
        var snapshot = SnapshotJSONTests.full()
        snapshot.rawState = "PARTIALLY_REFUNDED \(awkward)"
        return Decision.Figures(order: order, snapshot: snapshot)
    }

    /// Every figure a different number, so a figure written under another's key cannot pass as the same document.
    @Test func theFixturesFiguresAreDistinct() {
        let f = Self.figures()
        let numbers = [f.amount, f.refundAmount, f.authorised, f.captured, f.refunded, f.reversed, f.disputed, Int64(f.currency.exponent)]
        #expect(Set(numbers).count == numbers.count)
    }

    static let all: [DecisionRecord] =
        [
            DecisionRecord(
                decision: Decision(
                    fired: [
                        Decision.Fired(row: .capture, yields: "capture 7.00 USD"),
                        Decision.Fired(row: .purchaseShort, yields: "amount_mismatch \(awkward)")
                    ],
                    figures: figures()),
                findings: ["amount_mismatch", awkward], planned: ["pxp:O-1:capture:1", ""], superseded: ["k/2"]),
            // No order or no answer: no figures (left out, as the encoder leaves a nil out).
            DecisionRecord(
                decision: Decision(fired: [Decision.Fired(row: .unknownOrder, yields: "unknown_order")], figures: nil),
                findings: ["unknown_order"], planned: [], superseded: []),
            DecisionRecord(decision: Decision(), findings: [], planned: [], superseded: [])
        ]
        + DecisionRow.allCases.map {
            DecisionRecord(
                decision: Decision(fired: [Decision.Fired(row: $0, yields: $0.rawValue)], figures: figures()),
                findings: [], planned: [], superseded: [])
        }

    @Test(arguments: all)
    func isTheDocumentFoundationsEncoderMakes(_ r: DecisionRecord) throws {
        let ours = DecisionJSON.encode(r)
        try SnapshotJSONTests.expectEncodersDocument(ours, of: r)
        let back = try JSONDecoder().decode(DecisionRecord.self, from: Data(ours.utf8))
        #expect(back.decision == r.decision && back.findings == r.findings && back.planned == r.planned && back.superseded == r.superseded)
    }

    /// A field added to the record, the decision, a fired row or the figures and not to the writer fails here (the
    /// first record sets every optional, so each stored property is a member).
    @Test func everyStoredPropertyIsWritten() throws {
        let r = Self.all[0]
        guard case .object(let top) = try JSONValue.parse(DecisionJSON.encode(r)),
            case .object(let decision)? = top.first(where: { $0.0 == "decision" })?.1,
            case .object(let figures)? = decision.first(where: { $0.0 == "figures" })?.1,
            case .array(let fired)? = decision.first(where: { $0.0 == "fired" })?.1, case .object(let row)? = fired.first
        else {
            Issue.record("not the record's shape"); return
        }
        #expect(top.count == Mirror(reflecting: r).children.count)
        #expect(decision.count == Mirror(reflecting: r.decision).children.count)
        #expect(figures.count == Mirror(reflecting: r.decision.figures!).children.count)
        #expect(row.count == Mirror(reflecting: r.decision.fired[0]).children.count)
    }
}
