import Foundation
import Reconciliation
import Reporting
import Testing
import TextFormats

@Suite("Report HTML")
struct ReportHTMLTests {
    static let sample: Report = {
        var r = report(
            [
                row(1), row(2, provider: .paypal, order: "<script>alert('x')</script>", kind: .overCaptured, risk: 1000, currency: jpy),
                row(3, order: nil, kind: .unknownOrder, risk: 1250, currency: bhd)
            ],
            days: [
                DayCount(day: "2026-11-29", kind: .amountMismatch, count: 1),
                DayCount(day: "2026-11-20", kind: .overCaptured, count: 1),
                DayCount(day: "2026-01-01", kind: .unknownOrder, count: 1)
            ])
        r.summary.rejected24h = ["invalid_signature": 4]
        return r
    }()

    @Test func isSelfContained() {
        let html = Self.sample.html().lowercased()
        #expect(html.hasPrefix("<!doctype html>"))
        #expect(!html.contains("<link"))
        #expect(!html.contains("@import"))
        #expect(!html.contains("url("))
        for attr in ["src=", "href=", "action="] {
            for target in ["\"http", "'http", "http", "\"//", "'//", "//"] { #expect(!html.contains(attr + target)) }
        }
        #expect(!html.contains("<script src"))
        #expect(!html.contains("<iframe") && !html.contains("<img"))
        #expect(!html.contains("http://") && !html.contains("https://"))
        #expect(html.contains("content-security-policy") && html.contains("default-src 'none'"))
        #expect(html.components(separatedBy: "<script>").count == 2)  // exactly one inline script: ours
    }

    /// Kinds in words with a legend that says what each means and what to do next; expected and actual in words
    /// (`age_seconds 28124537` reads "age 325 days"); and no CSS that breaks a word mid-word ("capture|d").
    @Test func kindsAndValuesReadAsWordsAndNoWordIsBroken() {
        let stale = row(
            9, kind: .stalePending, detail: "transaction pending for 325d",
            expected: .object([("state", .string("completed")), ("age_seconds", .number("28124537"))]))
        let html = report([row(1), stale]).html()
        #expect(html.contains(">Pending too long</a>") && html.contains(">Amount differs</a>"))
        #expect(html.contains("id=\"kind-stale_pending\"") && html.contains("<code>stale_pending</code>"))
        #expect(html.contains("<b>Next:</b> Look at the payment at the provider"))
        #expect(html.contains("<b>age</b> 325 days") && !html.contains("28124537"))
        #expect(!html.contains("break-word") && !html.contains("break-all") && !html.contains("overflow-wrap:anywhere"))
        for kind in DiscrepancyKind.allCases {
            let guide = KindGuide.of(kind)
            #expect(!guide.title.isEmpty && guide.meaning.hasSuffix(".") && guide.nextStep.hasSuffix("."), "\(kind)")
            #expect(guide.title != kind.rawValue, "\(kind) has no guide of its own in KindGuide's table")
        }
        #expect(
            Humanize.duration(seconds: 28_124_537) == "325 days" && Humanize.duration(seconds: 3_600) == "1 hour"
                && Humanize.duration(seconds: 59) == "59 seconds" && Humanize.duration(seconds: 0) == "0 seconds")
    }

    @Test func containsTheFigures() {
        let html = Self.sample.html()
        #expect(html.contains("25.00"))
        #expect(html.contains("1000"))
        #expect(html.contains("1.250"))
        #expect(html.contains("USD") && html.contains("JPY") && html.contains("BHD"))
        #expect(html.contains("<div class=\"value\">3</div>"))  // open count card
        #expect(html.contains("<div class=\"value\">4</div>"))  // rejected 24h card
        #expect(html.contains("invalid_signature: 4"))
        #expect(html.contains("<svg"))
        #expect(html.contains("Amount differs: 1"))  // by-kind bar tooltip, the kind in words
        #expect(html.contains("2026-11-29 Amount differs: 1"))  // by-day segment
        #expect(html.contains(">earlier<"))  // older than the chart window
        #expect(
            html.contains("id=\"f-provider\"") && html.contains("id=\"f-kind\"") && html.contains("id=\"f-status\"")
                && html.contains("id=\"f-text\""))
        #expect(html.components(separatedBy: "<tbody data-provider=").count == 4)
    }

    @Test func escapesEveryValue() {
        let html = Self.sample.html()
        #expect(!html.contains("<script>alert"))
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"))
        let evil = "\"><img src=x onerror=alert(1)>"
        // (The provider is a `Provider`: no outside text reaches the page through it.)
        let page = report([
            row(
                1, order: evil, ref: evil, detail: evil,
                expected: .object([(evil, .string(evil))]))
        ]).html()
        #expect(!page.contains("<img"))
        #expect(!page.contains("\"><img"))
        #expect(page.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"))
    }

    @Test func escapeFunction() {
        #expect(HTML.escape("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d&quot;e&#39;f")
        #expect(HTML.escape("nul\u{0}") == "nul\u{FFFD}")
    }

    @Test func emptyReportSaysSo() {
        let html = report([]).html()
        #expect(html.contains("No open discrepancies."))
        #expect(html.contains("No discrepancies match"))
        #expect(!html.contains("<svg"))
    }
}

@Suite("Report table")
struct ReportTableTests {
    @Test func summaryThenGroupsAligned() throws {
        var r = report([
            row(1), row(22, order: "ORDER-LONGER", kind: .amountMismatch, risk: 123456),
            row(3, order: nil, kind: .unknownOrder, risk: 1000, currency: jpy)
        ])
        r.summary.rejected24h = ["invalid_signature": 2]
        let text = r.table(colour: false)
        #expect(!text.contains("\u{1B}["))
        #expect(text.contains("Open discrepancies: 3"))
        #expect(text.contains("1259.56"))  // 2500 + 123456 minor USD
        #expect(text.contains("invalid_signature      2"))
        // The summary comes first, then unknown_order before amount_mismatch (the contract's order).
        let summaryAt = try #require(text.range(of: "Money at risk"))
        let unknownAt = try #require(text.range(of: "unknown_order (1)"))
        let amountAt = try #require(text.range(of: "amount_mismatch (2)"))
        #expect(summaryAt.lowerBound < unknownAt.lowerBound && unknownAt.lowerBound < amountAt.lowerBound)
        // Aligned: within the amount_mismatch group, DETAIL starts at the same column on every line.
        let lines = text[amountAt.upperBound...].split(separator: "\n").prefix(3).map(String.init)
        let columns = lines.compactMap { line in
            line.range(of: line.hasPrefix("  ID") ? "DETAIL" : "captured less").map {
                line.distance(from: line.startIndex, to: $0.lowerBound)
            }
        }
        #expect(columns.count == 3 && Set(columns).count == 1)
        #expect(text.contains("  -  "))  // unknown_order: no order id
        #expect(!text.split(separator: "\n").contains { $0.hasSuffix(" ") })
    }

    @Test func colourOnlyWhenAsked() {
        let r = report([row(1), row(2, status: .resolved)])
        #expect(!r.table(colour: false).contains("\u{1B}"))
        let coloured = r.table(colour: true)
        #expect(coloured.contains("\u{1B}[1;31m"))  // open count
        #expect(coloured.contains("\u{1B}[2m"))  // resolved row dimmed
        #expect(coloured.contains("\u{1B}[0m"))
    }

    @Test func storedControlCharactersCannotReachTheTerminal() {
        let text = report([row(1, order: "evil\u{1B}[2J", detail: "a\nb\u{202E}c")]).table(colour: false)
        #expect(!text.contains("\u{1B}"))
        #expect(!text.contains("\u{202E}"))
        #expect(text.contains("evil\\u{1B}[2J"))
        #expect(text.contains("a\\nb\\u{202E}c"))
    }

    @Test func emptyReport() {
        let text = report([]).table(colour: false)
        #expect(text.contains("Open discrepancies: 0"))
        #expect(text.contains("Money at risk (open): none"))
        #expect(text.contains("No discrepancies match (status open)."))
    }
}

@Suite("Actions list")
struct ActionListTests {
    static let rows = [
        ActionRow(
            id: 1, provider: .pxp, orderID: "ORD-1", action: "capture", amount: 2500, currency: usd, status: "pending",
            idempotencyKey: "pxp:ORD-1:capture:2500", createdAt: noon, target: 2500, providerTarget: "sys-1"),
        ActionRow(
            id: 2, provider: .paypal, orderID: "ORD-2", action: "refund", amount: 1250, currency: bhd, status: "failed",
            idempotencyKey: "paypal:ORD-2:refund:1250", createdAt: noon, target: 1250, lastError: "422 UNPROCESSABLE", attempts: 3),
        ActionRow(
            id: 3, provider: .pxp, orderID: "ORD-3", action: "void", amount: 1000, currency: jpy, status: "superseded",
            idempotencyKey: "pxp:ORD-3:void:0", createdAt: noon)
    ]

    @Test func jsonShape() throws {
        let doc = try JSONValue.parse(ActionList.json(Self.rows))
        let a = try #require(doc[0])
        #expect(a["id"]?.numberLiteral == "1")
        #expect(a["provider"]?.stringValue == "pxp")
        #expect(a["order_id"]?.stringValue == "ORD-1")
        #expect(a["action"]?.stringValue == "capture")
        #expect(a["amount"]?.stringValue == "25.00")
        #expect(a["currency"]?.stringValue == "USD")
        #expect(a["status"]?.stringValue == "pending")
        #expect(a["idempotency_key"]?.stringValue == "pxp:ORD-1:capture:2500")
        #expect(a["created_at"]?.stringValue == "2026-11-29T12:00:00Z")
        #expect(a["provider_target"]?.stringValue == "sys-1")
        #expect(doc[1]?["amount"]?.stringValue == "1.250")
        #expect(doc[1]?["last_error"]?.stringValue == "422 UNPROCESSABLE")
        #expect(doc[2]?["amount"]?.stringValue == "1000")
        #expect(doc[2]?["target"]?.stringValue == "0")
        #expect(try JSONValue.parse(ActionList.json([])) == .array([]))
    }

    @Test func tableAligned() {
        let text = ActionList.table(Self.rows, colour: false)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        let statusColumn = lines.map { line -> Int? in
            let word = line.hasPrefix("ID") ? "STATUS" : ["pending", "failed", "superseded"].first { line.contains($0) }
            return word.flatMap { line.range(of: $0) }.map { line.distance(from: line.startIndex, to: $0.lowerBound) }
        }
        #expect(!statusColumn.contains(nil))
        #expect(Set(statusColumn).count == 1)
        #expect(text.contains("  25.00") && text.contains("  1.250") && text.contains("   1000"))
        #expect(!text.contains("\u{1B}"))
        #expect(ActionList.table(Self.rows, colour: true).contains("\u{1B}[31m"))
        #expect(ActionList.table([], colour: false) == "No actions match.\n")
    }
}
