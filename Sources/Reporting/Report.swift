// What `payrecon report` renders: plain values, read from the database by the caller.
import Foundation
import Reconciliation
import TextFormats

/// A discrepancy's lifecycle state as stored.
public enum DiscrepancyStatus: String, Sendable, Hashable, CaseIterable {
    case open, acknowledged, resolved
}

/// One row of the `discrepancies` table, ready to render.
public struct DiscrepancyRow: Sendable, Equatable {
    public var id: Int64
    public var provider: Provider
    /// nil for `unknown_order`.
    public var orderID: String?
    public var transactionRef: String
    public var kind: DiscrepancyKind
    public var status: DiscrepancyStatus
    /// The stored jsonb objects, kept exactly (member order, number literals).
    public var expected: JSONValue
    public var actual: JSONValue
    public var detail: String
    /// Minor units of `currency`.
    public var amountAtRisk: Int64
    public var currency: Currency?
    public var firstSeen: Date
    public var lastSeen: Date
    public var occurrences: Int
    public var resolvedAt: Date?
    /// When an operator acknowledged it (`payrecon discrepancies ack`), and the note they left.
    public var acknowledgedAt: Date?
    public var ackNote: String?
    /// Who acknowledged it (`--by`, else the OS user who ran the command).
    public var acknowledgedBy: String?
    /// The check that opened it or last changed what defines it (`payrecon explain ID` shows it).
    public var evidenceID: Int64?

    public init(
        id: Int64, provider: Provider, orderID: String?, transactionRef: String, kind: DiscrepancyKind,
        status: DiscrepancyStatus, expected: JSONValue = .object([]), actual: JSONValue = .object([]),
        detail: String = "", amountAtRisk: Int64 = 0, currency: Currency? = nil, firstSeen: Date,
        lastSeen: Date, occurrences: Int = 1, resolvedAt: Date? = nil, acknowledgedAt: Date? = nil,
        ackNote: String? = nil, acknowledgedBy: String? = nil
    ) {
        self.id = id; self.provider = provider; self.orderID = orderID; self.transactionRef = transactionRef
        self.kind = kind; self.status = status; self.expected = expected; self.actual = actual; self.detail = detail
        self.amountAtRisk = amountAtRisk; self.currency = currency; self.firstSeen = firstSeen; self.lastSeen = lastSeen
        self.occurrences = occurrences; self.resolvedAt = resolvedAt
        self.acknowledgedAt = acknowledgedAt; self.ackNote = ackNote; self.acknowledgedBy = acknowledgedBy
    }

    /// "25.00" in the row's currency; nil without a currency.
    public var formattedAmountAtRisk: String? {
        currency.map { Money.format(minorUnits: amountAtRisk, exponent: $0.exponent) }
    }
}

/// What is open now (whatever `--status` lists), for the report's first lines.
public struct ReportSummary: Sendable, Equatable {
    /// Open discrepancies matching the provider / kind / since filters.
    public var open: Int
    public var byKind: [DiscrepancyKind: Int]
    /// Sum of `amount_at_risk_minor` of those open discrepancies, per currency, in minor units. 128 bits: each
    /// amount fits in 64, so no number of them can overflow the sum (two near 2^62 made the report fail before).
    public var amountAtRisk: [Currency: Int128]
    /// Deliveries rejected in the last 24 hours, by reason (`invalid_signature`, ...).
    public var rejected24h: [String: Int]

    public init(
        open: Int = 0, byKind: [DiscrepancyKind: Int] = [:], amountAtRisk: [Currency: Int128] = [:],
        rejected24h: [String: Int] = [:]
    ) {
        self.open = open; self.byKind = byKind; self.amountAtRisk = amountAtRisk; self.rejected24h = rejected24h
    }

    /// Kinds with a count, in the contract's order.
    public var kindsInOrder: [(kind: DiscrepancyKind, count: Int)] {
        DiscrepancyKind.allCases.compactMap { k in byKind[k].flatMap { $0 > 0 ? (k, $0) : nil } }
    }

    /// Currencies by code, each with its total formatted in major units ("25.00", "1000", "1.250").
    public var amountsInOrder: [(currency: Currency, formatted: String)] {
        amountAtRisk.keys.sorted { $0.code < $1.code }.map { c in
            (c, Self.format(amountAtRisk[c]!, exponent: c.exponent))
        }
    }

    /// Major units with the exponent's digits, exactly ("25.00", "1000", "1.250"), for any 128-bit total.
    public static func format(_ minor: Int128, exponent: Int) -> String {
        let negative = minor < 0
        var digits = String(negative ? 0 - minor : minor)
        guard exponent > 0 else { return (negative ? "-" : "") + digits }
        if digits.count <= exponent { digits = String(repeating: "0", count: exponent - digits.count + 1) + digits }
        let point = digits.index(digits.endIndex, offsetBy: -exponent)
        return (negative ? "-" : "") + digits[..<point] + "." + digits[point...]
    }

    /// Reasons, most frequent first.
    public var rejectedInOrder: [(reason: String, count: Int)] {
        rejected24h.map { ($0.key, $0.value) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
    }

    public var rejectedTotal: Int { rejected24h.values.reduce(0, +) }
}

/// Open discrepancies first seen on one UTC day, for the HTML chart.
public struct DayCount: Sendable, Equatable {
    /// `YYYY-MM-DD` (UTC).
    public var day: String
    public var kind: DiscrepancyKind
    public var count: Int
    public init(day: String, kind: DiscrepancyKind, count: Int) { self.day = day; self.kind = kind; self.count = count }
}

/// The filters the report was asked for, shown in its heading.
public struct ReportFilters: Sendable, Equatable {
    /// `open`, `resolved` or `all`.
    public var status: String
    public var provider: Provider?
    public var kind: DiscrepancyKind?
    /// As typed (`7d`): last_seen within it.
    public var since: String?
    public init(status: String = "open", provider: Provider? = nil, kind: DiscrepancyKind? = nil, since: String? = nil) {
        self.status = status; self.provider = provider; self.kind = kind; self.since = since
    }

    /// "status open, provider pxp, since 7d".
    public var summaryText: String {
        var parts = ["status \(status)"]
        if let provider { parts.append("provider \(provider)") }
        if let kind { parts.append("kind \(kind.rawValue)") }
        if let since { parts.append("last seen within \(since)") }
        return parts.joined(separator: ", ")
    }
}

/// Everything one report shows.
public struct Report: Sendable, Equatable {
    public var generatedAt: Date
    public var filters: ReportFilters
    public var summary: ReportSummary
    /// Open discrepancies by first-seen day and kind (any days; the HTML chart picks its window).
    public var openByDay: [DayCount]
    public var discrepancies: [DiscrepancyRow]
    /// The evidence behind discrepancies, by id (the HTML shows each in a details element; others say how to see it).
    public var explanations: [Int64: Explanation]

    public init(
        generatedAt: Date, filters: ReportFilters = .init(), summary: ReportSummary, openByDay: [DayCount] = [],
        discrepancies: [DiscrepancyRow], explanations: [Int64: Explanation] = [:]
    ) {
        self.generatedAt = generatedAt; self.filters = filters; self.summary = summary; self.openByDay = openByDay
        self.discrepancies = discrepancies; self.explanations = explanations
    }

    /// How many discrepancies the HTML carries the evidence of (the first listed), and how much of each answer.
    public static let explainedInHTML = 200
    public static let answerBytesInHTML = 2_000

    /// True when a listed discrepancy is open (`--fail-on-open`).
    public var listsOpen: Bool { discrepancies.contains { $0.status == .open } }
}

/// The formats `payrecon report --format` offers.
public enum ReportFormat: String, Sendable, CaseIterable {
    case table, json, csv, html
}

extension Report {
    /// How the headline money at risk counts: each order once, at its largest open finding (two findings of one order
    /// are often one amount seen twice). The rows of a report can add up to more.
    public static let moneyAtRiskRule = "each order counted once, at its largest open finding; its rows may add up to more"

    /// What each open discrepancy adds to the headline money at risk: the order's largest finding its amount (the first
    /// of them by id, when two are as large), every other finding of the order 0; not open: nil. Summed per currency
    /// over every open discrepancy, it is the headline (CSV's `counted_at_risk`).
    public func countedAtRisk() -> [Int64: Int64] {
        var largest: [String: (id: Int64, amount: Int64)] = [:]
        for d in discrepancies.sorted(by: { $0.id < $1.id }) where d.status == .open {
            guard let currency = d.currency else { continue }
            let key = d.provider.rawValue + "\u{0}" + (d.orderID ?? "?" + d.transactionRef) + "\u{0}" + currency.code
            if let held = largest[key], held.amount >= d.amountAtRisk { continue }
            largest[key] = (d.id, d.amountAtRisk)
        }
        var out: [Int64: Int64] = [:]
        for d in discrepancies where d.status == .open { out[d.id] = 0 }
        for (_, held) in largest { out[held.id] = held.amount }
        return out
    }
}
