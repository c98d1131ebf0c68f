import Observability
import Crypto
import Foundation
import Providers
import Wiring
import Postgres
import Reconciliation
import Reporting
import Store

/// How the provider's settlement files are read (--provider, default paypal: the one that publishes them).
private func settlementReader(_ provider: Provider) throws(UsageError) -> SettlementReportReader {
    guard let reader = ProviderRegistry.definition(provider).settlementReports else {
        throw UsageError("\(provider.rawValue) publishes no settlement files payrecon reads (PayPal's STL and TRR reports are read)")
    }
    return reader
}

/// Opens `path` for reading in 1 MiB chunks, and hashes what is read.
private final class FileChunks {
    let handle: FileHandle
    let sha = SHA256Stream()
    init(_ path: String) throws {
        guard let h = FileHandle(forReadingAtPath: path) else { throw FatalError("cannot read \(path): no such file or not readable") }
        handle = h
    }
    func next() -> [UInt8]? {
        let data = handle.readData(ofLength: 1 << 20)
        guard !data.isEmpty else { return nil }
        let bytes = Array(data)
        sha.update(bytes)
        return bytes
    }
}

struct SettlementImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "settlement import",
        summary: "Import PayPal settlement (STL) and transaction detail (TRR) files: each all or nothing, once.",
        arguments: [
            .init(name: "FILE", help: "A report file as PayPal's SFTP delivers it (UTF-8 with or without a BOM, or UTF-16).", repeats: true)
        ],
        options: [Options.provider, Options.databaseURL],
        details: """
            Each file is read whole in one transaction: a row that cannot be read, or a file cut short (inside its last
            row, or a header without its footer), imports nothing of that file and names its line. The same file twice
            is a no-op (by its bytes' SHA-256); a line is (Transaction ID, event code, CR/DR), kept once whichever file
            brought it. A transaction detail row's status is PayPal's: S and V (fully refunded since: the money did
            move) are kept, P (pending) waits for a later file, D (denied) moved nothing. A row with no Transaction ID
            is the account's own, kept with the file. New lines are matched to the captures, refunds and sales payrecon
            knows (report --view fees shows their fees) and open, when they disagree: unknown_settlement,
            settlement_mismatch (gross, currency or direction), fee_mismatch. Then, over every file imported:
            settlement_missing (a capture or refund no line shows PAYRECON_SETTLEMENT_DEADLINE, default 3d, after it),
            settlement_incomplete (a file whose counts or totals do not add up; a day with no file between the first
            and the last). What no longer holds is resolved.
            Exit 0 when every file was imported (findings are in payrecon report), 1 when a file could not be, 2 on a
            usage or database error.
            """
    )

    var provider: Provider
    var paths: [String]
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        provider = try args.value(Options.provider) ?? .paypal
        paths = args.positionals
        databaseURL = try args.value(Options.databaseURL)
    }

    func validate() throws(UsageError) { _ = try settlementReader(provider) }

    func run(logger: Logger) async throws -> Int32 {
        let reader = try settlementReader(provider)
        let env = Environment(databaseURL: databaseURL)
        let deadline = try env.duration("PAYRECON_SETTLEMENT_DEADLINE", default: "3d")
        let conn = try connect(try env.databaseURL())
        defer { conn.close() }
        var failed = 0
        for path in paths {
            let name = URL(fileURLWithPath: path).lastPathComponent
            do {
                let chunks = try FileChunks(path)
                // The hash must cover the whole file before the import decides it is new: read it once to hash it.
                while chunks.next() != nil {}
                let sha = chunks.sha.finish()
                let again = try FileChunks(path)
                let imported = try SettlementStore.importFile(
                    provider: provider, name: name, sha256: sha, now: Date(), deadlineSeconds: deadline,
                    read: { each in
                        let summary = try reader.read(name, { again.next() }, each)
                        // What was imported must be what was hashed (a file still being written, or replaced meanwhile).
                        while again.next() != nil {}
                        guard again.sha.finish() == sha else {
                            throw FatalError(
                                "\(path) changed while it was read; nothing of it imported: import it again once it is complete")
                        }
                        return summary
                    }, on: conn)
                printImported(imported, path)
            } catch let error as SettlementReportError {
                failed += 1
                FileHandle.standardError.write(
                    Data(
                        "payrecon: \(path.terminalSafe): \(String(describing: error).terminalSafe); nothing of it imported. Fetch the file again from PayPal's SFTP, or check it with payrecon settlement verify.\n"
                            .utf8))
            } catch let error as FatalError {
                failed += 1
                FileHandle.standardError.write(Data("payrecon: \(error.description)\n".utf8))
            } catch let error as PostgresError {
                // One file the database refused (its transaction rolled back) does not keep the others out; a database
                // gone is fatal.
                if case .connection = error { throw error }
                failed += 1
                FileHandle.standardError.write(Data("payrecon: \(path): the database refused it (\(error)); nothing of it imported\n".utf8))
            }
        }
        return failed == 0 ? Exit.ok : Exit.finding
    }
}

extension SettlementImportCommand {
    /// One file's lines: what was imported and found (the file's own words escaped).
    func printImported(_ imported: SettlementStore.Imported, _ path: String) {
        if imported.alreadyImported {
            print("\(path): already imported (file \(imported.fileID)); nothing done")
            return
        }
        let kinds = imported.findings.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.rawValue)" }
        print(
            "\(path): imported as file \(imported.fileID): \(imported.lines) lines, \(imported.newLines) new"
                + (imported.summary.day.map { ", day \($0)" } ?? "")
                + (kinds.isEmpty ? "; nothing to report" : "; " + kinds.joined(separator: ", ")))
        if imported.pending > 0 {
            print("  \(imported.pending) rows of transactions still pending (not kept: a later file lists them completed)")
        }
        if imported.denied > 0 { print("  \(imported.denied) rows of denied transactions (not kept: they moved no money)") }
        if let note = imported.accountNote { print("  account: \(note.terminalSafe)") }
        if imported.accountRows > 0 {
            print("  \(imported.accountRows) account rows with no Transaction ID (kept with the file, no order's)")
        }
        for problem in imported.summary.problems { print("  incomplete: \(problem.terminalSafe)") }
    }
}

struct SettlementVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "settlement verify",
        summary: "Check a settlement file offline: does it read, and do its own counts and totals add up.",
        arguments: [.init(name: "FILE", help: "A PayPal STL or TRR report file.")],
        options: [Options.provider],
        details: """
            Reads the file as settlement import would, without a database: prints its kind, day, account and lines per
            currency, then 'ok', or each place it does not add up (footer counts and totals); a file cut short does not read.
            Exit 0 when it reads and adds up, 1 when it does not, 2 on a usage error.
            """
    )

    var provider: Provider
    var path: String

    init(parsing args: ParsedArguments) throws(UsageError) {
        provider = try args.value(Options.provider) ?? .paypal
        path = args.positionals[0]
    }

    func validate() throws(UsageError) { _ = try settlementReader(provider) }

    func run(logger: Logger) async throws -> Int32 {
        let reader = try settlementReader(provider)
        let name = URL(fileURLWithPath: path).lastPathComponent
        let chunks = try FileChunks(path)
        var perCurrency: [String: (lines: Int, credit: Int128, debit: Int128)] = [:]
        let summary: SettlementReportSummary
        do {
            summary = try reader.read(name, { chunks.next() }) { batch in
                for l in batch {
                    var t = perCurrency[l.currency.code] ?? (0, 0, 0)
                    t.lines += 1
                    if l.direction == .credit { t.credit += Int128(l.gross) } else { t.debit += Int128(l.gross) }
                    perCurrency[l.currency.code] = t
                }
            }
        } catch let error as SettlementReportError {
            print("\(path.terminalSafe): unreadable: \(String(describing: error).terminalSafe)")
            return Exit.finding
        }
        print(
            "\(path.terminalSafe): \((summary.kind ?? "report").terminalSafe)" + (summary.day.map { " of \($0)" } ?? "")
                + (summary.account.map { ", account \($0.terminalSafe)" } ?? "")
                + ", \(summary.bodyRows) body rows, sha256 \(Hex.encode(chunks.sha.finish()))")
        for (code, t) in perCurrency.sorted(by: { $0.key < $1.key }) {
            let exponent = Currency(code: code)?.exponent ?? 2
            print(
                "  \(code): \(t.lines) lines, credits \(ReportSummary.format(t.credit, exponent: exponent)), debits \(ReportSummary.format(t.debit, exponent: exponent))"
            )
        }
        if summary.problems.isEmpty { print("ok"); return Exit.ok }
        for problem in summary.problems { print("incomplete: \(problem.terminalSafe)") }
        return Exit.finding
    }
}
