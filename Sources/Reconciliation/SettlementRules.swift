/// What settlement lines say against the movements payrecon knows (pure: values in, findings out).
///
/// A line is matched to the movement with its transaction id. A payment line (money in) to a capture, a money-back
/// line (a refund, reversal or chargeback) to a refund or reversal. Matched, it must agree with the API's answer:
/// the same currency and gross (`settlement_mismatch`), the direction of its kind (a capture credited, a refund
/// debited: `settlement_mismatch`), and the fee the API stated, when it stated one (`fee_mismatch`: a capture's fee
/// is debited, the fee a refund gives back credited). Unmatched, a payment credited or money back debited is
/// `unknown_settlement` (a payment the merchant sent, a chargeback reversed in their favour and every other code are no
/// order's). A capture, refund or reversal older than the deadline that no line shows is `settlement_missing`.
public enum SettlementRules {
    /// A finding and the order it belongs to (nil: no order payrecon knows), under the transaction it names.
    public struct Judged: Sendable, Equatable {
        public var finding: Finding
        public var orderID: String?
        public var transactionRef: String
        /// nil for a finding about files, not money (settlement_incomplete).
        public var currency: Currency?
        /// Its evidence: the line that raised it (nil: none, as for a capture no line shows), or the file.
        public var line: SettlementLine?
        public var fileID: Int64?
        public init(
            finding: Finding, orderID: String?, transactionRef: String, currency: Currency?, line: SettlementLine? = nil,
            fileID: Int64? = nil
        ) {
            self.finding = finding; self.orderID = orderID; self.transactionRef = transactionRef; self.currency = currency
            self.line = line; self.fileID = fileID ?? line?.fileID
        }
    }

    /// A movement as the store holds it, with its order.
    public struct Known: Sendable, Equatable {
        public var movement: Movement
        public var orderID: String
        public init(_ movement: Movement, orderID: String) { self.movement = movement; self.orderID = orderID }
    }

    /// The findings of one line. `matched`: the movement with the line's transaction id, if any; `parent`: for a
    /// money-back line no movement matches, the movement its reference names (its order is then the finding's).
    public static func judge(_ line: SettlementLine, matched: Known?, parent: Known? = nil) -> [Judged] {
        guard line.role != .other else { return [] }
        guard let known = matched else { return unknownSettlement(line, parent: parent) }
        let m = known.movement
        var out: [Judged] = []
        let expectedDirection: SettlementLine.Direction = m.kind == .capture ? .credit : .debit
        var expected: [String: String] = [:], actual: [String: String] = [:], differences: [String] = []
        if line.currency != m.currency {
            expected["currency"] = m.currency.code; actual["currency"] = line.currency.code
            differences.append("currency \(line.currency.code), not \(m.currency.code)")
        } else if line.gross != m.gross {
            expected["gross"] = amount(m.gross, m.currency); actual["gross"] = amount(line.gross, line.currency)
            differences.append("gross \(amount(line.gross, line.currency)), not \(amount(m.gross, m.currency)) \(m.currency.code)")
        }
        if line.direction != expectedDirection {
            expected["direction"] = expectedDirection.rawValue; actual["direction"] = line.direction.rawValue
            differences.append(
                "\(line.direction == .credit ? "credited" : "debited") where a \(m.kind.rawValue) is \(expectedDirection == .credit ? "credited" : "debited")"
            )
        }
        if !differences.isEmpty {
            let atRisk = line.currency == m.currency ? distance(line.gross, m.gross) : max(line.gross, m.gross)
            out.append(
                Judged(
                    finding: Finding(
                        kind: .settlementMismatch, expected: expected, actual: actual,
                        detail: "the settlement line for \(m.kind.rawValue) \(m.id) (\(place(of: line))) shows "
                            + differences.joined(separator: ", "),
                        amountAtRisk: atRisk == 0 ? line.gross : atRisk),
                    orderID: known.orderID, transactionRef: m.id, currency: m.currency, line: line))
        }
        // The fee, where the API stated one and the line is in its currency: what the balance was charged (a capture)
        // or given back (a refund), both as positive amounts.
        if let apiFee = m.fee, line.currency == m.currency, (line.feeCurrency ?? line.currency) == m.currency {
            let taken = line.feeTaken ?? 0
            let lineFee: Int64 = m.kind == .capture ? taken : (taken == .min ? .max : -taken)
            if lineFee != apiFee {
                let said = m.kind == .capture ? "charged" : "gave back"
                out.append(
                    Judged(
                        finding: Finding(
                            kind: .feeMismatch,
                            expected: ["fee": amount(apiFee, m.currency)], actual: ["fee": amount(lineFee, m.currency)],
                            detail:
                                "the settlement file \(said) a fee of \(amount(lineFee, m.currency)) \(m.currency.code) on \(m.kind.rawValue) \(m.id) (\(place(of: line))); the provider's API stated \(amount(apiFee, m.currency))",
                            amountAtRisk: distance(lineFee, apiFee)),
                        orderID: known.orderID, transactionRef: m.id, currency: m.currency, line: line))
            }
        }
        return out
    }

    /// The finding of a line no movement matches: `unknown_settlement` for money in credited or money back debited,
    /// nothing for the rest.
    private static func unknownSettlement(_ line: SettlementLine, parent: Known?) -> [Judged] {
        let moneyIn = line.role == .payment && line.direction == .credit
        let moneyOut = line.role == .moneyBack && line.direction == .debit
        guard moneyIn || moneyOut else { return [] }
        let what = moneyIn ? "a payment of" : "money back of"
        let orderNote = parent.map { " (its reference \($0.movement.id) is order \($0.orderID)'s)" } ?? ""
        return [
            Judged(
                finding: Finding(
                    kind: .unknownSettlement, expected: [:],
                    actual: [
                        "transaction": line.transactionID, "event_code": line.eventCode,
                        "direction": line.direction.rawValue, "gross": amount(line.gross, line.currency),
                        "currency": line.currency.code
                    ],
                    detail:
                        "the settlement file shows \(what) \(amount(line.gross, line.currency)) \(line.currency.code) for transaction \(line.transactionID) (\(place(of: line))), which payrecon does not know\(orderNote)",
                    amountAtRisk: line.gross),
                orderID: parent?.orderID, transactionRef: line.transactionID, currency: line.currency, line: line)
        ]
    }

    /// An amount in its currency's major units, as findings state it.
    private static func amount(_ minor: Int64, _ c: Currency) -> String { Money.format(minorUnits: minor, exponent: c.exponent) }

    /// Where a line is, as findings name it: its number, event code and direction.
    private static func place(of line: SettlementLine) -> String { "line \(line.line), \(line.eventCode) \(line.direction.rawValue)" }

    /// |a − b|, exact in 128 bits, at most Int64.max (never a trap on hostile amounts).
    public static func distance(_ a: Int64, _ b: Int64) -> Int64 {
        Int64(clamping: (Int128(a) - Int128(b)).magnitude)
    }

    /// Which of the movements with a line's id it is: a payment line is a capture's, a money-back line a refund's or
    /// a reversal's (Paypercut's capture and refunds share the payment's id; PayPal's never do).
    public static func movement(for line: SettlementLine, among known: [Known]) -> Known? {
        switch line.role {
        case .payment: known.first { $0.movement.kind == .capture }
        case .moneyBack: known.first { $0.movement.kind != .capture }
        case .other: nil
        }
    }

    /// A movement no line shows, `now - at` past `deadline` seconds: settlement_missing.
    public static func missing(_ known: Known, now: Int64, deadline: Int64) -> Judged? {
        let m = known.movement
        guard let at = m.at, now - at > deadline else { return nil }
        let amount = Money.format(minorUnits: m.gross, exponent: m.currency.exponent)
        return Judged(
            finding: Finding(
                kind: .settlementMissing, expected: ["transaction": m.id, "gross": amount, "currency": m.currency.code],
                actual: [:],
                detail:
                    "\(m.kind.rawValue) \(m.id) of \(amount) \(m.currency.code) on \(UnixTime.iso8601(at)) has no line in the settlement files imported \(deadline / 86_400 > 0 ? "\(deadline / 86_400) days" : "\(deadline) seconds") later",
                amountAtRisk: m.gross),
            orderID: known.orderID, transactionRef: m.id, currency: m.currency)
    }
}
