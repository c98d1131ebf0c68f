import Reconciliation
import TextFormats

/// Appends JSON tokens for the documents the store writes itself rather than through Foundation's `JSONEncoder`
/// (`SnapshotJSON`, `DecisionJSON`): keys are written in the order given (sorted, as `.sortedKeys` wrote them), and a
/// comma goes before a member or element when one was written before it at that level.
struct JSONDocumentWriter {
    var out: [UInt8] = []
    /// A value was just written at the current level: the next member or element needs a comma.
    private var comma = false

    mutating func open() { out.append(UInt8(ascii: "{")); comma = false }
    mutating func close() { out.append(UInt8(ascii: "}")); comma = true }
    mutating func openArray() { out.append(UInt8(ascii: "[")); comma = false }
    mutating func closeArray() { out.append(UInt8(ascii: "]")); comma = true }
    /// Before each element of an array.
    mutating func element() { if comma { out.append(UInt8(ascii: ",")) }; comma = false }

    mutating func key(_ k: StaticString) {
        if comma { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "\""))
        k.withUTF8Buffer { out.append(contentsOf: $0) }
        out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        comma = false
    }

    mutating func string(_ s: String) { JSONValue.writeString(s, into: &out); comma = true }
    mutating func int<I: BinaryInteger>(_ v: I) { out.append(contentsOf: String(v).utf8); comma = true }
    mutating func bool(_ v: Bool) { out.append(contentsOf: (v ? "true" : "false").utf8); comma = true }

    mutating func strings(_ list: [String]) {
        openArray()
        for s in list { element(); string(s) }
        closeArray()
    }

    mutating func currency(_ c: Currency) {
        open(); key("code"); string(c.code); key("exponent"); int(c.exponent); close()
    }
}
