import Foundation
import Reconciliation
import Reporting
import Store

/// The pieces every console page is built from. Each takes text and escapes it (`HTML.escape`); only what a helper
/// itself made is passed on as HTML (`cells` of `table`, `body` of `page`).
enum ConsoleHTML {
    /// A `<select>` with its label.
    static func select(_ name: String, label: String, options: [(value: String, label: String)], selected: String) -> String {
        let choices = options.map {
            "<option value=\"\(HTML.escape($0.value))\"\($0.value == selected ? " selected" : "")>\(HTML.escape($0.label))</option>"
        }.joined()
        return "<label for=\"f-\(name)\">\(HTML.escape(label))<select id=\"f-\(name)\" name=\"\(name)\">\(choices)</select></label>"
    }

    /// "Any" and each provider, for a filter.
    static func providerSelect(_ selected: Provider?) -> String {
        select(
            "provider", label: "Provider", options: [("", "Any")] + Provider.allCases.map { ($0.rawValue, $0.rawValue) },
            selected: selected?.rawValue ?? "")
    }

    /// A GET form of filters (`fields` made by `select` and the like).
    static func filters(action: String, _ fields: String) -> String {
        "<form class=\"filters\" method=\"get\" action=\"\(action)\">\(fields)<button type=\"submit\">Show</button></form>"
    }

    /// A table with a caption-less header row; `cells` are HTML already (escape text with `text`).
    static func table(id: String, headers: [String], numeric: Set<Int> = [], rows: [[String]], none: String) -> String {
        guard !rows.isEmpty else { return "<p class=\"none\">\(HTML.escape(none))</p>" }
        let head = headers.enumerated().map {
            "<th scope=\"col\"\(numeric.contains($0.offset) ? " class=\"num\"" : "")>\(HTML.escape($0.element))</th>"
        }.joined()
        let body = rows.map { row in
            "<tr>"
                + row.enumerated().map { "<td\(numeric.contains($0.offset) ? " class=\"num\"" : "")>\($0.element)</td>" }.joined()
                + "</tr>"
        }.joined()
        return "<div class=\"scroll\"><table id=\"\(id)\"><thead><tr>\(head)</tr></thead><tbody>\(body)</tbody></table></div>"
    }

    /// What a list filtered by status and provider shows, and where.
    struct StatusList {
        var title: String, path: String, statusOptions: [(value: String, label: String)]
        var tableID: String, headers: [String], numeric: Set<Int> = [], none: String
    }

    /// A list page filtered by status and provider: the filters, a keyset page of `rows` (cells HTML already), and
    /// "Older" when there is more.
    static func statusList(
        _ list: StatusList, status: String?, provider: Provider?, rows: [[String]], next: Int64?, session: ConsoleSession
    ) -> String {
        var pairs = [("status", status ?? "all")]
        if let provider { pairs.append(("provider", provider.rawValue)) }
        return ConsolePages.page(
            title: list.title, session: session,
            body: filters(
                action: list.path,
                select("status", label: "Status", options: list.statusOptions, selected: status ?? "all") + providerSelect(provider))
                + table(id: list.tableID, headers: list.headers, numeric: list.numeric, rows: rows, none: list.none)
                + pager(list.path, pairs, next: next))
    }

    /// A list of facts: each label and its value (HTML already).
    static func facts(_ pairs: [(String, String)]) -> String {
        "<dl class=\"facts\">" + pairs.map { "<dt>\(HTML.escape($0.0))</dt><dd>\($0.1)</dd>" }.joined() + "</dl>"
    }

    static func text(_ s: String?) -> String { s.map(HTML.escape) ?? "—" }

    static func time(_ date: Date?) -> String { date.map { HTML.escape(Timestamp.iso8601($0)) } ?? "—" }

    static func badge(_ status: String) -> String { "<span class=\"badge \(HTML.escape(status))\">\(HTML.escape(status))</span>" }

    static func money(_ minor: Int64, _ currency: Currency) -> String {
        HTML.escape(Money.format(minorUnits: minor, exponent: currency.exponent) + " " + currency.code)
    }

    static func link(_ href: String, _ label: String) -> String { "<a href=\"\(HTML.escape(href))\">\(HTML.escape(label))</a>" }

    /// `/order?provider=pxp&id=ORD-1`: an order's page (ids may hold any character, so they go in the query).
    static func orderLink(_ provider: Provider, _ orderID: String, label: String? = nil) -> String {
        link("/order?" + query([("provider", provider.rawValue), ("id", orderID)]), label ?? orderID)
    }

    /// `a=1&b=x%20y`: each value percent-encoded (to be escaped again where it goes into an attribute).
    static func query(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }

    /// "Older" when there is a next page: the same query, from below `next`.
    static func pager(_ path: String, _ pairs: [(String, String)], next: Int64?) -> String {
        next.map { "<p class=\"pager\">" + link(path + "?" + query(pairs + [("before", String($0))]), "Older") + "</p>" } ?? ""
    }

    /// An error shown at the top of a page, announced to a screen reader.
    static func alert(_ message: String?) -> String { message.map { "<p class=\"error\" role=\"alert\">\(HTML.escape($0))</p>" } ?? "" }

    /// Bytes from outside (a body, a request) as text: invalid UTF-8 shows as U+FFFD, and at most `limit` bytes.
    static func bytes(_ body: [UInt8], limit: Int = 64 * 1024) -> String {
        let shown = body.count > limit ? Array(body.prefix(limit)) : body
        let note = body.count > limit ? "\n… \(body.count - limit) more bytes not shown" : ""
        return "<pre class=\"body\">\(HTML.escape(String(decoding: shown, as: UTF8.self) + note))</pre>"
    }

    /// What the console did to `target`, oldest first.
    static func trail(_ audit: [ConsoleAuditEntry]) -> String {
        guard !audit.isEmpty else { return "" }
        let lines = audit.map {
            "<li>\(HTML.escape(Timestamp.iso8601($0.at))) \(HTML.escape($0.userName)) \(HTML.escape($0.action))"
                + ($0.address.map { " from " + HTML.escape($0) } ?? "") + ($0.detail.map { ": " + HTML.escape($0) } ?? "") + "</li>"
        }.joined()
        return "<h2>In the console</h2><ul id=\"audit\">\(lines)</ul>"
    }

    /// A form that writes: POST to `action` with the session's CSRF token.
    static func writeForm(_ action: String, session: ConsoleSession, _ fields: String, button: String, class name: String = "act") -> String
    {
        """
        <form class="\(name)" method="post" action="\(HTML.escape(action))"><input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">\
        \(fields)<button class="primary" type="submit">\(HTML.escape(button))</button></form>
        """
    }
}
