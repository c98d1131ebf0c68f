// libFuzzer harness: Money.parse, Money.minorUnits(fromDecimal:) and (fromJSONNumber:) on arbitrary text.
// Input: byte 0 picks the exponent (0...3 and a few odd ones), the rest is the text.
// Properties: what parses formats back to text that parses to the same amount; a JSON number that parses is also
// accepted by JSONValue.isValidNumberLiteral (within its length limit).
import Reconciliation

private let currencies = ["USD", "JPY", "BHD", "EUR", "KWD", "CLP"].compactMap { Currency(code: $0) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let exponents = [0, 1, 2, 3, 4, 18, 19, 40]
    let exponent = exponents[Int(first) % exponents.count]
    let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
    if let minor = try? Money.minorUnits(fromDecimal: text, exponent: exponent) {
        let back = Money.format(minorUnits: minor, exponent: exponent)
        precondition((try? Money.minorUnits(fromDecimal: back, exponent: exponent)) == minor,
                     "format(\(minor), \(exponent)) = \(back) does not parse back")
    }
    if let minor = try? Money.minorUnits(fromJSONNumber: text, exponent: exponent) {
        // isValidNumberLiteral applies the JSON parser's default 256-byte number limit; Money has none of its own.
        precondition(text.utf8.count > 256 || JSONValue.isValidNumberLiteral(text),
                     "\(text) parsed as a JSON amount but is not a JSON number")
        _ = minor
    }
    let currency = currencies[Int(first) % currencies.count]
    if let money = try? Money.parse(text, currency: currency) {
        precondition((try? Money.parse(money.formatted, currency: currency)) == money, "\(money.formatted) does not parse back")
    }
    _ = try? Money.parse(jsonNumberText: text, currency: currency)
    return 0
}
