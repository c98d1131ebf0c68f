import Crypto
import Foundation
import Observability
import Reconciliation
import TextFormats

/// Paypercut behind the provider seam: HMAC-signed webhooks, payment intents re-fetched from its API (with the
/// latest payment), and capture / cancel / refund with Idempotency-Key.
public enum PaypercutProvider {
    public static let definition = ProviderDefinition(
        provider: .paypercut,
        traits: ProviderTraits(),
        webhookSecretVariable: "PAYPERCUT_WEBHOOK_SECRET",
        apiVariables: "PAYPERCUT_SECRET_KEY",
        webhookHeaders: [PaypercutWebhookVerifier.signatureHeader],
        webhookDeliveryIDHeader: nil,
        webhook: { env throws(ConfigurationError) in try webhook(env) },
        api: { env, transport throws(ConfigurationError) in try API(environment: env, transport: transport) },
        backfillReads: "the payment and refund lists (GET /v2/payments, GET /v1/refunds)")

    static func webhook(_ env: Environment) throws(ConfigurationError) -> (any ProviderWebhook)? {
        guard let secret = try env.secret("PAYPERCUT_WEBHOOK_SECRET") else { return nil }
        let tolerance = try env.signatureTolerance()
        do { return Webhook(verifier: try PaypercutWebhookVerifier(secret: secret, tolerance: tolerance)) } catch {
            throw ConfigurationError("PAYPERCUT_WEBHOOK_SECRET: \(error)")
        }
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
        let capturable: Capability =
            rawState == "requires_capture"
            ? .allowed(target: paymentIntentID)
            : .denied("Paypercut payment intent is \(rawState), not requires_capture")
        return Capabilities(
            capture: capturable, void: capturable, increment: .unsupported("paypercut does not support incremental authorisation"),
            refund: .against(target: paymentIntentID))
    }

    public struct API: ProviderAPI {
        public let client: PaypercutClient?

        public init(client: PaypercutClient?) { self.client = client }

        init(environment env: Environment, transport: any ProviderTransport) throws(ConfigurationError) {
            guard let key = try env.secret("PAYPERCUT_SECRET_KEY") else { self.init(client: nil); return }
            self.init(
                client: PaypercutClient(
                    configuration: PaypercutConfiguration(
                        baseURL: try env.baseURL("PAYPERCUT_API_BASE_URL", default: PaypercutConfiguration.defaultBaseURL), secretKey: key),
                    transport: transport))
        }

        public var isConfigured: Bool { client != nil }
        public var transactionSearch: (any TransactionSearching)? { client.map { PaypercutTransactionSearch(client: $0) } }

        /// Paypercut answers a repeated Idempotency-Key with the first result (PAYPERCUT-IDEMPOTENCY in
        /// docs/PROVIDER-FACTS.md).
        public var deduplicatesIdempotencyKeys: Bool { true }
        static let notConfigured = "no paypercut API client: set \(definition.apiVariables)"

        /// The event names its payment intent by `data.object.id` (a payment intent, or a `payment_intent.*` event)
        /// or `data.object.payment_intent`; `account.*` and other events naming none are ignored, with their type.
        public func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> {
            let parsed: PaypercutEvent
            do { parsed = try PaypercutEvent.parse(body: event.body) } catch {
                return .permanent(.notSent("stored body no longer parses: \(error)"))
            }
            guard let intent = parsed.paymentIntentID else {
                return .found(
                    .ignored(
                        "\(parsed.type) names no payment"
                            + (parsed.objectType.map { " (data.object: \($0))" } ?? "")))
            }
            return .found(.references([EventReference(transactionRef: intent, merchant: parsed.account)]))
        }

        /// The intent as the order's account (`Paypercut-Account`) sees it, with its latest payment. An account the
        /// key may not act for fails the check naming it (the client's words), never `missing_at_provider`.
        public func snapshot(of q: TransactionQuery) async -> ProviderOutcome<Snapshot> {
            guard let client else { return .permanent(.notSent(Self.notConfigured)) }
            let account = q.merchant.flatMap { $0.isEmpty ? nil : $0 }
            let intent: JSONValue
            switch await client.paymentIntent(q.transactionRef, account: account) {
            case .found(let i): intent = i
            case let other: return other.failure(as: Snapshot.self)!
            }
            var payment: JSONValue?
            if let id = intent["latest_payment"]?.stringValue, !id.isEmpty {
                switch await client.payment(id, account: account) {
                case .found(let p): payment = p
                case .notFound:
                    return .permanent(.refused(status: 404, body: "the latest payment \(id) of \(q.transactionRef) is not found"))
                case let other: return other.failure(as: Snapshot.self)!
                }
            }
            return ProviderOutcome<JSONValue>.found(intent).mapped {
                try PaypercutMapping.snapshot(intent: $0, payment: payment, account: account, links: q.links)
            }
        }

        /// Capture (final when it brings C to the order amount), cancel, refund; the key as Idempotency-Key (its
        /// SHA-256 when longer than Paypercut takes). Paypercut's refusals are permanent for the call: a state error
        /// (409, 422, `idempotency_error`) keeps Paypercut's answer and the executor re-fetches; an account refusal
        /// (403) names the account to fix.
        public func execute(_ call: ActionCall) async -> ActionCallResult {
            guard let client else { return ActionCallResult(.permanent(.notSent(Self.notConfigured))) }
            let target = call.providerTarget ?? call.order.transactionRef
            let key = call.idempotencyKey(limit: PaypercutClient.idempotencyKeyLimit)
            let account = call.order.merchant.flatMap { $0.isEmpty ? nil : $0 }
            let result: ProviderOutcome<JSONValue>
            switch call.kind {
            case .capture:
                result = await client.capture(target, amount: call.amount.minorUnits, final: call.isFinal, key: key, account: account)
            case .void: result = await client.cancel(target, key: key, account: account)
            case .refund:
                result = await client.refund(paymentIntent: target, amount: call.amount.minorUnits, key: key, account: account)
                // Recorded from Paypercut's answer (its amount and status: a pending refund counts in R until it fails).
                if case .found(let answer) = result, let id = answer["id"]?.stringValue {
                    let amount = answer["amount"]?.numberLiteral.flatMap { Int64($0) } ?? call.amount.minorUnits
                    return ActionCallResult(
                        .found(id),
                        links: [
                            TransactionLink(
                                externalID: id, parentExternalID: target, orderID: call.order.orderID, kind: .refund,
                                amount: amount, currency: call.amount.currency.code, state: answer["status"]?.stringValue,
                                source: .payrecon, actionID: call.actionID)
                        ])
                }
            case .increment: return ActionCallResult(.permanent(.notSent("Paypercut has no incremental authorisation")))
            }
            // 409 idempotency_error: an earlier request under this key reached Paypercut (PAYPERCUT-18).
            let keyInUse = if case .permanent(.refused(409, let body)) = result { body.contains("idempotency_error") } else { false }
            return ActionCallResult(result.map { $0["id"]?.stringValue ?? target }, keyInUse: keyInUse)
        }
    }
}
