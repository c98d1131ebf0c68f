import Foundation
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Testing

/// `payrecon discrepancies ack`: an acknowledged discrepancy leaves the open set and the money at
/// risk; the same finding seen again keeps it acknowledged; a changed finding of that kind opens a new row. Checks
/// are real (worker harness, paysim); the command and the report run as processes.
@Suite("Acknowledgement", .serialized) struct AcknowledgementTests {
    /// A fulfilled purchase of 20.00 GBP whose PXP transaction captured 15.00: amount_mismatch, 5.00 at risk.
    func mismatched(_ h: WorkerHarness, captured: String = "15.00") async throws {
        _ = try await h.seedPXP("TX-A", intent: "Purchase", value: captured, state: "Captured")
    }

    func rows(_ h: WorkerHarness) throws -> [(id: Int64, status: String, occurrences: Int64, risk: Int64, note: String?)] {
        let conn = try h.database.connect(); defer { conn.close() }
        return try conn.query(
            """
            SELECT id, status, occurrences::bigint AS n, amount_at_risk_minor AS risk, ack_note FROM discrepancies
            WHERE kind = 'amount_mismatch' ORDER BY id
            """
        ).map { (try $0.int64("id"), try $0.string("status"), try $0.int64("n"), try $0.int64("risk"), try $0.optionalString("ack_note")) }
    }

    @Test func theSameFindingStaysAcknowledgedAndADifferentOneOpensANewRow() async throws {
        try await WorkerHarness.with { h in
            try await mismatched(h)
            try h.insert(WorkerHarness.order(.pxp, "O-A", ref: "TX-A", intent: .purchase, amount: 2000))
            _ = try await h.sweep()
            let first = try #require(try rows(h).first)
            #expect(first.status == "open" && first.risk == 500)

            // discrepancies list and show, before and after the acknowledgement.
            let listed0 = try await PayreconProcess.launch(["discrepancies", "list"], databaseURL: h.database.url)
            #expect(
                listed0.status == 0 && listed0.stdout.contains("O-A") && listed0.stdout.contains("amount_mismatch")
                    && listed0.stdout.contains("5.00 GBP"), "\(listed0.stdout)")

            let ack = try await PayreconProcess.launch(
                [
                    "discrepancies", "ack", String(first.id), "--note", "short-shipped, agreed with buyer",
                    "--by", "finance@shop"
                ], databaseURL: h.database.url)
            #expect(ack.status == 0, "\(ack.stderr)")
            #expect(ack.stdout.contains("acknowledged discrepancy \(first.id) as finance@shop"))
            let shown = try await PayreconProcess.launch(["discrepancies", "show", String(first.id)], databaseURL: h.database.url)
            #expect(
                shown.status == 0 && shown.stdout.contains("acknowledged") && shown.stdout.contains("by finance@shop")
                    && shown.stdout.contains("short-shipped") && shown.stdout.contains("expected") && shown.stdout.contains("O-A"),
                "\(shown.stdout)")
            let openNow = try await PayreconProcess.launch(["discrepancies", "list"], databaseURL: h.database.url)
            #expect(openNow.stdout.contains("no open discrepancies"), "\(openNow.stdout)")
            let missingShow = try await PayreconProcess.launch(["discrepancies", "show", "999999"], databaseURL: h.database.url)
            #expect(missingShow.status == 2 && missingShow.stderr.contains("discrepancies list"))

            // The same finding again: counted on the acknowledged row, not reopened.
            _ = try await h.sweep()
            var all = try rows(h)
            #expect(all.count == 1)
            #expect(all[0].status == "acknowledged" && all[0].occurrences == 2 && all[0].note == "short-shipped, agreed with buyer")

            // The report leaves it out of the open set and the money at risk, and shows it when asked.
            let open = try await PayreconProcess.launch(["report", "--format", "json"], databaseURL: h.database.url)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(open.stdout.utf8)) as? [String: Any])
            let summary = try #require(json["summary"] as? [String: Any])
            #expect(summary["open"] as? Int == 0)
            #expect((summary["amount_at_risk"] as? [String: Any])?.isEmpty == true)
            let listed = try await PayreconProcess.launch(
                ["report", "--status", "acknowledged", "--format", "json"], databaseURL: h.database.url)
            let acknowledged = try #require(
                (try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])?["discrepancies"] as? [[String: Any]])
            #expect(acknowledged.count == 1)
            #expect(acknowledged.first?["status"] as? String == "acknowledged")
            #expect(acknowledged.first?["ack_note"] as? String == "short-shipped, agreed with buyer")
            #expect(acknowledged.first?["acknowledged_at"] is String)
            #expect(acknowledged.first?["acknowledged_by"] as? String == "finance@shop")
            let table = try await PayreconProcess.launch(["report", "--status", "all"], databaseURL: h.database.url)
            #expect(
                table.stdout.contains("[acknowledged") && table.stdout.contains("by finance@shop")
                    && table.stdout.contains("short-shipped, agreed with buyer"))
            let csv = try await PayreconProcess.launch(["report", "--status", "all", "--format", "csv"], databaseURL: h.database.url)
            #expect(csv.stdout.contains("acknowledged") && csv.stdout.contains("short-shipped"))
            let html = try await PayreconProcess.launch(["report", "--status", "all", "--format", "html"], databaseURL: h.database.url)
            #expect(html.stdout.contains(#"<option value="acknowledged">"#) && html.stdout.contains("short-shipped, agreed with buyer"))

            // The finding changes (now 12.00 captured): a new open row; the acknowledged one no longer holds.
            _ = try await mismatched(h, captured: "12.00")
            _ = try await h.sweep()
            all = try rows(h)
            #expect(all.map(\.status) == ["resolved", "open"])
            #expect(all[1].risk == 800 && all[1].occurrences == 1)

            // When nothing is wrong any more, nothing stays open or acknowledged.
            _ = try await mismatched(h, captured: "20.00")
            _ = try await h.sweep()
            #expect(try rows(h).map(\.status) == ["resolved", "resolved"])
        }
    }

    @Test func onlyAnOpenDiscrepancyCanBeAcknowledged() async throws {
        try await WorkerHarness.with { h in
            try await mismatched(h)
            try h.insert(WorkerHarness.order(.pxp, "O-A", ref: "TX-A", intent: .purchase, amount: 2000))
            _ = try await h.sweep()
            let id = try #require(try rows(h).first?.id)
            let byDefault = try await PayreconProcess.launch(
                ["discrepancies", "ack", String(id)], databaseURL: h.database.url,
                environment: ["USER": "ops-on-call", "SUDO_USER": ""])
            #expect(byDefault.status == 0 && byDefault.stdout.contains("as ops-on-call"), "\(byDefault.stdout)")
            let again = try await PayreconProcess.launch(["discrepancies", "ack", String(id)], databaseURL: h.database.url)
            #expect(again.status == 1 && again.stderr.contains("already acknowledged"))
            let missing = try await PayreconProcess.launch(["discrepancies", "ack", "999999"], databaseURL: h.database.url)
            #expect(missing.status == 1 && missing.stderr.contains("no discrepancy 999999"))
            let bad = try await PayreconProcess.launch(["discrepancies", "ack", "x1"], databaseURL: h.database.url)
            #expect(bad.status == 2 && bad.stderr.contains("ID must be a discrepancy id"))
        }
    }
}
