/// May the merchant fulfil the order now (ship the goods, release the download, confirm the payout)? Decided from one
/// fresh check: the transactions as the provider answered in it, what the decision table found, and payrecon's
/// actions for the order. Pure: the same inputs, the same verdict.
///
/// - `fulfil`: the provider holds the order's money as its intent requires (captured for a purchase, authorised or
///   captured for an authorisation, paid out for a payout) on transactions the merchant listed or payrecon made, for
///   the amount the order keeps (its amount less the refund it wants), in its currency and for its merchant, with
///   nothing disputed, reversed, pending or in doubt that could take it back.
/// - `wait`: nothing is wrong yet, but something is still to happen: a pending payment or refund, an action whose
///   outcome is not known. `reasons` says what is awaited.
/// - `refuse`: every reason, in words.
public struct Verdict: Sendable, Hashable {
    public enum Outcome: String, Sendable, Hashable, CaseIterable { case fulfil, wait, refuse }

    public var outcome: Outcome
    /// Why not `fulfil`: for `refuse` every reason to refuse, for `wait` what is awaited. Empty for `fulfil`.
    public var reasons: [String]
    /// The order's figures as the check summed them (nil when the provider knows none of its transactions).
    public var snapshot: Snapshot?

    /// The finding kinds that refuse an order: the provider's answer contradicts it, or money went or may go back.
    static let refusing: Set<DiscrepancyKind> = [
        .missingAtProvider, .merchantMismatch, .siteMismatch, .currencyMismatch, .intentMismatch,
        .amountMismatch, .overCaptured, .overRefunded, .stateMismatch, .actionNotAllowed,
        .disputed, .reversed, .actionFailed
    ]

    public static func decide(order: Order, transactions: [FetchedTransaction], findings: [Finding], actions: [EmittedAction]) -> Verdict {
        var refuse: [String] = [], wait: [String] = []
        let snapshot = Planner.orderSnapshot(order: order, transactions: transactions)
        if order.fulfilment == .cancelled { refuse.append("the order is cancelled") }
        for f in findings {
            if refusing.contains(f.kind) {
                refuse.append("\(f.kind.rawValue): \(f.detail)")
            } else if f.kind == .stalePending {
                wait.append("\(f.kind.rawValue): \(f.detail)")
            }
        }
        for a in actions where a.status == .pending && a.inDoubt {
            wait.append(
                "payrecon's \(a.kind.rawValue) of \(Money.format(minorUnits: a.amount, exponent: order.amount.currency.exponent)) "
                    + "\(order.amount.currency.code) may have reached the provider and its outcome is not known yet")
        }
        let fetched = transactions.compactMap { t in t.snapshot.map { (ref: t.transactionRef, s: $0) } }
        if fetched.isEmpty, !findings.contains(where: { $0.kind == .missingAtProvider }) {
            refuse.append("the provider knows none of the order's transactions (\(order.transactionRefs.joined(separator: ", ")))")
        }
        for (ref, s) in fetched {
            let name = order.hasSeveralTransactions ? "transaction \(ref) " : ""
            if s.state == .pending || s.pendingCaptured > 0 { wait.append("\(name)a payment is pending at the provider (\(s.rawState))") }
            if s.state == .actionRequired { wait.append("\(name)the buyer has still to complete the payment (\(s.rawState))") }
            if s.refundPending { wait.append("\(name)a refund is pending at the provider (\(s.rawState))") }
            if s.disputed > 0 { refuse.append("\(name)\(money(s.disputed, s.currency)) is disputed by the buyer") }
            if s.reversed > 0 { refuse.append("\(name)\(money(s.reversed, s.currency)) was taken back (a chargeback or reversal)") }
        }
        // The money counts only on transactions the merchant listed or payrecon made: one learned from a provider's
        // reference field (free text anyone creating a payment can set) is never the order's payment on its own word.
        let listed = fetched.filter { order.mayActOn($0.ref) }
        let learnedHolding = fetched.filter { !order.mayActOn($0.ref) && held($0.s, intent: order.intent) > 0 }
        let keeps = order.amount.minorUnits - order.refundAmount
        if keeps <= 0 { refuse.append("the order wants its whole amount refunded: there is nothing to fulfil") }
        // Only money in the order's currency counts (a listed attempt in another one, failed beside the paying
        // transaction, holds none of it).
        let heldListed = listed.filter { $0.s.currency == order.amount.currency }
            .reduce(Int64(0)) { sum, t in sum.addingReportingOverflow(held(t.s, intent: order.intent)).partialValue }
        if keeps > 0, heldListed < keeps {
            let short =
                "\(order.intent == .payout ? "paid out" : order.intent.isAuthorisation ? "authorised or captured" : "captured") "
                + "\(money(heldListed, order.amount.currency)) of the \(money(keeps, order.amount.currency)) the order keeps"
            if !learnedHolding.isEmpty {
                // Said whatever else is wrong: the money the merchant may think is there is not the order's on this word.
                refuse.append(
                    short + " on its own transactions; the rest is on \(learnedHolding.map(\.ref).joined(separator: ", ")), which "
                        + "payrecon learned from \(learnedHolding.compactMap { order.learned[$0.ref] }.first ?? "a reference field"): "
                        + "list it in the order's transaction_ref to rely on it")
            } else if refuse.isEmpty {
                if wait.isEmpty { refuse.append(short) } else { wait.append(short) }
            }
        }
        if !refuse.isEmpty { return Verdict(outcome: .refuse, reasons: refuse, snapshot: snapshot) }
        if !wait.isEmpty { return Verdict(outcome: .wait, reasons: wait, snapshot: snapshot) }
        return Verdict(outcome: .fulfil, reasons: [], snapshot: snapshot)
    }

    /// What a transaction holds for the order's intent, net of what went back: captured (a purchase, a payout), or
    /// the larger of authorised and captured (an authorisation), less refunds and reversals.
    static func held(_ s: Snapshot, intent: Intent) -> Int64 {
        guard s.state != .failed, s.state != .voided, s.state != .pending, s.state != .actionRequired else { return 0 }
        let gross = intent.isAuthorisation ? max(s.authorised, s.captured) : s.captured
        return max(0, gross - s.refunded - s.reversed)
    }

    static func money(_ minor: Int64, _ currency: Currency) -> String {
        Money.format(minorUnits: minor, exponent: currency.exponent) + " " + currency.code
    }
}
