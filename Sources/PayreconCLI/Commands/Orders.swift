import Observability
import Crypto
import Foundation
import Providers
import Wiring
import Postgres
import Reconciliation
import Store

private let strictFlag = FlagKey("--strict", "Refuse a file with a column (or key) payrecon does not read, instead of reading past it.")

struct OrdersImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "orders import",
        summary: "Import orders from CSV (header row) or JSON Lines: all or nothing.",
        arguments: [.init(name: "FILE", help: "A CSV file with a header row, or JSON Lines; '-' reads standard input.")],
        options: [strictFlag, Options.databaseURL],
        details: """
            Keys: provider, order_id, merchant, site, transaction_ref, intent, amount, currency, fulfilment,
            refund_amount, period_start, period_end (see docs/orders.md). Orders are upserted on (provider, order_id). A column
            or key of the shop's own is read past and named once on stderr; one near a key payrecon reads, or holding one
            of its words (refund_amout, amount_refunded), is refused, since its values would be dropped; --strict refuses
            every one. A file with any
            invalid row imports nothing and lists every bad row (line, field, reason); exit 1. A file with no order in
            it (an export job that wrote nothing) imports nothing; exit 1. The file is validated, then read again to
            import: one that reads differently the second time (being written meanwhile, a FIFO) imports nothing; exit 1.
            """
    )

    /// The file, or "-" for standard input.
    var path: String
    var strict: Bool
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        path = args.positionals[0]
        strict = args.flag(strictFlag)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        let url = try Environment(databaseURL: databaseURL).databaseURL()
        guard let first = try readFirst() else { return Exit.finding }
        let (count, buffered, validatedDigest) = (first.count, first.buffered, first.digest)
        // Pass 2: upsert in one transaction, in chunks (stdin was kept from pass 1; a file is read again, and committed only
        // when it read as the same bytes and no row of it is invalid).
        let conn = try connect(url)
        defer { conn.close() }
        let imported = SHA256Stream()
        let secondRead = Box()
        let orders: AnySequence<Order> =
            if let buffered { AnySequence(buffered) } else {
                AnySequence(
                    try reader(imported).lazy.compactMap { record -> Order? in
                        switch record {
                        case .order(let o, _): return o
                        case .invalid: secondRead.invalid += 1; return nil
                        }
                    })
            }
        let source = path == "-" ? "orders import (stdin)" : "orders import " + URL(fileURLWithPath: path).standardizedFileURL.path
        let (inserted, updated): (Int, Int)
        do {
            (inserted, updated) = try OrderStore.upsert(orders, source: source, on: conn) {
                guard buffered == nil else { return }
                if secondRead.invalid > 0 || imported.finish() != validatedDigest { throw FileChanged() }
            }
        } catch let conflict as OrderStore.PeriodConflict {
            FileHandle.standardError.write(Data(("payrecon: \(path): nothing imported: \(conflict)".terminalSafe + "\n").utf8))
            return Exit.finding
        } catch is FileChanged {
            FileHandle.standardError.write(
                Data(
                    ("payrecon: \(path) changed while it was imported (it read differently the second time); nothing "
                        + "imported: import a copy that nothing is writing to\n").utf8))
            return Exit.finding
        }
        print("imported \(count) orders from \(path): \(inserted) new, \(updated) updated, \(count - inserted - updated) unchanged")
        return Exit.ok
    }
}

extension OrdersImportCommand {
    /// A reader of the file (or standard input) that feeds `digest` what it reads. The file is read twice (validated,
    /// then imported: constant memory), and must be the same bytes both times: a file that changes between the reads
    /// (a FIFO, an export job rewriting it) imports nothing.
    func reader(_ digest: SHA256Stream) throws -> OrderFileReader {
        let handle: FileHandle
        if path == "-" {
            handle = .standardInput
        } else {
            guard let h = FileHandle(forReadingAtPath: path) else {
                throw FatalError("cannot read \(path): no such file or not readable")
            }
            handle = h
        }
        var reader = OrderFileReader(
            chunks: {
                let data = handle.readData(ofLength: 1 << 20)
                if data.isEmpty { return nil }
                let bytes = Array(data)
                digest.update(bytes)
                return bytes
            }, traits: ProviderRegistry.traits)
        reader.strict = strict
        return reader
    }

    /// What the first read found: the orders in the file (kept when they came from standard input, which can be read
    /// only once), and the digest of the bytes read.
    struct FirstRead {
        var count: Int
        var buffered: [Order]?
        var digest: [UInt8]
    }

    /// Pass 1: every row validated (streaming), every bad row said; nil when the file is refused.
    func readFirst() throws -> FirstRead? {
        var errors: [OrderFileError] = []  // the first OrderFile.maxListedProblems; the rest counted
        var problems = 0, badRows = Set<Int>()
        var count = 0
        var buffered: [Order]? = path == "-" ? [] : nil  // stdin can only be read once
        let validated = SHA256Stream()
        var validating = try reader(validated)
        while let record = validating.next() {
            switch record {
            case .order(let o, _): count += 1; buffered?.append(o)
            case .invalid(let e):
                problems += e.count
                if badRows.count < 1_000_000 { badRows.formUnion(e.map(\.line)) }
                errors += e.prefix(max(0, OrderFile.maxListedProblems - errors.count))
            }
        }
        if !validating.ignored.isEmpty {
            // The file's own words: escaped.
            FileHandle.standardError.write(
                Data(
                    "payrecon: \(path.terminalSafe): read past columns payrecon does not read: \(validating.ignored.joined(separator: ", ").terminalSafe) (--strict refuses them)\n"
                        .utf8))
        }
        if problems > 0 {
            FileHandle.standardError.write(
                Data("payrecon: \(path): \(badRows.count) invalid row(s), \(problems) problem(s); nothing imported\n".utf8))
            for e in errors { print(e.description.terminalSafe) }  // a file's text, as it reads
            if problems > errors.count { print("… and \(problems - errors.count) more problem(s), not listed") }
            return nil
        }
        guard count > 0 else {
            FileHandle.standardError.write(
                Data("payrecon: \(path.terminalSafe) holds no orders; nothing imported. Check the export that wrote it\n".utf8))
            return nil
        }
        return FirstRead(count: count, buffered: buffered, digest: validated.finish())
    }
}

/// What the import's second read met, counted as it streams.
private final class Box: @unchecked Sendable { var invalid = 0 }

/// The import's file read differently the second time.
private struct FileChanged: Error {}
