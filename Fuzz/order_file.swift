// libFuzzer harness: OrderFile.parse (CSV and JSON Lines) on arbitrary bytes.
// Input: byte 0 seeds the chunk sizes; the rest is the file. Property: reading the file in chunks gives the same
// records as reading it whole (the importer streams), and parse agrees with the reader.
import Providers
import Reconciliation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let seed = bytes.first else { return 0 }
    let file = Array(bytes.dropFirst())
    let whole = Array(OrderFileReader(bytes: file, traits: ProviderRegistry.traits)).map { String(describing: $0) }
    var offset = 0
    var step = Int(seed % 7) + 1
    let chunked = Array(OrderFileReader(chunks: {
        guard offset < file.count else { return nil }
        let end = min(file.count, offset + step)
        defer { offset = end; step = step % 13 + 1 }
        return Array(file[offset..<end])
    }, traits: ProviderRegistry.traits)).map { String(describing: $0) }
    precondition(whole == chunked, "chunked reading differs from whole-file reading")
    switch Result(catching: { () throws(OrderFileRejection) -> [Order] in try OrderFile.parse(file, traits: ProviderRegistry.traits) }) {
    case .success(let orders): precondition(orders.count == whole.count, "parse and reader disagree on the order count")
    case .failure(let rejection): precondition(!rejection.errors.isEmpty, "a rejection without errors")
    }
    return 0
}
