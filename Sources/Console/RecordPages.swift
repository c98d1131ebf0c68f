import Foundation
import Reconciliation
import Reporting
import Store

/// An order's page (`explain --order`), the rejected deliveries, and the settlement files and backfill windows.
enum RecordPages {
    /// An order: what it holds, links to each discrepancy, action and delivery, and its whole `explain` timeline.
    static func order(_ e: Explanation, timeline: String, session: ConsoleSession) -> String {
        let discrepancies = e.discrepancies.map {
            [
                ConsoleHTML.link("/discrepancies/\($0.id)", String($0.id)), HTML.escape(KindGuide.of($0.kind).title),
                ConsoleHTML.badge($0.status), HTML.escape($0.detail)
            ]
        }
        let actions = e.actions.map {
            [
                ConsoleHTML.link("/actions/\($0.id)", String($0.id)), HTML.escape($0.kind),
                HTML.escape($0.amount + " " + $0.currency), ConsoleHTML.badge($0.status)
            ]
        }
        let deliveries = e.deliveries.map {
            [
                ConsoleHTML.link("/deliveries/\($0.id)", String($0.id)), ConsoleHTML.text($0.eventType), ConsoleHTML.time($0.receivedAt),
                ConsoleHTML.badge($0.status), ConsoleHTML.text($0.outcome)
            ]
        }
        return ConsolePages.page(
            title: "Order \(e.provider.rawValue) \(e.orderID ?? e.transactionRef)", session: session,
            body: "<h2>Discrepancies</h2>"
                + ConsoleHTML.table(
                    id: "order-discrepancies", headers: ["Id", "Kind", "Status", "Detail"], rows: discrepancies, none: "None.")
                + "<h2>Actions</h2>"
                + ConsoleHTML.table(
                    id: "order-actions", headers: ["Id", "Action", "Amount", "Status"], numeric: [2], rows: actions, none: "None.")
                + "<h2>Deliveries</h2>"
                + ConsoleHTML.table(
                    id: "order-deliveries", headers: ["Id", "Event", "Received", "Status", "How it ended"], rows: deliveries, none: "None.")
                + "<details class=\"evidence\" open><summary>The timeline: every version, check, answer and call</summary>"
                + "<pre class=\"timeline\">\(HTML.escape(timeline))</pre></details>")
    }

    static func rejections(
        _ rows: [RejectionSamples.Sample], counts: [(provider: Provider, reason: String, count: Int64)], provider: Provider?,
        reason: String?, next: Int64?, session: ConsoleSession
    ) -> String {
        let countRows = counts.map { [$0.provider.rawValue, HTML.escape($0.reason), String($0.count)] }
        let cells = rows.map { r in
            [
                ConsoleHTML.link("/rejections/\(r.id)", String(r.id)), HTML.escape(r.provider.rawValue), HTML.escape(r.reason),
                ConsoleHTML.text(r.source), ConsoleHTML.time(r.receivedAt), String(r.bodyBytes), HTML.escape(String(r.message.prefix(160)))
            ]
        }
        var pairs: [(String, String)] = []
        if let provider { pairs.append(("provider", provider.rawValue)) }
        if let reason { pairs.append(("reason", reason)) }
        return ConsolePages.page(
            title: "Rejected deliveries", session: session,
            body: "<p class=\"meta\">Answered 4xx at the door and never processed. Anyone can send these: nothing here is "
                + "authenticated. Every one is counted; the first of each provider and reason an hour are kept as samples.</p>"
                + "<h2>Counted in the last 24 hours</h2>"
                + ConsoleHTML.table(
                    id: "rejection-counts", headers: ["Provider", "Reason", "Count"], numeric: [2], rows: countRows, none: "None.")
                + "<h2>Samples</h2>"
                + ConsoleHTML.filters(
                    action: "/rejections",
                    ConsoleHTML.providerSelect(provider)
                        + "<label for=\"f-reason\">Reason<input id=\"f-reason\" name=\"reason\" value=\"\(HTML.escape(reason ?? ""))\"></label>"
                )
                + ConsoleHTML.table(
                    id: "rejections", headers: ["Id", "Provider", "Reason", "Source", "Received", "Bytes", "Message"], numeric: [5],
                    rows: cells, none: "No sample matches.")
                + ConsoleHTML.pager("/rejections", pairs, next: next))
    }

    /// One sample, and what `payrecon verify` reads to check it offline: its body and headers as files.
    static func rejection(_ r: RejectionSamples.Sample, session: ConsoleSession) -> String {
        let cut = Int64(r.bodyPrefix.count) < r.bodyBytes
        let facts = ConsoleHTML.facts([
            ("Provider", HTML.escape(r.provider.rawValue)), ("Reason", HTML.escape(r.reason)), ("Message", HTML.escape(r.message)),
            ("Source", ConsoleHTML.text(r.source)), ("Received", ConsoleHTML.time(r.receivedAt)),
            ("Body", "\(r.bodyBytes) bytes" + (cut ? ", the first \(r.bodyPrefix.count) kept (its signature cannot verify)" : ""))
        ])
        let headers = r.headers.map { [HTML.escape($0.0), HTML.escape($0.1)] }
        return ConsolePages.page(
            title: "Rejected delivery \(r.id)", session: session,
            body: "<p class=\"meta\">Unauthenticated: anyone could have sent it.</p>" + facts
                + "<h2>Check it offline</h2><p>Download "
                + "<a href=\"/rejections/\(r.id)/body\" download=\"body\">body</a> and "
                + "<a href=\"/rejections/\(r.id)/headers.json\" download=\"headers.json\">headers.json</a> into one folder, then run "
                + "<code>payrecon verify \(HTML.escape(r.provider.rawValue)) --body body --headers headers.json --at transmission</code></p>"
                + "<h2>Headers as received</h2>"
                + ConsoleHTML.table(id: "headers", headers: ["Name", "Value"], rows: headers, none: "No header was kept.")
                + "<h2>Body</h2>" + ConsoleHTML.bytes(r.bodyPrefix))
    }

    static func settlement(_ files: [SettlementFileRow], windows: [BackfillWindowRow], session: ConsoleSession) -> String {
        let fileRows = files.map { f in
            [
                String(f.id), HTML.escape(f.provider.rawValue), HTML.escape(f.name), ConsoleHTML.text(f.kind), ConsoleHTML.text(f.account),
                ConsoleHTML.text(f.day), String(f.bodyRows), String(f.linesNew), ConsoleHTML.time(f.importedAt),
                f.problems.isEmpty ? "—" : "<span class=\"error\">\(HTML.escape(f.problems))</span>"
            ]
        }
        let windowRows = windows.map { w in
            [
                HTML.escape(w.provider.rawValue), HTML.escape(w.source), ConsoleHTML.time(w.start), ConsoleHTML.time(w.end),
                String(w.found),
                String(w.requests), ConsoleHTML.time(w.finishedAt)
            ]
        }
        return ConsolePages.page(
            title: "Settlement and backfill", session: session,
            body: "<p class=\"meta\">The newest 100 of each.</p><h2>Settlement files imported</h2>"
                + ConsoleHTML.table(
                    id: "settlement-files",
                    headers: ["Id", "Provider", "File", "Kind", "Account", "Day", "Rows", "New lines", "Imported", "Problems"],
                    numeric: [6, 7], rows: fileRows, none: "No settlement file was imported (payrecon settlement import).")
                + "<h2>Backfill windows read to the end</h2>"
                + ConsoleHTML.table(
                    id: "backfill-windows", headers: ["Provider", "List", "From", "To", "Found", "Requests", "Finished"], numeric: [4, 5],
                    rows: windowRows, none: "No backfill ran (payrecon backfill)."))
    }
}
