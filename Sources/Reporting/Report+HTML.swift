// `payrecon report --format html`: one self-contained page for finance — cards, two inline SVG charts and a
// filterable table. Inline CSS and JS only; a Content-Security-Policy forbids every network fetch.
import Reconciliation
import TextFormats

extension Report {
    /// Days the "by day" chart covers, ending on the report's day (older open discrepancies form one "earlier" bar).
    public static let chartDays = 14

    /// The page. Every value from the database is escaped (`HTML.escape`); the script reads no data, it only
    /// shows and hides the rows rendered here.
    public func html() -> String {
        var out =
            HTML.head(title: "payrecon report — \(Timestamp.iso8601(generatedAt))", script: true) + """
                <body>
                <header><h1>Payment reconciliation</h1>
                <p class="meta">Generated \(HTML.escape(Timestamp.iso8601(generatedAt))) · \(HTML.escape(filters.summaryText)) · times in UTC</p></header>
                <section class="cards">

                """
        out += card(
            label: "Open discrepancies", value: String(summary.open), tone: summary.open > 0 ? "bad" : "good",
            extra: summary.kindsInOrder.map { "\(HTML.escape(KindGuide.of($0.kind).title)): \($0.count)" })
        let money = summary.amountsInOrder
        out += "<div class=\"card \(money.isEmpty ? "good" : "bad")\"><div class=\"label\">Money at risk</div>"
        if money.isEmpty {
            out += "<div class=\"value\">none</div>"
        } else {
            for (currency, formatted) in money {
                out +=
                    "<div class=\"value money\"><span>\(HTML.escape(formatted))</span> <small>\(HTML.escape(currency.code))</small></div>"
            }
            out += "<ul><li>\(HTML.escape(Report.moneyAtRiskRule.prefix(1).uppercased() + Report.moneyAtRiskRule.dropFirst()))</li></ul>"
        }
        out += "</div>\n"
        out += card(
            label: "Rejected deliveries (24 h)", value: String(summary.rejectedTotal),
            tone: summary.rejectedTotal > 0 ? "warn" : "good",
            extra: summary.rejectedInOrder.map { "\(HTML.escape($0.reason)): \($0.count)" })
        out += "</section>\n"

        out += "<section class=\"charts\">\n"
        if summary.open == 0 {
            out += "<p class=\"empty\">No open discrepancies.</p>\n"
        } else {
            out += "<figure><figcaption>Open discrepancies by kind</figcaption>\n\(kindChart())</figure>\n"
            out +=
                "<figure><figcaption>Open discrepancies by day first seen (last \(Report.chartDays) days)</figcaption>\n\(dayChart())</figure>\n"
        }
        out += "</section>\n"
        out += tableSection()
        out += "<script>\(HTML.script)</script>\n</body>\n</html>\n"
        return out
    }

    private func card(label: String, value: String, tone: String, extra: [String]) -> String {
        var s =
            "<div class=\"card \(tone)\"><div class=\"label\">\(HTML.escape(label))</div><div class=\"value\">\(HTML.escape(value))</div>"
        if !extra.isEmpty { s += "<ul>" + extra.map { "<li>\($0)</li>" }.joined() + "</ul>" }  // items already escaped
        return s + "</div>\n"
    }

    // MARK: Charts (inline SVG, computed here)

    func kindChart() -> String {
        let rows = summary.kindsInOrder
        let labelWidth = 170, barMax = 470, rowHeight = 24
        let height = rows.count * rowHeight + 8
        let top = max(1, rows.map(\.count).max() ?? 1)
        var svg =
            "<svg class=\"chart\" role=\"img\" aria-label=\"Open discrepancies by kind\" viewBox=\"0 0 \(labelWidth + barMax + 60) \(height)\">"
        for (i, row) in rows.enumerated() {
            let y = i * rowHeight + 4
            let w = max(2, row.count * barMax / top)
            let name = HTML.escape(KindGuide.of(row.kind).title)
            svg += "<text x=\"\(labelWidth - 8)\" y=\"\(y + 16)\" text-anchor=\"end\">\(name)</text>"
            svg +=
                "<rect x=\"\(labelWidth)\" y=\"\(y + 3)\" width=\"\(w)\" height=\"\(rowHeight - 8)\" rx=\"3\" fill=\"\(HTML.colour(row.kind))\"><title>\(name): \(row.count)</title></rect>"
            svg += "<text x=\"\(labelWidth + w + 6)\" y=\"\(y + 16)\">\(row.count)</text>"
        }
        return svg + "</svg>\n"
    }

    func dayChart() -> String {
        let days = (0..<Report.chartDays).map { Timestamp.day(of: generatedAt, offset: Int64($0 - Report.chartDays + 1)) }
        let first = days[0]
        var buckets: [String: [DiscrepancyKind: Int]] = [:]
        for entry in openByDay where entry.count > 0 {
            let key = entry.day < first ? "earlier" : entry.day
            buckets[key, default: [:]][entry.kind, default: 0] += entry.count
        }
        let slots = (buckets["earlier"] == nil ? [] : ["earlier"]) + days
        let left = 34, bottom = 26, topPad = 10, plotWidth = 700, plotHeight = 170
        let slotWidth = plotWidth / slots.count
        let barWidth = max(4, slotWidth * 7 / 10)
        let maxTotal = max(1, slots.map { buckets[$0]?.values.reduce(0, +) ?? 0 }.max() ?? 1)
        let width = left + plotWidth + 10, height = topPad + plotHeight + bottom
        var svg =
            "<svg class=\"chart\" role=\"img\" aria-label=\"Open discrepancies by day first seen\" viewBox=\"0 0 \(width) \(height)\">"
        for tick in Set([0, maxTotal / 2, maxTotal]).sorted() {
            let y = topPad + plotHeight - tick * plotHeight / maxTotal
            svg += "<line class=\"grid\" x1=\"\(left)\" y1=\"\(y)\" x2=\"\(left + plotWidth)\" y2=\"\(y)\"/>"
            svg += "<text x=\"\(left - 6)\" y=\"\(y + 4)\" text-anchor=\"end\">\(tick)</text>"
        }
        for (i, slot) in slots.enumerated() {
            let x = left + i * slotWidth + (slotWidth - barWidth) / 2
            var y = topPad + plotHeight
            let counts = buckets[slot] ?? [:]
            for kind in DiscrepancyKind.allCases {
                guard let n = counts[kind], n > 0 else { continue }
                let h = max(1, n * plotHeight / maxTotal)
                y -= h
                svg +=
                    "<rect x=\"\(x)\" y=\"\(y)\" width=\"\(barWidth)\" height=\"\(h)\" fill=\"\(HTML.colour(kind))\"><title>\(HTML.escape(slot)) \(HTML.escape(KindGuide.of(kind).title)): \(n)</title></rect>"
            }
            let label = slot == "earlier" ? "earlier" : String(slot.dropFirst(5))
            svg +=
                "<text x=\"\(x + barWidth / 2)\" y=\"\(topPad + plotHeight + 16)\" text-anchor=\"middle\" class=\"axis\">\(HTML.escape(label))</text>"
        }
        svg += "</svg>\n<p class=\"legend\">"
        let present = DiscrepancyKind.allCases.filter { k in buckets.values.contains { ($0[k] ?? 0) > 0 } }
        svg += present.map { "<span><i style=\"background:\(HTML.colour($0))\"></i>\(HTML.escape(KindGuide.of($0).title))</span>" }.joined(
            separator: " ")
        return svg + "</p>\n"
    }

    // MARK: Table with client-side filters

    func tableSection() -> String {
        func options(_ values: [String]) -> String {
            values.map { "<option value=\"\(HTML.escape($0))\">\(HTML.escape($0))</option>" }.joined()
        }
        let providers = Set(discrepancies.map(\.provider.rawValue)).sorted()
        let present = DiscrepancyKind.allCases.filter { k in discrepancies.contains { $0.kind == k } }
        let statuses = DiscrepancyStatus.allCases.filter { s in discrepancies.contains { $0.status == s } }.map(\.rawValue)
        var out = """
            <section class="list">
            <h2>Discrepancies <small>(<span id="shown">\(discrepancies.count)</span> of \(discrepancies.count) shown)</small></h2>
            <form class="filters" onsubmit="return false">
            <label>Provider <select id="f-provider"><option value="">all</option>\(options(providers))</select></label>
            <label>Kind <select id="f-kind"><option value="">all</option>\(present.map { "<option value=\"\(HTML.escape($0.rawValue))\">\(HTML.escape(KindGuide.of($0).title))</option>" }.joined())</select></label>
            <label>Status <select id="f-status"><option value="">all</option>\(options(statuses))</select></label>
            <label>Search <input id="f-text" type="search" placeholder="order, reference, detail…"></label>
            </form>
            <div class="scroll"><table id="discrepancies">
            <thead><tr><th>ID</th><th>Provider</th><th>Order</th><th>Transaction</th><th>Kind</th><th>Status</th><th class="num">At risk</th><th class="num">Seen</th><th>First seen</th><th>Last seen</th></tr></thead>

            """
        for d in discrepancies {
            let risk = d.formattedAmountAtRisk.map { "\($0) \(d.currency!.code)" } ?? ""
            // One tbody per discrepancy: its figures on a line, what was expected and found on the next, spanning the
            // table (so nothing sits off-screen on a narrow window); the filters show or hide the tbody.
            out +=
                "<tbody data-provider=\"\(HTML.escape(d.provider.rawValue))\" data-kind=\"\(HTML.escape(d.kind.rawValue))\" data-status=\"\(HTML.escape(d.status.rawValue))\" class=\"\(d.status.rawValue)\"><tr>"
            out += "<td class=\"num\">\(d.id)</td><td>\(HTML.escape(d.provider.rawValue))</td>"
            out += "<td class=\"id\">" + (d.orderID.map { HTML.escape($0) } ?? "<span class=\"none\">none</span>") + "</td>"
            out +=
                "<td class=\"id\">\(HTML.escape(d.transactionRef))</td><td class=\"kind\"><a href=\"#kind-\(d.kind.rawValue)\" title=\"\(HTML.escape(d.kind.rawValue))\">"
                + "<i class=\"dot\" style=\"background:\(HTML.colour(d.kind))\"></i>\(HTML.escape(KindGuide.of(d.kind).title))</a></td>"
            out += "<td><span class=\"badge \(d.status.rawValue)\">\(d.status.rawValue)</span>"
            if d.status == .acknowledged {
                out +=
                    "<div class=\"ack\">\(HTML.escape(d.acknowledgedAt.map(Timestamp.minutes) ?? ""))"
                    + (d.acknowledgedBy.map { " by " + HTML.escape($0) } ?? "")
                    + (d.ackNote.map { ": " + HTML.escape($0) } ?? "") + "</div>"
            }
            out += "</td>"
            out += "<td class=\"num\">\(HTML.escape(risk))</td><td class=\"num\">\(d.occurrences)</td>"
            // Date and time may go on two lines on a narrow window; neither is ever split.
            out +=
                "<td class=\"time\">\(HTML.words(Timestamp.minutes(d.firstSeen)))</td><td class=\"time\">\(HTML.words(Timestamp.minutes(d.lastSeen)))</td>"
            out +=
                "</tr><tr class=\"more\"><td></td><td colspan=\"9\"><div class=\"more\"><div class=\"detail\">\(HTML.words(d.detail))</div>"
                + "<div class=\"values\"><span class=\"label\">expected</span> \(HTML.members(d.expected))</div>"
                + "<div class=\"values\"><span class=\"label\">found</span> \(HTML.members(d.actual))</div></div>"
                + evidence(d) + "</td></tr></tbody>\n"
        }
        out += "</table></div>\n"
        if discrepancies.isEmpty { out += "<p class=\"empty\">No discrepancies match (\(HTML.escape(filters.summaryText))).</p>\n" }
        out += legend(present)
        return out + "</section>\n"
    }

    /// What each kind in the table means and what to do next.
    func legend(_ kinds: [DiscrepancyKind]) -> String {
        guard !kinds.isEmpty else { return "" }
        var out = "<h2>What the kinds mean, and what to do</h2>\n<dl class=\"kinds\">\n"
        for kind in kinds {
            let guide = KindGuide.of(kind)
            out +=
                "<div id=\"kind-\(kind.rawValue)\"><dt><i class=\"dot\" style=\"background:\(HTML.colour(kind))\"></i>\(HTML.escape(guide.title))"
                + " <code>\(HTML.escape(kind.rawValue))</code></dt><dd>\(HTML.escape(guide.meaning)) <b>Next:</b> \(HTML.escape(guide.nextStep))</dd></div>\n"
        }
        return out + "</dl>\n"
    }
}

/// HTML escaping and the page's fixed assets.
public enum HTML {
    /// The page's start up to `</head>`: its title, the inline CSS, and a Content-Security-Policy that forbids every
    /// network fetch (and inline script unless `script`).
    public static func head(title: String, script: Bool) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \(script ? "script-src 'unsafe-inline'; " : "")img-src data:">
        <meta name="referrer" content="no-referrer">
        <title>\(escape(title))</title>
        <style>\(css)</style>
        </head>

        """
    }

    /// Text safe in element content and in quoted attribute values: `& < > " '` become entities; NUL becomes U+FFFD.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for s in text.unicodeScalars {
            switch s {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\u{0}": out += "\u{FFFD}"
            default: out.unicodeScalars.append(s)
            }
        }
        return out
    }

    /// Escaped text whose hyphenated, slashed or coloned tokens (references, dates, times, `PXP-SHORT-1`) are kept
    /// whole: a browser may break a line after a hyphen, which split them mid-reference.
    static func words(_ text: String) -> String {
        text.split(separator: " ", omittingEmptySubsequences: false).map { token in
            token.contains(where: { $0 == "-" || $0 == "/" || $0 == ":" })
                ? "<span class=\"w\">\(escape(String(token)))</span>" : escape(String(token))
        }.joined(separator: " ")
    }

    /// An expected/actual object as escaped `key: value` lines.
    static func members(_ value: JSONValue) -> String {
        guard let members = value.objectMembers else { return escape(String(decoding: value.serialized(), as: UTF8.self)) }
        return members.map { key, v in
            "<span class=\"kv\"><b>\(escape(Humanize.key(key)))</b> \(words(Humanize.value(key, v)))</span>"
        }.joined(separator: "<br>")
    }

    /// One fixed colour per kind, in the contract's order.
    static func colour(_ kind: DiscrepancyKind) -> String {
        let palette = [
            "#7f3c8d", "#11a579", "#3969ac", "#f2b701", "#e73f74", "#80ba5a",
            "#e68310", "#008695", "#cf1c90", "#f97b72", "#4b4b8f", "#a5aa99",
            "#5f4690", "#1d6996", "#38a6a5", "#0f8554", "#73af48", "#edad08", "#e17c05", "#cc503e"
        ]
        let index = DiscrepancyKind.allCases.firstIndex(of: kind) ?? 0
        return palette[index % palette.count]
    }

    public static let css = """
        :root{--fg:#1d2330;--muted:#667085;--line:#e4e7ec;--bg:#f7f8fa;--bad:#b42318;--warn:#b54708;--good:#027a48}
        *{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
        header,section{max-width:1280px;margin:0 auto;padding:16px 24px}h1{margin:8px 0 0;font-size:22px}h2{font-size:17px}
        .meta{color:var(--muted);margin:4px 0 0}.cards{display:flex;gap:16px;flex-wrap:wrap}
        .card{flex:1 1 220px;background:#fff;border:1px solid var(--line);border-left:5px solid var(--good);border-radius:8px;padding:14px 18px}
        .card.bad{border-left-color:var(--bad)}.card.warn{border-left-color:var(--warn)}
        .card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
        .card .value{font-size:28px;font-weight:650;font-variant-numeric:tabular-nums}.card .money{font-size:22px}
        .card small{font-size:13px;color:var(--muted)}.card ul{margin:6px 0 0;padding-left:18px;color:var(--muted);font-size:12px}
        .charts{display:flex;gap:16px;flex-wrap:wrap}figure{flex:1 1 520px;margin:0;background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px}
        figcaption{font-weight:600;margin-bottom:8px}.chart{width:100%;height:auto;font-size:11px;fill:var(--fg)}
        .chart .grid{stroke:var(--line)}.chart .axis{fill:var(--muted)}.legend{margin:6px 0 0;font-size:12px;color:var(--muted)}
        .legend span{margin-right:12px;white-space:nowrap}.legend i,.dot{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
        .filters{display:flex;gap:14px;flex-wrap:wrap;margin-bottom:10px}.filters label{color:var(--muted);font-size:12px;display:flex;flex-direction:column;gap:3px}
        select,input{font:inherit;padding:5px 8px;border:1px solid var(--line);border-radius:6px;background:#fff;min-width:150px}
        .scroll{overflow-x:auto;background:#fff;border:1px solid var(--line);border-radius:8px}
        table{border-collapse:collapse;width:100%}th,td{padding:7px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
        th{position:sticky;top:0;background:#f2f4f7;font-size:12px;color:var(--muted);white-space:nowrap}
        td{word-break:normal;overflow-wrap:normal;hyphens:none}td.id,.w{white-space:nowrap}
        tr.more td{padding-top:0;font-size:13px}tbody tr:first-child td{border-bottom:0}
        div.more{display:flex;flex-wrap:wrap;gap:6px 28px}div.more .detail{flex:1 1 24em}div.more .values{flex:0 1 auto}
        .label{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);margin-right:4px}
        td.kind a{color:inherit;text-decoration:none}dl.kinds{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 16px;margin:0}
        dl.kinds div{padding:6px 0;border-bottom:1px solid var(--line)}dl.kinds div:last-child{border-bottom:0}dl.kinds dt{font-weight:600}
        dl.kinds dd{margin:2px 0 0 15px;color:var(--fg)}dl.kinds code{font-weight:400;color:var(--muted);font-size:12px}
        .num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tbody.resolved td{color:var(--muted)}
        .badge{padding:1px 8px;border-radius:10px;font-size:12px;white-space:nowrap}td.kind{white-space:nowrap}.badge.open{background:#fee4e2;color:var(--bad)}.badge.resolved{background:#d1fadf;color:var(--good)}.badge.acknowledged{background:#eef;color:#446}.ack{font-size:11px;color:#667;max-width:16em}
        details.evidence{margin-top:6px}details.evidence summary{cursor:pointer;color:var(--muted);font-size:12px}
        details.evidence pre{width:0;min-width:100%;box-sizing:border-box;max-height:36em;overflow:auto;white-space:pre;font-size:11.5px;background:#f7f8fa;border:1px solid var(--line);border-radius:6px;padding:8px;margin:6px 0 0}
        .evidence-note{font-size:12px;color:var(--muted);margin-top:4px}
        .kv b{font-weight:600;color:var(--muted)}.none,.empty{color:var(--muted)}tbody[hidden],tr[hidden]{display:none}
        @media print{.filters{display:none}body{background:#fff}}
        """

    static let script = """
        (function(){
        var p=document.getElementById('f-provider'),k=document.getElementById('f-kind'),s=document.getElementById('f-status'),q=document.getElementById('f-text');
        var rows=Array.prototype.slice.call(document.querySelectorAll('#discrepancies tbody[data-provider]')),shown=document.getElementById('shown');
        function apply(){var t=q.value.trim().toLowerCase(),n=0;rows.forEach(function(r){
        var ok=(!p.value||r.dataset.provider===p.value)&&(!k.value||r.dataset.kind===k.value)&&(!s.value||r.dataset.status===s.value)&&(!t||r.textContent.toLowerCase().indexOf(t)>=0);
        r.hidden=!ok;if(ok)n++;});shown.textContent=n;}
        [p,k,s,q].forEach(function(e){e.addEventListener('input',apply);e.addEventListener('change',apply);});
        })();
        """
}

extension Report {
    /// The evidence behind one discrepancy, folded: the `payrecon explain` timeline, self-contained.
    func evidence(_ d: DiscrepancyRow) -> String {
        guard let e = explanations[d.id] else {
            return d.evidenceID == nil ? "" : "<div class=\"evidence-note\">Evidence: <code>payrecon explain \(d.id)</code></div>"
        }
        return "<details class=\"evidence\" id=\"evidence-\(d.id)\"><summary>Evidence: why payrecon says this"
            + (d.evidenceID.map { " (check \($0))" } ?? "") + "</summary><pre>"
            + HTML.escape(TextTable.safeMultiline(e.table(bodyLimit: Report.answerBytesInHTML))) + "</pre></details>"
    }
}
