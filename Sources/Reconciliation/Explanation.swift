// `payrecon explain`: the chain behind what payrecon concluded about one order (or one transaction no order holds),
// as a value: Store reads it, Reporting renders it as a timeline (Explanation+Table.swift) and as JSON
// (Explanation+JSON.swift).
import Foundation
import TextFormats

public struct Explanation: Sendable, Equatable {
    public var generatedAt: Date
    public var provider: Provider
    /// nil: a transaction no order holds (`unknown_order`).
    public var orderID: String?
    public var transactionRef: String
    /// The discrepancy asked about (`payrecon explain ID`).
    public var subject: DiscrepancyLine?
    public var order: OrderVersion?
    /// Versions the current one replaced, oldest first.
    public var replaced: [OrderVersion]
    public var deliveries: [Delivery]
    public var checks: [Check]
    /// Checks older than those shown (an order checked daily for years).
    public var checksLeftOut: Int
    public var discrepancies: [DiscrepancyLine]
    public var actions: [Action]

    public init(
        generatedAt: Date, provider: Provider, orderID: String?, transactionRef: String, subject: DiscrepancyLine? = nil,
        order: OrderVersion? = nil, replaced: [OrderVersion] = [], deliveries: [Delivery] = [], checks: [Check] = [],
        checksLeftOut: Int = 0, discrepancies: [DiscrepancyLine] = [], actions: [Action] = []
    ) {
        self.generatedAt = generatedAt; self.provider = provider; self.orderID = orderID; self.transactionRef = transactionRef
        self.subject = subject; self.order = order; self.replaced = replaced; self.deliveries = deliveries; self.checks = checks
        self.checksLeftOut = checksLeftOut; self.discrepancies = discrepancies; self.actions = actions
    }

    /// One version of the order: its fields as they were, from when, and where they came from.
    public struct OrderVersion: Sendable, Equatable {
        public var since: Date
        /// When a later version replaced it (nil: the current one).
        public var replacedAt: Date?
        /// `orders import /path/file.csv`, or `table` (written by the merchant's systems).
        public var source: String
        /// Field name → value, amounts in major units (`amount`, `refund_amount`), in a fixed order.
        public var fields: [(String, String)]
        public init(since: Date, replacedAt: Date?, source: String, fields: [(String, String)]) {
            self.since = since; self.replacedAt = replacedAt; self.source = source; self.fields = fields
        }
        public static func == (a: Self, b: Self) -> Bool {
            a.since == b.since && a.replacedAt == b.replacedAt && a.source == b.source
                && a.fields.elementsEqual(b.fields, by: { $0.0 == $1.0 && $0.1 == $1.1 })
        }
    }

    /// A delivery that named the order, and how it ended.
    public struct Delivery: Sendable, Equatable {
        public var id: Int64
        public var eventType: String?
        public var receivedAt: Date
        public var status: String
        /// `re-checked pxp order ORD-1`, `ignored: …`, or the last error while it is retried.
        public var outcome: String?
        public init(id: Int64, eventType: String?, receivedAt: Date, status: String, outcome: String?) {
            self.id = id; self.eventType = eventType; self.receivedAt = receivedAt; self.status = status; self.outcome = outcome
        }
    }

    /// One raw provider answer.
    public struct Answer: Sendable, Equatable {
        public var fetchedAt: Date
        public var method: String
        public var url: String
        /// nil: no answer.
        public var status: Int?
        public var sha256: String
        /// The whole answer's size.
        public var length: Int
        /// The raw answer (perhaps only its start: see `length`); nil when it was not kept (past what one check keeps).
        public var body: [UInt8]?
        public init(fetchedAt: Date, method: String, url: String, status: Int?, sha256: String, length: Int, body: [UInt8]?) {
            self.fetchedAt = fetchedAt; self.method = method; self.url = url; self.status = status; self.sha256 = sha256
            self.length = length; self.body = body
        }
    }

    /// One check of the order: the answers it used and what it decided.
    /// Where a settlement finding came from: the file (its name, kind, account and SHA-256) and the line, with the row
    /// as read; no file for a capture no file lists.
    public struct SettlementSource: Sendable, Equatable {
        public var fileName: String?
        public var kind: String?
        public var account: String?
        public var sha256: String?
        public var line: Int?
        public var row: String?
        public init(fileName: String?, kind: String?, account: String?, sha256: String?, line: Int?, row: String?) {
            self.fileName = fileName; self.kind = kind; self.account = account; self.sha256 = sha256; self.line = line; self.row = row
        }
    }

    public struct Check: Sendable, Equatable {
        public var evidenceID: Int64
        public var at: Date
        public var source: CheckSource
        public var deliveryID: Int64?
        /// SHA-256 (hex) of each answer, in the order fetched.
        public var hashes: [String]
        /// `opened`, `changed`, `resolved`, `planned`, `superseded`, `call`, `not sent`; empty: nothing decided.
        public var decided: [String]
        public var decision: Decision?
        /// A decision was kept but does not read as one (written by another version of payrecon, or damaged): why, and
        /// the start of what is stored. Never shown as "nothing decided".
        public var decisionUnreadable: String?
        /// The findings the plan had, the action keys it planned and superseded.
        public var findings: [String]
        public var planned: [String]
        public var superseded: [String]
        /// The answers themselves (kept when it decided something).
        public var answers: [Answer]
        /// A finding a settlement file raised: the file and the line (the answers are those of the order's check that
        /// stated the money it was compared with).
        public var settlement: SettlementSource?
        public init(
            evidenceID: Int64, at: Date, source: CheckSource, deliveryID: Int64?, hashes: [String], decided: [String],
            decision: Decision?, findings: [String], planned: [String], superseded: [String], answers: [Answer],
            decisionUnreadable: String? = nil, settlement: SettlementSource? = nil
        ) {
            self.evidenceID = evidenceID; self.at = at; self.source = source; self.deliveryID = deliveryID; self.hashes = hashes
            self.decided = decided; self.decision = decision; self.findings = findings; self.planned = planned
            self.superseded = superseded; self.answers = answers; self.decisionUnreadable = decisionUnreadable
            self.settlement = settlement
        }
    }

    public struct DiscrepancyLine: Sendable, Equatable {
        public var id: Int64
        public var kind: DiscrepancyKind
        public var status: String
        public var detail: String
        public var expected: JSONValue
        public var actual: JSONValue
        public var firstSeen: Date
        public var lastSeen: Date
        public var resolvedAt: Date?
        public var occurrences: Int
        /// The check that opened it or last changed what defines it.
        public var evidenceID: Int64?
        /// When and by whom it was acknowledged, and why; `acknowledgedFrom`: the address, when done in the console.
        public var acknowledgedAt: Date? = nil
        public var acknowledgedBy: String? = nil
        public var ackNote: String? = nil
        public var acknowledgedFrom: String? = nil
        public init(
            id: Int64, kind: DiscrepancyKind, status: String, detail: String, expected: JSONValue, actual: JSONValue,
            firstSeen: Date, lastSeen: Date, resolvedAt: Date?, occurrences: Int, evidenceID: Int64?
        ) {
            self.id = id; self.kind = kind; self.status = status; self.detail = detail; self.expected = expected; self.actual = actual
            self.firstSeen = firstSeen; self.lastSeen = lastSeen; self.resolvedAt = resolvedAt; self.occurrences = occurrences
            self.evidenceID = evidenceID
        }
    }

    public struct Call: Sendable, Equatable {
        public var attempt: Int
        public var sentAt: Date
        public var method: String
        public var url: String
        public var idempotencyKey: String?
        public var request: [UInt8]
        public var status: Int?
        public var sha256: String
        public var length: Int
        /// nil when not kept.
        public var body: [UInt8]?
        public var outcome: String?
        /// The executor's re-fetch that decided the call.
        public var evidenceID: Int64?
        public init(
            attempt: Int, sentAt: Date, method: String, url: String, idempotencyKey: String?, request: [UInt8], status: Int?,
            sha256: String, length: Int, body: [UInt8]?, outcome: String?, evidenceID: Int64?
        ) {
            self.attempt = attempt; self.sentAt = sentAt; self.method = method; self.url = url; self.idempotencyKey = idempotencyKey
            self.request = request; self.status = status; self.sha256 = sha256; self.length = length; self.body = body
            self.outcome = outcome; self.evidenceID = evidenceID
        }
    }

    public struct Action: Sendable, Equatable {
        public var id: Int64
        public var kind: String
        /// Major units with the currency's digits.
        public var amount: String
        public var currency: String
        public var status: String
        public var idempotencyKey: String
        public var createdAt: Date
        public var updatedAt: Date
        public var lastError: String?
        public var providerRef: String?
        /// The check that planned it.
        public var evidenceID: Int64?
        public var calls: [Call]
        public init(
            id: Int64, kind: String, amount: String, currency: String, status: String, idempotencyKey: String, createdAt: Date,
            updatedAt: Date, lastError: String?, providerRef: String?, evidenceID: Int64?, calls: [Call]
        ) {
            self.id = id; self.kind = kind; self.amount = amount; self.currency = currency; self.status = status
            self.idempotencyKey = idempotencyKey; self.createdAt = createdAt; self.updatedAt = updatedAt; self.lastError = lastError
            self.providerRef = providerRef; self.evidenceID = evidenceID; self.calls = calls
        }
    }

    /// What happened, in time order: each item with its time.
    public enum Event: Sendable {
        case version(OrderVersion)
        case delivery(Delivery)
        case check(Check)
        case opened(DiscrepancyLine)
        case acknowledged(DiscrepancyLine)
        case resolved(DiscrepancyLine)
        case planned(Action)
        case call(Action, Call)

        public var at: Date {
            switch self {
            case .version(let v): v.since
            case .delivery(let d): d.receivedAt
            case .check(let c): c.at
            case .opened(let d): d.firstSeen
            case .acknowledged(let d): d.acknowledgedAt ?? d.lastSeen
            case .resolved(let d): d.resolvedAt ?? d.lastSeen
            case .planned(let a): a.createdAt
            case .call(_, let c): c.sentAt
            }
        }

        /// Ties sort the way they happened: the version, the delivery, the check, then what it decided.
        var rank: Int {
            switch self {
            case .version: 0
            case .delivery: 1
            case .check: 2
            case .opened, .acknowledged, .resolved: 3
            case .planned: 4
            case .call: 5
            }
        }
    }

    /// Every event, oldest first.
    public var timeline: [Event] {
        var events: [Event] = replaced.map(Event.version)
        if let order { events.append(.version(order)) }
        events += deliveries.map(Event.delivery)
        events += checks.map(Event.check)
        for d in discrepancies {
            events.append(.opened(d))
            if d.acknowledgedAt != nil { events.append(.acknowledged(d)) }
            if d.resolvedAt != nil { events.append(.resolved(d)) }
        }
        for a in actions {
            events.append(.planned(a))
            events += a.calls.map { .call(a, $0) }
        }
        return events.enumerated().sorted { l, r in
            if l.element.at != r.element.at { return l.element.at < r.element.at }
            if l.element.rank != r.element.rank { return l.element.rank < r.element.rank }
            return l.offset < r.offset
        }.map(\.element)
    }
}
