import Foundation
import Testing
@testable import Store

/// A finding's expected and actual fields, written as JSON by hand: each reads back as the same strings, whatever they
/// hold, with its keys sorted.
@Suite struct FindingJSONTests {
    static let objects: [[String: String]] = [
        [:],
        ["amount": "10.00", "currency": "USD"],
        ["quote": "say \"hi\"", "backslash": #"C:\path"#, "slash": "a/b", "controls": "\u{1}\t\n\r\u{1F}"],
        ["unicode": "zł 5,00 — ünïcödé", "emoji": "💳", "": "empty key"]
    ]

    @Test(arguments: objects)
    func readsBackAsTheSameStrings(object: [String: String]) throws {
        let text = FindingStore.json(object)
        let back = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]
        #expect(back == object, "\(text)")
    }

    /// jsonb refuses `\u0000`: a NUL is written as U+FFFD, as PostgreSQL text keeps it.
    @Test func aNULIsKeptAsTheReplacementCharacter() throws {
        let text = FindingStore.json(["detail": "a\u{0}b", "k\u{0}": "v"])
        #expect(!text.contains("\\u0000"), "\(text)")
        let back = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]
        #expect(back == ["detail": "a\u{FFFD}b", "k\u{FFFD}": "v"])
    }

    @Test func keysAreSorted() {
        #expect(FindingStore.json(["b": "2", "a": "1", "c": "3"]) == #"{"a":"1","b":"2","c":"3"}"#)
        #expect(FindingStore.json([:]) == "{}")
    }
}
