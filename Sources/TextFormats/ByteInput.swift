// Chunked byte input with one byte of lookahead and physical line counting (CRLF, LF or a lone CR).

public struct ByteInput {
    private let nextChunk: () -> [UInt8]?
    private var chunk: [UInt8] = []
    /// The next byte's place in `chunk` (the CSV reader moves it past what it scanned).
    var index = 0
    private var exhausted = false
    /// 1-based line of the next byte.
    public private(set) var line = 1

    public init(nextChunk: @escaping () -> [UInt8]?) { self.nextChunk = nextChunk }

    /// Over bytes already in memory.
    public init(_ bytes: [UInt8]) {
        var given: [UInt8]? = bytes
        self.init(nextChunk: {
            defer { given = nil }; return given
        })
    }

    public mutating func peek() -> UInt8? {
        while index >= chunk.count {
            guard !exhausted, let next = nextChunk() else { exhausted = true; return nil }
            chunk = next
            index = 0
        }
        return chunk[index]
    }

    public mutating func next() -> UInt8? {
        guard let byte = peek() else { return nil }
        index += 1
        return byte
    }

    /// After reading `byte` (CR or LF): swallow the LF of a CRLF and count the line.
    package mutating func finishNewline(_ byte: UInt8) {
        if byte == 0x0D, peek() == 0x0A { index += 1 }
        line += 1
    }

    package static func isNewline(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }

    public mutating func skipBOM() {
        // A BOM can straddle chunks: gather up to three bytes into one chunk first.
        guard peek() == 0xEF else { return }
        var head = Array(chunk[index...])
        while head.count < 3, !exhausted {
            guard let more = nextChunk() else { exhausted = true; break }
            head += more
        }
        chunk = head
        index = head.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    }

    /// Skips blanks and blank lines (counting them) and returns the next byte without consuming it.
    package mutating func firstNonBlank() -> UInt8? {
        while let byte = peek() {
            if ByteInput.isNewline(byte) {
                index += 1; finishNewline(byte)
            } else if byte == 0x20 || byte == 0x09 {
                index += 1
            } else {
                return byte
            }
        }
        return nil
    }

    /// From the next byte to the end of the current chunk: where the first quote or line break (and, unless `quoted`,
    /// comma) is, and which byte it is; the chunk's end and nil when there is none. The chunk holds a byte
    /// (`peek()` returned one).
    func scan(quoted: Bool) -> (end: Int, stop: UInt8?) {
        chunk.withUnsafeBufferPointer { buffer in
            var i = index
            while i < buffer.count {
                let b = buffer[i]
                if b == 0x22 || b == 0x0A || b == 0x0D || (b == 0x2C && !quoted) { return (i, b) }
                i += 1
            }
            return (i, nil)
        }
    }

    /// Bytes of the current chunk.
    func chunkBytes(_ range: Range<Int>) -> ArraySlice<UInt8> { chunk[range] }

    /// Consumes the rest of the current line, its line break included.
    package mutating func skipLine() {
        while let byte = next() {
            if ByteInput.isNewline(byte) { finishNewline(byte); return }
        }
    }
}
