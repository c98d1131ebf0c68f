// `payrecon report --view fees`: per provider, currency and UTC day, what was captured, refunded and reversed, the
// fees the provider took (less those it gave back) and the net that reached the merchant's balance, as the
// providers' answers state them. In the four report formats; the HTML draws the fees per day.
import Foundation
import Reconciliation
import TextFormats

/// One provider, currency and day. Sums are exact 128-bit minor units.
public struct FeeDay: Sendable, Equatable {
    public var provider: Provider
    public var currency: Currency
    /// `YYYY-MM-DD` (UTC).
    public var day: String
    public var captured: Int128, refunded: Int128, reversed: Int128, fees: Int128, net: Int128
    public var movements: Int
    /// Captures whose answer stated no fee: their fee and net are missing from `fees` and `net`.
    public var withoutFee: Int

    public init(
        provider: Provider, currency: Currency, day: String, captured: Int128, refunded: Int128, reversed: Int128 = 0,
        fees: Int128, net: Int128, movements: Int, withoutFee: Int = 0
    ) {
        self.provider = provider; self.currency = currency; self.day = day; self.captured = captured; self.refunded = refunded
        self.reversed = reversed; self.fees = fees; self.net = net; self.movements = movements; self.withoutFee = withoutFee
    }

    func amount(_ minor: Int128) -> String { ReportSummary.format(minor, exponent: currency.exponent) }
}

public struct FeesReport: Sendable, Equatable {
    public var generatedAt: Date
    public var provider: Provider?
    /// As typed (`30d`), the window the days fall in.
    public var since: String
    /// Newest day first, then provider and currency.
    public var days: [FeeDay]

    public init(generatedAt: Date, provider: Provider? = nil, since: String, days: [FeeDay]) {
        self.generatedAt = generatedAt; self.provider = provider; self.since = since; self.days = days
    }

    /// Per provider and currency, the window's sums (a `day` of "total").
    public var totals: [FeeDay] {
        var out: [String: FeeDay] = [:]
        for d in days {
            let key = d.provider.rawValue + "\u{0}" + d.currency.code
            var t =
                out[key]
                ?? FeeDay(provider: d.provider, currency: d.currency, day: "total", captured: 0, refunded: 0, fees: 0, net: 0, movements: 0)
            t.captured += d.captured; t.refunded += d.refunded; t.reversed += d.reversed; t.fees += d.fees; t.net += d.net
            t.movements += d.movements; t.withoutFee += d.withoutFee
            out[key] = t
        }
        return out.values.sorted { ($0.provider.rawValue, $0.currency.code) < ($1.provider.rawValue, $1.currency.code) }
    }

    var heading: String {
        "fees and net, last \(since)" + (provider.map { ", provider \($0)" } ?? "") + " (days UTC, by when the provider says it happened)"
    }

    static let columns = ["day", "provider", "currency", "captured", "refunded", "reversed", "fees", "net", "movements", "without_fee"]

    func cells(_ d: FeeDay) -> [String] {
        [
            d.day, d.provider.rawValue, d.currency.code, d.amount(d.captured), d.amount(d.refunded), d.amount(d.reversed), d.amount(d.fees),
            d.amount(d.net), String(d.movements), String(d.withoutFee)
        ]
    }

    // MARK: table

    public func table(colour: Bool) -> String {
        var out = Style.bold.apply("payrecon report", colour: colour) + "  generated \(Timestamp.iso8601(generatedAt))  (\(heading))\n"
        guard !days.isEmpty else {
            return out
                + "\nNo captures, refunds or reversals in the window. Movements are recorded as checks fetch them: run payrecon work or payrecon reconcile.\n"
        }
        func render(_ rows: [FeeDay]) -> String {
            var t = TextTable([
                .init("DAY"), .init("PROVIDER"), .init("CUR"), .init("CAPTURED", .right), .init("REFUNDED", .right),
                .init("REVERSED", .right), .init("FEES", .right), .init("NET", .right), .init("MOVES", .right),
                .init("NO FEE", .right)
            ])
            for d in rows { t.append(Array(cells(d).prefix(8)) + [String(d.movements), d.withoutFee > 0 ? String(d.withoutFee) : "-"]) }
            return t.render(colour: colour)
        }
        out += "\n" + Style.bold.apply("Totals", colour: colour) + "\n" + render(totals)
        out += "\n" + Style.bold.apply("By day", colour: colour) + "\n" + render(days)
        if days.contains(where: { $0.withoutFee > 0 }) {
            out +=
                "\nNO FEE counts captures whose answer stated no fee (a provider may state none while a capture is pending): their fee and net are not in FEES and NET.\n"
        }
        return out
    }

    // MARK: CSV

    /// RFC 4180, one row per day (the totals are the rows' sums: a spreadsheet adds them).
    public func csv() -> String {
        var out = CSV.line(Self.columns)
        for d in days { out += CSV.line(cells(d).enumerated().map { $0.offset == 1 ? CSV.text($0.element) : $0.element }) }
        return out
    }

    // MARK: JSON

    /// `{"generated_at", "view": "fees", "filters": {provider, since}, "totals": […], "days": […]}`; amounts are
    /// decimal strings in major units with the currency's digits.
    public func json() -> [UInt8] {
        func value(_ d: FeeDay, day: Bool) -> JSONValue {
            var members: [(String, JSONValue)] = []
            if day { members.append(("day", .string(d.day))) }
            members += [
                ("provider", .string(d.provider.rawValue)), ("currency", .string(d.currency.code)),
                ("captured", .string(d.amount(d.captured))), ("refunded", .string(d.amount(d.refunded))),
                ("reversed", .string(d.amount(d.reversed))), ("fees", .string(d.amount(d.fees))),
                ("net", .string(d.amount(d.net))), ("movements", .number(String(d.movements))),
                ("without_fee", .number(String(d.withoutFee)))
            ]
            return .object(members)
        }
        var out = JSONValue.object([
            ("generated_at", .string(Timestamp.iso8601(generatedAt))),
            ("view", .string("fees")),
            ("filters", .object([("provider", provider.map { .string($0.rawValue) } ?? .null), ("since", .string(since))])),
            ("totals", .array(totals.map { value($0, day: false) })),
            ("days", .array(days.map { value($0, day: true) }))
        ]).serialized()
        out.append(UInt8(ascii: "\n"))
        return out
    }

    // MARK: HTML

    /// One self-contained page: per provider and currency a card of the window's totals and an inline SVG of the
    /// fees per day, then the table of days. No script, no network (the same Content-Security-Policy as the report).
    public func html() -> String {
        var out =
            HTML.head(title: "payrecon fees — \(Timestamp.iso8601(generatedAt))", script: false) + """
                <body>
                <header><h1>Fees and net</h1>
                <p class="meta">Generated \(HTML.escape(Timestamp.iso8601(generatedAt))) · \(HTML.escape(heading))</p></header>

                """
        guard !days.isEmpty else {
            return out + "<section><p class=\"empty\">No captures, refunds or reversals in the window.</p></section>\n</body>\n</html>\n"
        }
        out += "<section class=\"cards\">\n"
        for t in totals {
            out += "<div class=\"card\"><div class=\"label\">\(HTML.escape(t.provider.rawValue)) · \(HTML.escape(t.currency.code))</div>"
            out += "<div class=\"value money\"><span>\(HTML.escape(t.amount(t.net)))</span> <small>net</small></div><ul>"
            out += "<li>captured \(HTML.escape(t.amount(t.captured)))</li><li>refunded \(HTML.escape(t.amount(t.refunded)))</li>"
            if t.reversed != 0 { out += "<li>reversed \(HTML.escape(t.amount(t.reversed)))</li>" }
            out += "<li>fees \(HTML.escape(t.amount(t.fees)))</li>"
            if t.withoutFee > 0 { out += "<li>\(t.withoutFee) captures stated no fee</li>" }
            out += "</ul></div>\n"
        }
        out += "</section>\n<section class=\"charts\">\n"
        for t in totals {
            out += "<figure><figcaption>Fees per day, \(HTML.escape(t.provider.rawValue)) \(HTML.escape(t.currency.code))</figcaption>\n"
            out += feeChart(days.filter { $0.provider == t.provider && $0.currency == t.currency }.reversed()) + "</figure>\n"
        }
        out += "</section>\n<section><h2>By day</h2><table class=\"fees\"><thead><tr>"
        out +=
            ["Day", "Provider", "Currency", "Captured", "Refunded", "Reversed", "Fees", "Net", "Movements", "Without fee"]
            .map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>\n"
        for d in days { out += "<tr>" + cells(d).map { "<td>\(HTML.escape($0))</td>" }.joined() + "</tr>\n" }
        out += "</tbody></table></section>\n</body>\n</html>\n"
        return out
    }

    /// Bars of the fees per day, oldest left; a day whose fees are negative (more given back than taken) draws no bar.
    func feeChart(_ rows: [FeeDay]) -> String {
        let barWidth = 22, gap = 6, chartHeight = 120, labelHeight = 34
        let width = max(1, rows.count) * (barWidth + gap) + 20
        let top = max(Int128(1), rows.map(\.fees).max() ?? 1)
        var svg = "<svg class=\"chart\" role=\"img\" aria-label=\"Fees per day\" viewBox=\"0 0 \(width) \(chartHeight + labelHeight)\">"
        for (i, d) in rows.enumerated() {
            let x = 10 + i * (barWidth + gap)
            let h = d.fees > 0 ? max(2, Int(d.fees * Int128(chartHeight) / top)) : 0
            let label = "\(HTML.escape(d.day)): fees \(HTML.escape(d.amount(d.fees))) of \(HTML.escape(d.amount(d.captured))) captured"
            svg +=
                "<rect x=\"\(x)\" y=\"\(chartHeight - h)\" width=\"\(barWidth)\" height=\"\(h)\" rx=\"2\" fill=\"#b54708\"><title>\(label)</title></rect>"
            svg +=
                "<text x=\"\(x + barWidth / 2)\" y=\"\(chartHeight + 14)\" text-anchor=\"middle\" font-size=\"9\">\(HTML.escape(String(d.day.suffix(5))))</text>"
        }
        return svg + "</svg>\n"
    }
}
