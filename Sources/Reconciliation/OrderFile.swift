import TextFormats

// Order import files: CSV with a header row, or JSON Lines; all-or-nothing with every bad row listed.

/// One problem in an order file. `line` is the 1-based physical line where the row starts; `field` is the column
/// or key ("" when the problem is the row itself, e.g. a wrong field count or a JSON syntax error).
public struct OrderFileError: Error, Hashable, Sendable, CustomStringConvertible {
    public var line: Int
    public var field: String
    public var reason: String

    public init(line: Int, field: String, reason: String) {
        self.line = line; self.field = field; self.reason = reason
    }

    /// "line 3, amount: more decimals than USD allows (2)".
    public var description: String { field.isEmpty ? "line \(line): \(reason)" : "line \(line), \(field): \(reason)" }
}

/// A file with at least one bad row: nothing is imported; `errors` lists every problem in file order.
public struct OrderFileRejection: Error, Hashable, Sendable, CustomStringConvertible {
    public var errors: [OrderFileError]
    public init(errors: [OrderFileError]) { self.errors = errors }
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// One row of an order file, as the reader yields it.
public enum OrderFileRecord: Hashable, Sendable {
    case order(Order, line: Int)
    /// Every problem found in one row (or in the CSV header, which ends the file).
    case invalid([OrderFileError])
}

/// Reads order files.
///
/// Format: JSON Lines when the first non-blank character (after an optional UTF-8 BOM) is `{`, CSV otherwise.
///
/// CSV: RFC 4180 (quoted fields with `""` escapes and line breaks; CRLF, LF or CR), a header row naming the
/// columns in any order (names are matched case-insensitively, surrounding spaces ignored). Required columns:
/// provider, order_id, transaction_ref, intent, amount, currency, fulfilment; optional: merchant, site,
/// refund_amount, period_start and period_end (a subscription's billing period: both or neither, a date
/// `2026-01-01` meaning 00:00 UTC or a date-time with its zone, the end excluded and after the start, only for one
/// transaction_ref the provider calls a subscription or billing agreement, and no two periods of one agreement
/// overlapping, nor an order of it without one). Repeated columns are errors. A column of the shop's own is read past
/// and named (`OrderFileReader.ignored`), unless its name is near one payrecon reads or holds one of its words
/// (`refund_amout`, `amount_refunded`): then it is an error, since a refund limit read past would silently mean "no
/// refund"; `strict` makes every unknown column an error. Values are taken as written (no trimming). Empty lines are
/// skipped.
///
/// JSON Lines: one object per line with the same keys (unknown keys as unknown columns are; repeated keys are errors);
/// `null` = absent.
/// Amounts may be strings ("25.00") or JSON numbers (25.00), read from the literal text, never through Double;
/// order_id, transaction_ref, merchant and site may be integers (taken as written).
///
/// Values: provider, intent, fulfilment and currency are case-insensitive; amounts follow `Money.parse`.
/// A row is invalid for the contract's reasons plus: a duplicate (provider, order_id) within the file (which row
/// wins would be a guess), a wrong field count, a value of the wrong JSON type, invalid UTF-8.
public enum OrderFile {
    /// Bounds on what one row may hold: no key or field of an order comes near them (ids, references, amounts), and a
    /// hostile file cannot make one row fill the memory (a 200 MiB field took 432 MiB). A row over them is that
    /// row's error.
    public static let maxLineBytes = 64 * 1024
    public static let maxFieldBytes = 16 * 1024
    public static let maxFields = 64
    /// The problems an import lists at most; the rest are counted.
    public static let maxListedProblems = 1000

    public enum Format: Sendable, Hashable { case csv, jsonLines }

    /// The orders of a whole file, or every problem in it. `traits` are each provider's (the provider registry's).
    public static func parse(
        _ bytes: [UInt8], traits: @escaping @Sendable (Provider) -> ProviderTraits
    ) throws(OrderFileRejection) -> [Order] {
        var orders: [Order] = []
        var errors: [OrderFileError] = []
        for record in OrderFileReader(bytes: bytes, traits: traits) {
            switch record {
            case let .order(order, _): if errors.isEmpty { orders.append(order) }
            case let .invalid(rowErrors): errors.append(contentsOf: rowErrors)
            }
        }
        guard errors.isEmpty else { throw OrderFileRejection(errors: errors) }
        return orders
    }

    /// `parse(_:)` for text.
    public static func parse(text: String, traits: @escaping @Sendable (Provider) -> ProviderTraits) throws(OrderFileRejection) -> [Order] {
        try parse(Array(text.utf8), traits: traits)
    }

    /// The format `parse` would pick for a file starting with these bytes.
    public static func detectFormat(_ bytes: some Sequence<UInt8>) -> Format {
        var iterator = bytes.makeIterator()
        var byte = iterator.next()
        if byte == 0xEF {  // a UTF-8 BOM, or not ASCII at all (then not JSON either)
            guard iterator.next() == 0xBB, iterator.next() == 0xBF else { return .csv }
            byte = iterator.next()
        }
        while let current = byte, isBlank(current) { byte = iterator.next() }
        return byte == UInt8(ascii: "{") ? .jsonLines : .csv
    }

    static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// The keys / columns, in the contract's order.
    static let requiredFields = [
        "provider", "order_id", "transaction_ref", "intent", "amount", "currency",
        "fulfilment"
    ]
    static let optionalFields = ["merchant", "site", "refund_amount", "period_start", "period_end"]
    static let knownFields = Set(requiredFields + optionalFields)
}

/// Streams the records of an order file, reading the bytes in chunks, so a large file is checked (and imported in
/// a second pass) in constant memory apart from the set of order ids seen (for the duplicate check).
///
///     let reader = OrderFileReader { try? handle.read(upToCount: 1 << 16).map(Array.init) }
public struct OrderFileReader: IteratorProtocol, Sequence {
    var input: ByteInput
    var state: ReaderState = .start
    var validator: RowValidator
    /// Refuse a column (or JSON key) payrecon does not read, as before: a file with one is rejected whole. Otherwise a
    /// shop's export with columns of its own is read, those columns named once (`ignored`); one whose name is a near
    /// miss of a field payrecon reads (`refund_amout`) is still refused, since ignoring it would drop what it holds.
    public var strict = false
    /// The columns (or keys) read past, in the order met; at most `maxIgnoredNames` are kept.
    public private(set) var ignored: [String] = []
    static let maxIgnoredNames = 20

    /// nil: a column payrecon reads past.
    enum ReaderState { case start, csv(columns: [String?]), jsonLines, done }

    /// Reads from `nextChunk` until it returns nil (empty chunks are skipped). `traits` say what each provider
    /// needs of a row (the provider registry's).
    public init(chunks nextChunk: @escaping () -> [UInt8]?, traits: @escaping @Sendable (Provider) -> ProviderTraits) {
        input = ByteInput(nextChunk: nextChunk)
        validator = RowValidator(traits: traits)
    }

    /// Reads a file held in memory.
    public init(bytes: [UInt8], traits: @escaping @Sendable (Provider) -> ProviderTraits) {
        var sent = false
        self.init(
            chunks: {
                defer { sent = true }
                return sent ? nil : bytes
            }, traits: traits)
    }

    /// Whether `name` (a column or key payrecon does not read) is one edit or two from a field it reads: a misspelling,
    /// not a column of the shop's own.
    static func nearMiss(_ name: String) -> String? {
        func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
            var previous = Array(0...b.count)
            for (i, x) in a.enumerated() {
                var current = [i + 1]
                for (j, y) in b.enumerated() {
                    current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
                }
                previous = current
            }
            return previous[b.count]
        }
        let bytes = Array(name.lowercased().utf8)
        guard bytes.count <= 64 else { return nil }
        // Short names are close to many others ("note", "site"): one edit there, two in a longer name.
        return (OrderFile.requiredFields + OrderFile.optionalFields).first {
            distance(bytes, Array($0.utf8)) <= (Swift.min(bytes.count, $0.utf8.count) <= 5 ? 1 : 2)
        }
    }

    /// The words of the optional fields payrecon reads (a required one is there under its own name, or the file is
    /// refused): a column or key of the shop's own that holds one (`refund`, `amount_refunded`, `billing_period`,
    /// `merchant_account`) may be that field under another name, and reading past it would drop what it holds (a refund
    /// limit imported as 0), so it is refused, never read past.
    static let fieldWords = ["refund", "amount", "period", "merchant", "site"]

    /// Reads past `name` (a column or key payrecon does not read) and notes it, or says it may not (false).
    mutating func readPast(_ name: String) -> Bool {
        if strict { return false }
        let lowered = name.lowercased()
        if Self.nearMiss(lowered) != nil || Self.fieldWords.contains(where: { lowered.contains($0) }) { return false }
        if !ignored.contains(name) && ignored.count < Self.maxIgnoredNames { ignored.append(name) }
        return true
    }

    public mutating func next() -> OrderFileRecord? {
        while true {
            switch state {
            case .done:
                return nil
            case .start:
                input.skipBOM()
                if input.firstNonBlank() == UInt8(ascii: "{") {
                    state = .jsonLines
                } else {
                    switch readHeader() {
                    case let .success(columns): state = .csv(columns: columns)
                    case let .failure(rejection):
                        state = .done
                        return rejection.errors.isEmpty ? nil : .invalid(rejection.errors)
                    }
                }
            case let .csv(columns):
                guard let record = nextCSVRow(columns: columns) else { state = .done; return nil }
                return record
            case .jsonLines:
                guard let record = nextJSONLine() else { state = .done; return nil }
                return record
            }
        }
    }
}
