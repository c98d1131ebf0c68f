import Foundation
import Providers
import Wiring
import Postgres
import Reconciliation
import Store

let ordersImportCommand = Command(
    name: "orders import",
    summary: "Import orders from CSV (header row) or JSON Lines: all or nothing.",
    arguments: [.init(name: "FILE", help: "A CSV file with a header row, or JSON Lines; '-' reads standard input.")],
    options: [Options.databaseURL],
    details: """
        Keys: provider, order_id, merchant, site, transaction_ref, intent, amount, currency, fulfilment,
        refund_amount (see README). Orders are upserted on (provider, order_id). A file with any invalid row imports
        nothing and lists every bad row (line, field, reason); exit 1.
        """
) { args in
    let env = try args.environment()
    let path = args.positionals[0]
    let url = try env.databaseURL()
    func reader() throws -> OrderFileReader {
        let handle: FileHandle
        if path == "-" { handle = .standardInput } else {
            guard let h = FileHandle(forReadingAtPath: path) else { throw FatalError("cannot read \(path): no such file or not readable") }
            handle = h
        }
        return OrderFileReader(chunks: {
            let data = handle.readData(ofLength: 1 << 20)
            return data.isEmpty ? nil : Array(data)
        }, traits: ProviderRegistry.traits)
    }
    // Pass 1: validate everything (streaming), report every bad row.
    var errors: [OrderFileError] = []
    var count = 0
    var buffered: [Order]? = path == "-" ? [] : nil   // stdin can only be read once
    for record in try reader() {
        switch record {
        case .order(let o, _): count += 1; buffered?.append(o)
        case .invalid(let e): errors += e
        }
    }
    if !errors.isEmpty {
        let rows = Set(errors.map(\.line)).count
        FileHandle.standardError.write(Data("payrecon: \(path): \(rows) invalid row(s), \(errors.count) problem(s); nothing imported\n".utf8))
        for e in errors { print(e.description) }
        return Exit.finding
    }
    // Pass 2: upsert in one transaction, in chunks (stdin was kept from pass 1; a file is read again).
    let conn = try connect(url)
    defer { conn.close() }
    let orders: AnySequence<Order> = if let buffered { AnySequence(buffered) } else {
        AnySequence(try reader().lazy.compactMap { if case .order(let o, _) = $0 { o } else { nil } })
    }
    let (inserted, updated) = try OrderStore.upsert(orders, source: path == "-" ? "orders import (stdin)" : "orders import " + URL(fileURLWithPath: path).standardizedFileURL.path, on: conn)
    print("imported \(count) orders from \(path): \(inserted) new, \(updated) updated, \(count - inserted - updated) unchanged")
    return Exit.ok
}
