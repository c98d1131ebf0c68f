import Foundation
import Testing
@testable import Reconciliation

/// Snapshots are stored as JSON (`snapshots.snapshot`): a new one round-trips, and one stored before capabilities
/// existed still decodes, with nothing known to be allowed until the next fetch records them.
@Suite struct SnapshotCodingTests {
    @Test func roundTripsWithCapabilitiesAndAliases() throws {
        let s = Snapshot(
            provider: .pxp, transactionRef: "TX-1", merchant: "M1", site: "S1", reportsSite: true, intent: .authorisation,
            currency: .usd, value: 1000, authorised: 1000, captured: 300, refunded: 0, state: .authorised,
            rawState: "Authorised", createdAt: 1_750_000_000,
            capabilities: Capabilities(
                capture: .allowed(target: "SYS-1"), void: .denied("no"), increment: .unsupported("never"),
                refund: .spread([RefundSource(id: "C1", amount: 300, refunded: 0)], sources: "captures")),
            aliases: ["SYS-1"])
        #expect(try JSONCoding.decode(Snapshot.self, try JSONCoding.encode(s)) == s)
    }

    @Test func aSnapshotStoredBeforeCapabilitiesDecodesWithNoneKnown() throws {
        let stored = """
            {"actionTargets":{"refundableCaptures":[],"systemTransactionID":"SYS-1"},"authorised":2000,"captured":0,
             "createdAt":1750000000,"currency":{"code":"GBP","exponent":2},"intent":"authorisation","merchant":"M1",
             "provider":"pxp","rawState":"Authorised","refunded":0,"site":"S1","state":"authorised","transactionRef":"TX-1","value":2000}
            """
        let s = try JSONCoding.decode(Snapshot.self, stored)
        #expect(s.transactionRef == "TX-1" && s.authorised == 2000 && s.state == .authorised && s.createdAt == 1_750_000_000)
        #expect(s.capabilities == .unknown())
        #expect(s.aliases.isEmpty)
        // Planning on it refuses the capture with the reason rather than calling with a guessed target.
        let order = Fixture.order(.authorisation, .fulfilled, amount: 2000, currency: Currency(code: "GBP")!)
        let plan = Fixture.plan(order, s)
        #expect(plan.actions.isEmpty)
        #expect(plan.kinds == [.actionNotAllowed])
        #expect(plan.findings.first?.detail.contains("not known until the transaction is fetched again") == true)
    }
}
