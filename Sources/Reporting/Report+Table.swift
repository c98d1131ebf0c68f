// `payrecon report` (default format): a summary, then the discrepancies grouped by kind, aligned for a terminal.
import Reconciliation

extension Report {
    /// The terminal report. `colour` adds ANSI styles (callers pass true only for a terminal without NO_COLOR).
    public func table(colour: Bool) -> String {
        var out =
            Style.bold.apply("payrecon report", colour: colour)
            + "  generated \(Timestamp.iso8601(generatedAt))  (\(filters.summaryText); times UTC)\n\n"

        let openStyle: Style = summary.open > 0 ? .boldRed : .green
        out += Style.bold.apply("Open discrepancies: ", colour: colour) + openStyle.apply(String(summary.open), colour: colour) + "\n"
        var kinds = TextTable([.init("KIND"), .init("OPEN", .right)])
        for (kind, count) in summary.kindsInOrder { kinds.append([kind.rawValue, String(count)]) }
        if !kinds.rows.isEmpty { out += kinds.render(colour: colour) }

        out += "\n" + Style.bold.apply("Money at risk (open):", colour: colour)
        if summary.amountAtRisk.isEmpty {
            out += " none\n"
        } else {
            out += "\n"
            var money = TextTable([.init("CURRENCY"), .init("AMOUNT", .right)])
            for (currency, formatted) in summary.amountsInOrder { money.append([currency.code, formatted], style: .red) }
            out += money.render(colour: colour)
            out += "(\(Report.moneyAtRiskRule); over the open rows, --format csv's counted_at_risk column sums to it)\n"
        }

        out +=
            "\n" + Style.bold.apply("Rejected deliveries (last 24 h): ", colour: colour)
            + (summary.rejectedTotal > 0 ? Style.yellow : .none).apply(String(summary.rejectedTotal), colour: colour) + "\n"
        if summary.rejectedTotal > 0 {
            var rejected = TextTable([.init("REASON"), .init("COUNT", .right)])
            for (reason, count) in summary.rejectedInOrder { rejected.append([reason, String(count)]) }
            out += rejected.render(colour: colour)
        }

        guard !discrepancies.isEmpty else {
            return out + "\nNo discrepancies match (\(filters.summaryText)).\n"
        }
        for kind in DiscrepancyKind.allCases {
            let rows = discrepancies.filter { $0.kind == kind }
            guard !rows.isEmpty else { continue }
            out += "\n" + Style.cyan.apply(kind.rawValue, colour: colour) + " (\(rows.count))\n"
            var table = TextTable([
                .init("ID", .right), .init("PROVIDER"), .init("ORDER"), .init("TRANSACTION"), .init("STATUS"),
                .init("AT RISK", .right), .init("CUR"), .init("SEEN", .right), .init("FIRST SEEN"), .init("LAST SEEN"),
                .init("DETAIL")
            ])
            for d in rows {
                table.append(
                    [
                        String(d.id), d.provider.rawValue, d.orderID ?? "-", d.transactionRef, d.status.rawValue,
                        d.formattedAmountAtRisk ?? "", d.currency?.code ?? "", "\(d.occurrences)x",
                        Timestamp.minutes(d.firstSeen), Timestamp.minutes(d.lastSeen),
                        d.status == .acknowledged
                            ? d.detail + " [acknowledged\(d.acknowledgedAt.map { " " + Timestamp.minutes($0) } ?? "")"
                                + (d.acknowledgedBy.map { " by \($0)" } ?? "")
                                + (d.ackNote.map { ": \($0)" } ?? "") + "]" : d.detail
                    ], style: d.status == .open ? .none : .dim)
            }
            out += table.render(colour: colour)
        }
        return out
    }
}
