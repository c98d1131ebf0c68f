// "Where allowed": the rules every provider shares, then what the provider's own mapping said it
// allows (`Snapshot.capabilities`). No provider is named here.

extension Planner.Check {
    enum Permission<Target> {
        case allowed(Target)
        case denied(String)
    }

    /// What an action acts on: the provider's id, and (with several transactions) which of the order's.
    struct Target {
        /// The provider's own id of what is acted on (a capture's authorization, a refund's capture).
        var providerID: String?
        var transactionRef: String?
        /// The transaction's own total for the action before it (captured for a capture, authorised for an
        /// increment): a key's target is this plus the action's amount.
        var total: Int64 = 0
    }

    struct RefundPart {
        var target: String?
        var amount: Int64
        var transactionRef: String?
        /// What the transaction this part acts on had refunded before the plan.
        var refundedBefore: Int64
    }

    /// The transactions actions may act on: with several, those holding money (each with its own capabilities) that
    /// the merchant listed or payrecon made, never one learned from a provider's reference field (evidence, never
    /// authority); with one, the snapshot itself (the order's own transaction_ref, always the merchant's).
    var actionable: [Snapshot] { parts.isEmpty ? [snapshot] : parts.filter { order.mayActOn($0.transactionRef) } }

    /// The transactions holding money that were learned, not listed: counted in the findings, never acted on.
    var learnedParts: [Snapshot] { parts.filter { !order.mayActOn($0.transactionRef) } }

    /// Why an action the learned transactions' money alone would call for is not taken: which transaction, the field
    /// it was learned from, and how the merchant makes it theirs.
    func learnedDenial(_ holding: [Snapshot]) -> String? {
        guard !holding.isEmpty else { return nil }
        let named = holding.map { "\($0.transactionRef) (learned from \(order.learned[$0.transactionRef] ?? "a reference field"))" }
        return "the money is on " + (named.count == 1 ? "transaction " : "transactions ") + named.joined(separator: ", ")
            + ", which the order does not list: a provider's reference field is free text anyone creating a payment can set, so "
            + "payrecon counts it but never acts on it; if it is this order's, list it in the order's transaction_ref (import the "
            + "order again) and payrecon will act on it"
    }

    /// `ref` when the order has several transactions (its keys name them), else nil.
    func ref(_ part: Snapshot) -> String? { parts.isEmpty ? nil : part.transactionRef }

    /// An authorisation of the order's transactions, authorised and not fully captured, holding at least `amount`
    /// more than it has captured (the first such).
    func openAuthorisation(holding amount: Int64) -> Snapshot? {
        actionable.first {
            $0.intent.isAuthorisation && $0.state == .authorised && $0.capturedOrPending < $0.authorised
                && $0.authorised - $0.capturedOrPending >= amount
        }
    }

    /// Capture needs an authorised, not fully captured authorisation, and an amount the provider takes.
    func capturePermission(_ amount: Int64) -> Permission<Target> {
        if let denial = authorisationDenial(for: "capture") { return .denied(denial) }
        guard let part = openAuthorisation(holding: amount) else {
            let learned = learnedParts.filter {
                $0.intent.isAuthorisation && $0.state == .authorised && $0.authorised - $0.capturedOrPending >= amount
            }
            return .denied(
                learnedDenial(learned) ?? "no single authorisation of the order's transactions holds \(withCode(amount)) uncaptured")
        }
        if let refusal = part.capabilities.amountRefusal(amount, currency: part.currency) { return .denied(refusal) }
        return permission(part.capabilities.capture, part, total: part.capturedOrPending)
    }

    /// Void needs an authorised authorisation with nothing captured: each such transaction of the order, with the
    /// amount it would release (what a refusal puts at risk).
    func voidPermission() -> [(Permission<Target>, amount: Int64)] {
        if let denial = authorisationDenial(for: "void") { return [(.denied(denial), authorised - captured)] }
        guard captured == 0 else { return [(.denied("\(withCode(captured)) already captured"), authorised - captured)] }
        let voidable: (Snapshot) -> Bool = { $0.state == .authorised && $0.captured == 0 && $0.authorised > 0 }
        return actionable.filter(voidable).map { part in (permission(part.capabilities.void, part), part.authorised - part.captured) }
            + learnedParts.filter(voidable).map { part in (.denied(learnedDenial([part])!), part.authorised) }
    }

    /// Increment: a provider that has it, on an authorisation in state authorised.
    func incrementPermission(_ amount: Int64) -> Permission<Target> {
        guard let part = openAuthorisation(holding: 0) ?? actionable.first else {
            return .denied(learnedDenial(learnedParts) ?? "no transaction of the order may be acted on")
        }
        if case .unsupported(let reason) = part.capabilities.increment { return .denied(reason) }
        if let denial = authorisationDenial(for: "increment") { return .denied(denial) }
        if let refusal = part.capabilities.amountRefusal(amount, currency: part.currency) { return .denied(refusal) }
        return permission(part.capabilities.increment, part, total: part.authorised)
    }

    /// Refund needs captured money not yet refunded nor reversed, and no open dispute (refunding a disputed payment
    /// pays twice); a provider whose refunds act on captures gets the amount spread over them in their order.
    func refundPermission(_ amount: Int64) -> Permission<[RefundPart]> {
        if disputed > 0 {
            return .denied("\(withCode(disputed)) is under open dispute (refunding a disputed payment pays twice)")
        }
        let refundable = captured - refunded - reversed
        guard amount > 0, refundable >= amount else {
            return .denied(
                "only \(withCode(max(refundable, 0))) captured and not yet refunded"
                    + (reversed > 0 ? " nor reversed" : ""))
        }
        if let refusal = snapshot.capabilities.amountRefusal(amount, currency: snapshot.currency) { return .denied(refusal) }
        // Over the order's transactions in order, each taking what it holds unrefunded, through its own refunds.
        var result: [RefundPart] = []
        var remaining = amount
        var denial: String?
        for part in actionable where remaining > 0 {
            let holds = parts.isEmpty ? remaining : min(remaining, max(0, part.captured - part.refunded - part.reversed))
            guard holds > 0 else { continue }
            if !parts.isEmpty, let refusal = part.capabilities.amountRefusal(holds, currency: part.currency) { denial = refusal; continue }
            switch part.capabilities.refund {
            case .denied(let reason):
                denial = reason
            case .against(let target):
                result.append(RefundPart(target: target, amount: holds, transactionRef: ref(part), refundedBefore: part.refunded))
                remaining -= holds
            case .spread(let sources, let name):
                var left = holds
                for source in sources where left > 0 {
                    let available = source.amount - source.refunded
                    guard available > 0, !source.id.isEmpty else { continue }
                    let take = min(available, left)
                    result.append(RefundPart(target: source.id, amount: take, transactionRef: ref(part), refundedBefore: part.refunded))
                    left -= take
                }
                remaining -= holds - left
                if left > 0 { denial = "\(name) hold only \(withCode(holds - left)) refundable" }
            }
        }
        guard remaining == 0 else {
            let learned = learnedParts.filter { $0.captured - $0.refunded - $0.reversed > 0 }
            return .denied(
                learnedDenial(learned) ?? denial ?? "the order's transactions hold only \(withCode(amount - remaining)) refundable")
        }
        return .allowed(result)
    }

    /// Common to capture, void and increment: an authorisation, authorised, not fully captured.
    private func authorisationDenial(for action: String) -> String? {
        guard snapshot.intent.isAuthorisation else { return "\(action) needs an authorisation, not a \(snapshot.intent.rawValue)" }
        guard state == .authorised else { return "transaction is \(state.rawValue) (\(snapshot.rawState))" }
        guard captured < authorised else { return "authorisation fully captured" }
        guard snapshot.capturedOrPending < authorised else {
            return "authorisation fully given to captures, \(withCode(snapshot.pendingCaptured)) of them still pending at the provider"
        }
        return nil
    }

    private func permission(_ capability: Capability, _ part: Snapshot, total: Int64 = 0) -> Permission<Target> {
        switch capability {
        case .allowed(let target): .allowed(Target(providerID: target, transactionRef: ref(part), total: total))
        case .denied(let reason), .unsupported(let reason): .denied(reason)
        }
    }
}
