import Foundation
import Observability
import Providers
import Receiver
import Reconciliation

/// The receiver's webhook sides from the environment: one per registered provider whose webhook secret is set; the
/// others are named in a warning and answer 503 provider_not_configured.
public func configuredWebhooks(_ env: Environment, logger: Logger) throws(ConfigurationError) -> [Provider: any ProviderWebhook] {
    let webhooks = try ConfiguredProviders.webhooks(environment: env)
    for d in ProviderRegistry.definitions where webhooks[d.provider] == nil {
        logger.warning(
            "webhooks disabled for a provider: its secret is not set", ["provider": d.provider.rawValue, "set": d.webhookSecretVariable])
    }
    return webhooks
}
