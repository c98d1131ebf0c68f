// Chunked byte input with one byte of lookahead and physical line counting (CRLF, LF or a lone CR).

public struct ByteInput {
    private let nextChunk: () -> [UInt8]?
    private var chunk: [UInt8] = []
    private var index = 0
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

    /// Consumes the rest of the current line, its line break included.
    package mutating func skipLine() {
        while let byte = next() {
            if ByteInput.isNewline(byte) { finishNewline(byte); return }
        }
    }
}
