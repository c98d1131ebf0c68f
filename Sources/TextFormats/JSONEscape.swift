// The JSON string-escape grammar (RFC 8259 §7), shared by ExactJSON's parser and the order-file line parser.
// Each parser words and places its own errors; this only decodes and says what went wrong where.

/// Why a string escape could not be decoded.
package struct JSONEscapeError: Error {
    package enum Kind {
        /// The input ends right after the backslash.
        case endOfInput
        /// The byte after the backslash starts no escape (`index` points at it).
        case invalidEscape
        /// Fewer than four bytes left for a `\u` escape.
        case truncatedHex
        case invalidHexDigit
        /// A high surrogate not followed by a `\u` escape.
        case loneHighSurrogate
        /// A high surrogate followed by a `\u` escape that is not a low surrogate.
        case highSurrogateWithoutLow
        case loneLowSurrogate
        case invalidCodePoint
    }
    package var kind: Kind
    /// The byte index at which the problem was noticed.
    package var index: Int
}

package enum JSONEscape {
    /// Decodes the escape whose backslash is at `bytes[backslash]`, appends its UTF-8 to `out` and returns the index
    /// just past it. A surrogate pair (`\uD83D\uDE00`) is one escape.
    package static func decode(_ bytes: [UInt8], backslash: Int, into out: inout [UInt8]) throws(JSONEscapeError) -> Int {
        var i = backslash + 1
        guard i < bytes.count else { throw JSONEscapeError(kind: .endOfInput, index: i) }
        let escape = bytes[i]
        i += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4(bytes, &i)
            if (0xD800...0xDBFF).contains(scalar) {
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw JSONEscapeError(kind: .loneHighSurrogate, index: i)
                }
                i += 2
                let low = try hex4(bytes, &i)
                guard (0xDC00...0xDFFF).contains(low) else { throw JSONEscapeError(kind: .highSurrogateWithoutLow, index: i) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw JSONEscapeError(kind: .loneLowSurrogate, index: i)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw JSONEscapeError(kind: .invalidCodePoint, index: i) }
            out.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            throw JSONEscapeError(kind: .invalidEscape, index: i - 1)
        }
        return i
    }

    /// Four hex digits at `i`, which moves past them.
    private static func hex4(_ bytes: [UInt8], _ i: inout Int) throws(JSONEscapeError) -> UInt32 {
        guard bytes.count - i >= 4 else { throw JSONEscapeError(kind: .truncatedHex, index: i) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[i]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw JSONEscapeError(kind: .invalidHexDigit, index: i)
            }
            value = value << 4 | digit
            i += 1
        }
        return value
    }
}
