import Foundation
import Postgres
import Reconciliation
import Reporting
import Store

/// What the overview shows: the report's figures and the actions from one snapshot, the rest read beside it.
struct OverviewFigures: Sendable {
    var summary: ReportSummary
    var actions: (pending: Int, inDoubt: Int, failed: Int)
    var hours: [DeliveryHour]
    var history: [RiskPoint]
    var lastSweep: SweepRow?
    var lastBackfill: BackfillWindowRow?
    var lastSettlement: SettlementFileRow?
    var now: Date

    /// Everything the overview shows but the clock: equal signatures, the same page.
    var signature: String {
        let a = actions, sweep = lastSweep
        return [
            "open \(summary.open)", summary.byKind.map { "\($0.key.rawValue)=\($0.value)" }.sorted().joined(separator: ","),
            summary.amountAtRisk.map { "\($0.key.code)=\($0.value)" }.sorted().joined(separator: ","),
            "actions \(a.pending) \(a.inDoubt) \(a.failed)",
            hours.map { "\($0.hour.timeIntervalSince1970):\($0.done),\($0.ignored),\($0.pending),\($0.dead),\($0.rejected)" }.joined(
                separator: ";"),
            history.map { "\($0.at.timeIntervalSince1970):\($0.currency.code)=\($0.minor)" }.joined(separator: ";"),
            sweep.map { "sweep \($0.id) \($0.finishedAt?.timeIntervalSince1970 ?? 0)" } ?? "",
            lastBackfill.map { "backfill \($0.finishedAt.timeIntervalSince1970)" } ?? "",
            lastSettlement.map { "settlement \($0.id)" } ?? ""
        ].joined(separator: "\n")
    }
}

/// The overview's figures. What `payrecon report` also gives (discrepancies by kind, the money at risk) and the actions
/// are read in one repeatable-read snapshot, as the report reads them, so the two agree; the deliveries per hour and the
/// last runs on connections of their own at the same time (each an aggregate of its own table: on two cores the three
/// cost about the slowest of them, not their sum).
enum ConsoleQueries {
    static func overview(_ pool: PostgresPool) async throws -> OverviewFigures {
        async let open = pool.run { conn in
            try conn.transaction(isolation: .repeatableRead) { tx in
                (try ReportStore.openSummary(DiscrepancyFilter(), on: tx), try ConsoleStore.actionCounts(on: tx))
            }
        }
        async let hours = pool.run { try ConsoleStore.deliveriesPerHour(hours: 24, on: $0) }
        async let runs = pool.run { conn in
            let (backfill, settlement) = try ConsoleStore.lastBackfillAndSettlement(on: conn)
            return (
                history: try ConsoleStore.riskHistory(days: 30, on: conn), sweep: try ConsoleStore.lastSweep(on: conn), backfill: backfill,
                settlement: settlement
            )
        }
        let (summary, actions) = try await open
        let last = try await runs
        return OverviewFigures(
            summary: ReportSummary(open: summary.byKind.values.reduce(0, +), byKind: summary.byKind, amountAtRisk: summary.atRisk),
            actions: actions, hours: try await hours, history: last.history, lastSweep: last.sweep, lastBackfill: last.backfill,
            lastSettlement: last.settlement, now: Date())
    }
}

/// The overview: the money at risk now and over 30 days, open discrepancies by kind, deliveries per hour, actions by
/// state, and the last sweep, backfill and settlement import. Charts are inline SVG (no script), each with its figures
/// as a table beside it for a screen reader and for exact values.
enum OverviewPage {
    static func render(_ f: OverviewFigures, session: ConsoleSession) -> String {
        let s = f.summary
        let money =
            s.amountAtRisk.isEmpty
            ? "<span class=\"value\">0</span>"
            : s.amountAtRisk.sorted { $0.key.code < $1.key.code }.map { currency, minor in
                "<span class=\"value money\" data-currency=\"\(currency.code)\">"
                    + "\(ReportSummary.format(minor, exponent: currency.exponent)) \(currency.code)</span>"
            }.joined(separator: "<br>")
        let kinds = s.byKind.sorted { $0.key.rawValue < $1.key.rawValue }.map { kind, count in
            [
                "<a href=\"/discrepancies?kind=\(kind.rawValue)\">\(HTML.escape(KindGuide.of(kind).title))</a>",
                "<span data-kind=\"\(kind.rawValue)\">\(count)</span>"
            ]
        }
        let a = f.actions
        return ConsolePages.page(
            title: "Overview", session: session, script: true,
            body: """
                <div id="live" data-live="\(ConsoleLive.stamp(f))">
                <p class="meta" id="live-status" role="status">As of \(ConsoleHTML.time(f.now)); it refreshes by itself.</p>
                <div class="cards">
                <div class="card \(s.amountAtRisk.isEmpty ? "" : "bad")"><div class="label">Money at risk</div><div id="at-risk">\(money)</div></div>
                <div class="card \(s.open == 0 ? "" : "warn")"><div class="label">Open discrepancies</div><div class="value" id="open">\(s.open)</div></div>
                <div class="card \(a.failed + a.inDoubt == 0 ? "" : "bad")"><div class="label">Actions</div><div id="actions">\
                <a href="/actions?status=pending"><span class="value">\(a.pending)</span> pending</a><br>\
                <a href="/actions?status=in_doubt">\(a.inDoubt) in doubt</a>, <a href="/actions?status=failed">\(a.failed) failed</a></div></div>
                </div>
                <h2>Open discrepancies by kind</h2>
                \(ConsoleHTML.table(id: "by-kind", headers: ["Kind", "Open"], numeric: [1], rows: kinds, none: "None open."))
                <h2>Money at risk, the last 30 days</h2>
                \(riskCharts(f))
                <h2>Deliveries per hour, the last 24 hours</h2>
                \(deliveryChart(f.hours))
                <h2>Last runs</h2>
                \(lastRuns(f))
                </div>
                """)
    }

    /// One chart per currency: the money at risk when each nightly run finished, and now.
    static func riskCharts(_ f: OverviewFigures) -> String {
        // A run records only the currencies with money at risk: every other currency had none then (a point at 0, not a
        // line drawn across the gap). Now is the last point.
        let times = Array(Set(f.history.map(\.at))).sorted() + [f.now]
        var at: [Currency: [Date: Int128]] = [:]
        for p in f.history { at[p.currency, default: [:]][p.at] = p.minor }
        for (currency, minor) in f.summary.amountAtRisk { at[currency, default: [:]][f.now] = minor }
        let series = at.mapValues { values in times.map { ($0, values[$0] ?? 0) } }
        guard !series.isEmpty else { return "<p class=\"none\">No money has been at risk in the last 30 days.</p>" }
        let start = f.now.addingTimeInterval(-30 * 86400)
        return "<div class=\"charts\">"
            + series.sorted { $0.key.code < $1.key.code }.map { currency, points in
                let top = max(points.map(\.1).max() ?? 1, 1)
                let xy = points.map { at, minor -> (Int, Int) in
                    let x = 40 + Int(max(0, min(1, at.timeIntervalSince(start) / (30 * 86400))) * 540)
                    return (x, 100 - Int(minor * 80 / top))
                }
                let line = xy.map { "\($0.0),\($0.1)" }.joined(separator: " ")
                let dots = xy.map { "<circle cx=\"\($0.0)\" cy=\"\($0.1)\" r=\"3\" fill=\"#b3261e\"/>" }.joined()
                let shown = ReportSummary.format(top, exponent: currency.exponent) + " " + currency.code
                let rows = points.map { [ConsoleHTML.time($0.0), HTML.escape(ReportSummary.format($0.1, exponent: currency.exponent))] }
                return """
                    <figure><svg class="chart" viewBox="0 0 600 120" role="img" aria-label="Money at risk in \(currency.code), the last 30 days, at most \(HTML.escape(shown))">\
                    <line x1="40" y1="100" x2="580" y2="100" stroke="#c8ccd4"/><text x="2" y="24" font-size="10" fill="#5b6472">\(HTML.escape(shown))</text>\
                    <text x="40" y="115" font-size="10" fill="#5b6472">30 days ago</text><text x="556" y="115" font-size="10" fill="#5b6472">now</text>\
                    <polyline points="\(line)" fill="none" stroke="#b3261e" stroke-width="2"/>\(dots)</svg>
                    <details><summary>\(currency.code): the figures</summary>\
                    \(ConsoleHTML.table(id: "risk-\(currency.code)", headers: ["When", "At risk (\(currency.code))"], numeric: [1], rows: rows, none: ""))</details></figure>
                    """
            }.joined() + "</div>"
    }

    static var outcomes: [(name: String, color: String, value: (DeliveryHour) -> Int64)] {
        [
            ("done", "#2e7d32", \.done), ("ignored", "#9aa0a6", \.ignored), ("pending", "#3969ac", \.pending),
            ("dead", "#b3261e", \.dead), ("rejected", "#e8710a", \.rejected)
        ]
    }

    /// Stacked bars, one per hour, by how the deliveries ended; and the totals.
    static func deliveryChart(_ hours: [DeliveryHour]) -> String {
        let totals = outcomes.map { o in (o.name, hours.reduce(Int64(0)) { $0 + o.value($1) }) }
        guard totals.contains(where: { $0.1 > 0 }) else { return "<p class=\"none\">No delivery in the last 24 hours.</p>" }
        let top = max(hours.map { h in outcomes.reduce(Int64(0)) { $0 + $1.value(h) } }.max() ?? 1, 1)
        let width = 540 / max(hours.count, 1)
        let bars = hours.enumerated().map { i, h in
            var y = 100
            return outcomes.compactMap { o -> String? in
                let height = Int(o.value(h) * 80 / top)
                guard o.value(h) > 0 else { return nil }
                y -= max(height, 1)
                return
                    "<rect x=\"\(40 + i * width)\" y=\"\(y)\" width=\"\(max(width - 2, 1))\" height=\"\(max(height, 1))\" fill=\"\(o.color)\"/>"
            }.joined()
        }.joined()
        let legend = outcomes.map { "<span><i class=\"swatch-\($0.name)\"></i>\($0.name)</span>" }.joined()
        let summary = totals.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
        return """
            <figure><svg class="chart" viewBox="0 0 600 120" role="img" aria-label="Deliveries per hour, the last 24 hours: \(summary)">\
            <line x1="40" y1="100" x2="580" y2="100" stroke="#c8ccd4"/><text x="2" y="24" font-size="10" fill="#5b6472">\(top)/h</text>\
            <text x="40" y="115" font-size="10" fill="#5b6472">24 hours ago</text><text x="556" y="115" font-size="10" fill="#5b6472">now</text>\
            \(bars)</svg><p class="legend">\(legend)</p>
            \(ConsoleHTML.table(id: "deliveries-24h", headers: totals.map { $0.0 }, numeric: Set(0..<totals.count), rows: [totals.map { String($0.1) }], none: ""))</figure>
            """
    }

    static func lastRuns(_ f: OverviewFigures) -> String {
        let sweep = f.lastSweep.map { r in
            "Run \(r.id) \(r.finishedAt == nil ? "started" : "finished") \(ConsoleHTML.time(r.finishedAt ?? r.startedAt)): checked \(r.checked), "
                + "matched \(r.matched), opened \(r.opened), resolved \(r.resolved), actions \(r.actionsEmitted), errors \(r.errors)"
        }
        let backfill = f.lastBackfill.map { w in
            "\(HTML.escape(w.provider.rawValue)) \(HTML.escape(w.source)) read to \(ConsoleHTML.time(w.end)) at \(ConsoleHTML.time(w.finishedAt)): "
                + "\(w.found) found in \(w.requests) requests"
        }
        let settlement = f.lastSettlement.map { file in
            "\(HTML.escape(file.provider.rawValue)) \(HTML.escape(file.name)) at \(ConsoleHTML.time(file.importedAt)): \(file.bodyRows) rows, "
                + "\(file.linesNew) new" + (file.problems.isEmpty ? "" : ", <span class=\"error\">\(HTML.escape(file.problems))</span>")
        }
        return ConsoleHTML.facts([
            ("Nightly sweep", sweep ?? "None yet (payrecon reconcile)."),
            ("Backfill", (backfill ?? "None yet (payrecon backfill).") + " " + ConsoleHTML.link("/settlement", "All windows")),
            (
                "Settlement import",
                (settlement ?? "None yet (payrecon settlement import).") + " " + ConsoleHTML.link("/settlement", "All files")
            )
        ])
    }
}
