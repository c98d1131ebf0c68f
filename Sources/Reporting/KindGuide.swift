import Reconciliation
import TextFormats

/// Each discrepancy kind in words for the people who read reports: its name, what it means, and what to do next
/// (docs/reconciliation.md has the long form).
public struct KindGuide: Sendable {
    public let title: String
    public let meaning: String
    public let nextStep: String

    public static func of(_ kind: DiscrepancyKind) -> KindGuide {
        switch kind {
        case .missingAtProvider:
            KindGuide(
                title: "Missing at provider", meaning: "The provider does not know the order's transaction.",
                nextStep:
                    "Check the order's transaction reference (and, for PXP, its merchant and site), fix the order and import it again.")
        case .unknownOrder:
            KindGuide(
                title: "Unknown order", meaning: "The provider has a payment that no order of yours holds.",
                nextStep: "Import the missing order, or add the reference to its transactions; acknowledge it if it is not yours to track.")
        case .merchantMismatch:
            KindGuide(
                title: "Other merchant", meaning: "The payment went to another merchant account than the order names.",
                nextStep: "Correct the order's merchant, or find out why the money went to another account.")
        case .siteMismatch:
            KindGuide(
                title: "Other site", meaning: "PXP shows another site than the order names.",
                nextStep: "Correct the order's site, or find out why the payment was taken on another site.")
        case .currencyMismatch:
            KindGuide(
                title: "Other currency", meaning: "The payment is in another currency than the order.",
                nextStep: "Correct the order's currency, or investigate the payment.")
        case .intentMismatch:
            KindGuide(
                title: "Other intent",
                meaning: "The payment was taken as a purchase where the order expects an authorisation, or the reverse.",
                nextStep: "Correct the order's intent, or change how the checkout takes payment.")
        case .amountMismatch:
            KindGuide(
                title: "Amount differs", meaning: "Less was captured or authorised than the order's total.",
                nextStep: "If the order total is right, collect the difference; if not, correct it and import again.")
        case .overCaptured:
            KindGuide(
                title: "Captured too much", meaning: "More was captured than the order's total.",
                nextStep: "Refund the excess (raise the order's refund amount) or correct the total, then acknowledge it.")
        case .overRefunded:
            KindGuide(
                title: "Refunded too much", meaning: "More was refunded than the order asks for.",
                nextStep: "If the refund was meant, raise the order's refund amount; otherwise recover the money, then acknowledge it.")
        case .stateMismatch:
            KindGuide(
                title: "Fulfilled but unpaid", meaning: "The order is fulfilled while its payment failed or was voided.",
                nextStep: "Collect payment, or cancel the order and import it again.")
        case .actionNotAllowed:
            KindGuide(
                title: "Action not possible",
                meaning: "The order needs a capture, void, refund or increment the provider will not take now.",
                nextStep: "Read the detail for why, then act in the provider's dashboard or correct the order.")
        case .stalePending:
            KindGuide(
                title: "Pending too long", meaning: "The payment has been pending longer than PAYRECON_PENDING_MAX allows.",
                nextStep: "Look at the payment at the provider; for slow methods set a longer window per method.")
        case .disputed:
            KindGuide(
                title: "Disputed", meaning: "The buyer disputes the payment; refunds are held meanwhile.",
                nextStep: "Answer the dispute at the provider; it resolves when the dispute does.")
        case .reversed:
            KindGuide(
                title: "Reversed (chargeback)", meaning: "The payer's bank or the provider took money back.",
                nextStep: "Record the loss in your books, then acknowledge it with a note.")
        case .actionFailed:
            KindGuide(
                title: "Action failed", meaning: "A capture, void, refund or increment failed, or its outcome is unknown.",
                nextStep:
                    "See payrecon actions list --status failed; fix the cause (check at the provider first if the outcome is unknown), then payrecon actions retry ID."
            )
        case .settlementMissing:
            KindGuide(
                title: "Not settled",
                meaning: "A capture or refund has no line in the provider's settlement files after PAYRECON_SETTLEMENT_DEADLINE.",
                nextStep:
                    "Import the missing days' files (payrecon settlement import); if they are all in, ask the provider where the money went."
            )
        case .unknownSettlement:
            KindGuide(
                title: "Unknown settlement line", meaning: "The settlement file moved money for a transaction payrecon does not know.",
                nextStep: "Find the order (payrecon backfill looks for it at the provider), import it, or acknowledge the line.")
        case .settlementMismatch:
            KindGuide(
                title: "Settled differently",
                meaning: "The settlement line's gross, currency or direction differ from what the provider's API says.",
                nextStep: "Compare the line with the transaction at the provider; raise it with the provider if the file is wrong.")
        case .feeMismatch:
            KindGuide(
                title: "Fee differs", meaning: "The fee in the settlement file differs from the fee the provider's API stated.",
                nextStep: "Check the fee at the provider; claim the difference if you were overcharged, then acknowledge it.")
        case .settlementIncomplete:
            KindGuide(
                title: "Settlement file incomplete",
                meaning: "A settlement file's own counts or totals do not add up, or a day has no file.",
                nextStep: "Fetch the file again from the provider's SFTP and import it; a day with no file needs that day's file.")
        }
    }
}

/// Expected and actual values in words: `age_seconds 28124537` reads "age 325 days", snake_case keys read as words.
public enum Humanize {
    /// "325 days", "5 hours", "12 minutes", "40 seconds": the largest whole unit.
    public static func duration(seconds: Int64) -> String {
        let units: [(Int64, String)] = [(86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second")]
        for (size, name) in units where seconds >= size || size == 1 {
            let n = seconds / size
            return "\(n) \(name)\(n == 1 ? "" : "s")"
        }
        return "\(seconds) seconds"
    }

    /// A key in words: `age_seconds` → "age", `refund_amount` → "refund amount".
    public static func key(_ key: String) -> String {
        let base = key.hasSuffix("_seconds") ? String(key.dropLast("_seconds".count)) : key
        return base.replacingOccurrences(of: "_", with: " ")
    }

    /// A value in words: whole seconds under a `_seconds` key as a duration; strings as they are; the rest as JSON.
    public static func value(_ key: String, _ value: JSONValue) -> String {
        if key.hasSuffix("_seconds"), let text = value.numberLiteral ?? value.stringValue, let seconds = Int64(text) {
            return duration(seconds: seconds)
        }
        if let s = value.stringValue { return s }
        return String(decoding: value.serialized(), as: UTF8.self)
    }
}
