import Foundation
import Observability
import Providers
import Reconciliation

/// The receiver's side of `WebhookMaterialStore`: read at start, saved on a thread of its own (a save is asked for on
/// the thread verifying a delivery, which must not wait on the database).
final class ReceiverMaterialStore: WebhookMaterialStore {
    let storage: any ReceiverStorage
    private let thread = DedicatedThread(name: "webhook-material")
    private let logger: Logger
    init(storage: any ReceiverStorage, logger: Logger) { self.storage = storage; self.logger = logger }

    func load(_ provider: Provider) -> [(key: String, value: [UInt8])] {
        do { return try storage.loadWebhookMaterial(provider) } catch {
            logger.warning(
                "could not read what webhook verification kept; starting cold",
                ["provider": provider.rawValue, "error": String(describing: error)])
            return []
        }
    }

    func save(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date) {
        thread.after(.zero) { [storage, logger] in
            do { try storage.saveWebhookMaterial(provider, key: key, value: value, keepUntil: keepUntil) } catch {
                logger.warning(
                    "could not keep webhook verification material; it is fetched again after a restart",
                    ["provider": provider.rawValue, "error": String(describing: error)])
            }
        }
    }
}
