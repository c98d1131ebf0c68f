import Foundation
import Reconciliation
import Reporting
import Store

/// The deliveries page and one delivery's page: headers as stored, the body, how it ended, the orders it named.
enum DeliveryPages {
    static let statusOptions: [(value: String, label: String)] = [
        ("all", "All"), ("pending", "Pending"), ("done", "Done"), ("ignored", "Ignored"), ("dead", "Dead")
    ]

    /// Header values never shown: a sender's credentials, were one to send them.
    static let hiddenHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "x-api-key"]

    static func list(_ rows: [QueuedDelivery], status: String?, provider: Provider?, next: Int64?, session: ConsoleSession) -> String {
        let cells = rows.map { d in
            [
                ConsoleHTML.link("/deliveries/\(d.id)", String(d.id)), HTML.escape(d.provider.rawValue), ConsoleHTML.text(d.eventType),
                ConsoleHTML.time(d.receivedAt), ConsoleHTML.badge(d.status), String(d.attempts),
                ConsoleHTML.text((d.status == "done" || d.status == "ignored" ? d.outcome : d.lastError).map { String($0.prefix(160)) })
            ]
        }
        let list = ConsoleHTML.StatusList(
            title: "Deliveries", path: "/deliveries", statusOptions: statusOptions, tableID: "deliveries",
            headers: ["Id", "Provider", "Event", "Received", "Status", "Attempts", "How it ended"], numeric: [5],
            none: "No delivery matches.")
        return ConsoleHTML.statusList(list, status: status, provider: provider, rows: cells, next: next, session: session)
    }

    static func one(
        _ d: QueuedDelivery, orders: [(provider: Provider, orderID: String)], audit: [ConsoleAuditEntry], session: ConsoleSession,
        error: String? = nil
    ) -> String {
        let facts = ConsoleHTML.facts([
            ("Provider", HTML.escape(d.provider.rawValue)), ("Event", ConsoleHTML.text(d.eventType)),
            ("Deduplicated by", "<code>\(HTML.escape(d.dedupeKey))</code>"), ("Received", ConsoleHTML.time(d.receivedAt)),
            ("Redelivered", "\(d.redeliveries) time\(d.redeliveries == 1 ? "" : "s")"), ("Status", ConsoleHTML.badge(d.status)),
            ("Attempts", String(d.attempts)), ("Next attempt", d.status == "pending" ? ConsoleHTML.time(d.nextAttemptAt) : "—"),
            ("Processed", ConsoleHTML.time(d.processedAt)), ("How it ended", ConsoleHTML.text(d.outcome)),
            ("Last error", ConsoleHTML.text(d.lastError)),
            (
                "Orders it named",
                orders.isEmpty ? "—" : orders.map { ConsoleHTML.orderLink($0.provider, $0.orderID) }.joined(separator: ", ")
            )
        ])
        let retry =
            d.status == "dead" && session.role == ConsoleRole.operator.rawValue
            ? ConsoleHTML.writeForm("/deliveries/\(d.id)/retry", session: session, "", button: "Retry")
                + "<p class=\"meta\">It is due again with a fresh budget of attempts; a worker takes it at once.</p>" : ""
        let headers = d.headers.map { name, value in
            [HTML.escape(name), hiddenHeaders.contains(name.lowercased()) ? "<i>hidden</i>" : HTML.escape(value)]
        }
        return ConsolePages.page(
            title: "Delivery \(d.id)", session: session,
            body: ConsoleHTML.alert(error) + facts + retry
                + "<h2>Headers as received</h2>"
                + ConsoleHTML.table(id: "headers", headers: ["Name", "Value"], rows: headers, none: "No header was stored.")
                + "<h2>Body (\(d.body.count) bytes, as stored)</h2>" + ConsoleHTML.bytes(d.body)
                + ConsoleHTML.trail(audit))
    }
}
