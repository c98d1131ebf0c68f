import CZlib

/// IEEE CRC-32 (zlib's `crc32`), as PayPal signs it.
public enum CRC32 {
    /// The CRC-32 of `bytes`; `"test_string"` gives 157791623.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc = crc32(0, nil, 0)
        bytes.withUnsafeBufferPointer { buffer in
            var base = buffer.baseAddress
            var remaining = buffer.count
            // zlib takes a uInt length; feed very large inputs in slices.
            while remaining > 0, let p = base {
                let n = min(remaining, Int(UInt32.max))
                crc = crc32(crc, p, uInt(n))
                base = p + n
                remaining -= n
            }
        }
        return UInt32(truncatingIfNeeded: crc)
    }
}
