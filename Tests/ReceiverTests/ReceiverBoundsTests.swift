import Foundation
import HTTP
@testable import Receiver
import Store
import Testing

/// The pure bounds the receiver keeps: its body budget, connections per address, who the sender is behind a proxy,
/// which rejections get a log line, and what a rejection sample keeps.
@Suite struct ReceiverBoundsTests {
    @Test func theBodyBudgetKeepsAReserveLargeBodiesCannotTake() {
        var budget = BodyBudget(limit: 1 << 20, connections: 1000)  // reserve: a quarter, 256 KiB
        #expect(budget.reserve == 256 * 1024)
        var large = BodyBudget.Share(), other = BodyBudget.Share()
        #expect(budget.take(700 * 1024, for: &large))
        // Past the first 64 KiB, large bodies may hold 768 KiB in all.
        #expect(!budget.take(200 * 1024, for: &other))  // 136 KiB past its first 64: 772 KiB > 768
        #expect(other == BodyBudget.Share() && budget.held == 700 * 1024)
        // The first 64 KiB of any body still fit, up to the whole limit.
        var smalls: [BodyBudget.Share] = []
        for _ in 0..<5 {
            var s = BodyBudget.Share()
            #expect(budget.take(64 * 1024, for: &s))
            smalls.append(s)
        }
        var last = BodyBudget.Share()
        #expect(!budget.take(64 * 1024, for: &last), "never past the limit")
        budget.release(large)
        smalls.forEach { budget.release($0) }
        #expect(budget.held == 0 && budget.heldPastSmall == 0)
    }

    @Test func connectionsPerAddressExemptTrustedProxies() throws {
        var counts = ConnectionsPerAddress(limit: 2, exempt: [try AddressRange("10.0.0.0/8")])
        counts.opened(1, address: "203.0.113.1"); counts.opened(2, address: "203.0.113.1")
        #expect(!counts.admit("203.0.113.1") && counts.admit("203.0.113.2"))
        for i in 0..<50 { counts.opened(UInt(100 + i), address: "10.1.2.3") }
        #expect(counts.admit("10.1.2.3"))
        counts.closed(1)
        #expect(counts.admit("203.0.113.1") && counts.count("203.0.113.1") == 1)
    }

    @Test func addressRangesMatchIPv4AndIPv6() throws {
        let ranges = try AddressRange.list("127.0.0.1, 10.0.0.0/8,fd00::/8")
        #expect(ranges.count == 3)
        #expect(ranges[0].contains("127.0.0.1") && !ranges[0].contains("127.0.0.2"))
        #expect(ranges[1].contains("10.255.0.1") && !ranges[1].contains("11.0.0.1") && ranges[1].contains("::ffff:10.0.0.1"))
        #expect(ranges[2].contains("fd12::1") && !ranges[2].contains("fe80::1") && !ranges[2].contains("10.0.0.1"))
        for bad in ["10.0.0.0/33", "proxy.example", "10.0.0.0/x", "::1/129", ""] {
            #expect(throws: AddressRange.ParseError.self) { try AddressRange(bad) }
        }
    }

    @Test func theSenderIsTheLastForwardedHopOnlyFromATrustedProxy() throws {
        let proxies = [try AddressRange("127.0.0.1")]
        #expect(SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: ["1.1.1.1, 203.0.113.5"], trustedProxies: proxies) == "203.0.113.5")
        #expect(
            SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: ["1.1.1.1", "203.0.113.6:4431"], trustedProxies: proxies)
                == "203.0.113.6")
        #expect(SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: ["[2001:db8::7]:443"], trustedProxies: proxies) == "2001:db8::7")
        #expect(SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: ["not-an-address"], trustedProxies: proxies) == "127.0.0.1")
        #expect(SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: [], trustedProxies: proxies) == "127.0.0.1")
        #expect(SenderAddress.resolve(peer: "198.51.100.1", forwardedFor: ["203.0.113.5"], trustedProxies: proxies) == "198.51.100.1")
        #expect(SenderAddress.resolve(peer: "127.0.0.1", forwardedFor: ["203.0.113.5"], trustedProxies: []) == "127.0.0.1")
        #expect(SenderAddress.group("203.0.113.5") == "203.0.113.0/24")
        #expect(SenderAddress.group("203.0.113.200") == SenderAddress.group("203.0.113.5"))
        #expect(SenderAddress.group("203.0.114.5") != SenderAddress.group("203.0.113.5"))
        #expect(SenderAddress.group("2001:db8:1:2:aaaa::1") == "2001:db8:1::/48")
        #expect(SenderAddress.group("2001:db8:1:ffff::9") == SenderAddress.group("2001:db8:1:2::1"))
        // A host: an IPv4 address, an IPv6 /64; in the same group as its address.
        #expect(SenderAddress.host("203.0.113.5") == "203.0.113.5")
        #expect(SenderAddress.host("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::")
        #expect(SenderAddress.host("2001:db8:1:2:bbbb::9") == SenderAddress.host("2001:db8:1:2::1"))
        #expect(SenderAddress.host("2001:db8:1:3::1") != SenderAddress.host("2001:db8:1:2::1"))
        for address in ["203.0.113.5", "2001:db8:1:2:aaaa::1", "::ffff:198.51.100.7"] {
            #expect(SenderAddress.group(SenderAddress.host(address)) == SenderAddress.group(address), "\(address)")
        }
        #expect(SenderAddress.group("2001:db8:2::1") != SenderAddress.group("2001:db8:1::1"))
    }

    /// The first 10 rejections per (provider, reason) a minute get a line; the rest are one summary line when the
    /// minute ends, each minute summarised once.
    @Test func rejectionLogLinesAreBoundedWithASummaryAMinute() {
        var budget = RejectionLogBudget(perMinute: 10)
        let t0: Int64 = 1_700_000_040  // 20 s before a minute boundary
        var logged = 0, dueAt: [Int64] = []
        for i in 0..<500 {
            let admitted = budget.admit(provider: .paypal, reason: "invalid_signature", at: t0 + Int64(i % 15))
            if admitted.log { logged += 1 }
            if let due = admitted.summaryAt { dueAt.append(due) }
        }
        #expect(logged == 10 && dueAt == [1_700_000_040 / 60 * 60 + 60])
        #expect(budget.admit(provider: .pxp, reason: "invalid_signature", at: t0).log, "another provider has its own 10")
        #expect(budget.ended(at: t0 + 1).isEmpty)
        let summaries = budget.ended(at: 1_700_000_040 / 60 * 60 + 60)
        #expect(
            summaries == [
                RejectionLogBudget.Summary(provider: .paypal, reason: "invalid_signature", minute: 1_700_000_040 / 60 * 60, suppressed: 490)
            ])
        #expect(budget.ended(at: t0 + 3600).isEmpty)
        // The next minute starts afresh; an unsummarised earlier one is still summarised.
        var next = RejectionLogBudget(perMinute: 1)
        _ = next.admit(provider: .pxp, reason: "r", at: 0); _ = next.admit(provider: .pxp, reason: "r", at: 1)
        #expect(next.admit(provider: .pxp, reason: "r", at: 61).log)
        #expect(next.ended(at: 61) == [RejectionLogBudget.Summary(provider: .pxp, reason: "r", minute: 0, suppressed: 1)])
    }

    /// A sample keeps the first 8 KiB of the body and of the headers, and says what it cut.
    @Test func aSampleKeepsEightKiBOfBodyAndHeaders() {
        let headers = (0..<40).map { ("X-H\($0)", String(repeating: "v", count: 300)) }
        let r = Rejection(
            provider: .pxp, reason: "invalid_signature", message: "m", headers: headers,
            body: [UInt8](repeating: 1, count: 100_000), remoteAddress: "203.0.113.1")
        #expect(r.bodyPrefix.count == 8 * 1024 && r.bodyBytes == 100_000)
        let bytes = r.headers.dropLast().reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }
        #expect(bytes <= 8 * 1024)
        #expect(r.headers.last?.0 == "payrecon-truncated")
        let few = Rejection(provider: .pxp, reason: "x", message: "m", headers: [("A", "b")], body: [], remoteAddress: nil)
        #expect(few.headers.count == 1)
    }
}
