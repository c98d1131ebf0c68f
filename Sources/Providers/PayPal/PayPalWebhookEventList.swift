import Foundation
import Reconciliation
import TextFormats

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
    /// PayPal refuses a start "earlier than 45 days" (its Node SDK's tests, PAYPAL-58): windows start no earlier than
    /// 44 days ago, a day's margin, so that no window is refused for its age and none is taken for too old by mistake.
    var historySeconds: Int64? { 44 * 86_400 }
    /// A listed event is stored as a delivery: no larger than the receiver takes one (1 MiB).
    static let maxEventBytes = 1 << 20

    /// The cursor is the query of the page's `next` link: only its query is sent, to the configured API base and
    /// the list's own path, so a link naming another host or path takes the token nowhere.
    func events(from: Int64, to: Int64, cursor: String?) async -> ProviderOutcome<EventListPage> {
        let window = Window(from: from, to: to)
        let query: [(String, String)]
        if let cursor {
            guard let items = URLComponents(string: "?" + cursor)?.queryItems else {
                return .permanent(.notSent("PayPal's next link has a query payrecon cannot read: \(cursor.prefix(200))"))
            }
            query = items.map { ($0.name, $0.value ?? "") }
        } else {
            query = [("page_size", String(Self.pageSize)), ("start_time", window.start), ("end_time", window.end)]
        }
        switch await client.webhookEvents(query: query) {
        case .found(let body):
            do { return .found(try Self.page(body, window: window)) } catch { return .permanent(.unreadable("\(error)")) }
        case let other:
            return other.failure(as: EventListPage.self)!
        }
    }

    /// The window as asked: `start_time` its first second, `end_time` its last millisecond (both inclusive).
    struct Window {
        let from: Int64, to: Int64
        var start: String { UnixTime.iso8601(from) }
        var end: String { PayPalTransactionSearch.inclusiveEnd(to) }
    }

    /// The page's events, each re-serialized exactly (numbers as PayPal wrote them) as the body a delivery carries,
    /// and the query of its `next` link. The whole page is refused when it lists an event made outside the window,
    /// or when its next link would list another window or a filtered part of it (the window would then be recorded
    /// read when it was not); one event that cannot be stored is named, not stored, and the rest go on.
    static func page(_ body: JSONValue, window: Window) throws(ProviderMappingError) -> EventListPage {
        let r = AnswerReader(provider: .paypal)
        guard body.objectMembers != nil else { throw r.fail("(answer)", body, "expected a JSON object") }
        var events: [ListedEvent] = []
        let listed = body["events"]?.arrayValue ?? []
        guard listed.count <= pageSize else {
            throw r.fail("events", nil, "\(listed.count) events on one page, more than the \(pageSize) asked for")
        }
        for (i, event) in listed.enumerated() {
            let f = "events[\(i)]"
            func unreadable(_ why: String) -> ListedEvent {
                ListedEvent(
                    id: event["id"]?.stringValue.map { "\(f) (\($0.prefix(80)))" } ?? f, eventType: nil, body: [], at: nil, unreadable: why)
            }
            guard event.objectMembers != nil else { events.append(unreadable("not an event object")); continue }
            let at = try r.timestamp(event["create_time"], "\(f).create_time")
            guard let at else { throw r.fail("\(f).create_time", event["create_time"], "missing") }
            guard at >= window.from && at < window.to else {
                throw r.fail("\(f).create_time", event["create_time"], "outside the window asked for (\(window.start)–\(window.end))")
            }
            // Read as a delivery of it is read (its id is what deliveries are deduplicated on): what is stored, the
            // worker can read.
            let bytes = event.serialized()
            guard bytes.count <= maxEventBytes else {
                events.append(unreadable("\(bytes.count) bytes, more than a delivery payrecon takes (1 MiB)")); continue
            }
            let parsed: PayPalEvent
            do { parsed = try PayPalEvent.parse(body: bytes) } catch {
                events.append(unreadable("not an event a delivery could carry: \(error.message)")); continue
            }
            guard !parsed.id.isEmpty, parsed.id.utf8.count <= 255 else { events.append(unreadable("its id is not an event id")); continue }
            events.append(ListedEvent(id: parsed.id, eventType: parsed.eventType, body: bytes, at: at))
        }
        var next: String?
        for (i, link) in (body["links"]?.arrayValue ?? []).enumerated() where link["rel"]?.stringValue == "next" {
            let href = try r.string(link["href"], "links[\(i)].href")
            guard let url = URLComponents(string: href),
                url.path.hasSuffix("/v1/notifications/webhooks-events") || url.path.hasSuffix("/v1/notifications/webhooks-events/"),
                let query = url.percentEncodedQuery, !query.isEmpty
            else {
                throw r.fail(
                    "links[\(i)].href", link["href"], "a next link that is not the events list's (…/v1/notifications/webhooks-events?…)")
            }
            // The next page must be of the same list: the same times, if it names them, and no filter payrecon did not ask.
            for item in url.queryItems ?? [] {
                switch item.name {
                case "transaction_id", "event_type":
                    throw r.fail("links[\(i)].href", link["href"], "a next link filtering by \(item.name), which payrecon did not ask")
                case "start_time" where item.value.flatMap(ISO8601.unixSeconds(from:)) != window.from,
                    "end_time" where item.value.flatMap(ISO8601.unixSeconds(from:)) != window.to - 1:
                    throw r.fail("links[\(i)].href", link["href"], "a next link for another window (\(item.name)=\(item.value ?? ""))")
                default: break
                }
            }
            next = query
        }
        if next != nil && events.isEmpty { throw r.fail("events", body["events"], "empty beside a next link") }
        return EventListPage(events: events, next: next)
    }
}
