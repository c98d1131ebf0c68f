import Foundation
import Testing
@testable import Providers
@testable import Reconciliation

/// Paypercut's payment and refund lists as backfill pages through them, one account at a time: payments then refunds,
/// by `last_key`; a platform key holds nothing as itself; an account the key may not act for, or an item that does
/// not read, is named, not fatal.
@Suite struct PaypercutTransactionSearchTests {
    static func search(
        _ account: String?, _ answer: @escaping @Sendable (ProviderRequest) -> ProviderResponse
    ) -> (any TransactionSearching, ScriptedTransport) {
        let transport = ScriptedTransport { request, _ in answer(request) }
        let client = PaypercutClient(
            configuration: PaypercutConfiguration(baseURL: "https://api.paypercut.io", secretKey: "sk_test_1"),
            transport: transport, retry: .none)
        return (PaypercutTransactionSearch(client: client).scoped(to: account), transport)
    }

    static func pages(_ search: any TransactionSearching) async -> (found: [FoundTransaction], pages: Int)? {
        var cursor: String? = nil, found: [FoundTransaction] = [], pages = 0
        repeat {
            guard
                case .found(.items(let items, let next, nil, nil)) = await search.search(
                    from: 1_796_083_200, to: 1_796_169_600, cursor: cursor)
            else {
                return nil
            }
            found += items; cursor = next; pages += 1
        } while cursor != nil && pages < 10
        return (found, pages)
    }

    static let platform: @Sendable (ProviderRequest) -> ProviderResponse = { r in
        switch Self.account(r) {
        case nil:
            return json(
                403,
                #"{"type":"invalid_request_error","code":"account_required","message":"A platform key must name an account.","param":null}"#
            )
        case "acct_gone"?:
            return json(403, #"{"type":"invalid_request_error","code":"account_invalid","message":"No such account.","param":null}"#)
        default: break
        }
        if r.url.contains("/v2/payments") && !r.url.contains("last_key") {
            return json(
                200,
                #"{"items":[{"id":"pay_1","payment_intent":"pi_1","created":"2026-11-30T10:00:00Z"},{"id":"pay_x"}],"last_key":"pay_x"}"#)
        }
        if r.url.contains("/v2/payments") {
            return json(200, #"{"items":[{"id":"pay_2","payment_intent":"pi_2","created":1764496800}],"last_key":null}"#)
        }
        return json(200, #"{"items":[{"id":"re_1","payment":"pay_1","created":"2026-11-30T11:00:00Z"}]}"#)
    }

    static func account(_ r: ProviderRequest) -> String? { r.headers.first { $0.0 == "Paypercut-Account" }?.1 }

    @Test func pagesThroughAnAccountsPaymentsThenRefunds() async throws {
        let (search, transport) = Self.search("acct_1", Self.platform)
        #expect(search.listsPerAccount)
        let read = try #require(await Self.pages(search))
        #expect(read.pages == 3, "two payment pages, then the refunds")
        #expect(read.found.filter { $0.unreadable == nil }.map(\.id) == ["pay_1", "pay_2", "re_1"])
        #expect(read.found.filter { $0.unreadable == nil }.allSatisfy { $0.account == "acct_1" })
        #expect(
            read.found.contains { $0.unreadable != nil && $0.id.contains("pay_x") }, "an item naming no payment intent is named, not fatal")
        let requests = transport.requests
        #expect(requests.allSatisfy { Self.account($0) == "acct_1" })
        #expect(requests[0].url.contains("start_date=2026-11-30T23%3A59%3A59Z"), "a second before the window: \(requests[0].url)")
        #expect(requests[1].url.contains("last_key=pay_x"))
        #expect(await search.references(of: read.found[0]) == .found([EventReference(transactionRef: "pi_1", merchant: "acct_1")]))
    }

    @Test func aPlatformKeyHoldsNothingAsItselfAndARefusedAccountIsNamed() async throws {
        let own = try #require(await Self.pages(Self.search(nil, Self.platform).0))
        #expect(own.pages == 1 && own.found.isEmpty)
        let gone = try #require(await Self.pages(Self.search("acct_gone", Self.platform).0))
        #expect(gone.pages == 1 && gone.found.count == 1 && gone.found[0].unreadable?.contains("account_invalid") == true, "\(gone.found)")
    }

    @Test func aPageWithMoreThanItAskedIsRefused() async {
        let items = (0..<101).map { #"{"id":"pay_\#($0)","payment_intent":"pi_\#($0)"}"# }.joined(separator: ",")
        let (search, _) = Self.search(nil) { _ in json(200, #"{"items":[\#(items)],"last_key":null}"#) }
        guard case .permanent(.unreadable(let why)) = await search.search(from: 0, to: 86_400, cursor: nil) else {
            Issue.record("accepted"); return
        }
        #expect(why.contains("more than the 100 asked for"))
    }

    @Test func aCursorItDidNotWriteIsRefused() async {
        let (search, _) = Self.search(nil) { _ in json(200, #"{"items":[]}"#) }
        for cursor in ["charges:", "0|payments:", ""] {
            guard case .permanent(.notSent(_)) = await search.search(from: 0, to: 86_400, cursor: cursor) else {
                Issue.record("\(cursor) accepted"); continue
            }
        }
    }
}
