import Crypto
import Foundation
import HTTP
import Reconciliation
import TextFormats

/// PayPal behind the provider seam: offline RSA verification of its webhooks, the Orders v2 API, and what its
/// authorizations and captures allow.
public enum PayPalProvider {
    /// PayPal-Request-Id takes at most 108 characters.
    public static let requestIDLimit = 108
    /// `/v1/payments/sale/{id}/refund` takes a PayPal-Request-Id of at most 78 characters (payments_payment_v1.json
    /// `paypal_request_id`); a longer key goes as its SHA-256 in hex, as for v2.
    public static let v1RequestIDLimit = 78

    public static let definition = ProviderDefinition(
        provider: .paypal,
        // Subscriptions and billing agreements are `I-…` (PROVIDER-FACTS PAYPAL-62): orders of one may carry periods.
        traits: ProviderTraits(agreementPrefixes: ["I-"]),
        webhookSecretVariable: "PAYPAL_WEBHOOK_ID",
        apiVariables: "PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET",
        webhookHeaders: [
            PayPalWebhookVerifier.transmissionIDHeader, PayPalWebhookVerifier.transmissionTimeHeader,
            PayPalWebhookVerifier.transmissionSignatureHeader, PayPalWebhookVerifier.certURLHeader,
            PayPalWebhookVerifier.authAlgorithmHeader
        ],
        webhookDeliveryIDHeader: PayPalWebhookVerifier.transmissionIDHeader,
        webhook: { env throws(ConfigurationError) in try webhook(env) },
        api: { env, transport throws(ConfigurationError) in try API(environment: env, transport: transport) },
        settlementReports: SettlementReportReader(describes: "PayPal Settlement (STL-*.CSV) and Transaction Detail (TRR-*.CSV) reports") {
            name, chunks, each in
            try PayPalSettlementReport.read(name: name, chunks: chunks, each: each)
        },
        backfillReads:
            "Transaction Search (GET /v1/reporting/transactions) and the webhook events list (GET /v1/notifications/webhooks-events)")

    /// The receiver's PayPal side. `PAYPAL_WEBHOOK_ID=WEBHOOK_ID` with PayPal's own certificate URLs
    /// allowed is refused here, at start: PayPal's public simulator signs with that id for anyone who aims it at
    /// this listener. (`payrecon verify` may still check a simulator delivery offline with it.)
    static func webhook(_ env: Environment) throws(ConfigurationError) -> (any ProviderWebhook)? {
        guard let webhookID = env["PAYPAL_WEBHOOK_ID"] else { return nil }
        let prefixes = certURLPrefixes(env)
        if let problem = PayPalWebhookVerifier.simulatorWebhookIDProblem(webhookID: webhookID, certURLPrefixes: prefixes) {
            throw ConfigurationError(problem)
        }
        let tolerance = try env.signatureTolerance()
        do {
            return try webhook(webhookID: webhookID, trustRoots: try trustRoots(env), certURLPrefixes: prefixes, tolerance: tolerance)
        } catch let e as ConfigurationError { throw e } catch { throw ConfigurationError("PayPal webhooks: \(error)") }
    }

    /// The receiver's PayPal side over `upstream` (PayPal's certificate URLs over HTTP in production): a verifier
    /// behind a `CachingCertificateSource` that caches only a certificate that parsed, chained and names the CN PayPal
    /// serves from its URL's host, until the chain's notAfter; failures are remembered.
    public static func webhook(
        webhookID: String, trustRoots roots: [X509Certificate], certURLPrefixes prefixes: [String],
        tolerance: TimeInterval = WebhookDefaults.signatureTolerance,
        upstream: any CertificateSource = HTTPCertificateSource()
    ) throws(WebhookConfigurationError) -> Webhook {
        let source = CachingCertificateSource(
            upstream: upstream,
            validate: { url, pem, now in
                try PayPalWebhookVerifier.validateSigningCertificate(pem, certURL: url, trustRoots: roots, now: now)
            })
        return Webhook(
            verifier: try PayPalWebhookVerifier(
                webhookID: webhookID, certificateSource: source, trustRoots: roots,
                certURLPrefixes: prefixes, tolerance: tolerance), cache: source)
    }

    /// `PAYPAL_CERT_URL_PREFIXES`, else PayPal's live and sandbox certificate URLs.
    public static func certURLPrefixes(_ env: Environment) -> [String] {
        env.list("PAYPAL_CERT_URL_PREFIXES", default: PayPalWebhookVerifier.defaultCertURLPrefixes.joined(separator: ","))
    }

    /// `PAYPAL_TRUST_ROOTS` (a PEM file), else the DigiCert chains shipped with payrecon (`PayPalTrustRoots`).
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
        /// The verifier's certificate cache, kept in the receiver's database (`keep(in:)`).
        let cache: CachingCertificateSource?
        public init(verifier: PayPalWebhookVerifier, cache: CachingCertificateSource? = nil) {
            self.verifier = verifier; self.cache = cache
        }
        public func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent {
            try verifier.verify(headers: headers, body: body, time: .at(now))
            return try Self.event(headers: headers, body: body)
        }
        /// nil while the delivery's certificate is neither cached nor known bad: `prepare` fetches it.
        public func acceptWithoutWaiting(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent? {
            guard try verifier.verifyWithoutWaiting(headers: headers, body: body, time: .at(now)) else { return nil }
            return try Self.event(headers: headers, body: body)
        }
        public func prepare(headers: Headers, sender: String?, then: @escaping @Sendable () -> Void) {
            verifier.prefetchCertificate(headers: headers, sender: sender, then: then)
        }
        /// Signing certificates that verified a delivery are saved until their notAfter, and those saved before (still
        /// under an allowed prefix) are validated again and cached at start: a restart, or a stranger's stream of
        /// cert URLs right after one, never keeps a genuine delivery waiting for a fetch. The sender groups PayPal's
        /// verified deliveries came from are kept too (`sender:` keys), for their reserve of fetches.
        public func keep(in store: any WebhookMaterialStore) {
            guard let cache else { return }
            let items = store.load(.paypal)
            let kept = items.filter { verifier.isAllowed(certURL: $0.key) }.map { (url: $0.key, pem: $0.value) }
            cache.restore(kept)
            cache.restoreTrusted(
                items.compactMap { item in
                    guard item.key.hasPrefix(Self.senderKey), let seconds = Int64(String(decoding: item.value, as: UTF8.self)) else {
                        return nil
                    }
                    return (
                        sender: String(item.key.dropFirst(Self.senderKey.count)), until: Date(timeIntervalSince1970: TimeInterval(seconds))
                    )
                })
            cache.persist { url, pem, keepUntil in store.save(.paypal, key: url, value: pem, keepUntil: keepUntil) }
            cache.persistTrusted { sender, until in
                store.save(
                    .paypal, key: Self.senderKey + sender, value: Array(String(Int64(until.timeIntervalSince1970)).utf8), keepUntil: until)
            }
        }
        static let senderKey = "sender:"

        /// A delivery from `sender` verified: its address group (`SenderAddress.group`) may use the whole fetch budget
        /// from now on, and within it this host (`SenderAddress.host`) goes first.
        public func verified(from sender: String) {
            guard let cache, SenderAddress.group(sender) != nil else { return }
            cache.trust(sender: sender)
        }

        private static func event(headers: Headers, body: [UInt8]) throws(WebhookRejection) -> AcceptedEvent {
            let e = try PayPalEvent.parse(body: body)
            return AcceptedEvent(
                dedupeKey: e.id, eventType: e.eventType,
                transmissionID: headers[PayPalWebhookVerifier.transmissionIDHeader])
        }
    }

    /// What PayPal allows: capture and void act on the open authorization (capture while CREATED or
    /// PARTIALLY_CAPTURED, void only while CREATED), refunds on the captures still holding money, in order; PayPal
    /// has no incremental authorisation.
    public static func capabilities(
        authorizationID: String?, authorizationStatus: String?, refundableCaptures: [RefundSource],
        currency: Currency? = nil
    ) -> Capabilities {
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
        return Capabilities(
            capture: capture, void: void, increment: .unsupported("paypal does not support incremental authorisation"),
            refund: .spread(refundableCaptures, sources: "PayPal captures"), amountUnit: unit,
            amountUnitNote: unit > 1 ? currency.map { "PayPal takes \($0.code) without decimals" } : nil)
    }

    public struct API: ProviderAPI {
        public let client: PayPalClient?

        public init(client: PayPalClient?) { self.client = client }

        init(environment env: Environment, transport: any ProviderTransport) throws(ConfigurationError) {
            guard let id = env["PAYPAL_CLIENT_ID"], let secret = try env.secret("PAYPAL_CLIENT_SECRET") else {
                self.init(client: nil); return
            }
            self.init(
                client: PayPalClient(
                    configuration: PayPalConfiguration(
                        baseURL: try env.baseURL("PAYPAL_API_BASE_URL", default: PayPalConfiguration.sandboxBaseURL),
                        clientID: id, secret: secret), transport: transport))
        }

        public var isConfigured: Bool { client != nil }

        /// PayPal answers a repeated PayPal-Request-Id with the first result (kept 45 days on v2 payments, 30 days
        /// on v1 sale refunds: PAYPAL-IDEMPOTENCY in docs/PROVIDER-FACTS.md).
        public var deduplicatesIdempotencyKeys: Bool { true }

        /// An order left unapproved expires after about 3 hours and then answers 404 (PAYPAL-ORDER-EXPIRY).
        public var unapprovedAttemptsExpire: Bool { true }

        /// What the event is about (`PayPalEvent`, the one parser of PayPal events): the order behind a v2 resource
        /// (its own id, `resource.order_id`, `related_ids`, or its `up` links, fetched); a v1 sale and the orders
        /// holding it; the orders of the captures a dispute names; else why it names no payment.
        /// Transaction Search, when the API is configured (`payrecon backfill`).
        public var transactionSearch: (any TransactionSearching)? { client.map { PayPalTransactionSearch(client: $0) } }
        public var eventList: (any EventListing)? { client.map { PayPalWebhookEventList(client: $0) } }

        public func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> {
            guard let client else { return .permanent(.notSent("no PayPal API client: set \(definition.apiVariables)")) }
            let e: PayPalEvent, resource: JSONValue?
            do { (e, resource) = try PayPalEvent.parseWithResource(body: event.body) } catch {
                return .permanent(.notSent("stored body no longer parses: \(error)"))
            }
            let type = e.eventType ?? "an event without event_type"
            switch e.subject {
            case .noPayment(let reason):
                return .found(.ignored(reason))
            case .payments:
                // A chargeback as PayPal shows it: PAYMENT.CAPTURE.REVERSED carries the reversal record (refund-shaped,
                // COMPLETED): learned, so every later check counts it in V, never in R.
                var learned: [TransactionLink] = []
                if e.eventType == "PAYMENT.CAPTURE.REVERSED", e.resourceType == "refund", let id = e.resourceID {
                    learned.append(
                        TransactionLink(
                            externalID: id, parentExternalID: nil, orderID: nil, kind: .reversal,
                            source: .learned))
                }
                switch await client.orderID(resourceType: e.resourceType, resource: resource ?? .null) {
                case .found(let id): return .found(.references([EventReference(transactionRef: id, learned: learned)]))
                case .notFound:
                    let named = e.references.first.map { "\($0.kind) \($0.id)" } ?? "its resource"
                    return .found(.ignored("\(type) names \(named), which PayPal does not trace to an order"))
                case let other: return other.failure(as: EventContent.self)!
                }
            case .sale(let id, let agreement, let parent):
                var learned = [Self.saleLink(id)]
                if e.eventType == "PAYMENT.SALE.REVERSED" {
                    // What the event says, kept as the hint it is (explain shows it): the sale reads refunded (v1 has no
                    // reversed state), and it counts as a chargeback only when a dispute PayPal shows resolved for the
                    // buyer names it (PayPalSaleMapping), never on this event's word.
                    learned.append(
                        TransactionLink(
                            externalID: "reversal-of-" + id, parentExternalID: id, orderID: nil,
                            kind: .reversal, source: .learned))
                }
                let reference = EventReference(transactionRef: id, alternatives: [agreement, parent].compactMap { $0 }, learned: learned)
                // The sale's own answer says which agreement or payment it belongs to and which billing period holds it
                // (the event's names are a hint, used only when PayPal does not show the sale).
                switch await client.sale(id) {
                case .found(let sale): return .found(.references([Self.described(reference, by: sale)]))
                case .notFound: return .found(.references([reference]))
                case let other: return other.failure(as: EventContent.self)!
                }
            case .saleRefund(let id, let saleID, let parent, let amount, let currencyCode):
                return await saleRefund(id, sale: saleID, parent: parent, amount: amount, currency: currencyCode, client: client)
            case .dispute(let id, let transactions):
                return await disputeReferences(id, transactions: transactions, type: type, client: client)
            }
        }

        /// A dispute's transactions, each led to its order (a capture's) or looked for as a sale or a transaction_ref.
        @inline(never)
        func disputeReferences(
            _ id: String, transactions: [String], type: String, client: PayPalClient
        ) async -> ProviderOutcome<EventContent> {
            guard !transactions.isEmpty else { return .found(.ignored("\(type): dispute \(id) names no transaction")) }
            var references: [EventReference] = []
            for transaction in transactions {
                let link = TransactionLink(
                    externalID: id, parentExternalID: transaction, orderID: nil, kind: .dispute,
                    source: .learned)
                // A capture (Orders v2) leads to its order; anything else is looked for as a sale or a transaction_ref.
                switch await client.capture(transaction) {
                case .found(let capture):
                    switch await client.orderID(resourceType: "capture", resource: capture) {
                    case .found(let order): references.append(EventReference(transactionRef: order, learned: [link]))
                    case .notFound: references.append(EventReference(transactionRef: transaction, learned: [link]))
                    case let other: return other.failure(as: EventContent.self)!
                    }
                case .notFound:
                    // A v1 sale (a subscription's renewal): found as its own events find it, by its answer's agreement
                    // and the billing period its creation falls in; with no order's period holding it, the dispute is
                    // kept with the sale, for the cycle's order to count when it is recorded.
                    switch await client.sale(transaction) {
                    case .found(let sale):
                        let reference = EventReference(transactionRef: transaction, learned: [Self.saleLink(transaction), link])
                        references.append(Self.described(reference, by: sale))
                    case .notFound: references.append(EventReference(transactionRef: transaction, learned: [link]))
                    case let other: return other.failure(as: EventContent.self)!
                    }
                case let other: return other.failure(as: EventContent.self)!
                }
            }

            return .found(.references(references))
        }

        /// A refund payrecon made, as PayPal's answer states it: its amount (what moved, not what was asked) and status.
        static func ownRefund(
            _ answer: JSONValue, id: String, capture: String, orderID: String, actionID: Int64, sent: Money
        ) -> TransactionLink {
            let moved = (try? PayPalMapping.money(answer["amount"], "amount", sent.currency)) ?? sent.minorUnits
            return TransactionLink(
                externalID: id, parentExternalID: capture, orderID: orderID, kind: .refund,
                amount: moved, currency: sent.currency.code, state: answer["status"]?.stringValue, source: .payrecon,
                actionID: actionID)
        }

        /// Refunds in doubt, found by the mark they carried (`custom_id`, the request id as sent) among the refunds of
        /// the order that holds their capture: made (COMPLETED or PENDING: PayPal accepted the money), or refused
        /// (FAILED, CANCELLED). A refund PayPal does not show is left unknown: the executor re-sends it only as it
        /// was sent (PayPal answers a repeated request id with the first result), or waits out the grace. Captures
        /// and voids carry no mark (`capture_request` defines no `custom_id`), nor do v1 sale refunds.
        public func inquire(_ q: TransactionQuery) async -> ProviderOutcome<CallOutcomes> {
            guard let client else { return .found(CallOutcomes()) }
            var out = CallOutcomes()
            for call in q.callsInDoubt where call.kind == .refund {
                if q.links.contains(where: { $0.kind == .sale && $0.externalID == call.providerTarget }) { continue }
                let mark = call.idempotencyKey(limit: PayPalProvider.requestIDLimit)
                let order: JSONValue
                switch await client.order(call.transactionRef) {
                case .found(let o): order = o
                case .notFound: continue
                case let other: return other.failure(as: CallOutcomes.self)!
                }
                for unit in order["purchase_units"]?.arrayValue ?? [] {
                    for refund in unit["payments"]?["refunds"]?.arrayValue ?? [] where refund["custom_id"]?.stringValue == mark {
                        guard let id = refund["id"]?.stringValue,
                            let currency = (order["purchase_units"]?[0]?["amount"]?["currency_code"]?.stringValue)
                                .flatMap(Currency.init(code:))
                        else { continue }
                        let status = refund["status"]?.stringValue ?? ""
                        if status == "FAILED" || status == "CANCELLED" {
                            out.calls[call.actionID] = .refused("PayPal shows refund \(id) \(status)")
                        } else {
                            out.calls[call.actionID] = .made(providerRef: id)
                            out.links.append(
                                Self.ownRefund(
                                    refund, id: id, capture: call.providerTarget ?? "", orderID: call.orderID,
                                    actionID: call.actionID, sent: Money(minorUnits: call.amount, currency: currency)))
                        }
                    }
                }
            }
            return .found(out)
        }

        /// A refund of a sale (either shape of PAYMENT.SALE.REFUNDED): the refund is learned with its amount and state
        /// as PayPal's answer states them (`GET /v1/payments/refund/{id}`), never as the event does; one PayPal does not
        /// show is learned without an amount (a partially refunded sale then takes no further refund: what is left of
        /// it is not known). Its order is looked for by the sale, its parent payment and its billing agreement.
        func saleRefund(
            _ id: String, sale saleID: String, parent: String?, amount _: String?, currency _: String?,
            client: PayPalClient
        ) async -> ProviderOutcome<EventContent> {
            var refund = TransactionLink(
                externalID: id, parentExternalID: saleID, orderID: nil, kind: .refund,
                source: .learned)
            var saleID = saleID, named = true  // `named`: the sale is the one the event named
            var learnedRefund: TransactionLink?
            switch await client.saleRefund(id) {
            case .found(let answer):
                // Learned only as PayPal's answer states it: the sale it refunds (a body naming a real refund under
                // another sale's id would count it in this sale's R), its amount and its state. An answer naming no
                // sale (not a sale's refund) teaches nothing.
                if let own = answer["sale_id"]?.stringValue, !own.isEmpty {
                    if own != saleID { saleID = own; named = false }
                    refund.parentExternalID = own
                    refund.state = answer["state"]?.stringValue
                    if let code = answer["amount"]?["currency"]?.stringValue, let currency = Currency(code: code) {
                        refund.currency = code
                        refund.amount = try? PayPalSaleMapping.amount(answer["amount"]?["total"], "amount.total", currency)
                    }
                    learnedRefund = refund
                }
            case .notFound: break  // PayPal does not show it: nothing learned (a partially refunded sale then takes no refund)
            case let other: return other.failure(as: EventContent.self)!
            }
            // The refund names its sale, not the sale's billing agreement (what a subscription order lists): the
            // sale's own answer does, so the order is found whichever of the sale's events comes first.
            // (The event's parent_payment only when its sale is the refund's own.)
            // The sale's answer's names first (identifiers PayPal assigned); the event's parent_payment (a hint) only after
            // them, and only when its sale is the refund's own.
            var alternatives: [String] = []
            var saleAnswer: JSONValue?
            switch await client.sale(saleID) {
            case .found(let sale):
                saleAnswer = sale
                for name in [sale["billing_agreement_id"], sale["parent_payment"]].compactMap({ $0?.stringValue })
                where !name.isEmpty && !alternatives.contains(name) {
                    alternatives.append(name)
                }
            case .notFound: break
            case let other: return other.failure(as: EventContent.self)!
            }
            if named, let parent, !alternatives.contains(parent) { alternatives.append(parent) }
            var reference = EventReference(
                transactionRef: saleID, alternatives: alternatives,
                learned: [Self.saleLink(saleID)] + (learnedRefund.map { [$0] } ?? []))
            // The refund counts on its sale's renewal: the period that holds the sale's creation.
            if let saleAnswer {
                let described = Self.described(reference, by: saleAnswer)
                reference.occurredAt = described.occurredAt
                reference.value = described.value
                reference.learned = described.learned
            }
            return .found(.references([reference]))
        }

        /// Whether a sale's own answer says it was created within `period` (always, without one). A sale whose
        /// creation time cannot be read is no period's: counted on no renewal, it moves no money.
        static func sale(_ sale: JSONValue, isWithin period: BillingPeriod?) -> Bool {
            guard let period else { return true }
            guard let created = sale["create_time"]?.stringValue.flatMap(ISO8601.unixSeconds(from:)) else { return false }
            return period.contains(created)
        }

        /// What a sale's own answer (`GET /v1/payments/sale/{id}`) says of the reference an event makes to it: the
        /// agreement and payment it belongs to (identifiers PayPal assigned, over the event's hint), when it was created
        /// (which billing period holds it) and its amount.
        static func described(_ reference: EventReference, by sale: JSONValue) -> EventReference {
            var reference = reference
            let names = [sale["billing_agreement_id"], sale["parent_payment"]].compactMap { $0?.stringValue }.filter { !$0.isEmpty }
            if !names.isEmpty { reference.alternatives = names }
            reference.occurredAt = sale["create_time"]?.stringValue.flatMap(ISO8601.unixSeconds(from:))
            if let code = sale["amount"]?["currency"]?.stringValue, let currency = Currency(code: code),
                let minor = try? PayPalSaleMapping.amount(sale["amount"]?["total"], "amount.total", currency)
            {
                reference.value = Money(minorUnits: minor, currency: currency)
            }
            let agreement = sale["billing_agreement_id"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            for i in reference.learned.indices where reference.learned[i].kind == .sale {
                reference.learned[i].occurredAt = reference.occurredAt
                if reference.learned[i].parentExternalID == nil { reference.learned[i].parentExternalID = agreement }
            }
            return reference
        }

        static func saleLink(_ id: String) -> TransactionLink {
            TransactionLink(externalID: id, parentExternalID: nil, orderID: nil, kind: .sale, source: .learned)
        }

        /// A transaction paid by v1 sales fetches them (GET /v1/payments/sale/{id}): those of the order's sales that
        /// name this reference (their own id, billing agreement or parent payment), so an order of several
        /// transactions counts each sale once. Any other fetches its Orders v2 order. Then the disputes a dispute
        /// event named for one of this transaction's captures or sales (GET /v1/customer/disputes/{id}); a dispute
        /// PayPal refuses to show (403: the app lacks the disputes permission) does not fail the check: the capture's
        /// refunds are held as if disputed, and the finding says which permission is missing.
        public func snapshot(of q: TransactionQuery) async -> ProviderOutcome<Snapshot> {
            guard let client else { return .permanent(.notSent("no paypal API client: set \(definition.apiVariables)")) }
            let saleIDs = q.links.filter { $0.kind == .sale }.map(\.externalID)
            var sales: [JSONValue] = []
            var seen = Set<String>()
            for id in saleIDs where seen.insert(id).inserted {
                switch await client.sale(id) {
                case .found(let sale):
                    let names = [sale["id"], sale["billing_agreement_id"], sale["parent_payment"]].compactMap { $0?.stringValue }
                    if names.contains(q.transactionRef), Self.sale(sale, isWithin: q.period) { sales.append(sale) }
                case .notFound: continue
                case let other: return other.failure(as: Snapshot.self)!
                }
            }
            let order: JSONValue?
            // A renewal's order (a billing period) is paid by the agreement's sales made within it, never by an Orders v2
            // order. None known while the period runs: the renewal is still to be charged, pending from the period's
            // start (past the pending window, stale_pending), not missing (an order recorded before PayPal charges the
            // cycle). None once the period is over: missing, as before (a cancelled order's: no finding).
            if sales.isEmpty, let period = q.period {
                guard let currency = q.currency, Int64(Date().timeIntervalSince1970) < period.end else { return .notFound }
                let why = "no sale of \(q.transactionRef) is known within this order's billing period (\(period)) yet"
                return .found(
                    Snapshot(
                        provider: .paypal, transactionRef: q.transactionRef, merchant: nil, site: nil, reportsMerchant: false,
                        intent: .purchase, currency: currency, value: 0, authorised: 0, captured: 0, refunded: 0,
                        state: .pending, rawState: "no sale in this period yet", createdAt: period.start,
                        capabilities: .unknown(why), method: "paypal"))
            }
            if sales.isEmpty {
                switch await client.order(q.transactionRef) {
                case .found(let o): order = o
                case let other: return other.failure(as: Snapshot.self)!
                }
            } else {
                order = nil
            }
            // The payments a dispute of this transaction names: its captures, or its sales.
            let payments = Set(order.map(Self.captureIDs) ?? sales.compactMap { $0["id"]?.stringValue })
            var disputes: [JSONValue] = []
            var unreadable: [(dispute: String, capture: String)] = []
            if let failure = await readDisputes(of: q, payments: payments, client: client, into: &disputes, unreadable: &unreadable) {
                return failure
            }
            if let order {
                return ProviderOutcome<JSONValue>.found(order).mapped {
                    try PayPalMapping.snapshot(order: $0, disputes: disputes, links: q.links, unreadableDisputes: unreadable)
                }
            }
            return ProviderOutcome<JSONValue>.found(.array(sales)).mapped { _ in
                try Self.saleSnapshot(q, sales: sales, disputes: disputes, unreadable: unreadable)
            }
        }

        /// The disputes of `q`'s links that name one of `payments`, as PayPal shows them, into `disputes`; those PayPal
        /// refuses to show (403) into `unreadable`. The failure to answer with, or nil when every one was asked.
        func readDisputes(
            of q: TransactionQuery, payments: Set<String>, client: PayPalClient,
            into disputes: inout [JSONValue], unreadable: inout [(dispute: String, capture: String)]
        ) async -> ProviderOutcome<Snapshot>? {
            var asked = Set<String>()
            for link in q.links where link.kind == .dispute && payments.contains(link.parentExternalID ?? "") {
                guard asked.insert(link.externalID).inserted else { continue }
                switch await client.dispute(link.externalID) {
                case .found(let d):
                    // Counted only when its own answer names one of this transaction's payments: the event that linked it
                    // is a hint, and a forged one naming a real dispute of another payment would hold this one's refunds.
                    let named = (d["disputed_transactions"]?.arrayValue ?? []).compactMap { $0["seller_transaction_id"]?.stringValue }
                    if named.contains(where: payments.contains) { disputes.append(d) }
                case .notFound: continue  // PayPal no longer has it: nothing under dispute
                case .permanent(.refused(403, _)): unreadable.append((link.externalID, link.parentExternalID ?? ""))
                case let other: return other.failure(as: Snapshot.self)!
                }
            }
            return nil
        }

        /// The snapshot of a transaction paid by v1 sales: no refund is taken from them when one falls near a boundary
        /// of a billing period given as dates.
        static func saleSnapshot(
            _ q: TransactionQuery, sales: [JSONValue], disputes: [JSONValue], unreadable: [(dispute: String, capture: String)]
        ) throws(ProviderMappingError) -> Snapshot {
            var snapshot = try PayPalSaleMapping.snapshot(
                sales: sales, refunds: q.links, transactionRef: q.transactionRef, disputes: disputes,
                unreadableDisputes: unreadable)
            // A renewal made within hours of a period given as dates (00:00 UTC) may be the next or the last cycle's for
            // a merchant away from UTC: no refund is taken from the order's sales on that guess.
            if let period = q.period,
                let doubtful = sales.first(where: { sale in
                    sale["create_time"]?.stringValue.flatMap(ISO8601.unixSeconds(from:)).map(period.nearADateBoundary) ?? false
                })
            {
                snapshot.capabilities.refund = .denied(
                    "PayPal sale \(doubtful["id"]?.stringValue ?? "?") was made within 14 hours of a "
                        + "boundary of this order's billing period, given as dates (read as 00:00 UTC): which cycle it pays depends on the "
                        + "merchant's time zone. Give period_start and period_end with a time and zone (2026-01-01T00:00:00+10:00)")
            }
            return snapshot
        }

        /// The capture ids of an Orders v2 answer, over every purchase unit.
        static func captureIDs(_ order: JSONValue) -> [String] {
            (order["purchase_units"]?.arrayValue ?? []).flatMap { unit in
                (unit["payments"]?["captures"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
            }
        }

        /// Capture and void on the authorization, refund on the capture; the idempotency key is PayPal-Request-Id.
        public func execute(_ call: ActionCall) async -> ActionCallResult {
            guard let client else { return ActionCallResult(.permanent(.notSent("no paypal API client: set \(definition.apiVariables)"))) }
            guard let target = call.providerTarget else {
                return ActionCallResult(.permanent(.notSent("no PayPal authorization or capture id recorded for this action")))
            }
            if call.kind != .void, let refusal = PayPalCurrencies.refusal(call.amount.minorUnits, call.amount.currency) {
                return ActionCallResult(.permanent(.notSent(refusal)))  // never sent: PayPal would refuse it
            }
            let requestID = call.idempotencyKey(limit: PayPalProvider.requestIDLimit)
            let sources = call.snapshot?.capabilities.captureSources ?? []
            switch call.kind {
            case .capture where !sources.isEmpty:
                return await captureSpread(call, over: sources, client: client)
            case .void where !sources.isEmpty:
                return await voidEach(call, of: sources, client: client)
            case .capture:
                return ActionCallResult(
                    await client.captureAuthorization(target, amount: call.amount, final: call.isFinal, requestID: requestID)
                        .map { $0["id"]?.stringValue ?? target })
            case .void:
                return ActionCallResult(
                    await client.voidAuthorization(target, requestID: requestID).map { $0["id"]?.stringValue ?? target })
            case .refund:
                guard call.links.contains(where: { $0.kind == .sale && $0.externalID == target }) else {
                    return await captureRefund(call, target: target, requestID: requestID, client: client)
                }
                // A v1 sale refund: the request id within v1's 78 characters, and the refund recorded from the answer,
                // so R counts it before (or without) its PAYMENT.SALE.REFUNDED webhook.
                let result = await client.refundSale(
                    target, amount: call.amount, requestID: call.idempotencyKey(limit: PayPalProvider.v1RequestIDLimit))
                guard case .found(let answer) = result, let id = answer["id"]?.stringValue else {
                    return ActionCallResult(result.map { $0["id"]?.stringValue ?? target })
                }
                // What moved is what PayPal's answer states (its amount.total), not what was asked.
                let moved =
                    (try? PayPalSaleMapping.amount(answer["amount"]?["total"], "amount.total", call.amount.currency))
                    ?? call.amount.minorUnits
                let refund = TransactionLink(
                    externalID: id, parentExternalID: target, orderID: call.order.orderID, kind: .refund,
                    amount: moved, currency: call.amount.currency.code,
                    state: answer["state"]?.stringValue ?? "completed", source: .payrecon, actionID: call.actionID)
                return ActionCallResult(.found(id), links: [refund])
            case .increment: return ActionCallResult(.permanent(.notSent("PayPal has no incremental authorization")))
            }
        }

        /// A refund of an Orders v2 capture, recorded from PayPal's answer as payrecon's own; one answered FAILED or
        /// CANCELLED is declined.
        func captureRefund(_ call: ActionCall, target: String, requestID: String, client: PayPalClient) async -> ActionCallResult {
            // The refund is recorded as payrecon's own, so it is always R, whatever note it carries; it carries its
            // request id as custom_id, so a re-fetch tells which refund this call made.
            let result = await client.refundCapture(target, amount: call.amount, requestID: requestID, customID: requestID)
            guard case .found(let answer) = result, let id = answer["id"]?.stringValue else {
                return ActionCallResult(result.map { $0["id"]?.stringValue ?? target })
            }
            // A refund answered FAILED or CANCELLED (a repeated request id gets the first request's latest status)
            // moved nothing: refused, not done.
            if let status = answer["status"]?.stringValue, status == "FAILED" || status == "CANCELLED" {
                return ActionCallResult(.permanent(.declined("PayPal answered refund \(id) \(status)")))
            }
            return ActionCallResult(
                .found(id),
                links: [
                    Self.ownRefund(
                        answer, id: id, capture: target, orderID: call.order.orderID,
                        actionID: call.actionID, sent: call.amount)
                ])
        }

        /// A PayPal order of several purchase units authorises each unit separately: the capture takes from each open
        /// authorization in order what it still holds, each call with its own PayPal-Request-Id (the key and the
        /// authorization, hashed when longer than PayPal takes), the last one final when it brings C to the order
        /// amount. A repeat after a partial failure re-plans first, so it asks only for what is still missing.
        func captureSpread(_ call: ActionCall, over sources: [RefundSource], client: PayPalClient) async -> ActionCallResult {
            var left = call.amount.minorUnits
            // Refused before any capture when the authorizations cannot hold it all: nothing is sent.
            let room = sources.reduce(Int64(0)) { $0 + max(0, $1.amount - $1.refunded) }
            guard room >= left else {
                return ActionCallResult(
                    .permanent(.notSent("the order's authorizations hold \(room) of the \(left) minor units to capture")))
            }
            var refs: [String] = []
            for source in sources where left > 0 {
                let room = source.amount - source.refunded
                guard room > 0 else { continue }
                let take = min(room, left)
                left -= take
                let key = ActionCall(
                    actionID: call.actionID, kind: call.kind, amount: call.amount, target: call.target, providerTarget: source.id,
                    idempotencyKey: call.idempotencyKey + ":" + source.id, order: call.order, snapshot: nil)
                let outcome = await client.captureAuthorization(
                    source.id, amount: Money(minorUnits: take, currency: call.amount.currency),
                    final: take == room || (left == 0 && call.isFinal),
                    requestID: key.idempotencyKey(limit: PayPalProvider.requestIDLimit))
                guard case .found(let answer) = outcome else {
                    return ActionCallResult(Self.stopped(outcome.map { _ in "" }, after: refs))
                }
                refs.append(answer["id"]?.stringValue ?? source.id)
            }
            return ActionCallResult(.found(refs.joined(separator: ",")))
        }

        /// A spread that stopped part way. What was captured moved money, so the call is never one that moved nothing
        /// ("not sent", "not found", a 429): it is declined, and its order checked again (the next plan asks only for
        /// what is still missing). A part whose own outcome is unknown stays in doubt, as it is.
        static func stopped(_ outcome: ProviderOutcome<String>, after refs: [String]) -> ProviderOutcome<String> {
            guard !refs.isEmpty else { return outcome }
            let captured = "captured from \(refs.joined(separator: ", ")), then stopped: "
            switch outcome {
            case .transient(let t) where !ProviderOutcomeClassifier.refusedBeforeProcessing(t.reason): return outcome
            case .transient(let t): return .permanent(.declined(captured + t.reason))
            case .notFound: return .permanent(.declined(captured + "the next authorization is not found"))
            case .permanent(let failure) where !failure.reachedProvider: return .permanent(.declined(captured + failure.text))
            case .permanent, .found: return outcome
            }
        }

        /// Voids each open authorization of an order of several purchase units that has nothing captured.
        func voidEach(_ call: ActionCall, of sources: [RefundSource], client: PayPalClient) async -> ActionCallResult {
            var refs: [String] = []
            for source in sources where source.refunded == 0 {
                let key = ActionCall(
                    actionID: call.actionID, kind: call.kind, amount: call.amount, target: call.target, providerTarget: source.id,
                    idempotencyKey: call.idempotencyKey + ":" + source.id, order: call.order, snapshot: nil)
                let outcome = await client.voidAuthorization(source.id, requestID: key.idempotencyKey(limit: PayPalProvider.requestIDLimit))
                guard case .found = outcome else { return ActionCallResult(outcome.map { _ in "" }) }
                refs.append(source.id)
            }
            return ActionCallResult(.found(refs.joined(separator: ",")))
        }
    }
}

/// Fetches PayPal signing certificates over HTTP(S), bounded in size and time. Only ever called by the verifier
/// after the URL passed the allowed-prefix check, and behind `CachingCertificateSource`.
/// Through libcurl (`CurlHTTPClient`), as every other provider call.
public struct HTTPCertificateSource: CertificateSource {
    let client: any HTTPSending
    public init(
        client: any HTTPSending = CurlHTTPClient(
            configuration: .init(timeout: .seconds(5), maxConcurrentRequests: 4, maxResponseBytes: 64 * 1024))
    ) {
        self.client = client
    }
    public func pem(for url: String) throws -> [UInt8] {
        let response = try client.sendBlocking(HTTPClientRequest(method: "GET", url: url))
        guard response.status == 200 else { throw CertificateFetchError(message: "GET \(url) answered \(response.status)") }
        return response.body
    }
    struct CertificateFetchError: Error, CustomStringConvertible { var message: String; var description: String { message } }
}
