// Building provider URLs: every id that goes into a path or query is percent-encoded, so an id like
// `A/B?x` can never change which resource is asked for.

public enum ProviderURL {
    /// Percent-encodes everything but RFC 3986 unreserved characters (ALPHA DIGIT - . _ ~), byte by byte in UTF-8.
    public static func encodeComponent(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            default:
                out.append(UInt8(ascii: "%")); out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `base` (trailing slashes dropped) + `/seg1/seg2…` (each encoded) + `?k=v&…` (each encoded). A segment that
    /// is `.` or `..` has its dots encoded too (`%2E%2E`): left as is, path normalization (curl's, or a proxy's) would
    /// turn `/orders/..` into another resource.
    public static func build(base: String, segments: [String], query: [(String, String)] = []) -> String {
        var url = base
        while url.hasSuffix("/") { url.removeLast() }
        for s in segments {
            url += "/" + (s == "." || s == ".." ? String(repeating: "%2E", count: s.count) : encodeComponent(s))
        }
        if !query.isEmpty {
            url += "?" + query.map { encodeComponent($0.0) + "=" + encodeComponent($0.1) }.joined(separator: "&")
        }
        return url
    }

    /// Form encoding (application/x-www-form-urlencoded) of key/value pairs.
    public static func form(_ pairs: [(String, String)]) -> [UInt8] {
        Array(pairs.map { encodeComponent($0.0) + "=" + encodeComponent($0.1) }.joined(separator: "&").utf8)
    }
}
