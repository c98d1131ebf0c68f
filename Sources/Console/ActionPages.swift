import Foundation
import Reconciliation
import Reporting
import Store

/// The actions page and one action's page: what payrecon planned, what it sent, what the provider answered.
enum ActionPages {
    static let statusOptions: [(value: String, label: String)] = [
        ("all", "All"), ("pending", "Pending"), ("in_doubt", "In doubt"), ("failed", "Failed"), ("succeeded", "Succeeded"),
        ("superseded", "Superseded")
    ]

    static func list(_ rows: [StoredAction], status: String?, provider: Provider?, next: Int64?, session: ConsoleSession) -> String {
        let cells = rows.map { a in
            [
                ConsoleHTML.link("/actions/\(a.id)", String(a.id)), HTML.escape(a.provider.rawValue),
                ConsoleHTML.orderLink(a.provider, a.orderID), HTML.escape(a.kind.rawValue),
                ConsoleHTML.money(a.amount.minorUnits, a.amount.currency),
                ConsoleHTML.badge(a.status.rawValue) + (a.inDoubt ? " " + ConsoleHTML.badge("in doubt") : ""),
                ConsoleHTML.time(a.createdAt),
                ConsoleHTML.text(a.lastError.map { String($0.prefix(160)) })
            ]
        }
        let list = ConsoleHTML.StatusList(
            title: "Actions", path: "/actions", statusOptions: statusOptions, tableID: "actions",
            headers: ["Id", "Provider", "Order", "Action", "Amount", "Status", "Created", "Last error"], numeric: [4],
            none: "No action matches.")
        return ConsoleHTML.statusList(list, status: status, provider: provider, rows: cells, next: next, session: session)
    }

    /// One action: its facts, each call with what was asked and answered (folded), who acted on it in the console,
    /// and, for an operator, retry when it failed.
    static func one(
        _ a: StoredAction, calls: [Explanation.Call], audit: [ConsoleAuditEntry], canRetry: Bool, session: ConsoleSession,
        error: String? = nil
    ) -> String {
        let facts = ConsoleHTML.facts([
            ("Order", ConsoleHTML.orderLink(a.provider, a.orderID, label: "\(a.provider.rawValue) \(a.orderID)")),
            ("Action", HTML.escape(a.kind.rawValue)),
            ("Amount", ConsoleHTML.money(a.amount.minorUnits, a.amount.currency)),
            ("Brings the transaction to", ConsoleHTML.money(a.target, a.amount.currency)),
            ("Status", ConsoleHTML.badge(a.status.rawValue) + (a.inDoubt ? " " + ConsoleHTML.badge("in doubt") : "")),
            ("Acts on", ConsoleHTML.text(a.providerTarget ?? a.transactionRef)),
            ("Idempotency key", "<code>\(HTML.escape(a.idempotencyKey))</code>"),
            ("Attempts", String(a.attempts)),
            ("Provider reference", ConsoleHTML.text(a.providerRef)),
            ("Created", ConsoleHTML.time(a.createdAt)),
            ("Last sent", ConsoleHTML.time(a.sentAt)),
            ("Last error", ConsoleHTML.text(a.lastError))
        ])
        let callList = calls.map { c in
            let answer = c.status.map { "answered \($0)" } ?? "no answer"
            return """
                <details class="call"><summary>Attempt \(c.attempt): \(HTML.escape(c.method)) \(HTML.escape(c.url)), \
                \(HTML.escape(answer)), \(HTML.escape(Timestamp.iso8601(c.sentAt)))\(c.outcome.map { " · " + HTML.escape(String($0.prefix(120))) } ?? "")</summary>
                <h3>Asked</h3>\(ConsoleHTML.bytes(c.request))
                <h3>Answered (\(c.length) bytes, SHA-256 \(HTML.escape(String(c.sha256.prefix(16))))…)</h3>\
                \(c.body.map { ConsoleHTML.bytes($0) } ?? "<p class=\"none\">The answer's body was not kept.</p>")</details>
                """
        }.joined()
        return ConsolePages.page(
            title: "Action \(a.id)", session: session,
            body: ConsoleHTML.alert(error) + facts + (canRetry ? retryForm(a, session: session) : "")
                + "<h2>Calls</h2>" + (callList.isEmpty ? "<p class=\"none\">No call was made.</p>" : callList)
                + ConsoleHTML.trail(audit))
    }

    /// Retry re-plans from a fresh fetch: pending again with the plan's amount if the order still calls for it, else
    /// superseded. A call whose outcome is unknown is retried only once someone checked it was not applied.
    static func retryForm(_ a: StoredAction, session: ConsoleSession) -> String {
        let confirm =
            a.inDoubt
            ? "<label class=\"check\"><input type=\"checkbox\" name=\"checked\" value=\"yes\" required> "
                + "I checked at \(HTML.escape(a.provider.rawValue)) that the last call was not applied</label>" : ""
        // The attempt looked at: a retry of an action tried again since is refused (the check above was of this one).
        let attempt = "<input type=\"hidden\" name=\"attempts\" value=\"\(a.attempts)\">"
        return ConsoleHTML.writeForm("/actions/\(a.id)/retry", session: session, attempt + confirm, button: "Re-plan and retry")
            + "<p class=\"meta\">The transaction is fetched again and the order re-planned: if the order still calls for this "
            + "action it is pending again with the plan's amount (the next execution sends it), else it is superseded.</p>"
    }
}
