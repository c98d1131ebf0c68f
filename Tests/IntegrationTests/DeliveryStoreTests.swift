import Foundation
import Observability
import Store
import Testing

/// `DeliveryStore.headersJSON` (pure: no database).
@Suite struct DeliveryStoreHeadersJSONTests {
    /// The format before the one-pass builder: the stored jsonb must not change shape.
    static func reference(_ headers: [(String, String)]) -> String {
        "[" + headers.map { "[" + Log.jsonString($0.0) + "," + Log.jsonString($0.1) + "]" }.joined(separator: ",") + "]"
    }

    static let cases: [[(String, String)]] = [
        [],
        [("Host", "127.0.0.1:8080")],
        [("Content-Type", "application/json"), ("X-Request-Id", "req-1"), ("x-request-id", "req-1 again")],
        [("X-Quote", #"say "hi""#), ("X-Backslash", #"C:\path\"#), ("X-Both", #"\""#)],
        [("X-Control", "a\nb\rc\td\u{0}e\u{1}f\u{1F}g\u{7F}h"), ("X-Bell\u{7}", "\u{8}\u{C}")],
        [("X-Unicode", "Ünïcødé €  😀 \u{2028}\u{2029}"), ("X-Ünï", "日本語")],
        [("", ""), ("X-Empty", "")],
        [("X-Long", String(repeating: "a\"b", count: 1000))],
    ]

    @Test(arguments: cases.indices)
    func roundTripsThroughJSONSerialization(index: Int) throws {
        let headers = Self.cases[index]
        let json = DeliveryStore.headersJSON(headers)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String]])
        #expect(parsed.count == headers.count)
        for (pair, (name, value)) in zip(parsed, headers) {
            #expect(pair == [name, value])
        }
    }

    @Test(arguments: cases.indices)
    func sameTextAsBefore(index: Int) {
        let headers = Self.cases[index]
        #expect(DeliveryStore.headersJSON(headers) == Self.reference(headers))
    }

    @Test func shapeAndEscapes() {
        #expect(DeliveryStore.headersJSON([]) == "[]")
        #expect(DeliveryStore.headersJSON([("A", "1"), ("B", "2")]) == #"[["A","1"],["B","2"]]"#)
        #expect(DeliveryStore.headersJSON([("A", "\"\\\n\r\t\u{0}\u{1F}")]) == #"[["A","\"\\\n\r\t\u0000\u001f"]]"#)
        #expect(DeliveryStore.headersJSON([("A", "é")]) == "[[\"A\",\"é\"]]")
    }
}
