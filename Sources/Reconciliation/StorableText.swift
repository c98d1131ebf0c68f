extension String {
    /// This text with each NUL as U+FFFD: PostgreSQL's text and jsonb hold no NUL, so what quotes a provider or a
    /// sender (an outcome, an error, a header) is stored this way rather than failing the statement that stores it.
    public var withoutNUL: String {
        guard utf8.contains(0) else { return self }
        var out = String.UnicodeScalarView()
        for scalar in unicodeScalars { out.append(scalar.value == 0 ? "\u{FFFD}" : scalar) }
        return String(out)
    }
}

extension String {
    /// This text as one line a terminal shows as it is: every control character (C0, DEL, C1: ESC and its sequences,
    /// CR, LF, TAB), the line and paragraph separators and the bidi overrides written as a visible escape ("a\nb" →
    /// `a\nb`, ESC → `\u{1B}`). Text from outside (a sender's header, a provider's answer, a file's field) goes
    /// through it before it reaches a terminal, so it can neither move the cursor, set the title, nor print a line
    /// that looks like payrecon's own.
    public var terminalSafe: String {
        guard unicodeScalars.contains(where: Self.isTerminalControl) else { return self }
        var out = ""
        for s in unicodeScalars {
            switch s {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where Self.isTerminalControl(s): out += "\\u{" + String(s.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(s)
            }
        }
        return out
    }

    /// A text of several lines from outside, each line made `terminalSafe` and set behind `gutter`, so none of its
    /// lines can pass for one of payrecon's.
    public func terminalSafeLines(gutter: String = "  | ") -> String {
        split(separator: "\n", omittingEmptySubsequences: false).map { gutter + String($0).terminalSafe }.joined(separator: "\n")
    }

    public static func isTerminalControl(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (0x7F...0x9F).contains(s.value) || s.value == 0x2028 || s.value == 0x2029
            || (0x202A...0x202E).contains(s.value) || (0x2066...0x2069).contains(s.value)  // bidi overrides
    }
}
