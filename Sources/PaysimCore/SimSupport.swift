import Foundation

/// SplitMix64: tiny, fast, and fully determined by its seed (fault injection and generated ids).
public struct SplitMix64: Sendable {
    public private(set) var state: UInt64
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits (probabilities only; never money).
    public mutating func nextUnit() -> Double { Double(next() >> 11) / 9_007_199_254_740_992.0 }

    /// Uniform in 0...upper.
    public mutating func next(upTo upper: UInt64) -> UInt64 {
        upper == UInt64.max ? next() : next() % (upper + 1)
    }

    /// `count` characters from `alphabet`.
    public mutating func string(_ count: Int, alphabet: [Character]) -> String {
        String((0..<count).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
    }

    /// A random (version 4 layout) UUID, lower case.
    public mutating func uuid() -> String {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * UInt64(i))) }
        for i in 0..<8 { bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * UInt64(i))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }
}

/// RFC 3339 / ISO 8601 timestamps in UTC, without formatter objects (thread-safe, fast).
public enum SimTime {
    /// `2026-01-02T03:04:05Z`
    public static func rfc3339(_ date: Date) -> String { format(date, millis: false) }
    /// `2026-01-02T03:04:05.678Z`
    public static func rfc3339Millis(_ date: Date) -> String { format(date, millis: true) }

    static func format(_ date: Date, millis: Bool) -> String {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(totalMillis >= 0 ? totalMillis / 1000 : (totalMillis - 999) / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        var out = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        if millis {
            let ms = ((totalMillis % 1000) + 1000) % 1000
            out += "." + pad(Int32(ms), 3)
        }
        return out + "Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (also a space instead of `T`, and `+00:00`) into unix
    /// seconds. Returns nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let c = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= c.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard c[i] >= 0x30, c[i] <= 0x39 else { return nil }
                v = v * 10 + Int(c[i] - 0x30)
            }
            return v
        }
        guard c.count >= 19, let year = num(0, 4), c[4] == 0x2D, let month = num(5, 2), c[7] == 0x2D,
              let day = num(8, 2), c[10] == UInt8(ascii: "T") || c[10] == UInt8(ascii: " ") || c[10] == UInt8(ascii: "t"),
              let hour = num(11, 2), c[13] == 0x3A, let minute = num(14, 2), c[16] == 0x3A, let second = num(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        if i < c.count, c[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < c.count, c[i] >= 0x30, c[i] <= 0x39 { i += 1 }
            guard i > start else { return nil }
        }
        var offset = 0
        guard i < c.count else { return nil }
        if c[i] == UInt8(ascii: "Z") || c[i] == UInt8(ascii: "z") {
            i += 1
        } else if c[i] == UInt8(ascii: "+") || c[i] == UInt8(ascii: "-") {
            let sign = c[i] == UInt8(ascii: "-") ? -1 : 1
            guard let oh = num(i + 1, 2), i + 3 < c.count, c[i + 3] == 0x3A, let om = num(i + 4, 2) else { return nil }
            offset = sign * (oh * 3600 + om * 60)
            i += 6
        } else {
            return nil
        }
        guard i == c.count else { return nil }
        // Days from civil (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Int64(days * 86400 + hour * 3600 + minute * 60 + second - offset)
    }
}

/// JSON log lines on stderr (paysim's own: tiny, no secrets, static messages with data in fields).
public enum SimLog {
    public static func info(_ message: String, _ fields: KeyValuePairs<String, JSON?> = [:]) { write("info", message, fields) }
    public static func warn(_ message: String, _ fields: KeyValuePairs<String, JSON?> = [:]) { write("warn", message, fields) }
    public static func error(_ message: String, _ fields: KeyValuePairs<String, JSON?> = [:]) { write("error", message, fields) }

    static func write(_ level: String, _ message: String, _ fields: KeyValuePairs<String, JSON?>) {
        var members: [JSONMember] = [
            JSONMember(key: "time", value: .string(SimTime.rfc3339Millis(Date()))),
            JSONMember(key: "level", value: .string(level)),
            JSONMember(key: "component", value: "paysim"),
            JSONMember(key: "message", value: .string(message)),
        ]
        for (key, value) in fields { if let value { members.append(JSONMember(key: key, value: value)) } }
        let line = JSON.object(members).text + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
