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
            form.ack,form.act{display:flex;gap:10px;align-items:flex-end;flex-wrap:wrap;margin:10px 0}form.ack label{flex:1 1 260px}
            dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px}
            dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
            pre.body{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px;font-size:12px;max-height:480px;overflow:auto}
            details.call{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 12px;margin:8px 0}details.call h3{font-size:13px}
            label.check{display:flex;gap:6px;align-items:center}
            svg.chart{width:100%;max-width:720px;height:auto;background:#fff;border:1px solid var(--line);border-radius:8px}figure{margin:0 0 12px}
            .charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px}
            .legend span{margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
            .swatch-done{background:#2e7d32}.swatch-ignored{background:#9aa0a6}.swatch-pending{background:#3969ac}.swatch-dead{background:#b3261e}.swatch-rejected{background:#e8710a}
            """

    /// `script`: the page loads /console.js (the overview's refresh); every page reads without it.
    /// The overview's refresh: a long poll of /live, which answers when the figures change (the server is woken by
    /// NOTIFY, or reads them on a timer); then the figures are fetched again and put in place. Without it the page
    /// is the same, as of when it was loaded.
    static let script = """
        "use strict";
        (function () {
          var live = document.getElementById("live");
          if (!live || !window.fetch || !window.DOMParser) return;
          var stamp = live.getAttribute("data-live");
          function pause(ms) { return new Promise(function (done) { setTimeout(done, ms); }); }
          async function refresh() {
            var page = await fetch(location.pathname + location.search,
              { credentials: "same-origin", cache: "no-store", headers: { "X-Payrecon-Refresh": "1" } });
            if (!page.ok) return false;
            var fresh = new DOMParser().parseFromString(await page.text(), "text/html").getElementById("live");
            if (!fresh) return false;
            live.replaceWith(fresh);
            live = fresh;
            stamp = live.getAttribute("data-live");
            var status = document.getElementById("live-status");
            if (status) status.textContent = "Refreshed " + new Date().toLocaleTimeString() + "; it refreshes by itself.";
            return true;
          }
          async function watch() {
            for (;;) {
              try {
                var answer = await fetch("/live?since=" + encodeURIComponent(stamp), { credentials: "same-origin", cache: "no-store" });
                if (answer.status === 401 || answer.status === 403) return;
                var next = answer.ok ? (await answer.text()).trim() : stamp;
                if (next !== stamp) await pause((await refresh()) ? 2000 : 15000);
                else await pause(answer.ok ? 1000 : 15000);
              } catch (e) { await pause(15000); }
            }
          }
          watch();
        })();
        """

    static func page(title: String, session: ConsoleSession?, script: Bool = false, body: String) -> String {
        var nav = ""
        if let session {
            nav = """
                <nav aria-label="Console"><a href="/">Overview</a><a href="/discrepancies">Discrepancies</a><a href="/actions">Actions</a>\
                <a href="/deliveries">Deliveries</a><a href="/rejections">Rejections</a><a href="/settlement">Settlement</a>\
                <span class="who">\(HTML.escape(session.userName)) (\(HTML.escape(session.role)))</span>\
                <form method="post" action="/logout"><input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">\
                <button type="submit">Sign out</button></form></nav>
                """
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(HTML.escape(title)) · payrecon</title><link rel="stylesheet" href="/console.css">\(script ? "<script src=\"/console.js\" defer></script>" : "")</head>
            <body>\(nav)<header><h1>\(HTML.escape(title))</h1></header><main><section>
            \(body)
            </section></main></body></html>
            """
    }

    static func signIn(error: String?) -> String {
        page(
            title: "Sign in", session: nil,
            body: """
                \(ConsoleHTML.alert(error))
                <form class="signin" method="post" action="/login">
                <label for="name">Name<input id="name" name="name" autocomplete="username" required autofocus></label>
                <label for="password">Password<input id="password" name="password" type="password" autocomplete="current-password" required></label>
                <button class="primary" type="submit">Sign in</button></form>
                """)
    }

    static func discrepancies(
        _ rows: [StoredDiscrepancy], filter: DiscrepancyFilter, search: String?, next: Int64?, session: ConsoleSession
    ) -> String {
        let statuses: [(value: String, label: String)] = [
            ("open", "Open"), ("acknowledged", "Acknowledged"), ("resolved", "Resolved"), ("all", "All")
        ]
        let kinds = [("", "Any")] + DiscrepancyKind.allCases.map { ($0.rawValue, KindGuide.of($0).title) }
        let cells = rows.map { d in
            [
                ConsoleHTML.link("/discrepancies/\(d.id)", String(d.id)), HTML.escape(d.provider.rawValue),
                HTML.escape(KindGuide.of(d.kind).title), ConsoleHTML.badge(d.status),
                d.orderID.map { ConsoleHTML.orderLink(d.provider, $0) } ?? "—", HTML.escape(d.transactionRef), HTML.escape(d.detail)
            ]
        }
        var pairs = [("status", filter.status ?? "all")]
        if let p = filter.provider { pairs.append(("provider", p.rawValue)) }
        if let k = filter.kind { pairs.append(("kind", k.rawValue)) }
        if let search { pairs.append(("q", search)) }
        return page(
            title: "Discrepancies", session: session,
            body: ConsoleHTML.filters(
                action: "/discrepancies",
                ConsoleHTML.select("status", label: "Status", options: statuses, selected: filter.status ?? "all")
                    + ConsoleHTML.providerSelect(filter.provider)
                    + ConsoleHTML.select("kind", label: "Kind", options: kinds, selected: filter.kind?.rawValue ?? "")
                    + "<label for=\"f-q\">Order id or transaction reference<input id=\"f-q\" name=\"q\" value=\"\(HTML.escape(search ?? ""))\"></label>"
            )
                + ConsoleHTML.table(
                    id: "discrepancies", headers: ["Id", "Provider", "Kind", "Status", "Order", "Transaction", "Detail"], rows: cells,
                    none: "No discrepancy matches.")
                + ConsoleHTML.pager("/discrepancies", pairs, next: next))
    }

    /// One discrepancy: what it says, its `explain` timeline, who acted on it in the console, and the ack form where
    /// the viewer may act.
    static func discrepancy(
        _ d: StoredDiscrepancy, timeline: String, audit: [ConsoleAuditEntry], session: ConsoleSession, error: String? = nil
    ) -> String {
        let guide = KindGuide.of(d.kind)
        let ack =
            session.role == "operator" && d.status == "open"
            ? ConsoleHTML.writeForm(
                "/discrepancies/\(d.id)/ack", session: session,
                "<label for=\"note\">Note (why it is acknowledged)<input id=\"note\" name=\"note\" maxlength=\"500\"></label>",
                button: "Acknowledge", class: "ack") : ""
        return page(
            title: "Discrepancy \(d.id)", session: session,
            body: """
                \(ConsoleHTML.alert(error))
                <p><span class="badge \(HTML.escape(d.status))">\(HTML.escape(d.status))</span> <b>\(HTML.escape(guide.title))</b>: \(HTML.escape(guide.meaning))</p>
                <p>\(HTML.escape(d.detail))</p>\(d.orderID.map { "<p>Order " + ConsoleHTML.orderLink(d.provider, $0, label: "\(d.provider.rawValue) \($0)") + "</p>" } ?? "")<p class="meta">Next step: \(HTML.escape(guide.nextStep))</p>
                \(d.ackNote.map { "<p class=\"ack\">Acknowledged\(d.acknowledgedBy.map { " by " + HTML.escape($0) } ?? ""): \(HTML.escape($0))</p>" } ?? "")
                \(ack)
                \(ConsoleHTML.trail(audit))
                <details class="evidence"><summary>Evidence: why payrecon says this</summary><pre class="timeline">\(HTML.escape(timeline))</pre></details>
                """)
    }

    static func notFound(session: ConsoleSession?) -> String {
        page(title: "Not found", session: session, body: "<p>There is no such page. <a href=\"/\">The overview</a>.</p>")
    }
}
