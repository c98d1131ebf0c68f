import Reconciliation
import TextFormats

/// A modification transaction payrecon made or learned of: its own systemTransactionId, linked to the parent.
public struct PXPModification: Sendable, Hashable, Codable {
    public var systemTransactionId: String
    /// The first systemTransactionId (the one in the modification URL).
    public var parentSystemTransactionId: String
    public var operation: PXPOperation
    /// Minor units of the operation itself; for `.incremental` the increase (delta), not PXP's new total.
    public var amount: Int64
    /// PXP state of the modification transaction (`Captured`, `Authorised`, `Cancelled`, `Refused`, …).
    public var state: String
    /// For an increment payrecon sent: the new authorised total it asked for (nil for one learned of).
    public var newTotal: Int64?

    public init(
        systemTransactionId: String, parentSystemTransactionId: String, operation: PXPOperation, amount: Int64,
        state: String, newTotal: Int64? = nil
    ) {
        self.systemTransactionId = systemTransactionId; self.parentSystemTransactionId = parentSystemTransactionId
        self.operation = operation; self.amount = amount; self.state = state; self.newTotal = newTotal
    }

    /// Whether PXP answered it Pending (or Updated): accepted, not final. A pending refund counts in R and a pending
    /// capture leaves the capturable room (money PXP may already be moving is never planned again).
    public var isPending: Bool { ["pending", "updated"].contains(state.lowercased()) }

    /// Whether PXP accepted it: captures come back `Captured`, refunds and increments `Authorised`, voids `Cancelled`.
    public var isAccepted: Bool {
        let s = state.lowercased()
        switch operation {
        case .capture, .finalCapture: return s == "captured"
        case .refund, .incremental: return s == "authorised"
        case .void: return s == "cancelled"
        }
    }
}

/// PXP transaction answer (+ known modifications) → `Snapshot`.
///
/// Parent fields: intent `transactionMethod.intent`; currency and value V `amounts.currencyCode` /
/// `amounts.transactionValue`; parent A = `fundingData.providerResponse.authorisedAmount` when present, else V.
///
/// State table (case-insensitive) with the parent's own C/R: Authorised → authorised (C 0); Captured → captured
/// (C = V); Executed/Confirmed/Approved → captured (C = V); Refunded → refunded (C = R = V); Cancelled → voided;
/// Refused/Rejected/Error → failed; Pending/Updated → pending. For a Purchase in a captured or refunded state, A = C.
///
/// Modifications (only those whose parent is this transaction; each systemTransactionId counted once; only
/// accepted ones): captures (state Captured) sum to childC, refunds (state Authorised) to childR, increments
/// (state Authorised) to childInc. PXP may or may not also reflect a modification on the parent, so amounts are
/// combined without double counting:
/// - C = max(parent C, childC); R = max(parent R, childR);
/// - A = max(parent A, min(parent A, V) + childInc) — if the parent already shows the raised total it wins,
///   otherwise the increments are added to the original authorisation.
/// Then, when the parent state is authorised, captured or refunded: C > 0 and R ≥ C → refunded; R > 0 →
/// partially_refunded; an authorised parent with C > 0 and C ≥ A → captured (C < A stays authorised, partly
/// captured). An accepted void (state Cancelled) on an authorised parent with C = 0 → voided. `rawState` is always
/// the parent's own state.
public enum PXPMapping {
    static let reader = AnswerReader(provider: .pxp)

    public static func snapshot(
        transaction t: JSONValue, modifications: [PXPModification] = [],
        transactionRef: String
    ) throws(ProviderMappingError) -> Snapshot {
        let r = reader
        guard t.objectMembers != nil else { throw r.fail("(answer)", t, "expected a JSON object") }

        let read = try readIntent(t)
        guard case .order(let intent) = read.intent else {
            throw r.fail("transactionMethod.intent", t["transactionMethod"]?["intent"], "not one of the four order intents")
        }

        let currency = try r.currency(t["amounts"]?["currencyCode"], "amounts.currencyCode")
        let value = try r.amount(t["amounts"]?["transactionValue"], "amounts.transactionValue", exponent: currency.exponent)
        var authorised = value
        if let a = t["fundingData"]?["providerResponse"]?["authorisedAmount"], !a.isNull {
            authorised = try r.amount(a, "fundingData.providerResponse.authorisedAmount", exponent: currency.exponent)
        }

        let systemTransactionId = try r.string(t["systemTransactionId"], "systemTransactionId")
        let rawState = try r.string(t["state"], "state")
        guard let parent = parentState(rawState, value: value) else { throw r.fail("state", t["state"], "unknown transaction state") }
        var (state, captured, refunded) = parent
        if intent == .purchase && (state == .captured || state == .refunded) { authorised = captured }

        let m = try modificationSums(modifications, of: systemTransactionId)
        // An increment payrecon sent names the new total: A is that, whether PXP shows it on the parent's
        // authorisedAmount, on its transactionValue too, or not at all (PXP-34).
        if let newTotal = m.newTotal { authorised = max(authorised, newTotal) }
        // PXP does not document how a parent looks after a partial capture (PXP-33): an authorisation it shows
        // Captured while its captures hold less is partly captured, whichever way it shows it. The captures payrecon
        // knows say how much; without any, Captured means the whole value (a capture made elsewhere).
        let partlyCaptured = intent.isAuthorisation && state == .captured && m.captured > 0 && m.captured < max(value, authorised)
        captured = partlyCaptured ? m.captured : max(captured, m.captured)
        refunded = max(refunded, m.refunded)
        if m.increment > 0 {
            authorised = max(authorised, try add(min(authorised, value), m.increment, field: "modifications", what: "increments"))
        }
        state = combinedState(state, m, captured: captured, refunded: refunded, authorised: authorised, partlyCaptured: partlyCaptured)

        var snapshot = Snapshot(
            provider: .pxp, transactionRef: transactionRef,
            merchant: try r.optionalString(t["merchant"], "merchant"),
            site: try r.optionalString(t["site"], "site"), reportsSite: true,
            intent: intent, currency: currency, value: value,
            authorised: authorised, captured: captured, refunded: refunded,
            state: state, rawState: rawState,
            createdAt: try r.timestamp(t["merchantTransactionDate"], "merchantTransactionDate"),
            capabilities: PXPProvider.capabilities(systemTransactionID: systemTransactionId),
            aliases: [systemTransactionId], method: read.method)
        snapshot.pendingCaptured = m.pendingCaptured
        if m.pendingRefund { snapshot.rawState += "/RefundPending" }
        snapshot.refundPending = m.pendingRefund
        return snapshot
    }

    /// The parent's state with its modifications counted in: refunded, partly refunded, captured or voided by them, or
    /// still authorised when partly captured; any other state is the parent's own.
    static func combinedState(
        _ state: TransactionState, _ m: ModificationSums, captured: Int64, refunded: Int64, authorised: Int64, partlyCaptured: Bool
    ) -> TransactionState {
        var state = state
        if state == .authorised || state == .captured || state == .refunded {
            let base = state
            if captured > 0 && refunded >= captured {
                state = .refunded
            } else if refunded > 0 {
                state = .partiallyRefunded
            } else if base == .authorised && captured > 0 && captured >= authorised {
                state = .captured
            } else if base == .authorised && captured == 0 && m.voidAccepted {
                state = .voided
            } else if partlyCaptured && !m.finalCaptured && captured < authorised {
                state = .authorised
            }
        }
        return state
    }

    /// The parent's own state (case-insensitive) and what it holds by itself: Captured, Executed, Confirmed, Approved
    /// hold the value captured; Refunded the value captured and refunded. Nil for a state PXP does not document.
    static func parentState(_ raw: String, value: Int64) -> (TransactionState, captured: Int64, refunded: Int64)? {
        switch raw.lowercased() {
        case "authorised": (.authorised, 0, 0)
        case "captured", "executed", "confirmed", "approved": (.captured, value, 0)
        case "refunded": (.refunded, value, value)
        case "cancelled": (.voided, 0, 0)
        case "refused", "rejected", "error": (.failed, 0, 0)
        case "pending", "updated": (.pending, 0, 0)
        default: nil
        }
    }

    /// The modifications of one transaction, summed, each counted once: accepted captures (and whether one was
    /// final), refunds and increments (an increment payrecon sent names its new total), an accepted void; and those
    /// PXP answered Pending: a pending refund counts in R, a pending capture outside the capturable room.
    struct ModificationSums {
        var captured: Int64 = 0, refunded: Int64 = 0, increment: Int64 = 0
        var newTotal: Int64?
        var voidAccepted = false, finalCaptured = false
        var pendingCaptured: Int64 = 0, pendingRefund = false
    }

    static func modificationSums(_ modifications: [PXPModification], of system: String) throws(ProviderMappingError) -> ModificationSums {
        var sums = ModificationSums()
        var seen = Set<String>()
        for m in modifications where m.parentSystemTransactionId == system && m.isPending {
            guard m.amount >= 0, seen.insert(m.systemTransactionId).inserted else { continue }
            switch m.operation {
            case .refund: sums.refunded = try add(sums.refunded, m.amount, m); sums.pendingRefund = true
            case .capture, .finalCapture: sums.pendingCaptured = try add(sums.pendingCaptured, m.amount, m)
            case .incremental, .void: break  // neither moves money the plan could move again
            }
        }
        for m in modifications where m.parentSystemTransactionId == system && m.isAccepted {
            guard seen.insert(m.systemTransactionId).inserted else { continue }
            guard m.amount >= 0 else {
                throw ProviderMappingError(
                    provider: .pxp, field: "modification \(m.systemTransactionId).amount",
                    value: String(m.amount), reason: "negative amount")
            }
            switch m.operation {
            case .capture, .finalCapture:
                sums.captured = try add(sums.captured, m.amount, m)
                if m.operation == .finalCapture { sums.finalCaptured = true }
            case .refund: sums.refunded = try add(sums.refunded, m.amount, m)
            case .incremental:
                if let total = m.newTotal {
                    sums.newTotal = max(sums.newTotal ?? 0, total)
                } else {
                    sums.increment = try add(sums.increment, m.amount, m)
                }
            case .void: sums.voidAccepted = true
            }
        }
        return sums
    }

    /// What `transactionMethod.intent` says: one of the four order intents, or another (Verification, Refund…).
    public enum ReadIntent: Sendable, Equatable {
        case order(Intent)
        case other(String)
    }

    /// The intent and the payment method: `transactionMethod.intent` is a string, or an object naming the method
    /// (Aeropay: `{"aeropay": "Authorisation"}`); the method is that key, else `transactionMethod.fundingType`
    /// (`card`, `paypal`), lower-cased.
    public static func readIntent(_ t: JSONValue) throws(ProviderMappingError) -> (intent: ReadIntent, method: String?) {
        let r = reader
        let field = t["transactionMethod"]?["intent"]
        var method = t["transactionMethod"]?["fundingType"]?.stringValue?.lowercased()
        let text: String
        if let members = field?.objectMembers {
            guard members.count == 1, let value = members[0].1.stringValue else {
                throw r.fail("transactionMethod.intent", field, "expected a string or an object with one method")
            }
            method = members[0].0.lowercased()
            text = value
        } else {
            text = try r.string(field, "transactionMethod.intent")
        }
        switch text.lowercased() {
        case "authorisation": return (.order(.authorisation), method)
        case "estimatedauthorisation": return (.order(.estimatedAuthorisation), method)
        case "purchase": return (.order(.purchase), method)
        case "payout": return (.order(.payout), method)
        default: return (.other(text), method)
        }
    }

    /// The one assumption about how a PXP modification names its parent (PXP documents no such field; its answers
    /// seen so far carry none): a top-level `parentSystemTransactionId`. A refund or capture made in the Unity Portal
    /// is linked to its order through it; without it such a transaction is `unknown_order` with that said.
    public static let parentField = "parentSystemTransactionId"

    public static func parentSystemTransactionId(_ t: JSONValue) -> String? {
        guard let id = t[parentField]?.stringValue, !id.isEmpty else { return nil }
        return id
    }

    /// What a transaction no order holds is: an order's own (a snapshot), a modification of another transaction
    /// (linked to it: refund for intent Refund, else by its state — Captured a capture, Cancelled a void,
    /// Authorised an increment), a Verification (ignored), or something payrecon cannot reconcile.
    public static func lookup(transaction t: JSONValue, transactionRef: String) throws(ProviderMappingError) -> TransactionLookup {
        let r = reader
        guard t.objectMembers != nil else { throw r.fail("(answer)", t, "expected a JSON object") }
        let read = try readIntent(t)
        let state = t["state"]?.stringValue ?? "unknown"
        if let parent = parentSystemTransactionId(t) {
            let currency = try r.currency(t["amounts"]?["currencyCode"], "amounts.currencyCode")
            let value = try r.amount(t["amounts"]?["transactionValue"], "amounts.transactionValue", exponent: currency.exponent)
            let operation: ActionKind
            if case .other(let name) = read.intent, name.lowercased() == "refund" {
                operation = .refund
            } else {
                switch state.lowercased() {
                case "captured": operation = .capture
                case "cancelled": operation = .void
                case "authorised": operation = .increment
                default: operation = .capture
                }
            }
            let id = try r.string(t["systemTransactionId"], "systemTransactionId")
            return .modification(
                parent: parent,
                link: TransactionLink(
                    externalID: id, parentExternalID: parent, orderID: nil, kind: .init(operation), amount: value,
                    currency: currency.code, state: state, source: .learned))
        }
        switch read.intent {
        case .order:
            return .transaction(try snapshot(transaction: t, transactionRef: transactionRef))
        case .other(let name) where name.lowercased() == "verification":
            return .ignored("pxp transaction \(transactionRef) is a Verification (intent \(name)): it checks a card and moves no money")
        case .other(let name):
            let currency = (try? r.currency(t["amounts"]?["currencyCode"], "amounts.currencyCode"))
            let value = currency.flatMap { c in
                (try? r.amount(t["amounts"]?["transactionValue"], "amounts.transactionValue", exponent: c.exponent)).map {
                    Money(minorUnits: $0, currency: c)
                }
            }
            return .unreconcilable(
                UnknownTransaction(
                    transactionRef: transactionRef, value: value, state: state,
                    detail: "pxp transaction \(transactionRef) has intent \(name), which is not an order intent, and names no parent "
                        + "transaction (\(parentField)): it cannot be linked to an order"))
        }
    }

    private static func add(_ a: Int64, _ b: Int64, field: String, what: String) throws(ProviderMappingError) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard !overflow else { throw ProviderMappingError(provider: .pxp, field: field, value: nil, reason: "\(what) overflow") }
        return sum
    }

    private static func add(_ a: Int64, _ b: Int64, _ m: PXPModification) throws(ProviderMappingError) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard !overflow else {
            throw ProviderMappingError(
                provider: .pxp, field: "modification \(m.systemTransactionId).amount",
                value: String(m.amount), reason: "sum overflows")
        }
        return sum
    }
}

extension PXPModificationResult {
    /// The modification record to keep for mapping: `amount` is the operation's own amount (for an increment, the
    /// delta — not the new total sent to PXP).
    public func modification(parentSystemTransactionId: String, operation: PXPOperation, amount: Int64) -> PXPModification {
        PXPModification(
            systemTransactionId: systemTransactionId, parentSystemTransactionId: parentSystemTransactionId,
            operation: operation, amount: amount, state: state)
    }
}
