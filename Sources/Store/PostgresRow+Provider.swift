import Postgres
import Reconciliation

extension PostgresRow {
    /// A provider column, as the `Provider` it names. A name this payrecon does not know (a row written by a build with
    /// another provider) is a decoding error that says so, never a guess.
    func provider(_ column: String) throws -> Provider {
        let name = try string(column)
        guard let provider = Provider(rawValue: name) else {
            throw PostgresError.decoding(
                "\(column) '\(name)' is no provider this payrecon knows (\(Provider.allCases.map(\.rawValue).joined(separator: ", "))): "
                    + "read it with the payrecon that stored it")
        }
        return provider
    }
}
