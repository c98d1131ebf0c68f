import Foundation
import Reconciliation

/// PayPal's list of the webhook events it made (`GET /v1/notifications/webhooks-events`, notifications_webhooks_v1.json:
/// `events[]`, `count`, HATEOAS `links`) for `payrecon backfill`: an event whose delivery never reached payrecon is
/// stored as a delivery of it would have been, and goes through the worker. docs/PROVIDER-FACTS.md PAYPAL-57…59.
struct PayPalWebhookEventList: EventListing {
    let client: PayPalClient

    var name: String { "PayPal's webhook events list" }
    /// PayPal publishes no limit on the span of `start_time`..`end_time`; windows are a UTC day at most anyway.
    var maxWindowSeconds: Int64 { 31 * 86_400 }
    /// PayPal publishes no delay before an event is listed. Named assumption, safe if wrong: windows end as Transaction
    /// Search's do, 3 hours before now; what is newer PayPal is still delivering (it retries for 3 days), and the next
    /// run reads it.
    var listingLagSeconds: Int64 { 3 * 3_600 }
    /// 100 events a page (PayPal's default is 10; its maximum is not published: a smaller page than asked is
    /// followed by its `next` link all the same), so at most 100,000 events a window.
    static let pageSize = 100
    var maxPagesPerWindow: Int { 1_000 }

    /// The cursor is the query of the page's `next` link: only its query is sent, to the configured API base and
    /// the list's own path, so a link naming another host or path takes the token nowhere.
    func events(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<EventListPage> {
        let query: [(String, String)]
        if let cursor {
            guard let items = URLComponents(string: "?" + cursor)?.queryItems else {
                return .permanent(status: 0, body: "PayPal's next link has a query payrecon cannot read: \(cursor.prefix(200))")
            }
            query = items.map { ($0.name, $0.value ?? "") }
        } else {
            // Both times inclusive: the window's last instant is its end less one millisecond.
            query = [("page_size", String(Self.pageSize)), ("start_time", UnixTime.iso8601(from)),
                     ("end_time", String(UnixTime.iso8601(to - 1).dropLast()) + ".999Z")]
        }
        switch await client.webhookEvents(query: query) {
        case .found(let body):
            do { return .found(try Self.page(body, baseURL: client.configuration.baseURL)) } catch { return .permanent(status: 0, body: "\(error)") }
        case .permanent(let status, let body) where status == 400 && body.contains("start_time") && body.contains("VALIDATION_ERROR"):
            // PayPal's SDK's tests expect a start "earlier than 45 days" refused on start_time: it keeps no events
            // that old (an inference; if the refusal means something else, its words are shown all the same).
            return .found(.tooOld(String(body.prefix(300))))
        case let other:
            return other.failure(as: EventListPage.self)!
        }
    }

    /// The page's events, each re-serialized exactly (numbers as PayPal wrote them) as the body a delivery carries,
    /// and the query of its `next` link.
    static func page(_ body: JSONValue, baseURL: String) throws(ProviderMappingError) -> EventListPage {
        let r = AnswerReader(provider: "paypal")
        guard body.objectMembers != nil else { throw r.fail("(answer)", body, "expected a JSON object") }
        var events: [ListedEvent] = []
        for (i, event) in (body["events"]?.arrayValue ?? []).enumerated() {
            guard event.objectMembers != nil else { throw r.fail("events[\(i)]", event, "expected an event object") }
            // Read as a delivery of it is read (its id is what deliveries are deduplicated on): what is stored, the
            // worker can read.
            let bytes = event.serialized()
            let parsed: PayPalEvent
            do { parsed = try PayPalEvent.parse(body: bytes) } catch { throw r.fail("events[\(i)]", event["id"], "not an event a delivery could carry: \(error.message)") }
            guard !parsed.id.isEmpty, parsed.id.utf8.count <= 255 else { throw r.fail("events[\(i)].id", event["id"], "not an event id") }
            events.append(ListedEvent(id: parsed.id, eventType: parsed.eventType, body: bytes,
                                      at: try r.timestamp(event["create_time"], "events[\(i)].create_time")))
        }
        var next: String?
        for (i, link) in (body["links"]?.arrayValue ?? []).enumerated() where link["rel"]?.stringValue == "next" {
            let href = try r.string(link["href"], "links[\(i)].href")
            guard let url = URLComponents(string: href), url.path.hasSuffix("/v1/notifications/webhooks-events"),
                  let query = url.percentEncodedQuery, !query.isEmpty else {
                throw r.fail("links[\(i)].href", link["href"], "a next link that is not the events list's (\(baseURL)/v1/notifications/webhooks-events?…)")
            }
            next = query
        }
        if next != nil && events.isEmpty { throw r.fail("events", body["events"], "empty beside a next link") }
        return .events(events, next: next)
    }
}
