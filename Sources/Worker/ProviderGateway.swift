import Foundation
import Providers
import Reconciliation

/// The provider APIs the worker re-fetches from and acts through (a webhook is a hint: only these answers are
/// compared). One per registered provider; each is asked, never switched on.
public struct ProviderGateway: Sendable {
    let apis: [Provider: any ProviderAPI]

    /// Every call is counted and timed (`WorkerMetrics`).
    public init(_ configured: ConfiguredProviders) {
        apis = Dictionary(uniqueKeysWithValues: configured.apis.map { ($0.key, MeteredProviderAPI(provider: $0.key, base: $0.value) as any ProviderAPI) })
    }

    /// Whether any provider has credentials (the worker warns at start when none has).
    public var anyConfigured: Bool { apis.values.contains { $0.isConfigured } }

    public subscript(_ provider: Provider) -> any ProviderAPI {
        guard let api = apis[provider] else { preconditionFailure("\(provider.rawValue) has no line in ProviderRegistry.definitions") }
        return api
    }
}
