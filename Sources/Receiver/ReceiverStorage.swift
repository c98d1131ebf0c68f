import Foundation
import Postgres
import Reconciliation
import Store

/// Where the receiver stores what it accepts and records what it rejects. PostgreSQL in production
/// (`PostgresReceiverStorage`); a test can hand the receiver an in-memory store and run it in-process without a
/// database.
public protocol ReceiverStorage: Sendable {
    /// Commits `deliveries` (a redelivery counted on the stored row) in one transaction; one
    /// `StoredDelivery` per delivery, in order. Only after this returns may a delivery be answered 200.
    func commit(_ deliveries: [NewDelivery]) throws -> [StoredDelivery]
    /// Records rejection counts and samples, apart from deliveries (the rejection lane); at most 20 samples per
    /// (provider, reason, hour) are kept.
    func recordRejections(_ counts: [RejectionCount], samples: [Rejection]) throws
    /// Whether the store takes writes now (`/readyz`).
    func isReady() -> Bool
    /// Stored deliveries waiting for a worker (`/metrics`); nil when it cannot be read now.
    func pendingCount() -> Int64?
    /// Whether `error` means the store is unreachable: the batch is not retried item by item.
    func isUnavailable(_ error: any Error) -> Bool
    /// What webhook verification kept for `provider` (PayPal's certificates), still to be kept, newest first.
    func loadWebhookMaterial(_ provider: Provider) throws -> [(key: String, value: [UInt8])]
    /// Keeps one item of webhook verification material until `keepUntil`.
    func saveWebhookMaterial(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date) throws
    /// The migrations this payrecon ships that the database lacks (`/readyz` is 503 naming them); nil when it cannot
    /// be read now.
    func pendingMigrations() -> [String]?
}

extension ReceiverStorage {
    public func pendingMigrations() -> [String]? { [] }
}

/// The receiver's storage in PostgreSQL (`DeliveryStore`).
public struct PostgresReceiverStorage: ReceiverStorage {
    let pool: PostgresPool
    /// The commits' `statement_timeout`: PAYRECON_COMMIT_TIMEOUT, past which the delivery has been answered 503.
    let statementTimeoutMilliseconds: Int
    /// The versions of the migrations this payrecon ships (`sql/`); empty: not checked.
    let expectedMigrations: [String]
    public init(
        pool: PostgresPool, statementTimeoutMilliseconds: Int = DeliveryStore.commitStatementTimeoutMilliseconds,
        expectedMigrations: [String] = []
    ) {
        self.pool = pool
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        self.expectedMigrations = expectedMigrations
    }

    public func pendingMigrations() -> [String]? {
        guard !expectedMigrations.isEmpty else { return [] }
        return try? pool.withConnection { try Migrator.status(expectedMigrations, on: $0).pending }
    }

    public func commit(_ deliveries: [NewDelivery]) throws -> [StoredDelivery] {
        try pool.withConnection {
            try DeliveryStore.commit(deliveries, on: $0, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        }
    }
    public func recordRejections(_ counts: [RejectionCount], samples: [Rejection]) throws {
        try pool.withConnection { _ = try DeliveryStore.recordRejections(counts, samples: samples, on: $0) }
    }
    public func isReady() -> Bool { pool.healthy(timeout: .seconds(1)) }
    public func pendingCount() -> Int64? { try? pool.withConnection { try DeliveryStore.pendingCount(on: $0) } }
    public func isUnavailable(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return true }
        return error.isConnectionFailure
    }
    public func loadWebhookMaterial(_ provider: Provider) throws -> [(key: String, value: [UInt8])] {
        try pool.withConnection { try WebhookMaterial.load(provider, on: $0) }
    }
    public func saveWebhookMaterial(_ provider: Provider, key: String, value: [UInt8], keepUntil: Date) throws {
        try pool.withConnection { try WebhookMaterial.save(provider, key: key, value: value, keepUntil: keepUntil, on: $0) }
    }
}
