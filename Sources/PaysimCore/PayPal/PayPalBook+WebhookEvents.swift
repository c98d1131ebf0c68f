import Foundation
import Reconciliation
import TextFormats

// The webhook events PayPal made, as its notifications API lists them (`GET /v1/notifications/webhooks-events`,
// notifications_webhooks_v1.json): every event paysim built for a delivery, whether or not the delivery got through.

/// One event PayPal made: the JSON a delivery of it carries.
public struct PayPalEventRecord: Sendable, Equatable {
    public var id: String
    public var eventType: String
    /// Unix seconds of its `create_time`.
    public var created: Int64
    /// The `resource.id` it names (the list's `transaction_id` filter).
    public var resourceID: String?
    public var json: JSONValue
}

extension PayPalBook {
    /// paysim keeps the newest this many events (PayPal keeps them for a time it does not publish; its SDK's tests
    /// expect a start older than 45 days to be refused): a simulator run that sends millions stays bounded.
    static let eventsKept = 20_000

    mutating func record(event: JSONValue, now: Int64) {
        guard let id = event["id"]?.stringValue, !id.isEmpty else { return }
        let created = event["create_time"]?.stringValue.flatMap(SimTime.parse) ?? now
        events.append(
            PayPalEventRecord(
                id: id, eventType: event["event_type"]?.stringValue ?? "", created: created,
                resourceID: event["resource"]?["id"]?.stringValue, json: event))
        if events.count > Self.eventsKept + Self.eventsKept / 4 { events.removeFirst(events.count - Self.eventsKept) }
    }
}

extension Simulator {
    /// How far back PayPal lists events: its Node SDK's test expects a `VALIDATION_ERROR` on `start_time` for a start
    /// "earlier than 45 days" (an inference from the test's name; PayPal publishes no retention).
    static let paypalEventHistorySeconds: Int64 = 45 * 86_400

    /// GET /v1/notifications/webhooks-events: `events[]` (each as delivered, with its `links`), `count` (the events on
    /// this page) and `links` (`next` while more are left), filtered by `start_time` / `end_time` (both inclusive),
    /// `transaction_id` (the resource's id) and `event_type`; `page_size` events a page (default 10). Newest first;
    /// the next page is named by the last event's time and id (`move_to=next&index_time=…&index_id=…`), so events
    /// made meanwhile do not shift the pages.
    func paypalWebhookEvents(_ r: SimRequest) throws(SimError) -> SimResponse {
        // PayPal's refusal as its Node SDK's recorded mock has it: VALIDATION_ERROR, the field, "Invalid data provided".
        func invalid(_ field: String, _ why: String) -> SimError {
            SimError.paypal(
                400, name: "VALIDATION_ERROR", message: "Invalid data provided", issue: "Invalid data provided",
                description: why, field: field)
        }
        let now = Int64(clock().timeIntervalSince1970)
        var start: Int64?, end: Int64?
        if let text = r.query["start_time"] {
            guard let t = SimTime.parse(text) else { throw invalid("start_time", "Invalid date format") }
            guard t >= now - Self.paypalEventHistorySeconds else {
                throw invalid("start_time", "Start date cannot be earlier than 45 days")
            }
            start = t
        }
        if let text = r.query["end_time"] {
            guard let t = SimTime.parse(text) else { throw invalid("end_time", "Invalid date format") }
            end = t
        }
        if let start, let end, end < start { throw invalid("end_time", "End date should be after start date") }
        let pageSize = Int(r.query["page_size"] ?? "10") ?? 0
        guard (1...300).contains(pageSize) else { throw invalid("page_size", "page_size must be between 1 and 300") }
        var after: (Int64, String)?
        if r.query["move_to"] == "next" {
            guard let text = r.query["index_time"], let t = SimTime.parse(text), let id = r.query["index_id"] else {
                throw invalid("index_time", "Invalid page index")
            }
            after = (t, id)
        }
        let transaction = r.query["transaction_id"], type = r.query["event_type"]
        let (page, more, base): ([PayPalEventRecord], Bool, String) = state.withLock { s in
            var matching = s.paypal.events.filter { e in
                (start.map { e.created >= $0 } ?? true) && (end.map { e.created <= $0 } ?? true)
                    && (transaction.map { e.resourceID == $0 } ?? true) && (type.map { e.eventType == $0 } ?? true)
            }
            matching.sort { ($0.created, $0.id) > ($1.created, $1.id) }
            if let after { matching = matching.filter { ($0.created, $0.id) < after } }
            return (Array(matching.prefix(pageSize)), matching.count > pageSize, s.config.publicBaseURL)
        }
        var links: [JSONValue] = []
        if more, let last = page.last {
            var query: [(String, String)] = [("page_size", String(pageSize))]
            if let t = r.query["start_time"] { query.append(("start_time", t)) }
            if let t = r.query["end_time"] { query.append(("end_time", t)) }
            if let transaction { query.append(("transaction_id", transaction)) }
            if let type { query.append(("event_type", type)) }
            query += [
                ("move_to", "next"), ("index_time", SimTime.rfc3339(Date(timeIntervalSince1970: Double(last.created)))),
                ("index_id", last.id)
            ]
            let encoded = query.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(
                separator: "&")
            links.append(PayPalBook.link("\(base)/v1/notifications/webhooks-events?\(encoded)", "next", "GET"))
        }
        return .json(200, .object(["events": .array(page.map(\.json)), "count": .integer(Int64(page.count)), "links": .array(links)]))
    }
}
