import Foundation
import Testing
@testable import Providers
@testable import Reconciliation

/// PayPal's webhook events list as backfill reads it: events as a delivery carries them, the `next` link followed by
/// its query only (to the configured API, never to the host a link names), and what does not read refused by field.
@Suite struct PayPalWebhookEventListTests {
    static let event = #"{"id":"WH-1A","event_version":"1.0","create_time":"2026-11-30T12:00:01.000Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"CAP-1","amount":{"currency_code":"USD","value":"15.00"}},"links":[]}"#

    static func list(_ answers: @escaping @Sendable (ProviderRequest) -> ProviderResponse) -> (PayPalWebhookEventList, ScriptedTransport) {
        let transport = ScriptedTransport { request, _ in
            request.url.hasSuffix("/v1/oauth2/token") ? json(200, PayPalClientTests.tokenAnswer) : answers(request)
        }
        let client = PayPalClient(configuration: PayPalConfiguration(baseURL: "https://api-m.paypal.com", clientID: "id", secret: "s"),
                                  transport: transport, retry: .none)
        return (PayPalWebhookEventList(client: client), transport)
    }

    @Test func followsTheNextLinkByItsQueryToTheConfiguredAPI() async throws {
        let (list, transport) = Self.list { request in
            if request.url.contains("move_to=next") {
                return json(200, #"{"events":[\#(Self.event.replacingOccurrences(of: "WH-1A", with: "WH-1B"))],"count":1,"links":[]}"#)
            }
            return json(200, #"{"events":[\#(Self.event)],"count":1,"links":[{"href":"https://elsewhere.example/v1/notifications/webhooks-events?page_size=100&move_to=next&index_time=2026-11-30T12%3A00%3A01Z&index_id=WH-1A","rel":"next","method":"GET"}]}"#)
        }
        let from: Int64 = 1_764_460_800   // 2025-11-30T00:00:00Z
        guard case .found(.events(let first, let next)) = await list.events(from: from, to: from + 86_400, cursor: nil) else {
            Issue.record("the first page did not read"); return
        }
        #expect(first.map(\.id) == ["WH-1A"] && first[0].eventType == "PAYMENT.CAPTURE.COMPLETED")
        #expect(try PayPalEvent.parse(body: first[0].body).id == "WH-1A", "the stored body reads as a delivery's")
        #expect(String(decoding: first[0].body, as: UTF8.self).contains(#""value":"15.00""#))
        let cursor = try #require(next)
        guard case .found(.events(let second, nil)) = await list.events(from: from, to: from + 86_400, cursor: cursor) else {
            Issue.record("the second page did not read"); return
        }
        #expect(second.map(\.id) == ["WH-1B"])
        let urls = transport.requests.map(\.url).filter { !$0.hasSuffix("/token") }
        #expect(urls.count == 2)
        #expect(urls[0].hasPrefix("https://api-m.paypal.com/v1/notifications/webhooks-events?page_size=100&start_time=2025-11-30T00%3A00%3A00Z&end_time=2025-11-30T23%3A59%3A59.999Z"), "\(urls[0])")
        #expect(urls[1].hasPrefix("https://api-m.paypal.com/v1/notifications/webhooks-events?") && urls[1].contains("index_id=WH-1A")
                && !urls[1].contains("elsewhere"), "\(urls[1])")
    }

    @Test func refusesWhatDoesNotRead() throws {
        let base = "https://api-m.paypal.com"
        for (body, field) in [
            (#"[]"#, "(answer)"),
            (#"{"events":[{"event_type":"X"}]}"#, "events[0]"),
            (#"{"events":[7]}"#, "events[0]"),
            (#"{"events":[\#(Self.event)],"links":[{"href":"https://api-m.paypal.com/v2/payments/captures?x=1","rel":"next"}]}"#, "links[0].href"),
            (#"{"events":[],"links":[{"href":"https://api-m.paypal.com/v1/notifications/webhooks-events?move_to=next","rel":"next"}]}"#, "events"),
        ] {
            #expect(throws: ProviderMappingError.self, "\(body)") { _ = try PayPalWebhookEventList.page(try JSONValue.parse(body), baseURL: base) }
            do { _ = try PayPalWebhookEventList.page(try JSONValue.parse(body), baseURL: base) } catch let e as ProviderMappingError {
                #expect(e.field == field, "\(body): \(e)")
            }
        }
        // The last page: no next link; an empty list reads as nothing.
        #expect(try PayPalWebhookEventList.page(try JSONValue.parse(#"{"events":[],"count":0,"links":[]}"#), baseURL: base) == .events([], next: nil))
    }

    @Test func aStartOlderThanPayPalKeepsEventsIsTooOld() async {
        let (list, _) = Self.list { _ in
            json(400, #"{"name":"VALIDATION_ERROR","message":"Invalid data provided","debug_id":"d","details":[{"field":"start_time","issue":"Start date cannot be earlier than 45 days"}]}"#)
        }
        guard case .found(.tooOld(let why)) = await list.events(from: 0, to: 86_400, cursor: nil) else { Issue.record("not too old"); return }
        #expect(why.contains("45 days"))
    }
}
