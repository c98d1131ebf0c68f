// Currency: ISO 4217 codes with their minor-unit exponents.

/// An ISO 4217 currency and its exponent (number of minor-unit digits).
///
/// Only codes in the table are currencies: `Currency(code:)` returns nil for anything else. The code is normalised
/// to upper case ("usd" → "USD"), because merchant files are typed by people; it must be exactly three ASCII
/// letters (no surrounding spaces). Codes without a minor unit in ISO 4217 (precious metals, XDR, XTS, XXX, bond
/// units) are not payment currencies and are not in the table.
public struct Currency: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Upper-case ISO 4217 alphabetic code, e.g. "USD".
    public let code: String
    /// Minor-unit digits: 2 for USD ("25.00"), 0 for JPY ("1000"), 3 for BHD ("1.250"), 4 for CLF.
    public let exponent: Int

    /// The currency for an ISO 4217 code (case-insensitive), or nil when the code is not in the table.
    public init?(code: String) {
        // Checked in place, and copied only when a letter is lower case (every amount read passes here).
        guard code.utf8.count == 3 else { return nil }
        var lower = false
        for byte in code.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): break
            case UInt8(ascii: "a")...UInt8(ascii: "z"): lower = true
            default: return nil
            }
        }
        let normalised = lower ? String(decoding: code.utf8.map { $0 >= UInt8(ascii: "a") ? $0 - 32 : $0 }, as: UTF8.self) : code
        guard let exponent = Currency.exponents[normalised] else { return nil }
        self.code = normalised
        self.exponent = exponent
    }

    public var description: String { code }

    // Coded as `{"code": "USD", "exponent": 2}`; decoding looks the code up, so a stored exponent cannot disagree
    // with the table.
    private enum CodingKeys: String, CodingKey { case code, exponent }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let code = try container.decode(String.self, forKey: .code)
        guard let currency = Currency(code: code) else {
            throw DecodingError.dataCorruptedError(
                forKey: .code, in: container,
                debugDescription: "unknown currency \(code)")
        }
        self = currency
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(exponent, forKey: .exponent)
    }

    /// Every currency in the table, sorted by code.
    public static let all: [Currency] = exponents.keys.sorted().compactMap { Currency(code: $0) }

    /// ISO 4217 active codes (list one, 2025) → exponent. ANG and SLL are being withdrawn (XCG, SLE replace them)
    /// and stay so that older transactions still parse; HRK, CUC, ZWL, VEF, MRO, STD are withdrawn and absent.
    static let exponents: [String: Int] = {
        var table: [String: Int] = [:]
        let zero = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
        let three = "BHD IQD JOD KWD LYD OMR TND"
        let four = "CLF UYW"
        let two = """
            AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD \
            CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS \
            GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL \
            MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK \
            PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB \
            TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG
            """
        for (codes, exponent) in [(zero, 0), (two, 2), (three, 3), (four, 4)] {
            for code in codes.split(separator: " ") { table[String(code)] = exponent }
        }
        return table
    }()
}
