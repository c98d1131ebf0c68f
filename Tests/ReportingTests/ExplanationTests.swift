import Foundation
import Reconciliation
import Testing
@testable import Reporting
import TextFormats

/// The `payrecon explain` timeline and its JSON, and how reports point at the evidence.
struct ExplanationTests {
    static let hash = String(repeating: "ab", count: 32)

    static func check(_ id: Int64, at seconds: Double, decided: [String] = [], body: String? = nil) -> Explanation.Check {
        let answers =
            body.map {
                [
                    Explanation.Answer(
                        fetchedAt: noon.addingTimeInterval(seconds), method: "GET", url: "https://api/tx/1", status: 200,
                        sha256: hash, length: $0.utf8.count, body: Array($0.utf8))
                ]
            } ?? []
        return Explanation.Check(
            evidenceID: id, at: noon.addingTimeInterval(seconds), source: .sweep, deliveryID: nil, hashes: [hash],
            decided: decided, decision: nil, findings: [], planned: [], superseded: [], answers: answers)
    }

    /// Ninety identical clean sweeps read as one line and a count; a check that decided something is never folded.
    @Test func cleanChecksWithTheSameAnswersAreFolded() {
        var checks = [Self.check(1, at: 0, decided: ["opened"], body: #"{"state":"Captured"}"#)]
        checks += (2...91).map { Self.check(Int64($0), at: Double($0) * 86_400) }
        let e = Explanation(generatedAt: noon, provider: .pxp, orderID: "O-1", transactionRef: "TX-1", checks: checks)
        let text = e.table()
        #expect(text.contains("… and 89 more checks like it"), "\(text)")
        #expect(text.components(separatedBy: "sweep check").count - 1 == 2, "the deciding check and the first clean one")
        #expect(text.contains(#"{"state":"Captured"}"#))
    }

    /// A long answer is cut in the timeline, whole in the JSON; control characters from an answer never reach the
    /// terminal as such (the CLI makes each line safe; the JSON escapes them).
    @Test func longAnswersAreCutInTheTimelineAndWholeInJSON() throws {
        let long = "{\"note\":\"" + String(repeating: "x", count: 5_000) + "\"}"
        let e = Explanation(
            generatedAt: noon, provider: .pxp, orderID: "O-1", transactionRef: "TX-1",
            checks: [Self.check(1, at: 0, decided: ["opened"], body: long)])
        #expect(e.table().contains("(\(long.utf8.count) bytes in all; --format json shows the whole answer)"))
        let json = try JSONValue.parse(e.json())
        let body = json["timeline"]?.arrayValue?.first?["answers"]?.arrayValue?.first?["body"]?.stringValue
        #expect(body == long)
        #expect(TextTable.safeMultiline("a\u{1B}[2Jb\nc") == "a\\u{1B}[2Jb\nc")
        // An answer past what a check keeps: its hash and size, and why there is no body.
        var check = Self.check(2, at: 1, decided: ["opened"], body: "x")
        check.answers[0].body = nil; check.answers[0].length = 2_000_000
        let text = Explanation(generatedAt: noon, provider: .pxp, orderID: "O-1", transactionRef: "TX-1", checks: [check]).table()
        #expect(text.contains("(not kept: 2000000 bytes, past what one check keeps"))
    }

    @Test func theReportsJSONCarriesTheEvidenceID() throws {
        var r = row(7)
        r.evidenceID = 42
        let json = try parseJSON(report([r, row(8)]).json())
        let list = try #require(json["discrepancies"]?.arrayValue)
        #expect(list[0]["evidence_id"]?.numberLiteral == "42")
        #expect(list[1]["evidence_id"] == .null)
    }

    /// The HTML folds each explained discrepancy's timeline in a details element; one without a loaded explanation
    /// names the command that shows it.
    @Test func theHTMLFoldsTheEvidence() {
        var explained = row(7), other = row(8)
        explained.evidenceID = 1; other.evidenceID = 2
        var rep = report([explained, other])
        rep.explanations[7] = Explanation(
            generatedAt: noon, provider: .pxp, orderID: "ORD-1", transactionRef: "tx-1",
            checks: [Self.check(1, at: 0, decided: ["opened"], body: "<b>answer</b>")])
        let html = rep.html()
        #expect(
            html.contains(
                "<details class=\"evidence\" id=\"evidence-7\"><summary>Evidence: why payrecon says this (check 1)</summary><pre>"))
        #expect(html.contains("&lt;b&gt;answer&lt;/b&gt;") && !html.contains("<b>answer</b>"), "answers are escaped")
        #expect(html.contains("<code>payrecon explain 8</code>"))
    }
}
