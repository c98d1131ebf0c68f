// Placeholder: the Reconciliation helper replaces this with the real currency table and exact parser.
public struct Currency: Sendable, Hashable, Codable {
    public let code: String
    public let exponent: Int
    public init?(code: String) { self.code = code.uppercased(); self.exponent = 2 }
}

public struct Money: Sendable, Hashable, Codable {
    public var minorUnits: Int64
    public var currency: Currency
    public init(minorUnits: Int64, currency: Currency) { self.minorUnits = minorUnits; self.currency = currency }
}
