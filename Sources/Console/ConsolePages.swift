import Foundation
import Reconciliation
import Reporting
import Store

/// The console's pages as HTML: every outside string escaped (`HTML.escape`), no script, styles from /console.css
/// only (the Content-Security-Policy allows nothing inline), forms with labels, usable by keyboard.
enum ConsolePages {
    /// The report's look, and what the console adds to it.
    static let css =
        HTML.css + """
            nav{display:flex;gap:18px;align-items:center;flex-wrap:wrap;max-width:1280px;margin:0 auto;padding:10px 24px;border-bottom:1px solid var(--line);background:#fff}
            nav a{color:var(--fg);font-weight:600}nav .who{margin-left:auto;color:var(--muted)}nav form{display:inline}
            button{font:inherit;padding:5px 12px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer}
            button.primary{background:#1d2330;color:#fff;border-color:#1d2330}
            a:focus,button:focus,input:focus,select:focus,summary:focus{outline:3px solid #3969ac;outline-offset:2px}
            form.signin{max-width:360px;background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;display:flex;flex-direction:column;gap:10px}
            form.signin label,form.ack label{display:flex;flex-direction:column;gap:3px;color:var(--muted);font-size:12px}
            .error{color:var(--bad);font-weight:600}.pager{margin:10px 0}pre.timeline{white-space:pre-wrap;background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px;font-size:12px}
            form.ack{display:flex;gap:10px;align-items:flex-end;flex-wrap:wrap;margin:10px 0}
            """

    static func page(title: String, session: ConsoleSession?, body: String) -> String {
        var nav = ""
        if let session {
            nav = """
                <nav aria-label="Console"><a href="/">Overview</a><a href="/discrepancies">Discrepancies</a>\
                <span class="who">\(HTML.escape(session.userName)) (\(HTML.escape(session.role)))</span>\
                <form method="post" action="/logout"><input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">\
                <button type="submit">Sign out</button></form></nav>
                """
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(HTML.escape(title)) · payrecon</title><link rel="stylesheet" href="/console.css"></head>
            <body>\(nav)<header><h1>\(HTML.escape(title))</h1></header><main><section>
            \(body)
            </section></main></body></html>
            """
    }

    static func signIn(error: String?) -> String {
        page(
            title: "Sign in", session: nil,
            body: """
                \(error.map { "<p class=\"error\" role=\"alert\">\(HTML.escape($0))</p>" } ?? "")
                <form class="signin" method="post" action="/login">
                <label for="name">Name<input id="name" name="name" autocomplete="username" required autofocus></label>
                <label for="password">Password<input id="password" name="password" type="password" autocomplete="current-password" required></label>
                <button class="primary" type="submit">Sign in</button></form>
                """)
    }

    /// The money at risk by currency, open discrepancies by kind, and actions by state: the figures `report` gives.
    static func overview(_ summary: ReportSummary, actions: (pending: Int, inDoubt: Int, failed: Int), session: ConsoleSession) -> String {
        let money =
            summary.amountAtRisk.isEmpty
            ? "<span class=\"value\">0</span>"
            : summary.amountAtRisk.sorted { $0.key.code < $1.key.code }.map { currency, minor in
                "<span class=\"value money\" data-currency=\"\(currency.code)\">"
                    + "\(ReportSummary.format(minor, exponent: currency.exponent)) \(currency.code)</span>"
            }.joined(separator: "<br>")
        let kinds = summary.byKind.sorted { $0.key.rawValue < $1.key.rawValue }.map { kind, count in
            "<tr><td class=\"kind\"><a href=\"/discrepancies?kind=\(kind.rawValue)\">\(HTML.escape(KindGuide.of(kind).title))</a></td>"
                + "<td class=\"num\" data-kind=\"\(kind.rawValue)\">\(count)</td></tr>"
        }.joined()
        return page(
            title: "Overview", session: session,
            body: """
                <div class="cards">
                <div class="card \(summary.amountAtRisk.isEmpty ? "" : "bad")"><div class="label">Money at risk</div><div id="at-risk">\(money)</div></div>
                <div class="card \(summary.open == 0 ? "" : "warn")"><div class="label">Open discrepancies</div><div class="value" id="open">\(summary.open)</div></div>
                <div class="card \(actions.failed + actions.inDoubt == 0 ? "" : "bad")"><div class="label">Actions</div>\
                <div id="actions"><span class="value">\(actions.pending)</span> pending<br>\(actions.inDoubt) in doubt, \(actions.failed) failed</div></div>
                </div>
                <h2>Open discrepancies by kind</h2>
                \(kinds.isEmpty ? "<p class=\"none\">None open.</p>" : "<div class=\"scroll\"><table id=\"by-kind\"><thead><tr><th scope=\"col\">Kind</th><th scope=\"col\" class=\"num\">Open</th></tr></thead><tbody>\(kinds)</tbody></table></div>")
                """)
    }

    static func discrepancies(
        _ rows: [StoredDiscrepancy], filter: DiscrepancyFilter, search: String?, next: Int64?, session: ConsoleSession
    ) -> String {
        func option(_ value: String, _ label: String, selected: Bool) -> String {
            "<option value=\"\(HTML.escape(value))\"\(selected ? " selected" : "")>\(HTML.escape(label))</option>"
        }
        let statuses = [("open", "Open"), ("acknowledged", "Acknowledged"), ("resolved", "Resolved"), ("all", "All")].map {
            option($0.0, $0.1, selected: (filter.status ?? "all") == $0.0)
        }.joined()
        let providers = ([("", "Any")] + Provider.allCases.map { ($0.rawValue, $0.rawValue) }).map {
            option($0.0, $0.1, selected: (filter.provider?.rawValue ?? "") == $0.0)
        }.joined()
        let kinds = ([("", "Any")] + DiscrepancyKind.allCases.map { ($0.rawValue, KindGuide.of($0).title) }).map {
            option($0.0, $0.1, selected: (filter.kind?.rawValue ?? "") == $0.0)
        }.joined()
        let body = rows.map { d in
            """
            <tr><td class="id"><a href="/discrepancies/\(d.id)">\(d.id)</a></td><td>\(HTML.escape(d.provider.rawValue))</td>\
            <td class="kind">\(HTML.escape(KindGuide.of(d.kind).title))</td><td><span class="badge \(HTML.escape(d.status))">\(HTML.escape(d.status))</span></td>\
            <td>\(HTML.escape(d.orderID ?? "—"))</td><td>\(HTML.escape(d.transactionRef))</td><td>\(HTML.escape(d.detail))</td></tr>
            """
        }.joined()
        var query = "status=\(filter.status ?? "all")"
        if let p = filter.provider { query += "&provider=\(p.rawValue)" }
        if let k = filter.kind { query += "&kind=\(k.rawValue)" }
        if let search { query += "&q=" + (search.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") }
        let pager = next.map { "<p class=\"pager\"><a href=\"/discrepancies?\(HTML.escape(query))&amp;before=\($0)\">Older</a></p>" } ?? ""
        return page(
            title: "Discrepancies", session: session,
            body: """
                <form class="filters" method="get" action="/discrepancies">
                <label for="f-status">Status<select id="f-status" name="status">\(statuses)</select></label>
                <label for="f-provider">Provider<select id="f-provider" name="provider">\(providers)</select></label>
                <label for="f-kind">Kind<select id="f-kind" name="kind">\(kinds)</select></label>
                <label for="f-q">Order id or transaction reference<input id="f-q" name="q" value="\(HTML.escape(search ?? ""))"></label>
                <button type="submit">Show</button></form>
                \(rows.isEmpty ? "<p class=\"none\">No discrepancy matches.</p>" : """
                <div class="scroll"><table id="discrepancies"><thead><tr><th scope="col">Id</th><th scope="col">Provider</th><th scope="col">Kind</th>\
                <th scope="col">Status</th><th scope="col">Order</th><th scope="col">Transaction</th><th scope="col">Detail</th></tr></thead>\
                <tbody>\(body)</tbody></table></div>
                """)
                \(pager)
                """)
    }

    /// One discrepancy: what it says, its `explain` timeline, who acted on it in the console, and the ack form where
    /// the viewer may act.
    static func discrepancy(
        _ d: StoredDiscrepancy, timeline: String, audit: [ConsoleAuditEntry], session: ConsoleSession, error: String? = nil
    ) -> String {
        let guide = KindGuide.of(d.kind)
        let ack =
            session.role == "operator" && d.status == "open"
            ? """
            <form class="ack" method="post" action="/discrepancies/\(d.id)/ack"><input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">
            <label for="note">Note (why it is acknowledged)<input id="note" name="note" maxlength="500"></label>
            <button class="primary" type="submit">Acknowledge</button></form>
            """ : ""
        let trail = audit.map {
            "<li>\(HTML.escape(Timestamp.iso8601($0.at))) \(HTML.escape($0.userName)) \(HTML.escape($0.action))"
                + ($0.address.map { " from " + HTML.escape($0) } ?? "") + ($0.detail.map { ": " + HTML.escape($0) } ?? "") + "</li>"
        }.joined()
        return page(
            title: "Discrepancy \(d.id)", session: session,
            body: """
                \(error.map { "<p class=\"error\" role=\"alert\">\(HTML.escape($0))</p>" } ?? "")
                <p><span class="badge \(HTML.escape(d.status))">\(HTML.escape(d.status))</span> <b>\(HTML.escape(guide.title))</b>: \(HTML.escape(guide.meaning))</p>
                <p>\(HTML.escape(d.detail))</p><p class="meta">Next step: \(HTML.escape(guide.nextStep))</p>
                \(d.ackNote.map { "<p class=\"ack\">Acknowledged\(d.acknowledgedBy.map { " by " + HTML.escape($0) } ?? ""): \(HTML.escape($0))</p>" } ?? "")
                \(ack)
                \(trail.isEmpty ? "" : "<h2>In the console</h2><ul id=\"audit\">\(trail)</ul>")
                <details class="evidence"><summary>Evidence: why payrecon says this</summary><pre class="timeline">\(HTML.escape(timeline))</pre></details>
                """)
    }

    static func notFound(session: ConsoleSession?) -> String {
        page(title: "Not found", session: session, body: "<p>There is no such page. <a href=\"/\">The overview</a>.</p>")
    }
}
