import Foundation
import Providers
import Reconciliation
import Synchronization

/// The provider APIs the worker re-fetches from and acts through (a webhook is a hint: only these answers are
/// compared). One per registered provider; each is asked, never switched on.
public struct ProviderGateway: Sendable {
    /// Shared by every copy, so `reload` reaches the checker and the executor alike.
    private final class Table: Sendable {
        let apis: Mutex<[Provider: any ProviderAPI]>
        init(_ apis: [Provider: any ProviderAPI]) { self.apis = Mutex(apis) }
    }
    private let table: Table
    var apis: [Provider: any ProviderAPI] { table.apis.withLock { $0 } }

    /// Every call is counted and timed (`WorkerMetrics`).
    public init(_ configured: ConfiguredProviders) {
        table = Table(Self.metered(configured))
    }

    private static func metered(_ configured: ConfiguredProviders) -> [Provider: any ProviderAPI] {
        Dictionary(
            uniqueKeysWithValues: configured.apis.map { ($0.key, MeteredProviderAPI(provider: $0.key, base: $0.value) as any ProviderAPI) })
    }

    /// Puts `configured` in place (SIGHUP: the API secrets re-read). A call under way finishes with the API it
    /// started with; the next one uses the new.
    public func reload(_ configured: ConfiguredProviders) {
        let new = Self.metered(configured)
        table.apis.withLock { $0 = new }
    }

    /// Whether any provider has credentials (the worker warns at start when none has).
    public var anyConfigured: Bool { apis.values.contains { $0.isConfigured } }

    public subscript(_ provider: Provider) -> any ProviderAPI {
        guard let api = table.apis.withLock({ $0[provider] }) else {
            preconditionFailure("\(provider.rawValue) has no line in ProviderRegistry.definitions")
        }
        return api
    }
}
