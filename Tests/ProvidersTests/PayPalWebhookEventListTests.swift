import Foundation
import Testing
@testable import Providers
@testable import Reconciliation
import TextFormats

/// PayPal's webhook events list as backfill reads it: events as a delivery carries them, the `next` link followed by
/// its query only (to the configured API, never to the host a link names), and what does not read refused by field.
@Suite struct PayPalWebhookEventListTests {
    static let event =
        #"{"id":"WH-1A","event_version":"1.0","create_time":"2026-11-30T12:00:01.000Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"CAP-1","amount":{"currency_code":"USD","value":"15.00"}},"links":[]}"#

    static func list(_ answers: @escaping @Sendable (ProviderRequest) -> ProviderResponse) -> (PayPalWebhookEventList, ScriptedTransport) {
        let transport = ScriptedTransport { request, _ in
            request.url.hasSuffix("/v1/oauth2/token") ? json(200, PayPalClientTests.tokenAnswer) : answers(request)
        }
        let client = PayPalClient(
            configuration: PayPalConfiguration(baseURL: "https://api-m.paypal.com", clientID: "id", secret: "s"),
            transport: transport, retry: .none)
        return (PayPalWebhookEventList(client: client), transport)
    }

    @Test func followsTheNextLinkByItsQueryToTheConfiguredAPI() async throws {
        let (list, transport) = Self.list { request in
            if request.url.contains("move_to=next") {
                return json(200, #"{"events":[\#(Self.event.replacingOccurrences(of: "WH-1A", with: "WH-1B"))],"count":1,"links":[]}"#)
            }
            return json(
                200,
                #"{"events":[\#(Self.event)],"count":1,"links":[{"href":"https://elsewhere.example/v1/notifications/webhooks-events?page_size=100&move_to=next&index_time=2026-11-30T12%3A00%3A01Z&index_id=WH-1A","rel":"next","method":"GET"}]}"#
            )
        }
        let from = Self.window.from
        guard case .found(let firstPage) = await list.events(from: from, to: from + 86_400, cursor: nil) else {
            Issue.record("the first page did not read"); return
        }
        let (first, next) = (firstPage.events, firstPage.next)
        #expect(first.map(\.id) == ["WH-1A"] && first[0].eventType == "PAYMENT.CAPTURE.COMPLETED")
        #expect(try PayPalEvent.parse(body: first[0].body).id == "WH-1A", "the stored body reads as a delivery's")
        #expect(String(decoding: first[0].body, as: UTF8.self).contains(#""value":"15.00""#))
        let cursor = try #require(next)
        guard case .found(let secondPage) = await list.events(from: from, to: from + 86_400, cursor: cursor), secondPage.next == nil else {
            Issue.record("the second page did not read"); return
        }
        let second = secondPage.events
        #expect(second.map(\.id) == ["WH-1B"])
        let urls = transport.requests.map(\.url).filter { !$0.hasSuffix("/token") }
        #expect(urls.count == 2)
        #expect(
            urls[0].hasPrefix(
                "https://api-m.paypal.com/v1/notifications/webhooks-events?page_size=100&start_time=2026-11-30T00%3A00%3A00Z&end_time=2026-11-30T23%3A59%3A59.999Z"
            ), "\(urls[0])")
        #expect(
            urls[1].hasPrefix("https://api-m.paypal.com/v1/notifications/webhooks-events?") && urls[1].contains("index_id=WH-1A")
                && !urls[1].contains("elsewhere"), "\(urls[1])")
    }

    static let window = PayPalWebhookEventList.Window(from: 1_764_460_800 + 365 * 86_400, to: 1_764_460_800 + 366 * 86_400)  // 2026-11-30

    @Test func refusesAPageThatWouldMarkTheWindowReadWhenItWasNot() throws {
        let next = "https://api-m.paypal.com/v1/notifications/webhooks-events?page_size=100&move_to=next"
        for (body, field) in [
            (#"[]"#, "(answer)"),
            (
                #"{"events":[\#(Self.event)],"links":[{"href":"https://api-m.paypal.com/v2/payments/captures?x=1","rel":"next"}]}"#,
                "links[0].href"
            ),
            (#"{"events":[],"links":[{"href":"\#(next)","rel":"next"}]}"#, "events"),
            // A next link for another window, or filtered: the window would be recorded read when it was not.
            (#"{"events":[\#(Self.event)],"links":[{"href":"\#(next)&start_time=2026-11-29T00:00:00Z","rel":"next"}]}"#, "links[0].href"),
            (#"{"events":[\#(Self.event)],"links":[{"href":"\#(next)&end_time=2026-12-30T23:59:59.999Z","rel":"next"}]}"#, "links[0].href"),
            (#"{"events":[\#(Self.event)],"links":[{"href":"\#(next)&event_type=PAYMENT.CAPTURE.DENIED","rel":"next"}]}"#, "links[0].href"),
            // An event made outside the window asked for.
            (Self.event.replacingOccurrences(of: "2026-11-30T12", with: "2026-12-01T12").wrappedAsPage, "events[0].create_time"),
            (
                Self.event.replacingOccurrences(of: #""create_time":"2026-11-30T12:00:01.000Z","#, with: "").wrappedAsPage,
                "events[0].create_time"
            )
        ] {
            do {
                _ = try PayPalWebhookEventList.page(try JSONValue.parse(body), window: Self.window)
                Issue.record("accepted: \(body)")
            } catch let e as ProviderMappingError {
                #expect(e.field == field, "\(body): \(e)")
            }
        }
        // The same window named again, and a trailing slash, are the list's own next link.
        let same = try PayPalWebhookEventList.page(
            try JSONValue.parse(
                #"{"events":[\#(Self.event)],"links":[{"href":"https://api-m.paypal.com/v1/notifications/webhooks-events/?page_size=100&start_time=2026-11-30T00:00:00Z&end_time=2026-11-30T23:59:59.999Z&move_to=next","rel":"next"}]}"#
            ), window: Self.window)
        #expect(same.next?.contains("move_to=next") == true)
        // The last page: no next link; an empty list reads as nothing.
        #expect(
            try PayPalWebhookEventList.page(try JSONValue.parse(#"{"events":[],"count":0,"links":[]}"#), window: Self.window)
                == EventListPage(events: [], next: nil))
    }

    /// One event that cannot be stored is named and left out; the others on its page are stored.
    @Test func anEventThatCannotBeStoredIsNamedNotFatal() throws {
        let big = Self.event.replacingOccurrences(of: "WH-1A", with: "WH-BIG").replacingOccurrences(
            of: #""links":[]"#, with: #""links":[],"note":"\#(String(repeating: "x", count: 1 << 20))""#)
        let noID = Self.event.replacingOccurrences(of: #""id":"WH-1A","#, with: "")
        let page = try PayPalWebhookEventList.page(
            try JSONValue.parse("[\(Self.event),\(big),\(noID),7]".wrappedEvents), window: Self.window)
        #expect(page.events.map { $0.unreadable == nil } == [true, false, false, false])
        #expect(page.events[1].id.contains("WH-BIG") && page.events[1].unreadable?.contains("1 MiB") == true)
        #expect(page.events[0].id == "WH-1A")
    }

    /// A refusal is a failure, whatever its words: never taken for "too old" (payrecon does not ask for windows older
    /// than PayPal keeps events).
    @Test func aRefusalOnStartTimeIsAFailureNotAnEmptyWindow() async {
        let (list, _) = Self.list { _ in
            json(
                400,
                #"{"name":"VALIDATION_ERROR","message":"Invalid data provided","debug_id":"d","details":[{"field":"start_time","issue":"Invalid data provided"}]}"#
            )
        }
        guard case .permanent(.refused(400, let body)) = await list.events(from: Self.window.from, to: Self.window.to, cursor: nil) else {
            Issue.record("not a failure"); return
        }
        #expect(body.contains("start_time"))
        #expect(list.historySeconds == Int64(44 * 86_400))
    }
}

private extension String {
    var wrappedAsPage: String { #"{"events":[\#(self)],"count":1,"links":[]}"# }
    var wrappedEvents: String { #"{"events":\#(self),"links":[]}"# }
}
