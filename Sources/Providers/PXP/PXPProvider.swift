import Crypto
import Foundation
import Reconciliation
import Synchronization
import TextFormats

/// PXP behind the provider seam: its facts, its webhook side (HMAC over `X-Request-Id` + timestamp + body) and its
/// API side (the Transactions API; modifications are transactions of their own, linked to their parent).
public enum PXPProvider {
    public static let definition = ProviderDefinition(
        provider: .pxp,
        traits: ProviderTraits(requiresMerchantAndSite: true),
        webhookSecretVariable: "PXP_WEBHOOK_KEY",
        apiVariables: "PXP_CLIENT_ID, PXP_TOKEN_ID and PXP_TOKEN_VALUE",
        webhookHeaders: [PXPWebhookVerifier.requestIDHeader, PXPWebhookVerifier.timestampHeader, PXPWebhookVerifier.signatureHeader],
        webhookDeliveryIDHeader: PXPWebhookVerifier.requestIDHeader,
        webhook: { env throws(ConfigurationError) in try webhook(env) },
        api: { env, transport throws(ConfigurationError) in try API(environment: env, transport: transport) })

    static func webhook(_ env: Environment) throws(ConfigurationError) -> (any ProviderWebhook)? {
        guard let key = try env.secret("PXP_WEBHOOK_KEY") else { return nil }
        let name = try env.choice("PXP_WEBHOOK_HMAC", ["sha256", "sha512", "sha1"], default: "sha256")
        guard let algorithm = HMACAlgorithm(configuration: name) else {
            throw ConfigurationError("PXP_WEBHOOK_HMAC=\(name) is not supported")
        }
        let tolerance = try env.signatureTolerance()
        do { return Webhook(verifier: try PXPWebhookVerifier(key: key, algorithm: algorithm, tolerance: tolerance)) } catch {
            throw ConfigurationError("PXP_WEBHOOK_KEY: \(error)")
        }
    }

    public struct Webhook: ProviderWebhook {
        public let verifier: PXPWebhookVerifier
        public init(verifier: PXPWebhookVerifier) { self.verifier = verifier }
        public func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent {
            try verifier.verify(headers: headers, body: body, time: .at(now))
            let n = try PXPNotification.parse(body: body, headers: headers)
            return AcceptedEvent(dedupeKey: n.dedupeKey, eventType: n.eventType)
        }
    }

    /// What PXP allows on a transaction, all against its systemTransactionId: capture, void, increment and refund
    /// (PXP's own state and the planner's shared rules decide the rest).
    public static func capabilities(systemTransactionID: String?) -> Capabilities {
        guard let id = systemTransactionID, !id.isEmpty else {
            let reason = "no PXP systemTransactionId to act on"
            return Capabilities(capture: .denied(reason), void: .denied(reason), increment: .denied(reason), refund: .denied(reason))
        }
        return Capabilities(
            capture: .allowed(target: id), void: .allowed(target: id), increment: .allowed(target: id),
            refund: .against(target: id))
    }

    public struct API: ProviderAPI {
        public let client: PXPClient?

        /// Whether PXP has been seen, in this process, to find a modification by its merchantTransactionId
        /// (undocumented: PXP-LOOKUP-MODIFICATIONS in docs/PROVIDER-FACTS.md). Until it has, a 404 for a
        /// modification in doubt proves nothing, and nothing is re-sent on the strength of it.
        let lookups = LookupEvidence()

        public init(client: PXPClient?) { self.client = client }

        /// PXP does not document whether a repeated merchantTransactionId is de-duplicated (PXP-DEDUPE): payrecon
        /// never relies on it.
        public var deduplicatesIdempotencyKeys: Bool { false }

        init(environment env: Environment, transport: any ProviderTransport) throws(ConfigurationError) {
            guard let id = env["PXP_CLIENT_ID"], let token = env["PXP_TOKEN_ID"], let value = try env.secret("PXP_TOKEN_VALUE") else {
                self.init(client: nil); return
            }
            self.init(
                client: PXPClient(
                    configuration: PXPConfiguration(
                        baseURL: try env.baseURL("PXP_API_BASE_URL", default: PXPConfiguration.sandboxBaseURL),
                        clientID: id, tokenID: token, tokenValue: value), transport: transport))
        }

        public var isConfigured: Bool { client != nil }

        static let notConfigured = "no pxp API client: set \(definition.apiVariables)"

        /// Each event names its transaction by merchantTransactionId (an order's transaction_ref) and/or PXP's own
        /// systemTransactionId (looked up through stored links). No API call: this works without credentials.
        public func references(in event: StoredEvent) async -> ProviderOutcome<EventContent> {
            let notification: PXPNotification
            do { notification = try PXPNotification.parse(body: event.body, headers: event.headers) } catch {
                return .permanent(.notSent("stored body no longer parses: \(error)"))
            }
            let references: [EventReference] = notification.events.compactMap { e in
                guard e.merchantTransactionID != nil || e.systemTransactionID != nil else { return nil }
                return EventReference(
                    transactionRef: e.merchantTransactionID, alias: e.systemTransactionID, merchant: e.merchant, site: e.site)
            }
            guard references.isEmpty else { return .found(.references(references)) }
            // Authentication, token or report events name no transaction: nothing to reconcile.
            let named = notification.events.map { e in
                (e.eventType ?? "an event without eventCode") + (e.eventCategory.map { " (category \($0))" } ?? "")
            }
            return .found(.ignored(named.joined(separator: ", ") + " names no transaction"))
        }

        /// A transaction no order holds: fetched with the event's merchant and site, then read as an order's own, a
        /// modification to link to its parent, a Verification, or something that cannot be reconciled.
        public func lookup(_ q: TransactionQuery) async -> ProviderOutcome<TransactionLookup> {
            guard let client else { return .permanent(.notSent(Self.notConfigured)) }
            guard let merchant = q.merchant, let site = q.site, !merchant.isEmpty, !site.isEmpty else {
                return .permanent(.notSent("PXP event without merchant and site: they are part of PXP's API path"))
            }
            switch await client.transaction(merchant: merchant, site: site, merchantTransactionId: q.transactionRef) {
            case .found(let t):
                do { return .found(try PXPMapping.lookup(transaction: t, transactionRef: q.transactionRef)) } catch {
                    return .permanent(.unreadable("unreadable answer: \(error)"))
                }
            case let other: return other.failure(as: TransactionLookup.self)!
            }
        }

        public func snapshot(of q: TransactionQuery) async -> ProviderOutcome<Snapshot> {
            guard let client else { return .permanent(.notSent(Self.notConfigured)) }
            guard let merchant = q.merchant, let site = q.site, !merchant.isEmpty, !site.isEmpty else {
                return .permanent(.notSent("PXP order without merchant and site: they are part of PXP's API path"))
            }
            let modifications = q.links.compactMap(PXPModification.init(link:))
            return await client.transaction(merchant: merchant, site: site, merchantTransactionId: q.transactionRef).mapped {
                try PXPMapping.snapshot(transaction: $0, modifications: modifications, transactionRef: q.transactionRef)
            }
        }

        /// The modification's merchantTransactionId, recorded (state `Sent`) before the call: PXP's webhook about it
        /// may come before the answer, and a later attempt knows it may have been made.
        public func prepare(_ call: ActionCall) -> [TransactionLink] {
            guard let parent = call.providerTarget ?? call.snapshot?.aliases.first else { return [] }
            return [
                TransactionLink(
                    externalID: PXPClient.merchantTransactionId(forIdempotencyKey: call.idempotencyKey), parentExternalID: parent,
                    orderID: call.order.orderID, kind: .init(call.kind), amount: call.amount.minorUnits,
                    currency: call.amount.currency.code, state: Self.sentState, source: .payrecon, actionID: call.actionID,
                    target: call.kind == .increment ? call.target : nil)
            ]
        }

        static let sentState = "Sent"
        /// A prepared modification PXP was asked about and, with lookups known to work, does not know.
        static let notMadeState = "Sent/NotFound"

        /// Whether a link is a modification payrecon prepared (its merchantTransactionId) whose outcome is not known:
        /// sent and never answered, or answered Pending.
        static func inDoubt(_ link: TransactionLink) -> Bool {
            guard link.source == .payrecon, link.actionID != nil, let state = link.state else { return false }
            return state == sentState || state.lowercased() == "sent/pending"
        }

        /// Modifications in doubt, looked up by their merchantTransactionId (contract: a modification whose outcome
        /// is not known is looked up on every check before planning). A 404 says "not made" only when lookups are
        /// known to find modifications: this process has seen one found, or a modification of the order whose
        /// outcome is known is found now. Otherwise the call stays in doubt and is never re-sent automatically.
        public func inquire(_ q: TransactionQuery) async -> ProviderOutcome<CallOutcomes> {
            let doubtful = q.links.filter(Self.inDoubt)
            let prepared = q.links.filter {
                $0.source == .payrecon && $0.actionID != nil && ($0.state ?? "").hasPrefix(Self.sentState + "/")
            }
            guard !doubtful.isEmpty || !prepared.isEmpty else { return .found(CallOutcomes()) }
            var out = CallOutcomes()
            Self.recordLearned(prepared, of: q, into: &out)
            guard let client, let merchant = q.merchant, let site = q.site, !merchant.isEmpty, !site.isEmpty else { return .found(out) }
            var unknown: [TransactionLink] = []
            for link in doubtful {
                switch await client.transaction(merchant: merchant, site: site, merchantTransactionId: link.externalID) {
                case .found(let answer):
                    guard let id = answer["systemTransactionId"]?.stringValue, let state = answer["state"]?.stringValue,
                        let parent = link.parentExternalID, let kind = link.kind.action
                    else {
                        return .permanent(.unreadable("PXP's answer for \(link.externalID) has no systemTransactionId/state"))
                    }
                    lookups.found()
                    let currency = link.currency.flatMap(Currency.init(code:))
                    let moved = currency.flatMap { Self.moved(kind, answer: answer, currency: $0) } ?? link.amount ?? 0
                    let modification = PXPModification(
                        systemTransactionId: id, parentSystemTransactionId: parent,
                        operation: kind.pxpOperation, amount: moved, state: state)
                    var made = link
                    made.externalID = id
                    made.state = state
                    made.amount = moved
                    var prepared = link
                    prepared.state = Self.sentState + "/" + state
                    out.links += [made, prepared]
                    out.calls[link.actionID!] =
                        modification.isAccepted
                        ? .made(providerRef: id)
                        : state.lowercased() == "pending" ? .stillPending : .refused("PXP answered state \(state)")
                case .notFound:
                    unknown.append(link)
                case let other:
                    return other.failure(as: CallOutcomes.self)!
                }
            }
            guard !unknown.isEmpty else { return .found(out) }
            if await lookupsFindModifications(q, client: client, merchant: merchant, site: site) {
                for link in unknown {
                    var cleared = link
                    cleared.state = Self.notMadeState
                    out.links.append(cleared)
                    out.calls[link.actionID!] = .notMade
                }
            }
            return .found(out)
        }

        /// The prepared calls earlier lookups already decided, into `out`; those still in doubt are left to be looked up.
        static func recordLearned(_ prepared: [TransactionLink], of q: TransactionQuery, into out: inout CallOutcomes) {
            // What earlier lookups (a check's, a webhook's) already learned of a call: made, refused, or not made.
            for link in prepared where !Self.inDoubt(link) {
                let state = String(link.state!.dropFirst(Self.sentState.count + 1))
                if link.state == Self.notMadeState { out.calls[link.actionID!] = .notMade; continue }
                guard let kind = link.kind.action else { continue }
                let made = q.links.first {
                    $0.actionID == link.actionID && $0.externalID != link.externalID && $0.parentExternalID == link.parentExternalID
                }
                let modification = PXPModification(
                    systemTransactionId: made?.externalID ?? link.externalID, parentSystemTransactionId: link.parentExternalID ?? "",
                    operation: kind.pxpOperation, amount: link.amount ?? 0, state: state)
                out.calls[link.actionID!] =
                    modification.isAccepted
                    ? .made(providerRef: modification.systemTransactionId)
                    : .refused("PXP answered state \(state)")
            }
        }

        /// Evidence that a 404 for a merchantTransactionId means PXP does not know it: a modification found that
        /// way before, in this process, or one of the order's modifications with a known outcome found now.
        func lookupsFindModifications(_ q: TransactionQuery, client: PXPClient, merchant: String, site: String) async -> Bool {
            if lookups.seen { return true }
            let known = q.links.filter { link in
                guard link.source == .payrecon, let state = link.state, state.hasPrefix(Self.sentState + "/") else { return false }
                return state != Self.notMadeState && state.lowercased() != "sent/pending"
            }
            // This order's modification with a known outcome, else the last one this process made, else one of
            // another order's the store knows made (any process).
            var probes = known.suffix(1).map { (merchant, site, $0.externalID) }
            if let last = lookups.lastMade { probes.append(last) }
            for e in q.evidence
            where e.link.source == .payrecon && (e.link.state ?? "").hasPrefix(Self.sentState + "/")
                && e.link.state != Self.notMadeState
            {
                if let m = e.merchant, let s = e.site, !m.isEmpty, !s.isEmpty { probes.append((m, s, e.link.externalID)) }
            }
            for probe in probes.prefix(3) {
                if case .found = await client.transaction(merchant: probe.0, site: probe.1, merchantTransactionId: probe.2) {
                    lookups.found()
                    return true
                }
            }
            return false
        }

        /// The amount a capture or refund modification moved, as PXP's answer states it (`amounts.transactionValue`, on
        /// a lookup's answer); nil when the answer states none. An increment's value is its new total or its delta
        /// depending on how PXP shows it (PXP-34), and a void moves nothing: both keep what was sent.
        static func moved(_ kind: ActionKind, answer: JSONValue, currency: Currency) -> Int64? {
            guard kind == .capture || kind == .refund, let value = answer["amounts"]?["transactionValue"], !value.isNull else { return nil }
            return try? PXPMapping.reader.amount(value, "amounts.transactionValue", exponent: currency.exponent)
        }

        /// A modification of the parent transaction, its merchantTransactionId derived from the idempotency key (so
        /// a re-send is the same transaction); the modification is returned as a link whatever PXP's state. When an
        /// earlier attempt prepared it (its outcome unknown: a timeout, a crash), PXP is asked for that
        /// merchantTransactionId first, and it is sent again only when PXP does not know it.
        public func execute(_ call: ActionCall) async -> ActionCallResult {
            guard let client else { return ActionCallResult(.permanent(.notSent(Self.notConfigured))) }
            guard let snapshot = call.snapshot, let parent = call.providerTarget ?? snapshot.aliases.first,
                let merchant = call.order.merchant, let site = call.order.site
            else {
                return ActionCallResult(.permanent(.notSent("no PXP transaction to modify: the order has not been fetched yet")))
            }
            let kind: PXPModificationKind =
                switch call.kind {
                case .capture: call.isFinal ? .finalCapture(amount: call.amount.minorUnits) : .capture(amount: call.amount.minorUnits)
                case .refund: .refund(amount: call.amount.minorUnits)
                case .increment: .incremental(newTotal: call.target)
                case .void: .void(originalValue: snapshot.value)
                }
            let mtid = PXPClient.merchantTransactionId(forIdempotencyKey: call.idempotencyKey)
            var result: ProviderOutcome<PXPModificationResult> = .notFound
            if call.links.contains(where: { $0.externalID == mtid }) {
                switch await client.transaction(merchant: merchant, site: site, merchantTransactionId: mtid) {
                case .found(let answer):
                    lookups.found()
                    guard let id = answer["systemTransactionId"]?.stringValue, let state = answer["state"]?.stringValue else {
                        return ActionCallResult(.permanent(.unreadable("PXP's answer for \(mtid) has no systemTransactionId/state")))
                    }
                    result = .found(PXPModificationResult(systemTransactionId: id, state: state, answer: answer))
                case .notFound: break  // never made: send it
                case let other: return ActionCallResult(other.failure(as: String.self)!)
                }
            }
            if case .notFound = result {
                result = await client.modify(
                    systemTransactionId: parent, kind, currency: call.amount.currency, merchant: merchant, site: site,
                    merchantTransactionId: mtid,
                    merchantTransactionDate: PXPClient.formatDate(unixSeconds: snapshot.createdAt ?? Int64(Date().timeIntervalSince1970)))
            }
            guard case .found(let r) = result else { return ActionCallResult(result.failure(as: String.self)!) }
            lookups.made(merchant: merchant, site: site, merchantTransactionId: mtid)
            return Self.modificationResult(r, of: call, parent: parent, kind: kind, mtid: mtid)
        }

        /// The call's result as PXP answered it, with the modification and its prepared link: made when accepted, in
        /// doubt while Pending, else declined.
        static func modificationResult(
            _ r: PXPModificationResult, of call: ActionCall, parent: String, kind: PXPModificationKind, mtid: String
        ) -> ActionCallResult {
            // What moved is what PXP's answer states: a lookup's answer carries the modification's value; a
            // modification's own answer carries none (developer.pxp.io's examples), so it moved what was just sent.
            let moved = Self.moved(call.kind, answer: r.answer, currency: call.amount.currency) ?? call.amount.minorUnits
            let modification = r.modification(parentSystemTransactionId: parent, operation: kind.operation, amount: moved)
            let link = TransactionLink(
                externalID: r.systemTransactionId, parentExternalID: parent, orderID: call.order.orderID,
                kind: .init(call.kind), amount: moved, currency: call.amount.currency.code,
                state: r.state, source: .payrecon, actionID: call.actionID,
                target: call.kind == .increment ? call.target : nil)
            // The prepared link takes PXP's state, so it is never counted apart from the modification itself.
            var prepared = link
            prepared.externalID = mtid
            prepared.state = Self.sentState + "/" + r.state
            guard modification.isAccepted else {
                if r.state.lowercased() == "pending" {
                    // Not decided yet: the action stays in doubt, and every check looks the modification up again.
                    return ActionCallResult(
                        .transient(
                            reason: "PXP answered state Pending; looked up again on every check",
                            retryAfter: nil), links: [link, prepared])
                }
                return ActionCallResult(.permanent(.declined("PXP answered state \(r.state)")), links: [link, prepared])
            }
            return ActionCallResult(.found(r.systemTransactionId), links: [link, prepared])
        }
    }
}

extension ActionKind {
    /// The PXP operation that carries out this action.
    public var pxpOperation: PXPOperation {
        switch self {
        case .capture: .capture
        case .void: .void
        case .refund: .refund
        case .increment: .incremental
        }
    }
}

extension PXPModification {
    /// A stored link as a modification of its parent; nil for an alias or a kind PXP does not modify with.
    public init?(link: TransactionLink) {
        guard let parent = link.parentExternalID, let kind = link.kind.action, let amount = link.amount else { return nil }
        self.init(
            systemTransactionId: link.externalID, parentSystemTransactionId: parent, operation: kind.pxpOperation,
            amount: amount, state: link.state ?? "", newTotal: kind == .increment ? link.target : nil)
    }
}

/// Whether PXP was seen to find a modification by its merchantTransactionId (`PXPProvider.API.inquire`).
final class LookupEvidence: Sendable {
    private struct State { var seen = false; var lastMade: (String, String, String)? }
    private let state = Mutex(State())
    var seen: Bool { state.withLock { $0.seen } }
    /// The last modification this process made with a known outcome (merchant, site, merchantTransactionId): what
    /// to look up to learn whether lookups find modifications.
    var lastMade: (String, String, String)? { state.withLock { $0.lastMade } }
    func found() { state.withLock { $0.seen = true } }
    func made(merchant: String, site: String, merchantTransactionId: String) {
        state.withLock { $0.lastMade = (merchant, site, merchantTransactionId) }
    }
}
