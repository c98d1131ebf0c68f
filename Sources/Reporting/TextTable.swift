// Aligned columns for terminals, with optional ANSI colour.

/// ANSI styles; `Style.none` everywhere when colour is off.
public enum Style: String, Sendable {
    case none = "", bold = "1", dim = "2", red = "31", green = "32", yellow = "33", cyan = "36", boldRed = "1;31"

    /// `text` wrapped in this style's escape codes when `colour` is on.
    public func apply(_ text: String, colour: Bool) -> String {
        guard colour, self != .none, !text.isEmpty else { return text }
        return "\u{1B}[\(rawValue)m" + text + "\u{1B}[0m"
    }
}

/// Columns padded to their widest cell; numbers right-aligned. Cells are made terminal-safe first.
public struct TextTable: Sendable {
    public enum Alignment: Sendable { case left, right }
    public struct Column: Sendable {
        public var title: String
        public var alignment: Alignment
        public init(_ title: String, _ alignment: Alignment = .left) { self.title = title; self.alignment = alignment }
    }

    public var columns: [Column]
    public var rows: [(cells: [String], style: Style)] = []
    public var indent = "  "

    public init(_ columns: [Column]) { self.columns = columns }

    public mutating func append(_ cells: [String], style: Style = .none) {
        rows.append((cells.map(TextTable.safe), style))
    }

    public func render(colour: Bool) -> String {
        var widths = columns.map(\.title.count)
        for row in rows { for (i, cell) in row.cells.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for (i, cell) in cells.enumerated() where i < columns.count {
                let pad = String(repeating: " ", count: max(0, widths[i] - cell.count))
                let last = i == columns.count - 1
                parts.append(columns[i].alignment == .right ? pad + cell : (last ? cell : cell + pad))
            }
            var text = parts.joined(separator: "  ")
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }
        var out = indent + Style.bold.apply(line(columns.map(\.title)), colour: colour) + "\n"
        for row in rows { out += indent + row.style.apply(line(row.cells), colour: colour) + "\n" }
        return out
    }

    /// Control characters (ESC, CR, LF, ...) shown as escapes, so a stored value can neither move the cursor nor
    /// break the alignment: "a\nb" → "a\\nb", ESC → "\\u{1B}" (`String.terminalSafe`, the one rule).
    public static func safe(_ text: String) -> String { text.terminalSafe }

    /// As `safe`, keeping the line breaks of a multi-line text (each line made safe on its own).
    public static func safeMultiline(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { safe(String($0)) }.joined(separator: "\n")
    }
}
