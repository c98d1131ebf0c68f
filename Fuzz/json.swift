// libFuzzer harness: JSONValue.parse (ExactJSON) on arbitrary bytes, with default and tight limits.
// Property: a parsed value serializes to bytes that parse back to an equal value.
import Reconciliation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let value = try? JSONValue.parse(bytes) {
        let out = value.serialized()
        guard let again = try? JSONValue.parse(out) else { preconditionFailure("serialized output does not parse") }
        precondition(again == value, "round trip changed the value")
    }
    _ = try? JSONValue.parse(bytes, limits: .init(maxDepth: 4, maxBytes: 256, maxNumberLength: 8))
    return 0
}
