// "Where allowed" (contract §6): what each provider lets payrecon do to a transaction in its current state.

extension Planner.Check {
    enum Permission<Target> {
        case allowed(Target)
        case denied(String)
    }

    struct RefundPart {
        var target: String?
        var amount: Int64
    }

    /// Capture needs an authorised, not fully captured authorisation.
    func capturePermission() -> Permission<String?> {
        if let denial = authorisationDenial(for: "capture") { return .denied(denial) }
        switch snapshot.provider {
        case .pxp:
            return pxpTarget()
        case .paypal:
            guard let id = snapshot.actionTargets.authorizationID, !id.isEmpty else {
                return .denied("no PayPal authorization left to capture")
            }
            if let status = snapshot.actionTargets.authorizationStatus,
               status != "CREATED", status != "PARTIALLY_CAPTURED" {
                return .denied("PayPal authorization \(id) is \(status)")
            }
            return .allowed(id)
        case .paypercut:
            return paypercutRequiresCapture()
        }
    }

    /// Void needs an authorised authorisation with nothing captured.
    func voidPermission() -> Permission<String?> {
        if let denial = authorisationDenial(for: "void") { return .denied(denial) }
        guard captured == 0 else { return .denied("\(withCode(captured)) already captured") }
        switch snapshot.provider {
        case .pxp:
            return pxpTarget()
        case .paypal:
            guard let id = snapshot.actionTargets.authorizationID, !id.isEmpty else {
                return .denied("no PayPal authorization left to void")
            }
            guard snapshot.actionTargets.authorizationStatus == "CREATED" else {
                return .denied("PayPal authorization \(id) is \(snapshot.actionTargets.authorizationStatus ?? "of unknown status"), not CREATED")
            }
            return .allowed(id)
        case .paypercut:
            return paypercutRequiresCapture()
        }
    }

    /// Increment: PXP only, on an Authorisation or EstimatedAuthorisation in state Authorised.
    func incrementPermission() -> Permission<String?> {
        guard snapshot.provider == .pxp else {
            return .denied("\(snapshot.provider.rawValue) does not support incremental authorisation")
        }
        if let denial = authorisationDenial(for: "increment") { return .denied(denial) }
        return pxpTarget()
    }

    /// Refund needs captured money not yet refunded; PayPal refunds act on captures, so the amount is spread over
    /// the refundable captures in their order.
    func refundPermission(_ amount: Int64) -> Permission<[RefundPart]> {
        let refundable = captured - refunded
        guard amount > 0, refundable >= amount else {
            return .denied("only \(withCode(max(refundable, 0))) captured and not yet refunded")
        }
        switch snapshot.provider {
        case .pxp:
            switch pxpTarget() {
            case let .allowed(target): return .allowed([RefundPart(target: target, amount: amount)])
            case let .denied(reason): return .denied(reason)
            }
        case .paypal:
            var parts: [RefundPart] = []
            var remaining = amount
            for capture in snapshot.actionTargets.refundableCaptures where remaining > 0 {
                let available = capture.amount - capture.refunded
                guard available > 0, !capture.id.isEmpty else { continue }
                let part = min(available, remaining)
                parts.append(RefundPart(target: capture.id, amount: part))
                remaining -= part
            }
            guard remaining == 0 else {
                return .denied("PayPal captures hold only \(withCode(amount - remaining)) refundable")
            }
            return .allowed(parts)
        case .paypercut:
            return .allowed([RefundPart(target: snapshot.transactionRef, amount: amount)])
        }
    }

    /// Common to capture, void and increment: an authorisation, authorised, not fully captured.
    private func authorisationDenial(for action: String) -> String? {
        guard snapshot.intent.isAuthorisation else { return "\(action) needs an authorisation, not a \(snapshot.intent.rawValue)" }
        guard state == .authorised else { return "transaction is \(state.rawValue) (\(snapshot.rawState))" }
        guard captured < authorised else { return "authorisation fully captured" }
        return nil
    }

    private func pxpTarget() -> Permission<String?> {
        guard let id = snapshot.actionTargets.systemTransactionID, !id.isEmpty else {
            return .denied("no PXP systemTransactionId to act on")
        }
        return .allowed(id)
    }

    private func paypercutRequiresCapture() -> Permission<String?> {
        guard snapshot.rawState == "requires_capture" else {
            return .denied("Paypercut payment intent is \(snapshot.rawState), not requires_capture")
        }
        return .allowed(snapshot.transactionRef)
    }
}
