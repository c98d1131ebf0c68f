// "Where allowed" (contract §6): the rules every provider shares, then what the provider's own mapping said it
// allows (`Snapshot.capabilities`). No provider is named here.

extension Planner.Check {
    enum Permission<Target> {
        case allowed(Target)
        case denied(String)
    }

    struct RefundPart {
        var target: String?
        var amount: Int64
    }

    /// Capture needs an authorised, not fully captured authorisation, and an amount the provider takes.
    func capturePermission(_ amount: Int64) -> Permission<String?> {
        if let denial = authorisationDenial(for: "capture") { return .denied(denial) }
        if let refusal = snapshot.capabilities.amountRefusal(amount, currency: snapshot.currency) { return .denied(refusal) }
        return permission(snapshot.capabilities.capture)
    }

    /// Void needs an authorised authorisation with nothing captured.
    func voidPermission() -> Permission<String?> {
        if let denial = authorisationDenial(for: "void") { return .denied(denial) }
        guard captured == 0 else { return .denied("\(withCode(captured)) already captured") }
        return permission(snapshot.capabilities.void)
    }

    /// Increment: a provider that has it, on an authorisation in state authorised.
    func incrementPermission(_ amount: Int64) -> Permission<String?> {
        if case .unsupported(let reason) = snapshot.capabilities.increment { return .denied(reason) }
        if let denial = authorisationDenial(for: "increment") { return .denied(denial) }
        if let refusal = snapshot.capabilities.amountRefusal(amount, currency: snapshot.currency) { return .denied(refusal) }
        return permission(snapshot.capabilities.increment)
    }

    /// Refund needs captured money not yet refunded nor reversed, and no open dispute (refunding a disputed payment
    /// pays twice); a provider whose refunds act on captures gets the amount spread over them in their order.
    func refundPermission(_ amount: Int64) -> Permission<[RefundPart]> {
        if disputed > 0 {
            return .denied("\(withCode(disputed)) is under open dispute (refunding a disputed payment pays twice)")
        }
        let refundable = captured - refunded - reversed
        guard amount > 0, refundable >= amount else {
            return .denied("only \(withCode(max(refundable, 0))) captured and not yet refunded"
                           + (reversed > 0 ? " nor reversed" : ""))
        }
        if let refusal = snapshot.capabilities.amountRefusal(amount, currency: snapshot.currency) { return .denied(refusal) }
        switch snapshot.capabilities.refund {
        case .denied(let reason):
            return .denied(reason)
        case .against(let target):
            return .allowed([RefundPart(target: target, amount: amount)])
        case .spread(let sources, let name):
            var parts: [RefundPart] = []
            var remaining = amount
            for source in sources where remaining > 0 {
                let available = source.amount - source.refunded
                guard available > 0, !source.id.isEmpty else { continue }
                let part = min(available, remaining)
                parts.append(RefundPart(target: source.id, amount: part))
                remaining -= part
            }
            guard remaining == 0 else {
                return .denied("\(name) hold only \(withCode(amount - remaining)) refundable")
            }
            return .allowed(parts)
        }
    }

    /// Common to capture, void and increment: an authorisation, authorised, not fully captured.
    private func authorisationDenial(for action: String) -> String? {
        guard snapshot.intent.isAuthorisation else { return "\(action) needs an authorisation, not a \(snapshot.intent.rawValue)" }
        guard state == .authorised else { return "transaction is \(state.rawValue) (\(snapshot.rawState))" }
        guard captured < authorised else { return "authorisation fully captured" }
        return nil
    }

    private func permission(_ capability: Capability) -> Permission<String?> {
        switch capability {
        case .allowed(let target): .allowed(target)
        case .denied(let reason), .unsupported(let reason): .denied(reason)
        }
    }
}
