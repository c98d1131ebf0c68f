import Foundation
import Testing
@testable import PaysimCore
import Providers
import Reconciliation

/// paysim's STL and TRR files come from the book that answers the API: a day's captures and refunds with the fees
/// their answers state, and each fault as a reader meets it.
@Suite struct SettlementReportTests {
    static let day = "2026-11-30"

    func simulator() -> Simulator {
        let sim = makeSimulator()
        sim.seedPayPal(
            #"""
            [{"id":"O-1","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"100.00","captures":[{"id":"CAP-1","status":"PARTIALLY_REFUNDED","create_time":"2026-11-30T09:00:00Z"}],
              "refunds":[{"id":"REF-1","capture_id":"CAP-1","amount":"40.00","create_time":"2026-11-30T10:00:00Z"}]},
             {"id":"O-2","intent":"CAPTURE","status":"COMPLETED","currency":"JPY","amount":"1000","captures":[{"id":"CAP-2","create_time":"2026-11-30T11:00:00Z"}]},
             {"id":"O-3","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"5.00","captures":[{"id":"CAP-3","status":"PENDING","create_time":"2026-11-30T12:00:00Z"}]},
             {"id":"O-4","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"7.00","captures":[{"id":"CAP-4","create_time":"2026-12-01T00:00:00Z"}]}]
            """#)
        return sim
    }

    func file(_ sim: Simulator, _ name: String, faults: String = "") throws -> (SettlementReportSummary, [SettlementLine]) {
        let r = sim.handle(method: "GET", path: "/admin/paypal/reports/\(name)", query: faults.isEmpty ? [:] : ["faults": faults])
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
        return try PayPalSettlementReport.read(name: name, bytes: r.body)
    }

    @Test func aDaysFileHoldsItsMovementsWithTheFeesTheAPIStates() throws {
        let sim = simulator()
        let token = sim.paypalToken()
        let (summary, lines) = try file(sim, "STL-20261130.01.009.CSV")
        #expect(summary.problems.isEmpty, "\(summary.problems)")
        #expect(summary.kind == "STL" && summary.day == Self.day && summary.bodyRows == 3)
        #expect(lines.map { $0.transactionID } == ["CAP-1", "REF-1", "CAP-2"])  // not the pending capture, not the next day's
        // The file's fee is the API's: the capture's seller_receivable_breakdown, the refund's seller_payable_breakdown.
        let capture = try #require(sim.paypal("GET", "/v2/payments/captures/CAP-1", token: token).json)
        #expect(capture["seller_receivable_breakdown"]?["paypal_fee"]?["value"]?.stringValue == "3.98")
        #expect(lines[0].fee == 398 && lines[0].feeDirection == .debit && lines[0].direction == .credit && lines[0].eventCode == "T0006")
        #expect(lines[1].gross == 4000 && lines[1].direction == .debit && lines[1].referenceID == "CAP-1" && lines[1].eventCode == "T1107")
        #expect(lines[1].fee == 140 && lines[1].feeDirection == .credit)
        #expect(lines[2].currency.code == "JPY" && lines[2].gross == 1000 && lines[2].fee == 84)
        // The TRR lists the pending capture too, as not (yet) moving money.
        let (trr, detail) = try file(sim, "TRR-20261130.01.011.CSV")
        #expect(trr.problems.isEmpty, "\(trr.problems)")
        #expect(detail.first { $0.transactionID == "CAP-3" }?.status == .pending)
        // The same file twice is the same bytes.
        let a = sim.handle(method: "GET", path: "/admin/paypal/reports/STL-20261130.01.009.CSV", query: [:]).body
        #expect(a == sim.handle(method: "GET", path: "/admin/paypal/reports/STL-20261130.01.009.CSV", query: [:]).body)
    }

    @Test func eachFaultIsWhatAReaderMeets() throws {
        let sim = simulator()
        let (missing, missingLines) = try file(sim, "STL-20261130.01.009.CSV", faults: "missing_line")
        #expect(missingLines.map { $0.transactionID } == ["REF-1", "CAP-2"])
        #expect(missing.problems.contains { $0.contains("section count (SC) says 3 rows, the section has 2") }, "\(missing.problems)")
        let (_, feeLines) = try file(sim, "STL-20261130.01.009.CSV", faults: "fee_off_by_one")
        #expect(feeLines[0].fee == 399)
        let cut = sim.handle(method: "GET", path: "/admin/paypal/reports/STL-20261130.01.009.CSV", query: ["faults": "truncated"])
        let error = #expect(throws: SettlementReportError.self) {
            try PayPalSettlementReport.read(name: "STL-20261130.01.009.CSV", bytes: cut.body)
        }
        #expect(error?.description.contains("cut short") == true, "\(String(describing: error))")
        for encoding in ["double_space", "utf16", "bom"] {
            let (summary, lines) = try file(sim, "STL-20261130.01.009.CSV", faults: encoding)
            #expect(summary.problems.isEmpty && lines.count == 3, "\(encoding): \(summary.problems)")
        }
        let r = sim.handle(method: "GET", path: "/admin/paypal/reports/STL-20261130.01.009.CSV", query: ["faults": "nonsense"])
        #expect(r.status == 400)
        #expect(sim.handle(method: "GET", path: "/admin/paypal/reports/settlement.csv", query: [:]).status == 400)
    }

    /// PayPal's statuses from the book: a capture fully refunded by the day's end is V in that day's TRR (S in its STL,
    /// which has no status), a payment made PENDING and completed two days later is P in the TRR of the day it was made
    /// and S in both files of the day it completed, a declined capture is D in the TRR alone.
    @Test func theTRRCarriesPayPalsStatusesFromTheBook() throws {
        let sim = makeSimulator()
        sim.seedPayPal(
            #"""
            [{"id":"O-V","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"20.00","captures":[{"id":"CAP-V","status":"REFUNDED","create_time":"2026-11-30T09:00:00Z"}],
              "refunds":[{"id":"REF-V","capture_id":"CAP-V","amount":"20.00","create_time":"2026-11-30T10:00:00Z"}]},
             {"id":"O-E","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"30.00","captures":[{"id":"CAP-E","create_time":"2026-11-30T11:00:00Z","completed_time":"2026-12-02T08:00:00Z"}]},
             {"id":"O-D","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"40.00","captures":[{"id":"CAP-D","status":"DECLINED","create_time":"2026-11-30T12:00:00Z"}]}]
            """#)
        // The capture's refund came in updating it, the same day (seeded captures' update_time is their create_time).
        let (_, trr) = try file(sim, "TRR-20261130.01.011.CSV")
        let status = Dictionary(uniqueKeysWithValues: trr.map { ($0.transactionID, $0.status) })
        #expect(status == ["CAP-V": .reversed, "REF-V": .completed, "CAP-E": .pending, "CAP-D": .denied], "\(status)")
        let (_, stl) = try file(sim, "STL-20261130.01.009.CSV")
        #expect(stl.map(\.transactionID) == ["CAP-V", "REF-V"] && stl.allSatisfy { $0.status == .completed })
        let (_, later) = try file(sim, "TRR-20261202.01.011.CSV")
        #expect(later.map(\.transactionID) == ["CAP-E"] && later[0].status == .completed && later[0].fee != nil)
        #expect(try file(sim, "STL-20261202.01.009.CSV").1.map(\.transactionID) == ["CAP-E"])
    }

    /// Each account's files list the payments made to it, each day is the account's own (its offset on every time),
    /// and an account row has no Transaction ID.
    @Test func filesAreAnAccountsOwnInItsTimeZone() throws {
        let sim = makeSimulator()
        sim.seedPayPal(
            #"""
            [{"id":"O-A","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"10.00","merchant_id":"ACCT-A","captures":[{"id":"CAP-A","create_time":"2026-12-01T05:00:00Z"}]},
             {"id":"O-B","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"11.00","merchant_id":"ACCT-B","captures":[{"id":"CAP-B","create_time":"2026-11-30T09:00:00Z"}]}]
            """#)
        func lines(_ name: String, _ query: [String: String]) throws -> (SettlementReportSummary, [SettlementLine]) {
            let r = sim.handle(method: "GET", path: "/admin/paypal/reports/\(name)", query: query)
            #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
            return try PayPalSettlementReport.read(name: name, bytes: r.body)
        }
        // 2026-12-01T05:00Z is 2026-11-30 22:00 at -0700: on account A's file of the 30th, not of the 1st.
        let (a, aLines) = try lines("STL-20261130.01.009.CSV", ["account": "ACCT-A", "tz": "-0700"])
        #expect(a.account == "ACCT-A" && aLines.map(\.transactionID) == ["CAP-A"] && a.periodStart == 1_796_022_000)
        #expect(try lines("STL-20261201.01.009.CSV", ["account": "ACCT-A", "tz": "-0700"]).1.isEmpty)
        #expect(try lines("STL-20261130.01.009.CSV", ["account": "ACCT-B"]).1.map(\.transactionID) == ["CAP-B"])
        let (withRow, rows) = try lines("STL-20261130.01.009.CSV", ["account": "ACCT-B", "faults": "account_row"])
        #expect(withRow.problems.isEmpty && rows.count == 2 && rows[1].isAccountRow && rows[1].eventCode == "T0400", "\(withRow.problems)")
        #expect(sim.handle(method: "GET", path: "/admin/paypal/reports/STL-20261130.01.009.CSV", query: ["tz": "PST"]).status == 400)
    }
}
