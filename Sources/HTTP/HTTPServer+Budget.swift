import Foundation
import Synchronization

/// `PAYRECON_MAX_BODY_BUFFER`: the request bodies the server holds in memory at once, all connections together, from
/// their first byte until their request completes (through the handler's answer). A pure value under the server's lock.
///
/// The budget is split so that a flood of large bodies cannot turn away an ordinary delivery: the first
/// `smallBytes` (64 KiB) of each body draw on the whole budget, but bytes past them only on what is left after a
/// reserve (a quarter of the budget, or 64 KiB per connection if that is less). Large bodies therefore fill at most
/// three quarters, and the rest stays for the first 64 KiB of whatever arrives, which is all a webhook needs.
/// Nothing held ever passes `limit`.
public struct BodyBudget: Sendable {
    package static let smallBytes = 64 * 1024
    package let limit: Int
    package let reserve: Int
    package private(set) var held = 0
    package private(set) var heldPastSmall = 0

    public init(limit: Int, connections: Int) {
        self.limit = max(0, limit)
        self.reserve = min(self.limit / 4, max(1, connections) * Self.smallBytes)
    }

    /// One request's share: what it holds, and how much of that is past its first `smallBytes`.
    package struct Share: Sendable, Equatable { package var bytes = 0; package var pastSmall = 0; package init() {} }

    /// Takes `count` more bytes for a request that holds `share`; false (nothing taken) when they do not fit.
    package mutating func take(_ count: Int, for share: inout Share) -> Bool {
        let small = max(0, min(count, Self.smallBytes - share.bytes))
        let past = count - small
        guard held + count <= limit, heldPastSmall + past <= limit - reserve else { return false }
        held += count; heldPastSmall += past
        share.bytes += count; share.pastSmall += past
        return true
    }

    /// Whether a body of `count` bytes would fit now, taking nothing (a declared Content-Length is only a claim: it is
    /// checked, never set aside).
    public func fits(_ count: Int) -> Bool {
        let past = max(0, count - Self.smallBytes)
        return held + count <= limit && heldPastSmall + past <= limit - reserve
    }

    /// The request ended: what it held is free again.
    package mutating func release(_ share: Share) {
        held -= share.bytes; heldPastSmall -= share.pastSmall
    }
}

/// Connections per peer address, counted by the server itself so that some addresses (trusted proxies, which carry
/// many senders) can be exempt; MHD's own per-IP limit cannot exempt any. An accept policy asks `admit`; MHD's
/// connection notifications call `opened` and `closed`.
package struct ConnectionsPerAddress: Sendable {
    package let limit: Int
    package let exempt: [AddressRange]
    private var counts: [String: Int] = [:]
    private var byConnection: [UInt: String] = [:]

    package init(limit: Int, exempt: [AddressRange]) { self.limit = limit; self.exempt = exempt }

    package func isExempt(_ address: String) -> Bool { exempt.contains { $0.contains(address) } }

    /// Whether a new connection from `address` may be accepted.
    package func admit(_ address: String) -> Bool {
        limit <= 0 || isExempt(address) || counts[address, default: 0] < limit
    }
    package mutating func opened(_ connection: UInt, address: String) {
        guard limit > 0, !isExempt(address) else { return }
        byConnection[connection] = address
        counts[address, default: 0] += 1
    }
    package mutating func closed(_ connection: UInt) {
        guard let address = byConnection.removeValue(forKey: connection) else { return }
        let left = counts[address, default: 1] - 1
        counts[address] = left > 0 ? left : nil
    }
    package func count(_ address: String) -> Int { counts[address, default: 0] }
}
