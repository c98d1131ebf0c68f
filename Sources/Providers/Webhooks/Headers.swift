import HTTP

/// Webhook headers are the HTTP room's `HTTPHeaders` (ordered, ASCII case-insensitive lookup): the receiver hands
/// them over as received, with no copy.
public typealias Headers = HTTPHeaders

extension String {
    func trimmingASCIIWhitespace() -> String {
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d }
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
