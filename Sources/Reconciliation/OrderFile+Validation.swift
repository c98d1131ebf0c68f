// One row of an order file → an Order, or every problem in it.

/// A raw value from a CSV cell or a JSON Lines key.
enum RawValue: Hashable {
    case text(String)
    /// A JSON number, as its literal text.
    case number(String)
    case null
    /// A JSON value that is neither string, number nor null ("true", "an object", "an array").
    case wrongType(String)
}

struct RowValidator {
    /// What each provider needs of a row (its merchant and site when they are part of its API path).
    let traits: @Sendable (Provider) -> ProviderTraits
    private struct OrderKey: Hashable { var provider: Provider; var orderID: String }
    /// First line of every (provider, order_id) seen, for the duplicate check.
    private var firstLine: [OrderKey: Int] = [:]
    private struct AgreementKey: Hashable { var provider: Provider; var ref: String }
    /// The orders of each subscription or agreement seen, with their periods (nil: none), for the overlap check.
    private var agreements: [AgreementKey: [(orderID: String, line: Int, period: BillingPeriod?)]] = [:]

    init(traits: @escaping @Sendable (Provider) -> ProviderTraits) { self.traits = traits }

    mutating func validate(line: Int, values: [String: RawValue]) -> OrderFileRecord {
        var row = Row(line: line, values: values)

        let provider: Provider? = row.required("provider").flatMap { text in
            row.enumValue(Provider.self, text, field: "provider", name: "provider")
        }
        let orderID = row.required("order_id", allowInteger: true)
        let transactionRefs = row.required("transaction_ref", allowInteger: true).flatMap { row.references($0) }
        let merchant = row.optional("merchant", allowInteger: true)
        let site = row.optional("site", allowInteger: true)
        if let provider, traits(provider).requiresMerchantAndSite {
            if merchant == nil { row.fail("merchant", "required for \(provider.rawValue) (part of its API path)") }
            if site == nil { row.fail("site", "required for \(provider.rawValue) (part of its API path)") }
        }
        let intent = row.required("intent").flatMap { row.enumValue(Intent.self, $0, field: "intent", name: "intent") }
        let fulfilment = row.required("fulfilment").flatMap {
            row.enumValue(Fulfilment.self, $0, field: "fulfilment", name: "fulfilment")
        }
        let currency: Currency? = row.required("currency").flatMap { code in
            if let currency = Currency(code: code) { return currency }
            row.fail("currency", "unknown currency '\(code)'")
            return nil
        }
        let amount = row.amount("amount", currency: currency, required: true)
        let refundAmount = row.amount("refund_amount", currency: currency, required: false)
        if let amount, let refundAmount, refundAmount > amount, let currency {
            row.fail(
                "refund_amount",
                "refund_amount above the amount "
                    + "(\(Money.format(minorUnits: amount, exponent: currency.exponent)))")
        }

        let period = row.period()
        if let provider, let transactionRefs {
            checkPeriod(period, of: &row, provider: provider, orderID: orderID, transactionRefs: transactionRefs, line: line)
        }

        if let provider, let orderID {
            let key = OrderKey(provider: provider, orderID: orderID)
            if let first = firstLine[key] {
                row.fail("order_id", "duplicate order_id for \(provider.rawValue) (first on line \(first))")
            } else {
                firstLine[key] = line
            }
        }

        guard row.errors.isEmpty, let provider, let orderID, let transactionRefs, let intent, let fulfilment,
            let currency, let amount
        else { return .invalid(row.errors) }
        var order = Order(
            provider: provider, orderID: orderID, merchant: merchant, site: site,
            transactionRef: transactionRefs[0], intent: intent,
            amount: Money(minorUnits: amount, currency: currency), fulfilment: fulfilment,
            refundAmount: refundAmount ?? 0, transactionRefs: transactionRefs)
        order.period = period
        return .order(order, line: line)
    }

    /// A billing period is only for an order of one subscription or agreement, and of one agreement the periods must
    /// not overlap.
    private mutating func checkPeriod(
        _ period: BillingPeriod?, of row: inout Row, provider: Provider, orderID: String?,
        transactionRefs: [String], line: Int
    ) {
        let traits = self.traits(provider)
        if period != nil {
            if traits.agreementPrefixes.isEmpty {
                row.fail(
                    "period_start",
                    "\(provider.rawValue) has no subscriptions payrecon splits by billing period: record each renewal as "
                        + "its own order, by the renewal's own transaction")
            } else if transactionRefs.count > 1 || !traits.isAgreement(transactionRefs[0]) {
                let kinds = traits.agreementPrefixes.map { $0 + "…" }.joined(separator: ", ")
                row.fail(
                    "period_start",
                    "a billing period is only for an order of one subscription or billing agreement (\(kinds)); "
                        + "transaction_ref is '\(transactionRefs.joined(separator: " "))'")
            }
        }
        // Of one agreement, the periods must not overlap (a renewal's payment would count on two orders), and an order
        // without a period (which holds every payment) cannot stand beside orders with one.
        if let orderID, transactionRefs.count == 1, traits.isAgreement(transactionRefs[0]), row.errors.isEmpty {
            let key = AgreementKey(provider: provider, ref: transactionRefs[0])
            let siblings = agreements[key] ?? []
            if let clash = siblings.first(where: { other in
                switch (period, other.period) {
                case (nil, nil): return false
                case let (mine?, theirs?): return mine.overlaps(theirs)
                default: return true
                }
            }) {
                let why =
                    period == nil || clash.period == nil
                    ? "one of them has no billing period, so it would hold every payment of the agreement"
                    : "their periods overlap (\(period!) and \(clash.period!)), so a renewal's payment would count on both"
                row.fail(
                    period == nil ? "transaction_ref" : "period_start",
                    "order \(clash.orderID) (line \(clash.line)) is of the same agreement \(transactionRefs[0]) and \(why)")
            } else {
                agreements[key, default: []].append((orderID, line, period))
            }
        }
    }
}

/// The values of one row and the errors found so far (one per field: the first problem is the one reported).
private struct Row {
    let line: Int
    let values: [String: RawValue]
    var errors: [OrderFileError] = []

    init(line: Int, values: [String: RawValue]) { self.line = line; self.values = values }

    /// `transaction_ref`: one reference, or several separated by spaces (an order paid in several attempts or
    /// transactions). A repeated one, or one with a control character, is reported with its position.
    mutating func references(_ text: String) -> [String]? {
        let refs = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !refs.isEmpty else { fail("transaction_ref", "missing"); return nil }
        var seen: [String: Int] = [:]
        for (i, ref) in refs.enumerated() {
            if ref.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                fail("transaction_ref", "reference \(i + 1) of \(refs.count) contains a control character"); return nil
            }
            if ref.utf8.count > 255 {
                fail("transaction_ref", "reference \(i + 1) of \(refs.count) is longer than 255 bytes"); return nil
            }
            if let first = seen[ref] {
                fail("transaction_ref", "reference \(i + 1) of \(refs.count) ('\(ref)') repeats reference \(first)"); return nil
            }
            seen[ref] = i + 1
        }
        return refs
    }

    /// `period_start` and `period_end`: both or neither, each a date (00:00 UTC) or a date-time with its zone, the end
    /// after the start. nil when neither is given or either is wrong (then the row has the error).
    mutating func period() -> BillingPeriod? {
        func time(_ field: String) -> (given: Bool, at: Int64?) {
            guard let text = optional(field) else {
                return (values[field].map { if case .wrongType = $0 { true } else { false } } ?? false, nil)
            }
            guard let at = UnixTime.seconds(dateOrTime: text) else {
                fail(
                    field,
                    "'\(text)' is neither a date (2026-01-31, meaning 00:00 UTC) nor a date-time with its zone (2026-01-31T00:00:00Z)")
                return (true, nil)
            }
            return (true, at)
        }
        let start = time("period_start"), end = time("period_end")
        switch (start.given, end.given) {
        case (false, false): return nil
        case (true, false): fail("period_end", "missing: a billing period needs period_start and period_end"); return nil
        case (false, true): fail("period_start", "missing: a billing period needs period_start and period_end"); return nil
        case (true, true): break
        }
        guard let s = start.at, let e = end.at else { return nil }
        // Either end given as a date (00:00 UTC, the merchant's zone unknown) puts the period's cycle in doubt near its ends.
        let dates = [values["period_start"], values["period_end"]].contains {
            if case .text(let t)? = $0 { t.utf8.count == 10 } else { false }
        }
        guard let period = BillingPeriod(start: s, end: e, datesOnly: dates) else {
            fail("period_end", "\(UnixTime.dateOrTime(e)) is not after period_start \(UnixTime.dateOrTime(s)) (the end is excluded)")
            return nil
        }
        return period
    }

    mutating func fail(_ field: String, _ reason: String) {
        guard !errors.contains(where: { $0.field == field }) else { return }
        errors.append(OrderFileError(line: line, field: field, reason: reason))
    }

    /// A string value; nil when absent, null or empty. A JSON integer is accepted where `allowInteger`.
    mutating func optional(_ field: String, allowInteger: Bool = false) -> String? {
        switch values[field] {
        case nil, .null: return nil
        case let .text(text):
            // A JSON line's \u0000 or a raw NUL in a CSV field: PostgreSQL's text holds none, so the import would fail
            // at the database naming no line.
            if text.utf8.contains(0) { fail(field, "contains a NUL character, which PostgreSQL cannot store"); return nil }
            return text.isEmpty ? nil : text
        case let .number(literal):
            if allowInteger, literal.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                return literal
            }
            fail(field, allowInteger ? "must be a string or an integer" : "must be a string")
            return nil
        case let .wrongType(kind):
            fail(field, "must be a string, not \(kind)")
            return nil
        }
    }

    mutating func required(_ field: String, allowInteger: Bool = false) -> String? {
        let value = optional(field, allowInteger: allowInteger)
        if value == nil { fail(field, "missing") }
        return value
    }

    mutating func enumValue<E: RawRepresentable & CaseIterable>(
        _ type: E.Type, _ text: String, field: String,
        name: String
    ) -> E? where E.RawValue == String {
        if let value = E(rawValue: text.lowercased()) { return value }
        let allowed = E.allCases.map(\.rawValue).joined(separator: ", ")
        fail(field, "unknown \(name) '\(text)' (expected one of: \(allowed))")
        return nil
    }

    /// Minor units of an amount field: decimal string or JSON number, not negative, within the currency's
    /// exponent. Without a valid currency only the syntax and the sign are checked.
    mutating func amount(_ field: String, currency: Currency?, required: Bool) -> Int64? {
        let text: String
        let json: Bool
        switch values[field] {
        case nil, .null, .text(""):
            if required { fail(field, "missing") }
            return nil
        case let .text(value): (text, json) = (value, false)
        case let .number(literal): (text, json) = (literal, true)
        case let .wrongType(kind):
            fail(field, "must be a decimal string or a number, not \(kind)")
            return nil
        }
        do throws(MoneyError) {
            let number = try DecimalText(parsing: Array(text.utf8), json: json)
            if number.negative, number.digits.contains(where: { $0 != 0 }) {
                fail(field, "negative amount")
                return nil
            }
            guard let currency else { return nil }
            return try number.minorUnits(exponent: currency.exponent)
        } catch {
            fail(field, error.naming(currency).description)
            return nil
        }
    }
}
