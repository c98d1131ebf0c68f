import Foundation
import HTTP
import Reconciliation
import Reporting
import Store

/// The console's GET pages: each reads what it shows in one short query (a keyset page at most) and renders it.
extension ConsoleServer {
    static let pageSize = 50

    func page(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let id = parts.count >= 2 ? Int64(parts[1]).flatMap { $0 > 0 ? $0 : nil } : nil
        switch (parts.first, parts.count) {
        case (nil, _): return try await overview(session: session)
        case ("discrepancies", 1): return try await discrepancyList(request, session: session)
        case ("actions", 1): return try await actionList(request, session: session)
        case ("deliveries", 1): return try await deliveryList(request, session: session)
        case ("rejections", 1): return try await rejectionList(request, session: session)
        case ("settlement", 1): return try await settlement(session: session)
        case ("order", 1): return try await order(request, session: session)
        case ("live", 1):
            // The overview's long poll: its stamp once it differs from `since`, or the same after 20 s.
            let stamp = await live.wait(since: request.query["since"] ?? "", key: session.csrfToken, timeout: .seconds(20))
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(stamp.utf8))
        case ("discrepancies", 2) where id != nil: return try await discrepancyPage(id!, session: session)
        case ("actions", 2) where id != nil: return try await actionPage(id!, session: session, retry: request.query["retry"])
        case ("deliveries", 2) where id != nil: return try await deliveryPage(id!, session: session)
        case ("rejections", 2) where id != nil: return try await rejectionPage(id!, session: session)
        case ("rejections", 3) where id != nil && ["body", "headers.json"].contains(parts[2]):
            return try await rejectionDownload(id!, file: parts[2], session: session)
        default: return notFound(session)
        }
    }

    func notFound(_ session: ConsoleSession) -> HTTPResponse { Self.html(404, ConsolePages.notFound(session: session)) }

    /// The first `pageSize` rows, and the id the next page starts below when there are more.
    static func keyset<Row>(_ rows: [Row], id: (Row) -> Int64) -> (rows: [Row], next: Int64?) {
        rows.count > pageSize ? (Array(rows.prefix(pageSize)), id(rows[pageSize - 1])) : (rows, nil)
    }

    func overview(session: ConsoleSession) async throws -> HTTPResponse {
        Self.html(200, OverviewPage.render(try await overviewFigures(maxAge: configuration.figuresMaxAge), session: session))
    }

    /// The overview's figures: kept ones within `maxAge`, else one read every page asking meanwhile shares.
    func overviewFigures(maxAge: Duration) async throws -> OverviewFigures {
        let pool = pool
        return try await live.figures(maxAge: maxAge) { try await ConsoleQueries.overview(pool) }
    }

    func discrepancyList(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let q = request.query
        let status = q["status"].flatMap { ["open", "acknowledged", "resolved"].contains($0) ? $0 : nil }
        let filter = DiscrepancyFilter(
            status: q["status"] == "all" ? nil : (status ?? "open"), provider: q["provider"].flatMap(Provider.init(rawValue:)),
            kind: q["kind"].flatMap(DiscrepancyKind.init(rawValue:)))
        let search = q["q"].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        let before = q["before"].flatMap(Int64.init)
        let rows = try await pool.run {
            try ConsoleStore.discrepancyPage(filter, search: search, before: before, limit: Self.pageSize + 1, on: $0)
        }
        let page = Self.keyset(rows, id: \.id)
        return Self.html(200, ConsolePages.discrepancies(page.rows, filter: filter, search: search, next: page.next, session: session))
    }

    func discrepancyPage(_ id: Int64, session: ConsoleSession, error: String? = nil, status: Int = 200) async throws -> HTTPResponse {
        let found = try await pool.run { conn -> (StoredDiscrepancy, Explanation, [ConsoleAuditEntry])? in
            guard let d = try ReportStore.discrepancy(id: id, on: conn) else { return nil }
            return (d, try ExplainStore.explain(.discrepancy(id), on: conn), try ConsoleStore.audit(of: "discrepancy \(id)", on: conn))
        }
        guard let (d, explanation, audit) = found else { return notFound(session) }
        let timeline = TextTable.safeMultiline(explanation.table())
        return Self.html(status, ConsolePages.discrepancy(d, timeline: timeline, audit: audit, session: session, error: error))
    }

    /// A list's filters from the query: a status among `statuses` (else all), a provider, and where the page starts.
    static func listFilters(_ request: HTTPRequest, statuses: [String]) -> (status: String?, provider: Provider?, before: Int64?) {
        let q = request.query
        return (
            q["status"].flatMap { statuses.contains($0) ? $0 : nil }, q["provider"].flatMap(Provider.init(rawValue:)),
            q["before"].flatMap(Int64.init)
        )
    }

    func actionList(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let (status, provider, before) = Self.listFilters(request, statuses: ConsoleStore.actionFilters)
        let rows = try await pool.run {
            try ConsoleStore.actionPage(status: status, provider: provider, before: before, limit: Self.pageSize + 1, on: $0)
        }
        let page = Self.keyset(rows, id: \.id)
        return Self.html(200, ActionPages.list(page.rows, status: status, provider: provider, next: page.next, session: session))
    }

    /// One action; `retry` is the record (in its trail) of a retry the person asked for, which the page says the
    /// outcome of when it was not completed (the redirect after the post leads here).
    func actionPage(
        _ id: Int64, session: ConsoleSession, error: String? = nil, status: Int = 200, retry: String? = nil
    ) async throws -> HTTPResponse {
        let found = try await pool.run { conn -> (StoredAction, [Explanation.Call], [ConsoleAuditEntry])? in
            guard let a = try ActionStore.find(id: id, on: conn) else { return nil }
            return (a, try ExplainStore.calls(of: a, bodyLimit: 64 * 1024, on: conn), try ConsoleStore.audit(of: "action \(id)", on: conn))
        }
        guard let (action, calls, audit) = found else { return notFound(session) }
        let canRetry = session.role == ConsoleRole.operator.rawValue && action.status == .failed
        let said = error ?? Self.unfinishedRetry(retry, in: audit, session: session)
        return Self.html(status, ActionPages.one(action, calls: calls, audit: audit, canRetry: canRetry, session: session, error: said))
    }

    /// What a retry came to when it was not completed: its record must be in this action's trail, this person's, a
    /// retry, the last retry of the action, and made in the last 15 minutes (an old link says nothing once the action
    /// was retried again); else nothing. Only the id is read from the address, never the words.
    static func unfinishedRetry(
        _ record: String?, in audit: [ConsoleAuditEntry], session: ConsoleSession, now: Date = Date()
    ) -> String? {
        guard let record = record.flatMap({ Int64($0) }),
            let entry = audit.last(where: { $0.action == "retry" }), entry.id == record, entry.userName == session.userName,
            now.timeIntervalSince(entry.at) < 15 * 60,
            let detail = entry.detail, let why = detail.range(of: ConsoleServer.notRetried)
        else { return nil }
        // "checked at the provider that attempt 3 was not applied; " comes before it when the operator said so.
        let checked = detail[..<why.lowerBound].trimmingCharacters(in: CharacterSet(charactersIn: "; "))
        return "Your retry at \(Timestamp.iso8601(entry.at)) was not completed: \(detail[why.upperBound...])."
            + (checked.isEmpty ? "" : " (You had \(checked).)")
    }

    func deliveryList(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let (status, provider, before) = Self.listFilters(request, statuses: ["pending", "done", "ignored", "dead"])
        let rows = try await pool.run {
            try ConsoleStore.deliveryPage(status: status, provider: provider, before: before, limit: Self.pageSize + 1, on: $0)
        }
        let page = Self.keyset(rows, id: \.id)
        return Self.html(200, DeliveryPages.list(page.rows, status: status, provider: provider, next: page.next, session: session))
    }

    func deliveryPage(_ id: Int64, session: ConsoleSession, error: String? = nil, status: Int = 200) async throws -> HTTPResponse {
        let found = try await pool.run { conn -> (QueuedDelivery, [(provider: Provider, orderID: String)], [ConsoleAuditEntry])? in
            guard let d = try DeliveryQueue.find(id: id, on: conn) else { return nil }
            return (d, try ConsoleStore.orders(namedBy: id, on: conn), try ConsoleStore.audit(of: "delivery \(id)", on: conn))
        }
        guard let (delivery, orders, audit) = found else { return notFound(session) }
        return Self.html(status, DeliveryPages.one(delivery, orders: orders, audit: audit, session: session, error: error))
    }

    /// `/order?provider=pxp&id=ORD-1`: the order's `explain --order`.
    func order(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        guard let provider = request.query["provider"].flatMap(Provider.init(rawValue:)), let orderID = request.query["id"],
            !orderID.isEmpty, orderID.utf8.count <= 200
        else { return notFound(session) }
        let explanation: Explanation
        do {
            explanation = try await pool.run { try ExplainStore.explain(.order(provider, orderID), bodyLimit: 2048, on: $0) }
        } catch is ExplainStore.NotFound {
            return notFound(session)
        }
        let timeline = TextTable.safeMultiline(explanation.table())
        return Self.html(200, RecordPages.order(explanation, timeline: timeline, session: session))
    }

    func rejectionList(_ request: HTTPRequest, session: ConsoleSession) async throws -> HTTPResponse {
        let q = request.query
        let provider = q["provider"].flatMap(Provider.init(rawValue:)), before = q["before"].flatMap(Int64.init)
        let reason = q["reason"].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : String($0.prefix(100)) }
        let (rows, counts) = try await pool.run { conn in
            (
                try ConsoleStore.rejectionPage(provider: provider, reason: reason, before: before, limit: Self.pageSize + 1, on: conn),
                try ConsoleStore.rejectionCounts(hours: 24, on: conn)
            )
        }
        let page = Self.keyset(rows, id: \.id)
        return Self.html(
            200, RecordPages.rejections(page.rows, counts: counts, provider: provider, reason: reason, next: page.next, session: session))
    }

    func rejectionPage(_ id: Int64, session: ConsoleSession) async throws -> HTTPResponse {
        guard let sample = try await pool.run({ try RejectionSamples.find(id: id, on: $0) }) else { return notFound(session) }
        return Self.html(200, RecordPages.rejection(sample, session: session))
    }

    /// The sample's body or headers as a file `payrecon verify` reads: a download, never rendered by the browser.
    func rejectionDownload(_ id: Int64, file: String, session: ConsoleSession) async throws -> HTTPResponse {
        guard let sample = try await pool.run({ try RejectionSamples.find(id: id, on: $0) }) else { return notFound(session) }
        return HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", file == "body" ? "application/octet-stream" : "application/json"),
                ("Content-Disposition", "attachment; filename=\"\(file == "body" ? "body" : "headers.json")\"")
            ],
            body: file == "body" ? sample.bodyPrefix : sample.headersJSON)
    }

    func settlement(session: ConsoleSession) async throws -> HTTPResponse {
        let (files, windows) = try await pool.run { conn in
            (try ConsoleStore.settlementFiles(limit: 100, on: conn), try ConsoleStore.backfillWindows(limit: 100, on: conn))
        }
        return Self.html(200, RecordPages.settlement(files, windows: windows, session: session))
    }
}
