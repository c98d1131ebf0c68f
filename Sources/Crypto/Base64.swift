/// Standard base64 (RFC 4648 §4, with padding).
///
/// Decoding is strict: the length must be a multiple of four, only the alphabet may appear, `=` only as one or two
/// final padding characters, and the unused bits of the last group must be zero. No whitespace is skipped, so a
/// header value with garbage in it is rejected rather than half-read.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// `bytes` as padded base64.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)]); out.append(alphabet[Int(n & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(UInt8(ascii: "=")); out.append(UInt8(ascii: "="))
        case 2:
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)]); out.append(UInt8(ascii: "="))
        default: break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64; nil for anything that is not exactly that.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        if chars.isEmpty { return [] }
        var padding = 0
        if chars[chars.count - 1] == UInt8(ascii: "=") { padding += 1 }
        if chars[chars.count - 2] == UInt8(ascii: "=") { padding += 1 }
        if padding == 1 && chars[chars.count - 2] == UInt8(ascii: "=") { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            let last = i + 4 == chars.count
            var n: UInt32 = 0
            for j in 0..<4 {
                let c = chars[i + j]
                if last && j >= 4 - padding {
                    n <<= 6
                    continue
                }
                let v = reverse[Int(c)]
                if v == 0xff { return nil }
                n = n << 6 | UInt32(v)
            }
            out.append(UInt8(n >> 16 & 0xff))
            if !(last && padding == 2) { out.append(UInt8(n >> 8 & 0xff)) } else if n & 0xffff != 0 { return nil }
            if !(last && padding >= 1) { out.append(UInt8(n & 0xff)) } else if padding == 1 && n & 0xff != 0 { return nil }
            i += 4
        }
        return out
    }
}
