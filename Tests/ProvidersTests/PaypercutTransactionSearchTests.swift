import Foundation
import Testing
@testable import Providers
@testable import Reconciliation

/// Paypercut's payment and refund lists as backfill pages through them: each account in turn (the key's own, then the
/// connected accounts orders name), payments then refunds, by `last_key`; a platform key that must name an account
/// goes straight on to the connected ones; an item that does not read is named, not fatal.
@Suite struct PaypercutTransactionSearchTests {
    static func search(_ answer: @escaping @Sendable (ProviderRequest) -> ProviderResponse) -> (any TransactionSearching, ScriptedTransport) {
        let transport = ScriptedTransport { request, _ in answer(request) }
        let client = PaypercutClient(configuration: PaypercutConfiguration(baseURL: "https://api.paypercut.io", secretKey: "sk_test_1"),
                                     transport: transport, retry: .none)
        return (PaypercutTransactionSearch(client: client).scoped(to: ["acct_1"]), transport)
    }

    static func account(_ r: ProviderRequest) -> String? { r.headers.first { $0.0 == "Paypercut-Account" }?.1 }

    @Test func pagesThroughEachAccountsPaymentsThenRefunds() async throws {
        let (search, transport) = Self.search { r in
            if Self.account(r) == nil {
                return json(403, #"{"type":"invalid_request_error","code":"account_required","message":"A platform key must name an account.","param":null}"#)
            }
            if r.url.contains("/v2/payments") && !r.url.contains("last_key") {
                return json(200, #"{"items":[{"id":"pay_1","payment_intent":"pi_1","created":"2026-11-30T10:00:00Z"},{"id":"pay_x"}],"last_key":"pay_x"}"#)
            }
            if r.url.contains("/v2/payments") { return json(200, #"{"items":[{"id":"pay_2","payment_intent":"pi_2","created":1764496800}],"last_key":null}"#) }
            return json(200, #"{"items":[{"id":"re_1","payment":"pay_1","created":"2026-11-30T11:00:00Z"}]}"#)
        }
        #expect(search.listsPerAccount)
        var cursor: String? = nil, found: [FoundTransaction] = [], pages = 0
        repeat {
            guard case .found(.items(let items, let next, nil, nil)) = await search.search(from: 1_796_083_200, to: 1_796_169_600, cursor: cursor) else {
                Issue.record("page \(pages + 1) did not read"); return
            }
            found += items; cursor = next; pages += 1
        } while cursor != nil && pages < 10
        #expect(pages == 4, "own account refused (account_required), then acct_1's two payment pages and its refunds")
        #expect(found.filter { $0.unreadable == nil }.map(\.id) == ["pay_1", "pay_2", "re_1"])
        #expect(found.filter { $0.unreadable == nil }.allSatisfy { $0.account == "acct_1" })
        #expect(found.contains { $0.unreadable != nil && $0.id.contains("pay_x") }, "an item naming no payment intent is named, not fatal")
        let urls = transport.requests.map(\.url)
        #expect(urls[0].contains("start_date=2026-11-30T23%3A59%3A59Z"), "a second before the window: \(urls[0])")
        #expect(urls[2].contains("last_key=pay_x"))
        #expect(await search.references(of: found[0]) == .found([EventReference(transactionRef: "pi_1", merchant: "acct_1")]))
    }

    @Test func aCursorItDidNotWriteIsRefused() async {
        let (search, _) = Self.search { _ in json(200, #"{"items":[]}"#) }
        for cursor in ["7|payments:", "x|payments:", "0|charges:"] {
            guard case .permanent(0, _) = await search.search(from: 0, to: 86_400, cursor: cursor) else { Issue.record("\(cursor) accepted"); continue }
        }
    }
}
