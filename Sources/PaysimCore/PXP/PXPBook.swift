import Reconciliation
import TextFormats

// PXP transactions and modifications as PXP applies them (see providers/pxp.md §2.3–2.4).
//
// Reported vs internal: a parent transaction reports only its own original values (state, authorisedAmount),
// except that a Void sets it Cancelled with authorisedAmount 0. What was captured, refunded or incremented lives
// in the modification transactions (each with its own systemTransactionId) and in the internal totals used to
// enforce the limits.

public struct PXPTransaction: Sendable, Equatable {
    public var merchant: String
    public var site: String
    public var merchantTransactionID: String
    public var systemTransactionID: String
    public var merchantTransactionDate: String
    /// Authorisation, EstimatedAuthorisation, Purchase, Payout, Refund, Verification.
    public var intent: String
    public var entryType: String = "Ecom"
    public var fundingType: String = "Card"
    /// A modification made elsewhere (the Unity Portal) naming its parent: the one field payrecon assumes for it
    /// (`PXPMapping.parentField`; PXP documents none), rendered only when set.
    public var parentSystemTransactionID: String? = nil
    /// The transaction value (a modification: its own amount) in the transaction currency.
    public var amount: Money
    /// Authorised, Captured, Cancelled, Refunded, Refused, Pending, ...
    public var state: String
    /// `fundingData.providerResponse.authorisedAmount` as reported (nil: not reported).
    public var reportedAuthorised: Int64?
    /// The `site` the answer reports when it differs from the one in the API path (a site alias or a
    /// misconfigured terminal at the provider): lets tests and the demo show `site_mismatch`.
    public var reportedSite: String?

    // Internal totals (limits).
    public var authorised: Int64
    public var captured: Int64 = 0
    public var refunded: Int64 = 0
    public var finalCaptured = false

    /// For modifications: the parent's systemTransactionId and the operation.
    public var parentID: String?
    public var operation: String?

    var isAuthorisationIntent: Bool { intent == "Authorisation" || intent == "EstimatedAuthorisation" }

    /// Minor units of this transaction's currency as major-unit text (for messages).
    func formatted(_ minorUnits: Int64) -> String {
        Money.format(minorUnits: minorUnits, exponent: amount.currency.exponent)
    }

    /// The transaction JSON in PXP's GET shape.
    public var json: JSONValue {
        .object([
            "systemTransactionId": .string(systemTransactionID),
            "state": .string(state),
            "stateData": PXPTransaction.stateData(state),
            "merchantTransactionDate": .string(merchantTransactionDate),
            "merchantTransactionId": .string(merchantTransactionID),
            "parentSystemTransactionId": parentSystemTransactionID.map { .string($0) },
            "merchant": .string(merchant),
            "site": .string(reportedSite ?? site),
            "transactionMethod": .object([
                "intent": .string(intent), "entryType": .string(entryType),
                "fundingType": .string(fundingType)
            ]),
            "amounts": .object([
                "transactionValue": .decimal(minorUnits: amount.minorUnits, exponent: amount.currency.exponent),
                "currencyCode": .string(amount.currency.code)
            ]),
            "fundingData": .object([
                "providerResponse": .object([
                    "provider": "pxpfinancial",
                    "authorisedAmount": reportedAuthorised.map { .decimal(minorUnits: $0, exponent: amount.currency.exponent) }
                ])
            ])
        ])
    }

    static func stateData(_ state: String) -> JSONValue {
        switch state {
        case "Authorised", "Captured", "Cancelled", "Refunded", "Executed", "Confirmed", "Approved":
            return .object(["code": "CRD000", "message": "Approved"])
        case "Refused", "Rejected":
            return .object(["code": "CRD005", "message": "Do not honour"])
        default:
            return .object([:])
        }
    }

    static let states: Set<String> = [
        "Authorised", "Refused", "Cancelled", "Captured", "Error", "Executed", "Confirmed",
        "Pending", "Refunded", "Updated", "Rejected", "Approved"
    ]
    static let intents: Set<String> = [
        "Authorisation", "EstimatedAuthorisation", "Purchase", "Payout", "Refund",
        "Verification"
    ]
}

/// A modification request (`POST /transactions/{systemTransactionId}/modifications`), validated.
public struct PXPModificationRequest: Sendable, Equatable {
    public enum Operation: String, Sendable, CaseIterable {
        case capture = "Capture", finalCapture = "FinalCapture",
            void = "Void", refund = "Refund", incremental = "Incremental"
    }
    public var merchant: String
    public var site: String
    public var merchantTransactionID: String
    public var merchantTransactionDate: String?
    public var operation: Operation
    /// `amounts.transaction` as text (parsed against the parent's currency).
    public var amountText: String?
    public var currencyCode: String?

    static func parse(_ body: [UInt8]) throws(SimError) -> PXPModificationRequest {
        let json: JSONValue
        do { json = try JSONValue.parse(body) } catch {
            throw SimError.pxp(400, "InvalidRequest", "body is not valid JSON: \(error)")
        }
        guard json.objectMembers != nil else { throw SimError.pxp(400, "InvalidRequest", "body must be a JSON object") }
        func required(_ key: String) throws(SimError) -> String {
            guard let value = json[key]?.stringValue, !value.isEmpty else {
                throw SimError.pxp(400, "InvalidRequest", "\(key) is required")
            }
            return value
        }
        let merchant = try required("merchant")
        let site = try required("site")
        let mtid = try required("merchantTransactionId")
        guard mtid.count <= 50 else { throw SimError.pxp(400, "InvalidRequest", "merchantTransactionId longer than 50") }
        let opText = try required("operation")
        guard let operation = Operation(rawValue: opText) else {
            throw SimError.pxp(400, "InvalidRequest", "unknown operation \(opText)")
        }
        var amountText: String?
        var currency: String?
        if let amounts = json["amounts"], !amounts.isNull {
            guard amounts.objectMembers != nil else { throw SimError.pxp(400, "InvalidRequest", "amounts must be an object") }
            if let t = amounts["transaction"], !t.isNull {
                guard let literal = t.numberLiteral ?? t.stringValue else {
                    throw SimError.pxp(400, "InvalidRequest", "amounts.transaction must be a number")
                }
                amountText = literal
            }
            currency = amounts["currencyCode"]?.stringValue
        }
        let date = json["merchantTransactionDate"]?.stringValue
        if let date, SimTime.parse(date) == nil {
            throw SimError.pxp(400, "InvalidRequest", "merchantTransactionDate is not an ISO 8601 date-time")
        }
        return PXPModificationRequest(
            merchant: merchant, site: site, merchantTransactionID: mtid,
            merchantTransactionDate: date, operation: operation, amountText: amountText,
            currencyCode: currency)
    }
}

/// All PXP transactions, by systemTransactionId and by (merchant, site, merchantTransactionId).
public struct PXPBook: Sendable {
    public private(set) var transactions: [String: PXPTransaction] = [:]
    private var byReference: [String: String] = [:]
    /// parent systemTransactionId → its modifications' ids.
    private var children: [String: [String]] = [:]
    /// Modifications answered Pending (`PXPBehaviour.answersPending`) → the state they show from their first lookup on.
    var pendingFinal: [String: String] = [:]

    /// A modification's lookup: one answered Pending shows its final state from now on.
    mutating func lookedUp(_ id: String) -> PXPTransaction? {
        guard var t = transactions[id] else { return nil }
        if let final = pendingFinal.removeValue(forKey: id) { t.state = final; transactions[id] = t }
        return t
    }

    public init() {}

    static func referenceKey(_ merchant: String, _ site: String, _ mtid: String) -> String {
        merchant + "\u{1F}" + site + "\u{1F}" + mtid
    }

    public func find(systemTransactionID: String) -> PXPTransaction? { transactions[systemTransactionID] }

    public func find(merchant: String, site: String, merchantTransactionID: String) -> PXPTransaction? {
        byReference[Self.referenceKey(merchant, site, merchantTransactionID)].flatMap { transactions[$0] }
    }

    /// Modifications applied with this merchantTransactionId (more than one when PXP does not de-duplicate).
    public func applications(merchantTransactionID: String) -> [PXPTransaction] {
        transactions.values.filter { $0.parentID != nil && $0.merchantTransactionID == merchantTransactionID }
    }

    /// The first transaction with this merchantTransactionId, whatever its merchant and site.
    public func find(merchantTransactionID: String) -> PXPTransaction? {
        transactions.values.filter { $0.merchantTransactionID == merchantTransactionID }
            .sorted { $0.systemTransactionID < $1.systemTransactionID }.first
    }

    /// Create or replace (admin). Replacing drops the old transaction's modifications.
    public mutating func put(_ transaction: PXPTransaction) {
        let key = Self.referenceKey(transaction.merchant, transaction.site, transaction.merchantTransactionID)
        if let old = byReference[key] { remove(old) }
        remove(transaction.systemTransactionID)
        transactions[transaction.systemTransactionID] = transaction
        byReference[key] = transaction.systemTransactionID
    }

    private mutating func remove(_ id: String) {
        guard let t = transactions.removeValue(forKey: id) else { return }
        byReference[Self.referenceKey(t.merchant, t.site, t.merchantTransactionID)] = nil
        for child in children.removeValue(forKey: id) ?? [] { remove(child) }
    }

    public enum Outcome: Sendable, Equatable {
        case applied(PXPTransaction)
        /// The same merchantTransactionId was applied before: the earlier result, nothing changed.
        case replayed(PXPTransaction)
    }

    /// Applies a modification to the parent named in the URL, as PXP would; returns the NEW modification transaction.
    mutating func modify(
        parentID: String, _ request: PXPModificationRequest, newSystemTransactionID: String,
        now: String, behaviour: PXPBehaviour = PXPBehaviour()
    ) throws(SimError) -> Outcome {
        guard var parent = transactions[parentID] else {
            throw SimError.pxp(404, "TransactionNotFound", "no transaction \(parentID)")
        }
        guard parent.merchant == request.merchant, parent.site == request.site else {
            throw SimError.pxp(404, "TransactionNotFound", "no transaction \(parentID) for this merchant and site")
        }
        // Idempotency: the same merchantTransactionId again → the earlier result; a PXP that does not de-duplicate
        // (`behaviour.deduplicates` false: undocumented either way) applies it again as a new transaction.
        if let existing = find(
            merchant: request.merchant, site: request.site,
            merchantTransactionID: request.merchantTransactionID)
        {
            if existing.parentID == parentID, existing.operation == request.operation.rawValue {
                if behaviour.deduplicates { return .replayed(existing) }
            } else {
                throw SimError.pxp(
                    409, "DuplicateMerchantTransactionId",
                    "merchantTransactionId \(request.merchantTransactionID) is already used by another transaction")
            }
        }
        guard parent.parentID == nil else {
            throw SimError.pxp(422, "InvalidOperation", "modify the original transaction, not a modification")
        }
        if let currency = request.currencyCode, currency.uppercased() != parent.amount.currency.code {
            throw SimError.pxp(422, "CurrencyMismatch", "currencyCode \(currency) differs from the transaction's \(parent.amount.currency)")
        }
        var amount: Int64?
        if let text = request.amountText {
            guard let minor = RequestAmount.minorUnits(text, exponent: parent.amount.currency.exponent) else {
                throw SimError.pxp(
                    400, "InvalidAmount",
                    "amounts.transaction \(text) is not a valid \(parent.amount.currency) amount")
            }
            amount = minor
        }
        func requireAmount() throws(SimError) -> Int64 {
            guard let amount else { throw SimError.pxp(400, "InvalidRequest", "amounts.transaction is required") }
            guard amount > 0 else { throw SimError.pxp(400, "InvalidAmount", "amounts.transaction must be positive") }
            return amount
        }
        func requireOpenAuthorisation() throws(SimError) {
            guard parent.isAuthorisationIntent else {
                throw SimError.pxp(
                    422, "InvalidOperation",
                    "\(request.operation.rawValue) needs an Authorisation or EstimatedAuthorisation, not \(parent.intent)")
            }
            // A parent PXP shows Captured after a partial capture (`capturedAfterPartialCapture`) may still be captured.
            let partlyCaptured = parent.state == "Captured" && parent.captured < parent.authorised
            guard parent.state == "Authorised" || (partlyCaptured && request.operation != .void) else {
                throw SimError.pxp(422, "InvalidState", "\(request.operation.rawValue) needs state Authorised, not \(parent.state)")
            }
            guard !parent.finalCaptured else {
                throw SimError.pxp(422, "InvalidState", "the authorisation was closed by a final capture")
            }
        }

        var child = PXPTransaction(
            merchant: parent.merchant, site: parent.site, merchantTransactionID: request.merchantTransactionID,
            systemTransactionID: newSystemTransactionID, merchantTransactionDate: request.merchantTransactionDate ?? now,
            intent: parent.intent, entryType: parent.entryType, fundingType: parent.fundingType,
            amount: parent.amount, state: "Authorised", reportedAuthorised: nil, authorised: 0,
            parentID: parentID, operation: request.operation.rawValue)

        switch request.operation {
        case .capture, .finalCapture:
            try requireOpenAuthorisation()
            let value = try requireAmount()
            guard parent.captured + value <= parent.authorised else {
                throw SimError.pxp(
                    422, "AmountExceeded",
                    "capture total \(parent.formatted(parent.captured + value)) exceeds the authorised \(parent.formatted(parent.authorised))"
                )
            }
            parent.captured += value
            if request.operation == .finalCapture { parent.finalCaptured = true }
            // "A capture updates the state to Captured" (developer.pxp.io, capture a transaction); after a partial
            // one, whether it does is undocumented: a setting.
            if parent.finalCaptured || parent.captured == parent.authorised || behaviour.capturedAfterPartialCapture {
                parent.state = "Captured"
            }
            child.state = "Captured"
            child.amount.minorUnits = value
        case .void:
            try requireOpenAuthorisation()
            guard parent.captured == 0 else {
                throw SimError.pxp(422, "InvalidState", "cannot void: money was already captured")
            }
            if let amount, amount != parent.authorised, amount != parent.amount.minorUnits {
                throw SimError.pxp(422, "InvalidAmount", "a void must match the authorised amount")
            }
            child.state = "Cancelled"
            child.amount.minorUnits = parent.authorised
            child.reportedAuthorised = 0
            parent.state = "Cancelled"
            parent.reportedAuthorised = 0
            parent.authorised = 0
        case .incremental:
            try requireOpenAuthorisation()
            let newTotal = try requireAmount()
            guard newTotal > parent.authorised else {
                throw SimError.pxp(
                    422, "InvalidAmount",
                    "an incremental authorisation's amount is the new total and must exceed the authorised \(parent.formatted(parent.authorised))"
                )
            }
            // The modification reports the increase as its value (so summing modifications gives the total) and
            // the new total as providerResponse.authorisedAmount (as in PXP's example).
            child.state = "Authorised"
            child.amount.minorUnits = newTotal - parent.authorised
            child.reportedAuthorised = newTotal
            child.authorised = newTotal - parent.authorised
            parent.authorised = newTotal
            // The parent shows the new total as its authorisedAmount, and (undocumented either way: a setting) as its
            // transactionValue too.
            parent.reportedAuthorised = newTotal
            if behaviour.incrementRaisesValue { parent.amount.minorUnits = newTotal }
        case .refund:
            let value = try requireAmount()
            let refundable: Bool
            switch parent.state {
            case "Captured", "Executed", "Confirmed", "Approved": refundable = true
            case "Authorised": refundable = parent.isAuthorisationIntent
            default: refundable = false
            }
            guard refundable, parent.captured > 0 else {
                throw SimError.pxp(422, "InvalidOperation", "nothing captured to refund (state \(parent.state))")
            }
            guard parent.refunded + value <= parent.captured else {
                throw SimError.pxp(
                    422, "AmountExceeded",
                    "refund total \(parent.formatted(parent.refunded + value)) exceeds the captured \(parent.formatted(parent.captured))")
            }
            parent.refunded += value
            child.state = "Authorised"  // PXP answers a refund with state Authorised
            child.amount.minorUnits = value
        }
        transactions[parentID] = parent
        transactions[child.systemTransactionID] = child
        children[parentID, default: []].append(child.systemTransactionID)
        let key = Self.referenceKey(child.merchant, child.site, child.merchantTransactionID)
        if byReference[key] == nil { byReference[key] = child.systemTransactionID }  // the first keeps the id
        if behaviour.answersPending {
            pendingFinal[child.systemTransactionID] = child.state
            child.state = "Pending"
            transactions[child.systemTransactionID] = child
        }
        return .applied(child)
    }
}

extension PXPTransaction {
    /// Builds a transaction from a `POST /admin/pxp/transactions` object.
    static func fromAdmin(_ json: JSONValue, systemTransactionID generated: String, now: String) throws(SimError) -> PXPTransaction {
        guard json.objectMembers != nil else { throw SimError.admin(400, "malformed_body", "a PXP transaction must be an object") }
        func string(_ key: String, required: Bool = true) throws(SimError) -> String? {
            guard let value = json[key], !value.isNull else {
                if required { throw SimError.admin(400, "missing_field", "\(key) is required") }
                return nil
            }
            guard let s = value.stringValue, !s.isEmpty else {
                throw SimError.admin(400, "invalid_field", "\(key) must be a non-empty string")
            }
            return s
        }
        let merchant = try string("merchant")!
        let site = try string("site")!
        let mtid = try string("merchantTransactionId")!
        let intent = try string("intent")!
        guard PXPTransaction.intents.contains(intent) else {
            throw SimError.admin(400, "invalid_field", "intent must be one of \(PXPTransaction.intents.sorted().joined(separator: ", "))")
        }
        let state = try string("state", required: false) ?? "Authorised"
        guard PXPTransaction.states.contains(state) else {
            throw SimError.admin(400, "invalid_field", "state must be one of \(PXPTransaction.states.sorted().joined(separator: ", "))")
        }
        let code = try string("currency")!
        guard let currency = Currency(code: code) else {
            throw SimError.admin(400, "invalid_field", "unknown currency \(code.uppercased())")
        }
        guard let minor = json["value"]?.seedMinorUnits(exponent: currency.exponent) else {
            throw SimError.admin(400, "invalid_field", "value must be a decimal amount in \(currency)")
        }
        let amount = Money(minorUnits: minor, currency: currency)
        var reported: Int64?
        if let a = json["authorisedAmount"], !a.isNull {
            guard let minor = a.seedMinorUnits(exponent: currency.exponent) else {
                throw SimError.admin(400, "invalid_field", "authorisedAmount must be a decimal amount in \(currency)")
            }
            reported = minor
        }
        let createdAtField = try string("createdAt", required: false)
        let dateField = try string("merchantTransactionDate", required: false)
        let createdAt = createdAtField ?? dateField ?? now
        guard SimTime.parse(createdAt) != nil else {
            throw SimError.admin(400, "invalid_field", "createdAt must be an ISO 8601 date-time")
        }
        let sid = try string("systemTransactionId", required: false) ?? generated
        var t = PXPTransaction(
            merchant: merchant, site: site, merchantTransactionID: mtid, systemTransactionID: sid,
            merchantTransactionDate: createdAt, intent: intent, amount: amount, state: state,
            reportedAuthorised: reported, authorised: 0)
        if let e = try string("entryType", required: false) { t.entryType = e }
        if let r = try string("reportedSite", required: false) { t.reportedSite = r }
        if let f = try string("fundingType", required: false) { t.fundingType = f }
        if let p = try string("parentSystemTransactionId", required: false) { t.parentSystemTransactionID = p }
        // Internal totals follow from the reported state.
        let authorised = reported ?? amount.minorUnits
        switch state {
        case "Authorised":
            t.authorised = authorised
        case "Captured", "Executed", "Confirmed", "Approved":
            t.authorised = t.isAuthorisationIntent ? authorised : amount.minorUnits
            t.captured = t.authorised
        case "Refunded":
            t.authorised = amount.minorUnits; t.captured = amount.minorUnits; t.refunded = amount.minorUnits
        default:
            t.authorised = 0
        }
        return t
    }
}
