// `payrecon explain --format table`: the chain as a timeline a person reads top to bottom.
import Foundation
import Reconciliation

extension Explanation {
    /// Raw answers longer than this are cut in the timeline (`--format json` has them whole).
    public static let bodyPreviewBytes = 4_000

    /// The timeline as text, newline-terminated.
    public func table(bodyLimit: Int = Explanation.bodyPreviewBytes) -> String {
        var out: [String] = []
        let what = orderID.map { "\(provider) order \($0)" } ?? "\(provider) transaction \(transactionRef) (no stored order holds it)"
        if let s = subject {
            out.append("discrepancy \(s.id): \(s.kind.rawValue) (\(s.status)) on \(what)")
            out.append("  \(s.detail.terminalSafe)")
            let guide = KindGuide.of(s.kind)
            out.append("  \(guide.title): \(guide.meaning) Next: \(guide.nextStep)")
            out.append(
                "  expected \(s.expected.serializedText), found \(s.actual.serializedText); seen \(s.occurrences)× "
                    + "from \(Timestamp.iso8601(s.firstSeen)) to \(Timestamp.iso8601(s.lastSeen))"
                    + (s.evidenceID.map { "; evidence \($0)" } ?? "; no evidence: recorded before payrecon kept it"))
        } else {
            out.append(what + (orderID != nil ? " (transaction \(transactionRef))" : ""))
        }
        if orderID != nil, order == nil { out.append("  the order is no longer stored") }
        out.append("")
        // Clean checks in a row that saw the same answers are one entry ("and 87 more like it"): an order the sweep
        // checks daily reads as what changed, not as ninety identical lines.
        var alike = 0
        var last: Check?
        func flush() {
            if alike > 0, let last {
                out.append("      … and \(alike) more check\(alike == 1 ? "" : "s") like it, the last at \(Self.time(last.at))")
            }
            alike = 0
        }
        var previous: Check?
        for event in timeline {
            if case .check(let c) = event, c.decided.isEmpty, let p = previous, p.hashes == c.hashes {
                alike += 1; last = c; continue
            }
            flush()
            if case .check(let c) = event, c.decided.isEmpty { previous = c } else { previous = nil }
            out += lines(event, bodyLimit: bodyLimit)
        }
        flush()
        if checksLeftOut > 0 { out.append("(\(checksLeftOut) older checks left out)") }
        return out.joined(separator: "\n") + "\n"
    }

    func lines(_ event: Event, bodyLimit: Int) -> [String] {
        let at = Self.time(event.at)
        switch event {
        case .version(let v):
            let verb = v == (replaced.first ?? order) ? "order stored" : "order changed"
            let source = v.source == "table" ? "the orders table (written by the merchant's systems)" : v.source
            return [
                "\(at)  \(verb) from \(source.terminalSafe): "
                    + v.fields.map { "\($0.0) \($0.1.isEmpty ? "-" : $0.1.terminalSafe)" }.joined(separator: ", ")
            ]
        case .delivery(let d):
            return [
                "\(at)  delivery \(d.id) \((d.eventType ?? "(no event type)").terminalSafe) received; \(d.status)"
                    + (d.outcome.map { ": \($0.terminalSafe)" } ?? "")
            ]
        case .check(let c):
            return Self.checkLines(c, at: at, bodyLimit: bodyLimit)
        case .opened(let d):
            return [
                "\(at)  discrepancy \(d.id) \(d.kind.rawValue) opened" + (d.evidenceID.map { " (evidence \($0))" } ?? "")
                    + (d.status == "open" ? ", open" : d.status == "acknowledged" ? ", acknowledged" : "") + ": \(d.detail.terminalSafe)"
            ]
        case .acknowledged(let d):
            return [
                "\(at)  discrepancy \(d.id) \(d.kind.rawValue) acknowledged" + (d.acknowledgedBy.map { " by \($0.terminalSafe)" } ?? "")
                    + (d.acknowledgedFrom.map { " in the console from \($0.terminalSafe)" } ?? "")
                    + (d.ackNote.map { ": \($0.terminalSafe)" } ?? "")
            ]
        case .resolved(let d):
            return ["\(at)  discrepancy \(d.id) \(d.kind.rawValue) resolved: a later check no longer found it as it was"]
        case .planned(let a):
            return [
                "\(at)  action \(a.id) \(a.kind) \(a.amount) \(a.currency) planned (key \(a.idempotencyKey)"
                    + (a.evidenceID.map { ", evidence \($0)" } ?? "") + "); now \(a.status)"
                    + (a.providerRef.map { ", provider ref \($0.terminalSafe)" } ?? "") + (a.lastError.map { ": \($0.terminalSafe)" } ?? "")
            ]
        case .call(let a, let c):
            var l = [
                "\(at)  action \(a.id) call, attempt \(c.attempt)" + (c.evidenceID.map { " after re-fetch (evidence \($0))" } ?? "")
                    + ": \(c.method) \(c.url.terminalSafe), idempotency key \((c.idempotencyKey ?? "(none)").terminalSafe)"
            ]
            if !c.request.isEmpty {
                l.append("      sent:"); l += Self.indented(Self.preview(c.request, length: c.request.count, limit: bodyLimit))
            }
            l.append(
                "      → \(c.status.map(String.init) ?? "no answer"), sha256 \(c.sha256): \((c.outcome ?? "outcome not recorded").terminalSafe)"
            )
            l += Self.indented(c.body.map { Self.preview($0, length: c.length, limit: bodyLimit) } ?? Self.notKept(c.length))
            return l
        }
    }

    /// A check's entry: what it decided, the file line and answers it compared, the rules that fired.
    static func checkLines(_ c: Explanation.Check, at: String, bodyLimit: Int) -> [String] {
        var l = [
            "\(at)  \(c.source.words) (evidence \(c.evidenceID)"
                + (c.deliveryID.map { ", delivery \($0)" } ?? "") + "): "
                + (c.decided.isEmpty ? "nothing changed" : c.decided.map(Self.phrase).joined(separator: ", "))
        ]
        if let s = c.settlement {
            if let name = s.fileName {
                // The file's name, account and row are the file's text: escaped, and the row behind a gutter.
                l.append(
                    "      file \(name.terminalSafe) (\(s.kind ?? "kind not stated"), account \((s.account ?? "not stated").terminalSafe), sha256 \(s.sha256 ?? "?"))"
                        + (s.line.map { ", line \($0)" } ?? ""))
                if let row = s.row { l += Self.indented(row) }
            } else {
                l.append("      no settlement file lists it")
            }
            if !c.answers.isEmpty { l.append("      compared with the answer that stated the money:") }
        }
        if c.answers.isEmpty {
            for h in c.hashes { l.append("      answer sha256 \(h)") }
            if c.hashes.isEmpty { l.append("      no provider answer (nothing fetched)") }
        }
        for a in c.answers {
            l.append(
                "      \(a.method) \(a.url) → \(a.status.map(String.init) ?? "no answer") at \(Self.time(a.fetchedAt)), sha256 \(a.sha256)"
            )
            l += Self.indented(a.body.map { Self.preview($0, length: a.length, limit: bodyLimit) } ?? Self.notKept(a.length))
        }
        if let decision = c.decision {
            if let f = decision.figures { l.append("      saw: \(f.described)") }
            for fired in decision.fired {
                l.append("      rule \(fired.row.rawValue): \(fired.row.words)"); l.append("        → \(fired.yields)")
            }
            if decision.fired.isEmpty { l.append("      no row fired: the order and the provider agree") }
        }
        if let unreadable = c.decisionUnreadable {
            l.append("      the rules it kept cannot be read by this payrecon (written by a newer one, or damaged): \(unreadable)")
        }
        if !c.superseded.isEmpty { l.append("      superseded: " + c.superseded.joined(separator: ", ")) }
        return l
    }

    /// What a check decided, in words.
    static func phrase(_ decided: String) -> String {
        switch decided {
        case "adopted": "now the evidence of a discrepancy recorded before payrecon kept evidence"
        case "call": "decided the call below"
        case "moved": "its answer stated money that moved (kept: a settlement line is compared with it)"
        case "not sent": "the call was not sent: the order no longer called for it"
        case "settled": "the provider said what came of a call in doubt"
        default: decided
        }
    }

    static func time(_ date: Date) -> String { Timestamp.iso8601Millis(date) }

    /// An answer or request quoted: each line behind a gutter, so none of a provider's lines can pass for one of payrecon's.
    static func indented(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { "        | " + $0 }
    }

    /// The body as text (UTF-8), else as base64; cut past `limit` bytes with how much was left out (`length`: the
    /// whole answer's size, when only its start was read).
    static func preview(_ body: [UInt8], length: Int, limit: Int) -> String {
        if length == 0 { return "(empty)" }
        let cut = body.count > limit ? Array(body.prefix(limit)) : body
        var text = String(validating: cut, as: UTF8.self) ?? (String(validating: Array(cut.dropLast(3)), as: UTF8.self) ?? "")
        if text.isEmpty { text = "base64 " + Data(cut).base64EncodedString() }
        if max(length, body.count) > cut.count {
            text += "\n… (\(max(length, body.count)) bytes in all; --format json shows the whole answer)"
        }
        return text
    }

    static func notKept(_ length: Int) -> String {
        "(not kept: \(length) bytes, past what one check keeps — 64 answers, 1 MiB; its SHA-256 is above)"
    }
}
