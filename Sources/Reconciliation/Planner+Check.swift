// The rows of the decision table for one order and its snapshot (documented at the top of Planner.swift).

extension Planner {
    struct Check {
        let order: Order
        let snapshot: Snapshot
        let now: Int64
        let pendingMax: Int64
        /// With several transactions: those holding money, which actions act on (`snapshot` is their sum).
        let parts: [Snapshot]
        var findings: [Finding] = []
        var actions: [PlannedAction] = []
        /// The row being evaluated, and each row that yielded something (`Decision`).
        var row: DecisionRow = .blocking
        var fired: [Decision.Fired] = []

        init(order: Order, snapshot: Snapshot, now: Int64, pendingMax: Int64, parts: [Snapshot] = []) {
            self.order = order; self.snapshot = snapshot; self.now = now; self.pendingMax = pendingMax; self.parts = parts
        }

        var amt: Int64 { order.amount.minorUnits }
        var authorised: Int64 { snapshot.authorised }
        var captured: Int64 { snapshot.captured }
        var refunded: Int64 { snapshot.refunded }
        var reversed: Int64 { snapshot.reversed }
        var disputed: Int64 { snapshot.disputed }
        var state: TransactionState { snapshot.state }
        var currency: Currency { order.amount.currency }

        func money(_ minorUnits: Int64) -> String { Money.format(minorUnits: minorUnits, exponent: currency.exponent) }
        func withCode(_ minorUnits: Int64) -> String { "\(money(minorUnits)) \(currency.code)" }

        /// The decision table, rows in order (Planner.swift): blocking mismatches, payouts, then rows 1–13.
        mutating func run() {
            checkBlocking()
            guard findings.isEmpty else { return }
            if order.intent == .payout { row = .payout; checkPayout(); return }
            if order.fulfilment == .open, state == .failed || state == .voided { return }
            authorisationRows()
            purchaseAndStateRows()
            cancellationRows()
            refundAmountRow()
            overRows()
            row = .stalePending
            // 11. pending too long → stale_pending.
            checkStale()
            // 12. D > 0 → disputed; 13. V > 0 → reversed.
            checkDisputedAndReversed()
        }

        /// Rows 1–3: an authorisation the order's total is above (increment), or a fulfilled one to capture.
        mutating func authorisationRows() {
            let fulfilment = order.fulfilment
            guard order.intent.isAuthorisation, state == .authorised else { return }
            row = .incrementOpen
            // 1. open, authorisation intents, authorised, amt > A → increment, else amount_mismatch.
            if fulfilment == .open, amt > authorised {
                let need = amt - authorised
                switch incrementPermission(need) {
                case let .allowed(target): emit(.increment, amount: need, target: target.total + need, on: target)
                case let .denied(reason):
                    add(
                        .amountMismatch, expected: ["amount": money(amt)], actual: ["authorised": money(authorised)],
                        detail: "order total \(withCode(amt)) is above the authorised \(withCode(authorised)) "
                            + "and cannot be incremented: \(reason)",
                        risk: need)
                }
            }
            row = .capture
            // 2. fulfilled, authorisation intents, authorised, C < amt ≤ A → capture amt − C, where C counts the
            //    captures still pending too: money the provider may already be moving is never captured again.
            if fulfilment == .fulfilled, snapshot.capturedOrPending < amt, amt <= authorised {
                let need = amt - snapshot.capturedOrPending
                switch capturePermission(need) {
                case let .allowed(target): emit(.capture, amount: need, target: target.total + need, on: target)
                case let .denied(reason): notAllowed(.capture, amount: need, reason: reason)
                }
            }
            row = .incrementFulfilled
            // 3. fulfilled, authorisation intents, authorised, amt > A → increment, else action_not_allowed.
            if fulfilment == .fulfilled, amt > authorised {
                let need = amt - authorised
                switch incrementPermission(need) {
                case let .allowed(target): emit(.increment, amount: need, target: target.total + need, on: target)
                case let .denied(reason): notAllowed(.increment, amount: need, reason: reason)
                }
            }
        }

        /// Rows 4–5: a purchase short of its total; a fulfilled order whose payment failed or was voided.
        mutating func purchaseAndStateRows() {
            row = .purchaseShort
            // 4. purchase, captured or refunded, C < amt → amount_mismatch.
            if order.intent == .purchase, state.holdsCapturedMoney, captured < amt {
                add(
                    .amountMismatch, expected: ["amount": money(amt)], actual: ["captured": money(captured)],
                    detail: "captured \(withCode(captured)) is below the order total \(withCode(amt))",
                    risk: amt - captured)
            }
            row = .fulfilledNotPaid
            // 5. fulfilled, failed or voided → state_mismatch.
            if order.fulfilment == .fulfilled, state == .failed || state == .voided {
                stateMismatch()
            }
        }

        /// Rows 6–7: a cancelled order's authorisation voided, its captured money refunded.
        mutating func cancellationRows() {
            guard order.fulfilment == .cancelled else { return }
            row = .cancelledVoid
            // 6. cancelled, authorised, C = 0 → void A − C.
            if state == .authorised, captured == 0, authorised > 0 {
                for (permission, amount) in voidPermission() {
                    switch permission {
                    case let .allowed(target): emit(.void, amount: amount, target: 0, on: target)
                    case let .denied(reason): notAllowed(.void, amount: amount, reason: reason)
                    }
                }
            }
            row = .cancelledRefund
            // 7. cancelled, C − R > 0 → refund C − R (less what was reversed: the payer has that back already).
            if captured - refunded - reversed > 0 {
                refund(captured - refunded - reversed)
            }
        }

        /// Row 8: not cancelled, rq > R → refund rq − R if rq ≤ C, else action_not_allowed.
        mutating func refundAmountRow() {
            row = .refundAmount
            guard order.fulfilment != .cancelled, order.refundAmount > refunded else { return }
            let need = order.refundAmount - refunded
            if order.refundAmount <= captured {
                refund(need)
            } else {
                notAllowed(
                    .refund, amount: need,
                    reason: "refund_amount \(withCode(order.refundAmount)) is above the captured " + withCode(captured))
            }
        }

        /// Rows 9–10: more captured than the order's total, more refunded than it calls for.
        mutating func overRows() {
            row = .overCaptured
            // 9. C > amt → over_captured.
            if captured > amt {
                add(
                    .overCaptured, expected: ["amount": money(amt)], actual: ["captured": money(captured)],
                    detail: "captured \(withCode(captured)) is above the order total \(withCode(amt))",
                    risk: captured - amt)
            }
            row = .overRefunded
            // 10. R > (cancelled ? C : rq) → over_refunded.
            let refundLimit = order.fulfilment == .cancelled ? captured : order.refundAmount
            if refunded > refundLimit {
                let limitName = order.fulfilment == .cancelled ? "captured" : "refund_amount"
                add(
                    .overRefunded, expected: [limitName: money(refundLimit)], actual: ["refunded": money(refunded)],
                    detail: "refunded \(withCode(refunded)) is above the \(limitName) \(withCode(refundLimit))",
                    risk: refunded - refundLimit)
            }
        }

        // MARK: blocking checks and payouts

        mutating func checkBlocking() {
            if snapshot.reportsMerchant, let merchant = order.merchant, !merchant.isEmpty, snapshot.merchant != merchant {
                add(
                    .merchantMismatch, expected: ["merchant": merchant], actual: ["merchant": snapshot.merchant ?? ""],
                    detail: "provider reports merchant '\(snapshot.merchant ?? "")', order expects '\(merchant)'",
                    risk: amt)
            }
            if snapshot.reportsSite, let site = order.site, !site.isEmpty, snapshot.site != site {
                add(
                    .siteMismatch, expected: ["site": site], actual: ["site": snapshot.site ?? ""],
                    detail: "provider reports site '\(snapshot.site ?? "")', order expects '\(site)'", risk: amt)
            }
            if snapshot.currency != currency {
                add(
                    .currencyMismatch, expected: ["currency": currency.code], actual: ["currency": snapshot.currency.code],
                    detail: "provider reports \(snapshot.currency.code), order is in \(currency.code)", risk: amt)
            }
            if snapshot.intent != order.intent {
                add(
                    .intentMismatch, expected: ["intent": order.intent.rawValue],
                    actual: ["intent": snapshot.intent.rawValue],
                    detail: "provider reports intent \(snapshot.intent.rawValue), order expects \(order.intent.rawValue)",
                    risk: amt)
            }
        }

        mutating func checkPayout() {
            if state.holdsCapturedMoney, captured != amt {
                add(
                    .amountMismatch, expected: ["amount": money(amt)], actual: ["captured": money(captured)],
                    detail: "payout of \(withCode(captured)) differs from the order total \(withCode(amt))",
                    risk: captured > amt ? captured - amt : amt - captured)
            }
            if order.fulfilment == .fulfilled, state == .failed || state == .voided {
                stateMismatch()
            }
            checkStale()
        }

        mutating func checkDisputedAndReversed() {
            if disputed > 0 {
                row = .disputed
                let notes = snapshot.notes.isEmpty ? "" : " (" + snapshot.notes.joined(separator: "; ") + ")"
                add(
                    .disputed, expected: [:], actual: ["disputed": money(disputed), "state": state.rawValue],
                    detail: "\(withCode(disputed)) is under open dispute; refunds are held until it is resolved" + notes, risk: disputed)
            }
            if reversed > 0 {
                row = .reversed
                add(
                    .reversed, expected: [:], actual: ["reversed": money(reversed), "captured": money(captured)],
                    detail:
                        "\(withCode(reversed)) of the captured \(withCode(captured)) was taken back by the payer's bank or the provider "
                        + "(chargeback or reversal), not refunded by the merchant", risk: reversed)
            }
        }

        mutating func stateMismatch() {
            add(
                .stateMismatch, expected: ["fulfilment": order.fulfilment.rawValue],
                actual: ["state": state.rawValue, "raw_state": snapshot.rawState],
                detail: "order is \(order.fulfilment.rawValue) but the transaction is \(state.rawValue) "
                    + "(\(snapshot.rawState))",
                risk: amt)
        }

        mutating func checkStale() {
            guard state == .pending || state == .actionRequired, let createdAt = snapshot.createdAt else { return }
            let (age, overflow) = now.subtractingReportingOverflow(createdAt)
            guard !overflow, age > pendingMax else { return }
            // No age in the finding: it changes by itself, and a finding found as it was must stay as it was (an
            // acknowledged one acknowledged, its evidence the check that opened it). The age follows from created_at.
            add(
                .stalePending, expected: ["max_age_seconds": String(pendingMax)],
                actual: ["state": state.rawValue, "raw_state": snapshot.rawState, "created_at": UnixTime.iso8601(createdAt)],
                detail:
                    "transaction \(state.rawValue) (\(snapshot.rawState)) since \(UnixTime.iso8601(createdAt)), longer than PAYRECON_PENDING_MAX (\(DurationParser.describe(pendingMax)))",
                risk: amt)
        }

        // MARK: emitting

        /// Records a finding; a second finding of a kind already found in this plan joins it (the order has one
        /// open discrepancy of each kind: amounts at risk summed, details joined, values kept under numbered keys).
        mutating func add(
            _ kind: DiscrepancyKind, expected: [String: String], actual: [String: String],
            detail: String, risk: Int64
        ) {
            let finding = Finding(kind: kind, expected: expected, actual: actual, detail: detail, amountAtRisk: max(risk, 0))
            fired.append(.init(row: row, yields: kind == .actionNotAllowed ? "\(kind.rawValue): \(detail)" : kind.rawValue))
            guard let i = findings.firstIndex(where: { $0.kind == kind }) else { findings.append(finding); return }
            findings[i] = Planner.join(findings[i], finding)
        }

        mutating func notAllowed(_ kind: ActionKind, amount: Int64, reason: String) {
            add(
                .actionNotAllowed, expected: ["action": kind.rawValue, "amount": money(amount)],
                actual: ["state": state.rawValue, "raw_state": snapshot.rawState],
                detail: "\(kind.rawValue) of \(withCode(amount)) needed but not allowed: \(reason)", risk: amount)
        }

        mutating func emit(_ kind: ActionKind, amount: Int64, target: Int64, on t: Target) {
            emit(kind, amount: amount, target: target, providerTarget: t.providerID, transactionRef: t.transactionRef)
        }

        mutating func emit(_ kind: ActionKind, amount: Int64, target: Int64, providerTarget: String?, transactionRef: String? = nil) {
            let key = PlannedAction.idempotencyKey(
                provider: order.provider, orderID: order.orderID, kind: kind,
                target: target, transactionRef: transactionRef)
            fired.append(.init(row: row, yields: "\(kind.rawValue) \(withCode(amount)) (\(key))"))
            actions.append(
                PlannedAction(
                    kind: kind, amount: amount, currency: currency, target: target,
                    idempotencyKey: key, providerTarget: providerTarget, transactionRef: transactionRef))
        }

        /// A refund of `amount` on top of R, split over the provider's refund sources when needed; action_not_allowed otherwise.
        mutating func refund(_ amount: Int64) {
            switch refundPermission(amount) {
            case let .denied(denial): notAllowed(.refund, amount: amount, reason: denial)
            case let .allowed(parts):
                // Each key's target is the refunded total of the transaction it acts on, never the order's: one
                // transaction's key must not change when another's refunds do.
                var totals: [String?: Int64] = [:]
                for part in parts {
                    let total = totals[part.transactionRef, default: part.refundedBefore] + part.amount
                    totals[part.transactionRef] = total
                    emit(.refund, amount: part.amount, target: total, providerTarget: part.target, transactionRef: part.transactionRef)
                }
            }
        }
    }
}

extension TransactionState {
    /// States in which money has been taken: captured, partially_refunded, refunded.
    var holdsCapturedMoney: Bool { self == .captured || self == .partiallyRefunded || self == .refunded }
}
