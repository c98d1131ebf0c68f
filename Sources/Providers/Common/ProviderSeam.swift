import Crypto
import Foundation
import Reconciliation
import TextFormats

// The one seam between payrecon and a payment provider. Everything a provider is lives in its own folder under
// Sources/Providers and reaches the other rooms only through these types: a `ProviderDefinition` (its facts and how
// to build its two sides from the environment), its `ProviderWebhook` (verify, then read the dedupe key) and its
// `ProviderAPI` (what a stored event names, a transaction's snapshot, one action). The receiver, the worker, the
// store and the planner never ask which provider this is; they ask the provider.

/// A provider's facts and how to build its sides. Each provider folder declares one; `ProviderRegistry` lists them.
public struct ProviderDefinition: Sendable {
    public let provider: Provider
    public let traits: ProviderTraits
    /// The variable holding its webhook secret (the receiver's 503 and `payrecon verify --key` name it).
    public let webhookSecretVariable: String
    /// What to set to reach its API, for errors and the start-up warning ("PXP_CLIENT_ID, PXP_TOKEN_ID and …").
    public let apiVariables: String
    /// Its webhook side, or nil when its secret is not set (its endpoint then answers 503 provider_not_configured).
    public let webhook: @Sendable (Environment) throws(ConfigurationError) -> (any ProviderWebhook)?
    /// Its API side over `transport`. Always built: without credentials every call is a permanent failure that
    /// names `apiVariables`, while what needs no call (reading a stored event) still works.
    public let api: @Sendable (Environment, any ProviderTransport) throws(ConfigurationError) -> any ProviderAPI
    /// The request headers its webhook verification or dedupe reads: stored with a delivery as sent (any other header
    /// is stored by name with the value `[redacted]`, since proxies add credentials under many names).
    public let webhookHeaders: [String]
    /// The header naming the provider's own id of a delivery, for log lines (nil: the id is only in the body).
    public let webhookDeliveryIDHeader: String?
    /// Reads its settlement report files (`payrecon settlement import`), or nil when it publishes none payrecon reads.
    public let settlementReports: SettlementReportReader?
    /// What `payrecon backfill` reads of it, in words ("Transaction Search and the webhook events list"), or nil
    /// when it publishes no list payrecon reads.
    public let backfillReads: String?

    public init(
        provider: Provider, traits: ProviderTraits, webhookSecretVariable: String, apiVariables: String,
        webhookHeaders: [String], webhookDeliveryIDHeader: String?,
        webhook: @escaping @Sendable (Environment) throws(ConfigurationError) -> (any ProviderWebhook)?,
        api: @escaping @Sendable (Environment, any ProviderTransport) throws(ConfigurationError) -> any ProviderAPI,
        settlementReports: SettlementReportReader? = nil, backfillReads: String? = nil
    ) {
        self.provider = provider; self.traits = traits; self.webhookSecretVariable = webhookSecretVariable
        self.apiVariables = apiVariables; self.webhookHeaders = webhookHeaders
        self.webhookDeliveryIDHeader = webhookDeliveryIDHeader; self.webhook = webhook; self.api = api
        self.settlementReports = settlementReports
        self.backfillReads = backfillReads
    }
}

/// A provider's settlement file format: reads a file (named, in chunks), handing its lines over in batches, and
/// says what the file says of itself; throws `SettlementReportError` when a row cannot be read.
public struct SettlementReportReader: Sendable {
    /// What the files are, for help and errors ("PayPal Settlement (STL) and Transaction Detail (TRR) reports").
    public let describes: String
    public let read:
        @Sendable (_ name: String, _ chunks: @escaping () -> [UInt8]?, _ each: ([SettlementLine]) throws -> Void) throws
            -> SettlementReportSummary
    public init(
        describes: String,
        read:
            @escaping @Sendable (String, @escaping () -> [UInt8]?, ([SettlementLine]) throws -> Void) throws
            -> SettlementReportSummary
    ) {
        self.describes = describes; self.read = read
    }
}

// MARK: - The webhook side

/// Verifies a delivery on its raw bytes and only then reads it (nothing unauthenticated is interpreted).
public protocol ProviderWebhook: Sendable {
    /// Verifies and reads the delivery; may wait on the network (PayPal's certificate fetch).
    func accept(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent
    /// As `accept`, never waiting: nil when something must be fetched first. The receiver calls this on the thread
    /// that serves requests, and on nil calls `prepare`, then this again — so no thread, least of all one serving
    /// other deliveries, ever waits on a fetch a sender asked for.
    func acceptWithoutWaiting(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent?
    /// Fetches what `acceptWithoutWaiting` lacked, without blocking; `then` runs (any thread) once it can decide.
    /// `sender`: the address the delivery came from (a provider that keeps per-sender budgets groups it itself).
    func prepare(headers: Headers, sender: String?, then: @escaping @Sendable () -> Void)
    /// Restores what verification keeps across restarts (PayPal's validated signing certificates) from `store`, and
    /// saves there what it learns from now on.
    func keep(in store: any WebhookMaterialStore)
    /// A delivery from `sender` (its address) passed `accept`: a sender of genuine deliveries.
    func verified(from sender: String)
}

/// Where a provider's webhook side keeps what verifying deliveries taught it (PayPal's validated signing
/// certificates), so a restart starts warm. The receiver's database in production.
public protocol WebhookMaterialStore: Sendable {
    /// What was saved for `provider` and is still to be kept, newest first.
    func load(_ provider: Provider) -> [(key: String, value: [UInt8])]
    /// Saves one item until `keepUntil`. Called on a thread that serves requests: must not block.
    func save(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date)
}

extension ProviderWebhook {
    public func keep(in store: any WebhookMaterialStore) {}
    public func verified(from sender: String) {}
    /// Providers whose verification needs nothing from the network (HMAC) decide at once.
    public func acceptWithoutWaiting(headers: Headers, body: [UInt8], now: Date) throws(WebhookRejection) -> AcceptedEvent? {
        try accept(headers: headers, body: body, now: now)
    }
    public func prepare(headers: Headers, sender: String?, then: @escaping @Sendable () -> Void) { then() }
}

/// What the receiver stores with a verified delivery.
public struct AcceptedEvent: Sendable, Hashable {
    /// Redeliveries share it.
    public var dedupeKey: String
    public var eventType: String?
    /// The signed transmission's own id when the signature covers it but not the whole body (PayPal signs a CRC32
    /// of the body): the store refuses a second, different body under the same transmission id.
    public var transmissionID: String?
    public init(dedupeKey: String, eventType: String?, transmissionID: String? = nil) {
        self.dedupeKey = dedupeKey; self.eventType = eventType; self.transmissionID = transmissionID
    }
}

// MARK: - The API side

/// A stored delivery, as the worker hands it to its provider.
public struct StoredEvent: Sendable {
    public var id: Int64
    public var headers: Headers
    public var body: [UInt8]
    public init(id: Int64, headers: Headers, body: [UInt8]) { self.id = id; self.headers = headers; self.body = body }
}

/// What a stored delivery is about: the transactions it names, or why it names none (the delivery then ends
/// `ignored` with that reason).
public enum EventContent: Sendable, Hashable {
    case references([EventReference])
    /// It names no payment: `VAULT.PAYMENT-TOKEN.CREATED names no payment`.
    case ignored(String)
}

/// One transaction an event names. The worker looks for the orders holding it and re-checks them, or reports it as
/// `unknown_order` when the provider has it and no order does.
public struct EventReference: Sendable, Hashable {
    /// What an order's transaction_ref holds for it (PXP merchantTransactionId, PayPal order id); nil when the event
    /// names the transaction only by `alias`.
    public var transactionRef: String?
    /// Other values an order's transaction_ref may hold for the same payment (a PayPal sale's billing agreement or
    /// parent payment), tried in order after `transactionRef`.
    public var alternatives: [String]
    /// Another id of the transaction that stored links may know (PXP systemTransactionId); looked up when no order
    /// holds `transactionRef`.
    public var alias: String?
    /// Merchant and site the event names, to fetch a transaction no order holds.
    public var merchant: String?
    public var site: String?
    /// Links the event teaches (a PayPal sale, a dispute naming a capture, a sale's refund): recorded for every order
    /// found (their `orderID` is filled in then), so every later check of it, the sweep's too, fetches them.
    public var learned: [TransactionLink]
    /// When the payment was created, as the provider's API answer says (unix seconds; nil: not read): of the orders of
    /// a subscription with billing periods, the one whose period holds it is the payment's.
    public var occurredAt: Int64?
    /// The payment's amount, as the provider's API answer says: what an `unknown_order` for it names.
    public var value: Money?

    public init(
        transactionRef: String?, alternatives: [String] = [], alias: String? = nil, merchant: String? = nil, site: String? = nil,
        learned: [TransactionLink] = [], occurredAt: Int64? = nil, value: Money? = nil
    ) {
        self.transactionRef = transactionRef; self.alternatives = alternatives; self.alias = alias
        self.merchant = merchant; self.site = site; self.learned = learned; self.occurredAt = occurredAt; self.value = value
    }
}

/// What the provider says of a transaction a webhook named and no order holds.
public enum TransactionLookup: Sendable {
    /// A transaction of its own: `unknown_order` unless it turns out to be an order's.
    indirect case transaction(Snapshot)
    /// A modification of another transaction (a PXP refund or capture made in the portal), named by `parent` (an id
    /// stored links know, PXP's systemTransactionId): linked to the parent's order and that order re-checked.
    case modification(parent: String, link: TransactionLink)
    /// Not a payment payrecon reconciles (a PXP Verification): the delivery ends ignored with this reason.
    case ignored(String)
    /// A transaction payrecon cannot reconcile as an order and cannot link: `unknown_order` with this detail.
    case unreconcilable(UnknownTransaction)
}

/// A transaction that no order holds, as `unknown_order` reports it.
public struct UnknownTransaction: Sendable, Hashable {
    public var transactionRef: String
    public var value: Money?
    public var state: String
    public var detail: String
    public init(transactionRef: String, value: Money?, state: String, detail: String) {
        self.transactionRef = transactionRef; self.value = value; self.state = state; self.detail = detail
    }
}

/// What to fetch: an order's transaction (or one a webhook named), with what payrecon already knows of it.
public struct TransactionQuery: Sendable {
    public var transactionRef: String
    public var merchant: String?
    public var site: String?
    /// Transactions linked to this one (modifications payrecon made or learned of).
    public var links: [TransactionLink]
    /// For `inquire`: links of other orders' calls that succeeded, with their order's merchant and site — what a
    /// provider may look up to learn whether its lookups can be trusted (PXP: whether it finds modifications by
    /// merchantTransactionId), when this order has none.
    public var evidence: [Evidence]
    /// For `inquire`: the calls in doubt the executor asks about (besides those the links show).
    public var callsInDoubt: [CallInDoubt]
    /// The order's billing period (a subscription's renewal): of the agreement's payments, only those the provider's
    /// answer says were created within it are the order's.
    public var period: BillingPeriod?
    /// The order's currency: what a renewal not charged yet is counted in (nothing, in it).
    public var currency: Currency?
    public init(
        transactionRef: String, merchant: String?, site: String?, links: [TransactionLink] = [], evidence: [Evidence] = [],
        callsInDoubt: [CallInDoubt] = [], period: BillingPeriod? = nil, currency: Currency? = nil
    ) {
        self.transactionRef = transactionRef; self.merchant = merchant; self.site = site; self.links = links; self.evidence = evidence
        self.callsInDoubt = callsInDoubt; self.period = period; self.currency = currency
    }

    public struct Evidence: Sendable {
        public var link: TransactionLink
        public var merchant: String?
        public var site: String?
        public init(link: TransactionLink, merchant: String?, site: String?) {
            self.link = link; self.merchant = merchant; self.site = site
        }
    }
}

/// One planned action to execute, with the order it belongs to and the latest stored snapshot.
public struct ActionCall: Sendable {
    public var actionID: Int64
    public var kind: ActionKind
    /// The operation's own amount.
    public var amount: Money
    /// The cumulative total it brings the transaction to (minor units; 0 for a void).
    public var target: Int64
    /// The provider's id to act on, as planned.
    public var providerTarget: String?
    public var idempotencyKey: String
    public var order: Order
    /// The transaction as fetched just before the call.
    public var snapshot: Snapshot?
    /// A capture that brings C to the order amount: it releases the rest of the authorisation (PayPal
    /// `final_capture`, PXP Final capture, Paypercut `final_capture`).
    public var isFinal: Bool
    /// The transactions linked to the order before this attempt (what earlier attempts prepared or made).
    public var links: [TransactionLink]

    public init(
        actionID: Int64, kind: ActionKind, amount: Money, target: Int64, providerTarget: String?, idempotencyKey: String,
        order: Order, snapshot: Snapshot?, isFinal: Bool = false, links: [TransactionLink] = []
    ) {
        self.actionID = actionID; self.kind = kind; self.amount = amount; self.target = target
        self.providerTarget = providerTarget; self.idempotencyKey = idempotencyKey; self.order = order; self.snapshot = snapshot
        self.isFinal = isFinal; self.links = links
    }

    /// The idempotency key as a provider taking at most `limit` characters gets it: itself, or its SHA-256 in hex
    /// when longer.
    public func idempotencyKey(limit: Int) -> String {
        idempotencyKey.utf8.count <= limit ? idempotencyKey : SHA256.hex(Array(idempotencyKey.utf8))
    }
}

/// What an action's call came to: the provider's reference for what it did, and the transactions it created, which
/// the executor records before the outcome (so later checks count them).
public struct ActionCallResult: Sendable {
    public var outcome: ProviderOutcome<String>
    public var links: [TransactionLink]
    /// The provider refused the call because an earlier request under its key reached it with another body
    /// (Paypercut's 409 `idempotency_error`): proof the earlier one arrived, so a call in doubt stays in doubt.
    public var keyInUse: Bool
    public init(_ outcome: ProviderOutcome<String>, links: [TransactionLink] = [], keyInUse: Bool = false) {
        self.outcome = outcome; self.links = links; self.keyInUse = keyInUse
    }
}

/// A call payrecon made whose outcome it does not know, as `inquire` is asked about it: the provider may find what it
/// did by the key it carried (PayPal's `custom_id` on a refund).
public struct CallInDoubt: Sendable, Equatable {
    public var actionID: Int64
    public var kind: ActionKind
    /// The key as payrecon holds it (each provider sends it as it takes it: `ActionCall.idempotencyKey(limit:)`).
    public var idempotencyKey: String
    public var amount: Int64
    public var providerTarget: String?
    /// The order, and the order's transaction it acted on.
    public var orderID: String
    public var transactionRef: String
    public init(
        actionID: Int64, kind: ActionKind, idempotencyKey: String, amount: Int64, providerTarget: String?, orderID: String,
        transactionRef: String
    ) {
        self.actionID = actionID; self.kind = kind; self.idempotencyKey = idempotencyKey; self.amount = amount;
        self.providerTarget = providerTarget
        self.orderID = orderID; self.transactionRef = transactionRef
    }

    /// The key as a provider taking at most `limit` characters got it.
    public func idempotencyKey(limit: Int) -> String {
        idempotencyKey.utf8.count <= limit ? idempotencyKey : SHA256.hex(Array(idempotencyKey.utf8))
    }
}

/// What the provider says now of a call payrecon made and whose outcome it does not know (a timeout, a cut
/// connection, a crash between the call and its record).
public enum CallOutcome: Sendable, Equatable {
    /// It was made; the provider's reference for what it did.
    case made(providerRef: String)
    /// It was made and refused (the provider's word).
    case refused(String)
    /// The provider knows it and has not decided yet.
    case stillPending
    /// The provider does not know it, and its answer can be trusted to say so: it may be sent again.
    case notMade
}

/// Calls in doubt, asked about: links to record (what the provider now says of them), and the outcome of each call
/// the provider could tell, by action id. A call it could not tell about is absent.
public struct CallOutcomes: Sendable {
    public var links: [TransactionLink]
    public var calls: [Int64: CallOutcome]
    public init(links: [TransactionLink] = [], calls: [Int64: CallOutcome] = [:]) { self.links = links; self.calls = calls }
}

/// A provider's API, as the worker, the sweep and the executor use it.
public protocol ProviderAPI: Sendable {
    /// Whether the provider documents that a repeated idempotency key is answered with the first result, so an
    /// action whose outcome is unknown may be sent again with the same key (PayPal-Request-Id, Paypercut's
    /// Idempotency-Key). Where it is not documented (PXP's merchantTransactionId), a call in doubt is sent again
    /// only when `inquire` says the provider does not know it.
    var deduplicatesIdempotencyKeys: Bool { get }
    /// Whether a transaction this provider answers 404 for may be an attempt it forgot because it was never
    /// approved (PayPal orders expire after about 3 hours), rather than a missing payment.
    var unapprovedAttemptsExpire: Bool { get }
    /// Asks the provider about the calls in doubt among `transaction.links` (every check does, before planning, and
    /// the executor before it decides to re-send). Nothing to ask: `.found(CallOutcomes())`, no call made.
    func inquire(_ transaction: TransactionQuery) async -> ProviderOutcome<CallOutcomes>
    /// Whether credentials were given (without them every call fails permanently, naming what to set).
    var isConfigured: Bool { get }
    /// The transactions a stored delivery names (a webhook is a hint: the worker re-fetches each), or why it names
    /// none. A body that no longer parses is permanent.
    func references(in event: StoredEvent) async -> ProviderOutcome<EventContent>
    /// A transaction a webhook named that no order holds (by default its snapshot).
    func lookup(_ transaction: TransactionQuery) async -> ProviderOutcome<TransactionLookup>
    /// The provider's answer for one transaction, normalized. An answer that cannot be read is
    /// permanent, naming the field.
    func snapshot(of transaction: TransactionQuery) async -> ProviderOutcome<Snapshot>
    /// Links to record before the call is sent (a PXP modification's merchantTransactionId), so the provider's
    /// webhook about it, which may arrive before the answer, finds its order. Nothing is sent when they cannot be
    /// recorded.
    func prepare(_ call: ActionCall) -> [TransactionLink]
    /// Executes one action, its idempotency key sent as the provider takes it.
    func execute(_ call: ActionCall) async -> ActionCallResult
    /// `payrecon doctor`'s checks of this provider, called only when it `isConfigured`: that the credentials work
    /// (an authenticated read of something that does not exist answers 404, not 401 or 403) and that the permissions
    /// payrecon needs are granted. Reads only: nothing here may move money. One `DoctorCheck` per line.
    func doctor(_ context: DoctorContext) async -> [DoctorCheck]
    /// The provider's own list of transactions, for `payrecon backfill` (nil: it publishes none payrecon reads).
    var transactionSearch: (any TransactionSearching)? { get }
    /// The provider's own list of the webhook events it made, for `payrecon backfill` (nil: none payrecon reads).
    var eventList: (any EventListing)? { get }
}

extension ProviderAPI {
    public func prepare(_ call: ActionCall) -> [TransactionLink] { [] }

    public var transactionSearch: (any TransactionSearching)? { nil }

    public var eventList: (any EventListing)? { nil }

    public func inquire(_ transaction: TransactionQuery) async -> ProviderOutcome<CallOutcomes> { .found(CallOutcomes()) }

    public var unapprovedAttemptsExpire: Bool { false }

    public func lookup(_ transaction: TransactionQuery) async -> ProviderOutcome<TransactionLookup> {
        await snapshot(of: transaction).map(TransactionLookup.transaction)
    }

    /// A provider without checks of its own adds no line (its folder should say how to prove its credentials).
    public func doctor(_ context: DoctorContext) async -> [DoctorCheck] { [] }
}

extension ProviderOutcome where T == JSONValue {
    /// A mapping error is the provider saying something we cannot read: permanent, with the field named.
    public func mapped(_ map: (JSONValue) throws -> Snapshot) -> ProviderOutcome<Snapshot> {
        switch self {
        case .found(let json):
            do { return .found(try map(json)) } catch { return .permanent(.unreadable("unreadable answer: \(error)")) }
        case .notFound: return .notFound
        case .transient(let t): return .transient(t)
        case .permanent(let failure): return .permanent(failure)
        }
    }
}

// MARK: - The provider's own records (backfill)

/// One transaction a provider's own records list, as `payrecon backfill` reads it.
public struct FoundTransaction: Sendable, Hashable {
    /// The provider's id of it (PayPal: a capture, refund or sale id).
    public var id: String
    public var eventCode: String?
    /// The transaction it belongs to (a refund's capture), and what kind of id that is.
    public var referenceID: String?
    public var referenceType: String?
    /// What the merchant sent with it: an order id, often (PayPal `invoice_id`, `custom_field`).
    public var invoiceID: String?
    public var customField: String?
    /// Unix seconds it was made.
    public var at: Int64?
    /// Why the row could not be read (then `id` names where it is in the answer): reported, not checked, and its
    /// window is not held open for it (reading it again would fail again).
    public var unreadable: String?
    /// The account it was listed as (Paypercut's `Paypercut-Account`), where the provider lists per account.
    public var account: String?
    /// Its status as listed (PayPal's `transaction_status`: S, V, P, D; Paypercut's payment `status`): a row listed
    /// again with another status (a pending payment completed, a payment refunded since) is news to a re-read.
    public var status: String?
    public init(
        id: String, eventCode: String? = nil, referenceID: String? = nil, referenceType: String? = nil, invoiceID: String? = nil,
        customField: String? = nil, at: Int64? = nil, unreadable: String? = nil, account: String? = nil, status: String? = nil
    ) {
        self.id = id; self.eventCode = eventCode; self.referenceID = referenceID; self.referenceType = referenceType
        self.invoiceID = invoiceID; self.customField = customField; self.at = at; self.unreadable = unreadable; self.account = account
        self.status = status
    }
}

/// One page of a search.
public enum TransactionSearchPage: Sendable, Equatable {
    /// The transactions on one page; `next`: the cursor of the page after it (nil on the last); `totalPages`: how many
    /// pages the provider counts for the window, where it says (PayPal); `lastRefreshed`: the provider's data reaches
    /// that time (unix seconds).
    case items([FoundTransaction], next: String?, totalPages: Int?, lastRefreshed: Int64?)
    /// The window holds more than the provider lists at once: search halves of it.
    case tooLarge
    /// The window starts later than the provider's data reaches yet: nothing to list.
    case notYetAvailable
}

/// A provider's search of its own records, over windows of time.
public protocol TransactionSearching: Sendable {
    /// The longest window one search may cover.
    var maxWindowSeconds: Int64 { get }
    /// How long a transaction takes to appear in the search: windows end at least this long before now.
    var listingLagSeconds: Int64 { get }
    /// The most pages one window may take before it is left for a later run as not adding up.
    var maxPagesPerWindow: Int { get }
    /// The transactions made in [from, to): the first page for a nil `cursor`, else the page a `next` named.
    func search(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<TransactionSearchPage>
    /// What payrecon must check for a found transaction no order is known to hold: the references a webhook naming
    /// it would carry (PayPal: a capture leads to its order).
    func references(of found: FoundTransaction) async -> ProviderOutcome<[EventReference]>
    /// Whether a listed row can be an order's at all (PayPal: a payment or the money back of one; not a withdrawal,
    /// a hold or a conversion): the others are skipped without a request.
    func isOrders(_ found: FoundTransaction) -> Bool
    /// The id, beside the row's own, by which an order payrecon holds may know it (PayPal: the reference when it names
    /// a transaction or an order; Paypercut: a payment's or refund's payment intent).
    func matchReference(of found: FoundTransaction) -> String?
    /// What to do when the provider refuses the search (HTTP 403): the permission to ask for, and where.
    var permissionHint: String { get }
    /// The same search as `account` (nil: the key's own), where the provider lists per account (Paypercut); itself
    /// otherwise.
    func scoped(to account: String?) -> any TransactionSearching
    /// Whether it lists per account: then backfill reads the key's own account and each account payrecon's orders name
    /// (their merchants), each with windows of its own.
    var listsPerAccount: Bool { get }
}

extension TransactionSearching {
    public func scoped(to account: String?) -> any TransactionSearching { self }
    public var listsPerAccount: Bool { false }
}

// MARK: - The provider's own list of its webhook events (backfill)

/// One event a provider's list of its webhook events holds, as a delivery of it would carry it.
public struct ListedEvent: Sendable, Equatable {
    /// The event's id: what a delivery of it is deduplicated on.
    public var id: String
    public var eventType: String?
    /// The event as the provider lists it: the body a delivery of it would carry.
    public var body: [UInt8]
    /// Unix seconds it was created.
    public var at: Int64?
    /// Why the event cannot be stored (then `id` names where it is in the answer): reported, not stored.
    public var unreadable: String?
    public init(id: String, eventType: String?, body: [UInt8], at: Int64?, unreadable: String? = nil) {
        self.id = id; self.eventType = eventType; self.body = body; self.at = at; self.unreadable = unreadable
    }
}

/// One page of a provider's event list: its events, and the cursor of the page after it (nil on the last).
public struct EventListPage: Sendable, Equatable {
    public var events: [ListedEvent]
    public var next: String?
    public init(events: [ListedEvent], next: String?) { self.events = events; self.next = next }
}

/// A provider's list of the webhook events it made, over windows of time: what a lost delivery would have carried.
public protocol EventListing: Sendable {
    var maxWindowSeconds: Int64 { get }
    /// Windows end at least this long before now.
    var listingLagSeconds: Int64 { get }
    var maxPagesPerWindow: Int { get }
    /// How far back the provider keeps events (nil: no limit known): older windows are not asked for.
    var historySeconds: Int64? { get }
    /// The events made in [from, to): the first page for a nil `cursor`, else the page a `next` named.
    func events(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<EventListPage>
    /// The list's name and the permission it needs, for messages.
    var name: String { get }
}
