import Foundation
import HTTP
import Reconciliation

/// PayPal behind the provider seam: offline RSA verification of its webhooks, the Orders v2 API, and what its
/// authorizations and captures allow.
public enum PayPalProvider {
    /// PayPal-Request-Id takes at most 108 characters.
    public static let requestIDLimit = 108

    public static let definition = ProviderDefinition(
        provider: .paypal,
        traits: ProviderTraits(),
        webhookSecretVariable: "PAYPAL_WEBHOOK_ID",
        apiVariables: "PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET",
        webhook: { env throws(ConfigurationError) in try webhook(env) },
        api: { env, transport throws(ConfigurationError) in try API(environment: env, transport: transport) })

    static func webhook(_ env: Environment) throws(ConfigurationError) -> (any ProviderWebhook)? {
        guard let webhookID = env["PAYPAL_WEBHOOK_ID"] else { return nil }
        let tolerance = try env.signatureTolerance()
        do {
            let roots = try trustRoots(env)
            // Only a certificate that parsed, chained and names PayPal's CN is cached; failures are remembered.
            let source = CachingCertificateSource(upstream: HTTPCertificateSource(), validate: { pem in
                try PayPalWebhookVerifier.validateSigningCertificate(pem, trustRoots: roots)
            })
            return Webhook(verifier: try PayPalWebhookVerifier(
                webhookID: webhookID, certificateSource: source,
                trustRoots: roots, certURLPrefixes: certURLPrefixes(env), tolerance: tolerance))
        } catch let e as ConfigurationError { throw e } catch { throw ConfigurationError("PayPal webhooks: \(error)") }
    }

    /// `PAYPAL_CERT_URL_PREFIXES`, else PayPal's live and sandbox certificate URLs.
    public static func certURLPrefixes(_ env: Environment) -> [String] {
        env.list("PAYPAL_CERT_URL_PREFIXES", default: PayPalWebhookVerifier.defaultCertURLPrefixes.joined(separator: ","))
    }

    /// `PAYPAL_TRUST_ROOTS` (a PEM file), else the DigiCert root and intermediate shipped with payrecon.
    public static func trustRoots(_ env: Environment) throws(ConfigurationError) -> [X509Certificate] {
        guard let path = env["PAYPAL_TRUST_ROOTS"] else { return PayPalTrustRoots.defaultCertificates }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("PAYPAL_TRUST_ROOTS=\(path) cannot be read: point it at a PEM file with the root and intermediates")
        }
        let certs: [X509Certificate]
        do { certs = try X509Certificate.parsePEMBundle(Array(data)) } catch {
            throw ConfigurationError("PAYPAL_TRUST_ROOTS=\(path) is not a PEM bundle: \(error)")
        }
        guard !certs.isEmpty else { throw ConfigurationError("PAYPAL_TRUST_ROOTS=\(path) holds no certificate") }
        return certs
    }

    public struct Webhook: ProviderWebhook {
        public let verifier: PayPalWebhookVerifier
        public init(verifier: PayPalWebhookVerifier) { self.verifier = verifier }
        public func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent {
            try verifier.verify(headers: headers, body: body, time: .at(now))
            return try Self.event(headers: headers, body: body)
        }
        /// nil while the delivery's certificate is neither cached nor known bad: `prepare` fetches it.
        public func acceptWithoutWaiting(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent? {
            guard try verifier.verifyWithoutWaiting(headers: headers, body: body, time: .at(now)) else { return nil }
            return try Self.event(headers: headers, body: body)
        }
        public func prepare(headers: Headers, then: @escaping @Sendable () -> Void) {
            verifier.prefetchCertificate(headers: headers, then: then)
        }
        private static func event(headers: Headers, body: [UInt8]) throws(WebhookRejection) -> AcceptedEvent {
            let e = try PayPalEvent.parse(body: body)
            return AcceptedEvent(dedupeKey: e.id, eventType: e.eventType,
                                 transmissionID: headers[PayPalWebhookVerifier.transmissionIDHeader])
        }
    }

    /// What PayPal allows: capture and void act on the open authorization (capture while CREATED or
    /// PARTIALLY_CAPTURED, void only while CREATED), refunds on the captures still holding money, in order; PayPal
    /// has no incremental authorisation.
    public static func capabilities(authorizationID: String?, authorizationStatus: String?, refundableCaptures: [RefundSource],
                                    currency: Currency? = nil) -> Capabilities {
        var capture = Capability.allowed(target: authorizationID)
        var void = Capability.allowed(target: authorizationID)
        if let id = authorizationID, !id.isEmpty {
            if let status = authorizationStatus, status != "CREATED", status != "PARTIALLY_CAPTURED" {
                capture = .denied("PayPal authorization \(id) is \(status)")
            }
            if authorizationStatus != "CREATED" {
                void = .denied("PayPal authorization \(id) is \(authorizationStatus ?? "of unknown status"), not CREATED")
            }
        } else {
            capture = .denied("no PayPal authorization left to capture")
            void = .denied("no PayPal authorization left to void")
        }
        let unit = currency.map(PayPalCurrencies.unit) ?? 1
        return Capabilities(capture: capture, void: void, increment: .unsupported("paypal does not support incremental authorisation"),
                            refund: .spread(refundableCaptures, sources: "PayPal captures"), amountUnit: unit,
                            amountUnitNote: unit > 1 ? currency.map { "PayPal takes \($0.code) without decimals" } : nil)
    }

    public struct API: ProviderAPI {
        public let client: PayPalClient?

        public init(client: PayPalClient?) { self.client = client }

        init(environment env: Environment, transport: any ProviderTransport) throws(ConfigurationError) {
            guard let id = env["PAYPAL_CLIENT_ID"], let secret = try env.secret("PAYPAL_CLIENT_SECRET") else { self.init(client: nil); return }
            self.init(client: PayPalClient(configuration: PayPalConfiguration(baseURL: env["PAYPAL_API_BASE_URL"] ?? PayPalConfiguration.sandboxBaseURL,
                                                                              clientID: id, secret: secret), transport: transport))
        }

        public var isConfigured: Bool { client != nil }

        /// PayPal answers a repeated PayPal-Request-Id with the first result (kept 45 days on v2 payments, 30 days
        /// on v1 sale refunds: PAYPAL-IDEMPOTENCY in docs/PROVIDER-FACTS.md).
        public var deduplicatesIdempotencyKeys: Bool { true }

        /// What the event is about (`PayPalEvent`, the one parser of PayPal events): the order behind a v2 resource
        /// (its own id, `resource.order_id`, `related_ids`, or its `up` links, fetched); a v1 sale and the orders
        /// holding it; the orders of the captures a dispute names; else why it names no payment.
        public func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> {
            guard let client else { return .permanent(status: 0, body: "no PayPal API client: set \(definition.apiVariables)") }
            let e: PayPalEvent, resource: JSONValue?
            do { (e, resource) = try PayPalEvent.parseWithResource(body: event.body) } catch {
                return .permanent(status: 0, body: "stored body no longer parses: \(error)")
            }
            let type = e.eventType ?? "an event without event_type"
            switch e.subject {
            case .noPayment(let reason):
                return .found(.ignored(reason))
            case .payments:
                switch await client.orderID(resourceType: e.resourceType, resource: resource ?? .null) {
                case .found(let id): return .found(.references([EventReference(transactionRef: id)]))
                case .notFound:
                    let named = e.references.first.map { "\($0.kind) \($0.id)" } ?? "its resource"
                    return .found(.ignored("\(type) names \(named), which PayPal does not trace to an order"))
                case let other: return other.failure(as: EventContent.self)!
                }
            case .sale(let id, let agreement, let parent):
                return .found(.references([EventReference(transactionRef: id, alternatives: [agreement, parent].compactMap { $0 },
                                                          learned: [Self.saleLink(id)])]))
            case .saleRefund(let id, let saleID, let parent, let amount, let currencyCode):
                var refund = TransactionLink(externalID: id, parentExternalID: saleID, orderID: nil, kind: ActionKind.refund.rawValue,
                                             currency: currencyCode, state: "completed", source: .learned)
                if let amount, let code = currencyCode, let currency = Currency(code: code) {
                    refund.amount = try? PayPalSaleMapping.amount(.string(amount), "resource.amount.total", currency)
                }
                return .found(.references([EventReference(transactionRef: saleID, alternatives: [parent].compactMap { $0 },
                                                          learned: [Self.saleLink(saleID), refund])]))
            case .dispute(let id, let transactions):
                guard !transactions.isEmpty else { return .found(.ignored("\(type): dispute \(id) names no transaction")) }
                var references: [EventReference] = []
                for transaction in transactions {
                    let link = TransactionLink(externalID: id, parentExternalID: transaction, orderID: nil, kind: TransactionLink.disputeKind,
                                               source: .learned)
                    // A capture (Orders v2) leads to its order; anything else is looked for as a sale or a transaction_ref.
                    switch await client.capture(transaction) {
                    case .found(let capture):
                        switch await client.orderID(resourceType: "capture", resource: capture) {
                        case .found(let order): references.append(EventReference(transactionRef: order, learned: [link]))
                        case .notFound: references.append(EventReference(transactionRef: transaction, learned: [link]))
                        case let other: return other.failure(as: EventContent.self)!
                        }
                    case .notFound: references.append(EventReference(transactionRef: transaction, learned: [link]))
                    case let other: return other.failure(as: EventContent.self)!
                    }
                }
                return .found(.references(references))
            }
        }

        static func saleLink(_ id: String) -> TransactionLink {
            TransactionLink(externalID: id, parentExternalID: nil, orderID: nil, kind: TransactionLink.saleKind, source: .learned)
        }

        /// An order paid by v1 sales fetches them (GET /v1/payments/sale/{id}); any other fetches its Orders v2
        /// order. Either way the disputes a dispute event named for it are fetched too (GET /v1/customer/disputes/{id}).
        public func snapshot(of q: TransactionQuery) async -> ProviderOutcome<Snapshot> {
            guard let client else { return .permanent(status: 0, body: "no paypal API client: set \(definition.apiVariables)") }
            var disputes: [JSONValue] = []
            for id in Set(q.links.filter { $0.kind == TransactionLink.disputeKind }.map(\.externalID)).sorted() {
                switch await client.dispute(id) {
                case .found(let d): disputes.append(d)
                case .notFound: continue   // PayPal no longer has it: nothing under dispute
                case let other: return other.failure(as: Snapshot.self)!
                }
            }
            let saleIDs = q.links.filter { $0.kind == TransactionLink.saleKind }.map(\.externalID)
            if !saleIDs.isEmpty {
                var sales: [JSONValue] = []
                var seen = Set<String>()
                for id in saleIDs where seen.insert(id).inserted {
                    switch await client.sale(id) {
                    case .found(let sale): sales.append(sale)
                    case .notFound: continue
                    case let other: return other.failure(as: Snapshot.self)!
                    }
                }
                guard !sales.isEmpty else { return .notFound }
                return ProviderOutcome<JSONValue>.found(.array(sales)).mapped { _ in
                    try PayPalSaleMapping.snapshot(sales: sales, refunds: q.links, transactionRef: q.transactionRef, disputes: disputes)
                }
            }
            return await client.order(q.transactionRef).mapped { try PayPalMapping.snapshot(order: $0, disputes: disputes) }
        }

        /// Capture and void on the authorization, refund on the capture; the idempotency key is PayPal-Request-Id.
        public func execute(_ call: ActionCall) async -> ActionCallResult {
            guard let client else { return ActionCallResult(.permanent(status: 0, body: "no paypal API client: set \(definition.apiVariables)")) }
            guard let target = call.providerTarget else {
                return ActionCallResult(.permanent(status: 0, body: "no PayPal authorization or capture id recorded for this action"))
            }
            if call.kind != .void, let refusal = PayPalCurrencies.refusal(call.amount.minorUnits, call.amount.currency) {
                return ActionCallResult(.permanent(status: 0, body: refusal))   // never sent: PayPal would refuse it
            }
            let result: ProviderOutcome<JSONValue>
            let requestID = call.idempotencyKey(limit: PayPalProvider.requestIDLimit)
            switch call.kind {
            case .capture: result = await client.captureAuthorization(target, amount: call.amount, final: call.isFinal, requestID: requestID)
            case .void: result = await client.voidAuthorization(target, requestID: requestID)
            case .refund:
                if call.links.contains(where: { $0.kind == TransactionLink.saleKind && $0.externalID == target }) {
                    result = await client.refundSale(target, amount: call.amount, requestID: requestID)
                } else {
                    result = await client.refundCapture(target, amount: call.amount, requestID: requestID)
                }
            case .increment: return ActionCallResult(.permanent(status: 0, body: "PayPal has no incremental authorization"))
            }
            return ActionCallResult(result.map { $0["id"]?.stringValue ?? target })
        }
    }
}

/// Fetches PayPal signing certificates over HTTP(S), bounded in size and time. Only ever called by the verifier
/// after the URL passed the allowed-prefix check, and behind `CachingCertificateSource`.
public struct HTTPCertificateSource: CertificateSource {
    let client: HTTPClient
    public init(client: HTTPClient = HTTPClient(configuration: .init(timeoutSeconds: 5, maxConcurrentRequests: 4, maxResponseBytes: 64 * 1024))) {
        self.client = client
    }
    public func pem(for url: String) throws -> [UInt8] {
        let response = try client.sendBlocking(HTTPClientRequest(method: "GET", url: url))
        guard response.status == 200 else { throw CertificateFetchError(message: "GET \(url) answered \(response.status)") }
        return response.body
    }
    struct CertificateFetchError: Error, CustomStringConvertible { var message: String; var description: String { message } }
}
