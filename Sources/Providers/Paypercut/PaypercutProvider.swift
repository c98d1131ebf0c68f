import Foundation
import Observability
import Reconciliation

/// Paypercut behind the provider seam. Its webhooks are verified and stored; its API client is not built yet, so
/// its deliveries are kept (done) and its orders cannot be re-fetched (issue: "Paypercut, the third provider").
public enum PaypercutProvider {
    public static let definition = ProviderDefinition(
        provider: .paypercut,
        traits: ProviderTraits(),
        webhookSecretVariable: "PAYPERCUT_WEBHOOK_SECRET",
        apiVariables: "PAYPERCUT_SECRET_KEY (Paypercut reconciliation is not available yet)",
        webhook: { env throws(ConfigurationError) in try webhook(env) },
        api: { _, _ in API() })

    static func webhook(_ env: Environment) throws(ConfigurationError) -> (any ProviderWebhook)? {
        guard let secret = try env.secret("PAYPERCUT_WEBHOOK_SECRET") else { return nil }
        let tolerance = TimeInterval(try env.duration("PAYRECON_SIGNATURE_TOLERANCE", default: "10m"))
        do { return Webhook(verifier: try PaypercutWebhookVerifier(secret: secret, tolerance: tolerance)) }
        catch { throw ConfigurationError("PAYPERCUT_WEBHOOK_SECRET: \(error)") }
    }

    public struct Webhook: ProviderWebhook {
        public let verifier: PaypercutWebhookVerifier
        public init(verifier: PaypercutWebhookVerifier) { self.verifier = verifier }
        public func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent {
            try verifier.verify(headers: headers, body: body, time: .at(now))
            let e = try PaypercutEvent.parse(body: body)
            return AcceptedEvent(dedupeKey: e.id, eventType: e.type)
        }
    }

    /// What Paypercut allows on a payment intent: capture and void while it is `requires_capture`, refunds against
    /// the intent; no incremental authorisation.
    public static func capabilities(paymentIntentID: String, rawState: String) -> Capabilities {
        let capturable: Capability = rawState == "requires_capture"
            ? .allowed(target: paymentIntentID)
            : .denied("Paypercut payment intent is \(rawState), not requires_capture")
        return Capabilities(capture: capturable, void: capturable, increment: .unsupported("paypercut does not support incremental authorisation"),
                            refund: .against(target: paymentIntentID))
    }

    public struct API: ProviderAPI {
        public init() {}
        public var isConfigured: Bool { false }
        static let notConfigured = "no paypercut API client: set \(definition.apiVariables)"

        public func references(in event: StoredEvent) async -> ProviderOutcome<[EventReference]> {
            // Kept (done) for when the client exists.
            Log.info("paypercut delivery stored; reconciliation for paypercut is not available yet", ["delivery_id": event.id])
            return .found([])
        }

        public func snapshot(of transaction: TransactionQuery) async -> ProviderOutcome<Snapshot> {
            .permanent(status: 0, body: Self.notConfigured)
        }

        public func execute(_ call: ActionCall) async -> ActionCallResult {
            ActionCallResult(.permanent(status: 0, body: "Paypercut actions are not available yet"))
        }
    }
}
