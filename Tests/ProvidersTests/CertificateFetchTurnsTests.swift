import Foundation
import Testing
@testable import Providers

/// Whose certificate URL is fetched next: the group served least recently, then the URL asked most often.
@Suite struct CertificateFetchTurnsTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    struct Row: CustomTestStringConvertible, Sendable {
        let name: String
        /// (url, group, seconds after t0), in order.
        let asks: [(String, String, Double)]
        /// Groups already served, with when (seconds after t0).
        let served: [(String, Double)]
        let ineligible: Set<String>
        let expected: String?
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "nothing asked: no turn", asks: [], served: [], ineligible: [], expected: nil),
        Row(name: "one ask: its URL", asks: [("u1", "g1", 0)], served: [], ineligible: [], expected: "u1"),
        Row(
            name: "across groups, asking more often buys nothing: the group waiting longest goes first",
            asks: [("genuine", "paypal", 0), ("r1", "flood", 1), ("r1", "flood", 2), ("r1", "flood", 3), ("r2", "flood", 4)],
            served: [], ineligible: [], expected: "genuine"),
        Row(
            name: "an ask older than 10 minutes has no turn",
            asks: [("old", "g1", 0), ("new", "g2", 601)], served: [], ineligible: [], expected: "new"),
        Row(name: "of equals, the first asked", asks: [("a", "g1", 1), ("b", "g2", 0)], served: [], ineligible: [], expected: "b"),
        Row(
            name: "a group never served goes before one served, whatever it asked",
            asks: [("x", "served", 0), ("x", "served", 1), ("x", "served", 2), ("y", "fresh", 3)],
            served: [("served", 0)], ineligible: [], expected: "y"),
        Row(
            name: "the group served least recently goes first",
            asks: [("a", "g1", 0), ("b", "g2", 0)], served: [("g1", 10), ("g2", 5)], ineligible: [], expected: "b"),
        Row(
            name: "a group the budget refuses has no turn",
            asks: [("a", "g1", 0), ("a", "g1", 1), ("b", "g2", 2)], served: [], ineligible: ["g1"], expected: "b"),
        Row(name: "only refused groups: no turn", asks: [("a", "g1", 0)], served: [], ineligible: ["g1"], expected: nil),
        Row(
            name: "within a group, its most asked URL",
            asks: [("r1", "g", 0), ("rotated", "g", 1), ("rotated", "g", 2)], served: [], ineligible: [], expected: "rotated")
    ]

    @Test(arguments: rows)
    func theTurn(_ row: Row) {
        var turns = CertificateFetchTurns()
        for (url, group, at) in row.asks { turns.record(url: url, group: group, now: Self.t0 + at) }
        for (group, at) in row.served { turns.served(group: group, now: Self.t0 + at) }
        let now = Self.t0 + (row.asks.map(\.2).max() ?? 0)
        #expect(turns.next(now: now, eligible: { !row.ineligible.contains($0) })?.url == row.expected)
    }

    /// A URL whose fetch started leaves every group's asks; the group keeps its place in the turns.
    @Test func aFetchedURLLeavesEveryGroup() {
        var turns = CertificateFetchTurns()
        turns.record(url: "u", group: "g1", now: Self.t0)
        turns.record(url: "u", group: "g2", now: Self.t0)
        turns.record(url: "v", group: "g2", now: Self.t0 + 1)
        turns.served(group: "g1", now: Self.t0 + 2)
        turns.forget(url: "u")
        #expect(turns.next(now: Self.t0 + 3, eligible: { _ in true })?.url == "v")
        #expect(turns.asks["g1"]?.isEmpty == true && turns.lastServed["g1"] == Self.t0 + 2)
    }

    /// Bounded: a group keeps its most asked URLs (a stranger's stream of new URLs pushes out its own once-asked
    /// ones, never the retried one), and the groups that asked most recently are kept.
    @Test func boundedByGroupAndURL() {
        var turns = CertificateFetchTurns(maxURLsPerGroup: 3, maxGroups: 2)
        turns.record(url: "retried", group: "g", now: Self.t0)
        turns.record(url: "retried", group: "g", now: Self.t0 + 1)
        for i in 0..<10 { turns.record(url: "r\(i)", group: "g", now: Self.t0 + 2 + Double(i)) }
        #expect(turns.asks["g"]?.count == 3)
        #expect(turns.asks["g"]?["retried"]?.asks == 2)
        #expect(turns.asks["g"]?["r9"] != nil && turns.asks["g"]?["r0"] == nil)
        turns.record(url: "a", group: "h", now: Self.t0 + 20)
        turns.record(url: "b", group: "k", now: Self.t0 + 21)
        #expect(Set(turns.asks.keys) == ["h", "k"])
    }

    /// A group pushed out by other groups' asks keeps when it was served: churning through more groups than are kept
    /// does not bring a flood's group back as "never served", ahead of a genuine one waiting.
    @Test func aGroupPushedOutKeepsWhenItWasServed() {
        var turns = CertificateFetchTurns(maxGroups: 2)
        turns.record(url: "f1", group: "flood", now: Self.t0)
        turns.served(group: "flood", now: Self.t0)
        turns.forget(url: "f1")
        turns.record(url: "x", group: "other1", now: Self.t0 + 1)
        turns.record(url: "y", group: "other2", now: Self.t0 + 2)  // "flood" is pushed out of the asks
        #expect(turns.asks["flood"] == nil)
        turns.record(url: "genuine", group: "paypal", now: Self.t0 + 3)
        turns.record(url: "f2", group: "flood", now: Self.t0 + 4)
        #expect(turns.next(now: Self.t0 + 5, eligible: { $0 == "flood" || $0 == "paypal" })?.url == "genuine")
    }

    /// Expiry drops asks older than 10 minutes and groups left with none.
    @Test func oldAsksExpire() {
        var turns = CertificateFetchTurns()
        turns.record(url: "a", group: "g1", now: Self.t0)
        turns.record(url: "b", group: "g2", now: Self.t0 + 500)
        turns.expire(now: Self.t0 + 700)
        #expect(Set(turns.asks.keys) == ["g2"])
    }
}
