import Reconciliation
import TextFormats

/// Each discrepancy kind in words for the people who read reports: its name, what it means, and what to do next
/// (docs/reconciliation.md has the long form).
public struct KindGuide: Sendable {
    public let title: String
    public let meaning: String
    public let nextStep: String

    /// The guide to a kind (every kind has one: a test reads them all).
    public static func of(_ kind: DiscrepancyKind) -> KindGuide {
        guides[kind] ?? KindGuide(kind.rawValue, "A discrepancy of kind \(kind.rawValue).", "Run payrecon explain on it.")
    }

    private init(_ title: String, _ meaning: String, _ nextStep: String) {
        self.title = title
        self.meaning = meaning
        self.nextStep = nextStep
    }

    /// Title, meaning and next step of each kind. Words only: what a provider does differently is its own folder's
    /// to say (the detail of each finding names it).
    private static let guides: [DiscrepancyKind: KindGuide] = [
        .missingAtProvider: KindGuide(
            "Missing at provider",
            "The provider does not know the order's transaction.",
            "Check the order's transaction reference (and its merchant and site, where the provider has them), fix the order and import it again."
        ),
        .unknownOrder: KindGuide(
            "Unknown order",
            "The provider has a payment that no order of yours holds.",
            "Import the missing order, or add the reference to its transactions; acknowledge it if it is not yours to track."),
        .merchantMismatch: KindGuide(
            "Other merchant",
            "The payment went to another merchant account than the order names.",
            "Correct the order's merchant, or find out why the money went to another account."),
        .siteMismatch: KindGuide(
            "Other site",
            "The provider shows another site than the order names.",
            "Correct the order's site, or find out why the payment was taken on another site."),
        .currencyMismatch: KindGuide(
            "Other currency",
            "The payment is in another currency than the order.",
            "Correct the order's currency, or investigate the payment."),
        .intentMismatch: KindGuide(
            "Other intent",
            "The payment was taken as a purchase where the order expects an authorisation, or the reverse.",
            "Correct the order's intent, or change how the checkout takes payment."),
        .amountMismatch: KindGuide(
            "Amount differs",
            "Less was captured or authorised than the order's total.",
            "If the order total is right, collect the difference; if not, correct it and import again."),
        .overCaptured: KindGuide(
            "Captured too much",
            "More was captured than the order's total.",
            "Refund the excess (raise the order's refund amount) or correct the total, then acknowledge it."),
        .overRefunded: KindGuide(
            "Refunded too much",
            "More was refunded than the order asks for.",
            "If the refund was meant, raise the order's refund amount; otherwise recover the money, then acknowledge it."),
        .stateMismatch: KindGuide(
            "Fulfilled but unpaid",
            "The order is fulfilled while its payment failed or was voided.",
            "Collect payment, or cancel the order and import it again."),
        .actionNotAllowed: KindGuide(
            "Action not possible",
            "The order needs a capture, void, refund or increment the provider will not take now.",
            "Read the detail for why, then act in the provider's dashboard or correct the order."),
        .stalePending: KindGuide(
            "Pending too long",
            "The payment has been pending longer than PAYRECON_PENDING_MAX allows.",
            "Look at the payment at the provider; for slow methods set a longer window per method."),
        .disputed: KindGuide(
            "Disputed",
            "The buyer disputes the payment; refunds are held meanwhile.",
            "Answer the dispute at the provider; it resolves when the dispute does."),
        .reversed: KindGuide(
            "Reversed (chargeback)",
            "The payer's bank or the provider took money back.",
            "Record the loss in your books, then acknowledge it with a note."),
        .actionFailed: KindGuide(
            "Action failed",
            "A capture, void, refund or increment failed, or its outcome is unknown.",
            "See payrecon actions list --status failed; fix the cause (check at the provider first if the outcome is unknown), then payrecon actions retry ID."
        ),
        .settlementMissing: KindGuide(
            "Not settled",
            "A capture or refund has no line in the provider's settlement files after PAYRECON_SETTLEMENT_DEADLINE.",
            "Import the missing days' files (payrecon settlement import); if they are all in, ask the provider where the money went."),
        .unknownSettlement: KindGuide(
            "Unknown settlement line",
            "The settlement file moved money for a transaction payrecon does not know.",
            "Find the order (payrecon backfill looks for it at the provider), import it, or acknowledge the line."),
        .settlementMismatch: KindGuide(
            "Settled differently",
            "The settlement line's gross, currency or direction differ from what the provider's API says.",
            "Compare the line with the transaction at the provider; raise it with the provider if the file is wrong."),
        .feeMismatch: KindGuide(
            "Fee differs",
            "The fee in the settlement file differs from the fee the provider's API stated.",
            "Check the fee at the provider; claim the difference if you were overcharged, then acknowledge it."),
        .settlementIncomplete: KindGuide(
            "Settlement file incomplete",
            "A settlement file's own counts or totals do not add up, or a day has no file.",
            "Fetch the file again from the provider's SFTP and import it; a day with no file needs that day's file.")
    ]
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
