import Foundation
import Reconciliation

/// Every provider payrecon knows: one line each. Adding a provider is a folder under Sources/Providers, a paysim
/// book and a line here (docs/ARCHITECTURE.md, "Adding a provider").
public enum ProviderRegistry {
    public static let definitions: [ProviderDefinition] = [
        PXPProvider.definition,
        PayPalProvider.definition,
        PaypercutProvider.definition
    ]

    private static let byProvider: [Provider: ProviderDefinition] =
        Dictionary(uniqueKeysWithValues: definitions.map { ($0.provider, $0) })

    /// The definition of `provider` (every case of `Provider` has one; a test holds the registry to that).
    public static func definition(_ provider: Provider) -> ProviderDefinition {
        guard let d = byProvider[provider] else { preconditionFailure("\(provider.rawValue) has no line in ProviderRegistry.definitions") }
        return d
    }

    /// What the order file and the planner need to know of each provider.
    @Sendable public static func traits(_ provider: Provider) -> ProviderTraits { definition(provider).traits }
}

/// The providers as configured from the environment: what `serve`, `work`, `reconcile` and `actions execute` use.
public struct ConfiguredProviders: Sendable {
    /// Every provider's API (one without credentials fails each call, naming what to set).
    public let apis: [Provider: any ProviderAPI]
    /// The providers whose webhook secret is set.
    public let webhooks: [Provider: any ProviderWebhook]

    /// `apis` as given; a registered provider left out gets its API without credentials (each call says what to set).
    public init(apis: [Provider: any ProviderAPI], webhooks: [Provider: any ProviderWebhook] = [:]) {
        var all = apis
        for d in ProviderRegistry.definitions where all[d.provider] == nil {
            all[d.provider] = try? d.api(Environment([:]), NoTransport())
        }
        self.apis = all; self.webhooks = webhooks
    }

    /// Builds every registered provider's API over `transport` and, with `webhooks`, its webhook side. `limiters` are
    /// the process's (kept by whoever builds the APIs again on SIGHUP, so a reload does not reset them).
    public init(
        environment: Environment, transport: any ProviderTransport, webhooks: Bool = false,
        limiters: RateLimiters = RateLimiters()
    ) throws(ConfigurationError) {
        var apis: [Provider: any ProviderAPI] = [:]
        var hooks: [Provider: any ProviderWebhook] = [:]
        for d in ProviderRegistry.definitions {
            // `<PROVIDER>_MAX_RPS`: this provider's requests go through a limiter of their own.
            // Every request counted by what came back (`payrecon_provider_http_requests_total`).
            let counted = CountedTransport(base: transport, provider: d.provider)
            let limited: any ProviderTransport =
                try RateLimitedTransport.limit(for: d.provider, in: environment)
                .map { RateLimitedTransport(base: counted, limiter: limiters.limiter(for: d.provider, perSecond: $0)) } ?? counted
            apis[d.provider] = try d.api(environment, limited)
            if webhooks, let hook = try d.webhook(environment) { hooks[d.provider] = hook }
        }
        self.init(apis: apis, webhooks: hooks)
    }

    /// Only the webhook sides (the receiver calls no provider API).
    public static func webhooks(environment: Environment) throws(ConfigurationError) -> [Provider: any ProviderWebhook] {
        var hooks: [Provider: any ProviderWebhook] = [:]
        for d in ProviderRegistry.definitions { if let hook = try d.webhook(environment) { hooks[d.provider] = hook } }
        return hooks
    }
}

/// The transport of an API built without credentials: it never sends.
private struct NoTransport: ProviderTransport {
    struct NotConfigured: Error, CustomStringConvertible { var description: String { "no provider credentials: nothing is sent" } }
    func send(_ request: ProviderRequest) async throws -> ProviderResponse { throw NotConfigured() }
}
