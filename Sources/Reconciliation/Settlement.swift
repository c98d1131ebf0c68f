import TextFormats

/// A provider's settlement report, read: its balance lines and what its own counts and totals say of it. Pure
/// values: the provider's reader builds them (PayPal: `PayPalSettlementReport`), the store keeps them, and
/// `SettlementRules` judges them against the movements payrecon knows.
public struct SettlementLine: Sendable, Hashable {
    public enum Direction: String, Sendable, Hashable { case credit = "CR", debit = "DR" }
    /// What the line is to payrecon: money in for a payment (a capture or sale), money back out (a refund, a
    /// reversal, a chargeback), or anything else (withdrawals, holds, conversions, fees of the account) that no
    /// order's transaction is.
    public enum Role: String, Sendable, Hashable { case payment, moneyBack = "money_back", other }

    /// A transaction detail row's standing, as PayPal's Transactional Status defines it (reporting_transactions_v1.json
    /// `transaction_status`). A settlement (STL) row has none: it lists only money that moved, so it is `completed`.
    public enum Status: String, Sendable, Hashable, CaseIterable {
        /// S: "successfully completed without a denial and after any pending statuses".
        case completed = "S"
        /// V: "a successful transaction was fully reversed and funds were refunded to the original sender". The money
        /// did move; its refund or reversal is a row of its own. Kept and matched as a completed row is.
        case reversed = "V"
        /// P: "created but waits for another payment process to complete": a later file brings it completed.
        case pending = "P"
        /// D: "PayPal or merchant rules denied the transaction": it moved no money.
        case denied = "D"

        /// The row is money that moved: kept, matched and judged.
        public var moved: Bool { self == .completed || self == .reversed }
    }

    /// The provider's id of the transaction (PayPal's Transaction ID: a capture, refund or sale id). Empty for an
    /// account row (a balance transfer, a withdrawal…): no transaction's, kept with its file and never matched.
    public var transactionID: String
    /// The provider's code of the event (PayPal's T-code: T0006, T1107…). A line is (transactionID, eventCode,
    /// direction): the same id appears under several codes.
    public var eventCode: String
    public var direction: Direction
    public var role: Role
    /// The transaction a refund or reversal belongs to (PayPal Reference ID of type TXN), and the reference's type.
    public var referenceID: String?
    public var referenceType: String?
    public var invoiceID: String?
    public var customField: String?
    /// Unix seconds.
    public var initiatedAt: Int64?
    public var completedAt: Int64?
    public var currency: Currency
    /// ISO minor units of `currency`, never negative: the direction says which way.
    public var gross: Int64
    /// The fee, its direction and currency (a capture's fee is a debit; the fee a refund gives back a credit).
    public var fee: Int64?
    public var feeDirection: Direction?
    public var feeCurrency: Currency?
    /// The line of the file it came from (1-based).
    public var line: Int
    /// The row as read, as CSV, at most `SettlementLine.rowLimit` bytes (the evidence of a finding it raises); nil when
    /// not known.
    public var row: String?
    /// The stored file it came from, once stored.
    public var fileID: Int64?
    /// The row's standing: only money that moved (`status.moved`) is a line; a pending row waits for the later file
    /// that lists it completed, a denied one moved nothing.
    public var status: Status = .completed

    /// A body row with no Transaction ID: the account's own (a transfer, a withdrawal, a fee of the account).
    public var isAccountRow: Bool { transactionID.isEmpty }

    /// How much of a row is kept as evidence: real rows are about 200 bytes; a hostile row of 512 fields of 64 KiB
    /// keeps no more than this.
    public static let rowLimit = 1_024

    /// Fields as a CSV row (a field with a comma, a quote or a line break quoted), at most `rowLimit` bytes (then "…"),
    /// a NUL as U+FFFD (PostgreSQL text holds none).
    public static func rowText(_ fields: CSVFields) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        for i in 0..<fields.count {
            let field = fields[i]
            if i > 0 { out.append(0x2C) }
            if field.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }) {
                out.append(0x22)
                for b in field { if b == 0x22 { out.append(0x22) }; out.append(b) }
                out.append(0x22)
            } else {
                out += field.prefix(rowLimit + 1)
            }
            if out.count > rowLimit { break }
        }
        if out.count <= rowLimit, !out.contains(0) { return String(decoding: out, as: UTF8.self) }
        var kept: [UInt8] = []
        kept.reserveCapacity(min(out.count, rowLimit) + 4)
        for b in out.prefix(rowLimit) { if b == 0 { kept += [0xEF, 0xBF, 0xBD] } else { kept.append(b) } }
        return String(decoding: kept, as: UTF8.self) + (out.count > rowLimit ? "…" : "")
    }

    public init(
        transactionID: String, eventCode: String, direction: Direction, role: Role, referenceID: String? = nil,
        referenceType: String? = nil, invoiceID: String? = nil, customField: String? = nil, initiatedAt: Int64? = nil,
        completedAt: Int64? = nil, currency: Currency, gross: Int64, fee: Int64? = nil, feeDirection: Direction? = nil,
        feeCurrency: Currency? = nil, line: Int
    ) {
        self.transactionID = transactionID; self.eventCode = eventCode; self.direction = direction; self.role = role
        self.referenceID = referenceID; self.referenceType = referenceType; self.invoiceID = invoiceID; self.customField = customField
        self.initiatedAt = initiatedAt; self.completedAt = completedAt; self.currency = currency; self.gross = gross
        self.fee = fee; self.feeDirection = feeDirection; self.feeCurrency = feeCurrency; self.line = line
    }

    /// The fee as the merchant's balance saw it: positive when taken, negative when given back.
    public var feeTaken: Int64? {
        guard let fee else { return nil }
        return feeDirection == .credit ? -fee : fee
    }
}

/// What a settlement report says of itself: its kind, the account and period it covers, and where its own row
/// counts or totals do not add up (then it is `settlement_incomplete`).
public struct SettlementReportSummary: Sendable, Hashable {
    /// `STL` (settlement), `TRR` (transaction detail), or nil when neither the name nor the content says.
    public var kind: String?
    public var account: String?
    /// The report's day (`YYYY-MM-DD`): from the file name (`STL-yyyymmdd…`), else the period's start.
    public var day: String?
    /// Unix seconds of the period the report covers, when it says.
    public var periodStart: Int64?
    public var periodEnd: Int64?
    public var bodyRows: Int
    /// Each place the report contradicts itself or stops early, in words.
    public var problems: [String]
    /// The file's time zone, seconds east of UTC, as its times' offsets state it (`-0700`: −25 200); nil when they
    /// state none. Its `day` is that zone's.
    public var utcOffset: Int?

    public init(
        kind: String? = nil, account: String? = nil, day: String? = nil, periodStart: Int64? = nil, periodEnd: Int64? = nil,
        bodyRows: Int = 0, problems: [String] = []
    ) {
        self.kind = kind; self.account = account; self.day = day; self.periodStart = periodStart; self.periodEnd = periodEnd
        self.bodyRows = bodyRows; self.problems = problems
    }
}

/// A report that cannot be read at all (not CSV, a body row before its column names, a column missing, an amount that
/// is not a number): nothing of it is kept.
public struct SettlementReportError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var reason: String
    public init(line: Int, _ reason: String) { self.line = line; self.reason = reason }
    public var description: String { line > 0 ? "line \(line): \(reason)" : reason }
}
