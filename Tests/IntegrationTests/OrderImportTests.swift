import Foundation
import PayreconTesting
import Postgres
import Testing

/// `payrecon orders import` is all or nothing over the bytes it was given (issue "strangers, round three", item 3):
/// it validates on a first read and imports on a second, and a file that reads differently the second time (a FIFO,
/// an export job rewriting it meanwhile) imports nothing, whatever the second read holds.
@Suite("Orders import, all or nothing", .serialized) struct OrderImportTests {
    static let header = "provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n"

    @Test func aFileThatChangesBetweenItsTwoReadsImportsNothing() async throws {
        try await WorkerHarness.with { h in
            let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).fifo").path
            #expect(mkfifo(fifo, 0o600) == 0)
            defer { unlink(fifo) }
            // The first reader gets a good file; the second an amount nobody validated, and a row that is not valid.
            let reads = [
                Self.header + "paypal,ORD-F1,,,PP-F1,purchase,10.00,USD,open,0\n",
                Self.header + "paypal,ORD-F1,,,PP-F1,purchase,99.00,USD,open,0\nbogus,ORD-F2,,,X,purchase,1.00,USD,open,0\n"
            ]
            let writer = Thread {
                for (i, text) in reads.enumerated() {
                    // Past the first read's end of file before the second writer opens (else one read sees both).
                    if i > 0 { Thread.sleep(forTimeInterval: 0.5) }
                    let fd = open(fifo, O_WRONLY)
                    guard fd >= 0 else { return }
                    _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
                    close(fd)
                }
            }
            writer.start()
            let r = try await PayreconProcess.launch(["orders", "import", fifo], databaseURL: h.database.url)
            #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
            #expect(r.stderr.contains("changed while it was imported") && r.stderr.contains("nothing imported"), "\(r.stderr)")
            #expect(!r.stdout.contains("imported 1 orders"), "\(r.stdout)")
            #expect(try h.database.count("SELECT count(*) FROM orders") == 0, "nothing stored, least of all the unvalidated 99.00")
        }
    }

    /// The same file read twice as the same bytes imports as before.
    @Test func aFileThatStaysTheSameImports() async throws {
        try await WorkerHarness.with { h in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).csv")
            try (Self.header + "paypal,ORD-S1,,,PP-S1,purchase,10.00,USD,open,0\n").write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let r = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: h.database.url)
            #expect(r.status == 0 && r.stdout.contains("imported 1 orders"), "\(r.stdout) \(r.stderr)")
            #expect(try h.database.count("SELECT count(*) FROM orders") == 1)
        }
    }

    /// A shop's export with columns of its own imports, naming them once; `--strict` refuses it, as before. A file with
    /// no order in it (an export job that wrote only its header, or nothing) exits 1 saying so: before, it imported 0
    /// orders and exited 0, so a broken export passed unnoticed.
    @Test func foreignColumnsAreReadPastAndAnEmptyFileFails() async throws {
        try await WorkerHarness.with { h in
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let export = dir.appendingPathComponent("export.csv")
            try
                ("provider,order_id,customer_email,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n"
                + "paypal,ORD-X1,a@example.com,,,PP-X1,purchase,10.00,USD,open,0\n").write(to: export, atomically: true, encoding: .utf8)
            let strict = try await PayreconProcess.launch(["orders", "import", "--strict", export.path], databaseURL: h.database.url)
            #expect(
                strict.status == 1 && strict.stdout.contains("customer_email") && strict.stdout.contains("unknown column"),
                "\(strict.stdout) \(strict.stderr)")
            let r = try await PayreconProcess.launch(["orders", "import", export.path], databaseURL: h.database.url)
            #expect(
                r.status == 0 && r.stderr.contains("read past columns payrecon does not read: customer_email")
                    && r.stdout.contains("imported 1 orders"),
                "\(r.stdout) \(r.stderr)")
            for (name, text) in [("header-only.csv", Self.header), ("empty.csv", "")] {
                let file = dir.appendingPathComponent(name)
                try text.write(to: file, atomically: true, encoding: .utf8)
                let e = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: h.database.url)
                #expect(e.status == 1 && e.stderr.contains("holds no orders; nothing imported"), "\(name): \(e.stdout) \(e.stderr)")
            }
            #expect(try h.database.count("SELECT count(*) FROM orders") == 1)
        }
    }
}

/// The problems of an order file are listed up to a bound, and the rest counted (issue "strangers, round three",
/// item 5): a file of 1,500 bad rows prints 1,000 of them and says how many more.
@Suite("Orders import, bounded") struct OrderImportBoundsTests {
    @Test func theProblemsListedAreBounded() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("orders-\(UUID().uuidString).csv")
        let rows = (0..<1_500).map { "bogus,O-\($0),,,X,purchase,1.00,USD,open,0" }
        try (OrderImportTests.header + rows.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let r = try await PayreconProcess.launch(["orders", "import", file.path], databaseURL: "postgresql://nobody@127.0.0.1:1/none")
        #expect(r.status == 1)
        #expect(r.stderr.contains("1500 invalid row(s), 1500 problem(s); nothing imported"), "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").count == 1_001, "1,000 listed and one line that counts the rest")
        #expect(r.stdout.contains("… and 500 more problem(s), not listed"))
    }
}
