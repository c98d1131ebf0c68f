import Foundation
import HTTP
import Observability
import PayreconTesting
@_spi(Positional) import Postgres
import Reconciliation
import Store
import Testing
import Wiring
import Worker

/// The worker's /metrics after a short run, scraped and parsed (Prometheus text format): every family the
/// operator's dashboard and alerts use exists with its type and labels; and the shipped Grafana dashboard queries
/// only metrics payrecon exports.
@Suite("Metrics", .serialized) struct MetricsTests {
    struct Family: Equatable { var type: String; var labels: Set<String> }

    /// `# TYPE name type` lines and the label names of each family's samples (histogram series folded in, `le` left out).
    static func parse(_ text: String) -> [String: Family] {
        var families: [String: Family] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                if parts.count == 4 { families[String(parts[2]), default: Family(type: "", labels: [])].type = String(parts[3]) }
                continue
            }
            guard !line.hasPrefix("#") else { continue }
            let nameEnd = line.firstIndex { $0 == "{" || $0 == " " } ?? line.endIndex
            var name = String(line[..<nameEnd])
            for suffix in ["_bucket", "_sum", "_count"] where families[name] == nil && name.hasSuffix(suffix) {
                name = String(name.dropLast(suffix.count))
            }
            var labels: Set<String> = []
            if line[nameEnd...].hasPrefix("{"), let close = line.lastIndex(of: "}") {
                for pair in line[line.index(after: nameEnd)..<close].split(separator: ",") {
                    if let eq = pair.firstIndex(of: "=") { labels.insert(String(pair[..<eq])) }
                }
            }
            labels.remove("le")
            families[name, default: Family(type: "", labels: [])].labels.formUnion(labels)
        }
        return families
    }

    @Test func everyWorkerFamilyExistsWithItsTypeAndLabels() async throws {
        try await WorkerHarness.with { h in
            WorkerMetrics.register()
            ProcessMetrics.register(version: "test")
            PoolMetrics.register(h.pool)
            _ = try await h.admin(
                "/admin/paypal/orders",
                #"{"id":"PP-M","intent":"AUTHORIZE","currency":"USD","amount":"20.00","authorizations":[{"id":"AUTH-M"}]}"#)
            try h.insert(WorkerHarness.order(.paypal, "ORD-M", ref: "PP-M", amount: 2000, currency: "USD", merchant: nil))
            // And one captured short of its total: 10.00 USD at risk.
            _ = try await h.admin(
                "/admin/paypal/orders", #"{"id":"PP-M2","intent":"CAPTURE","currency":"USD","amount":"20.00","captures":[{"id":"CAP-M2"}]}"#
            )
            try h.insert(
                WorkerHarness.order(.paypal, "ORD-M2", ref: "PP-M2", intent: .purchase, amount: 3000, currency: "USD", merchant: nil))
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_id":"CAP-M2"}"#)
            _ = try h.storeWebhook(#"{"provider":"paypal","event_type":"PAYMENT.AUTHORIZATION.CREATED","resource_id":"AUTH-M"}"#)
            _ = try h.store(
                .paypal,
                json: #"{"id":"WH-M2","event_type":"VAULT.PAYMENT-TOKEN.CREATED","resource_type":"payment_token","resource":{"id":"T"}}"#)
            #expect(await h.runOnce().done == 3)
            _ = await h.executor.executePending()  // the capture the order calls for
            try await h.pool.run { try WorkerMetrics.refresh(on: $0) }
            let server = WorkerMetricsServer(host: "127.0.0.1", port: 0)
            let port = try server.start()
            defer { server.stop() }
            let text = String(
                decoding: try await h.http.send(HTTPClientRequest(method: "GET", url: "http://127.0.0.1:\(port)/metrics")).body,
                as: UTF8.self)
            let families = Self.parse(text)
            let expected: [String: Family] = [
                "payrecon_deliveries_processed_total": Family(type: "counter", labels: ["provider", "outcome"]),
                "payrecon_provider_calls_total": Family(type: "counter", labels: ["provider", "operation", "status"]),
                "payrecon_provider_call_seconds": Family(type: "histogram", labels: ["provider", "operation"]),
                "payrecon_actions_total": Family(type: "counter", labels: ["provider", "kind", "status"]),
                "payrecon_deliveries_backlog": Family(type: "gauge", labels: []),
                "payrecon_oldest_pending_delivery_age_seconds": Family(type: "gauge", labels: []),
                "payrecon_deliveries_dead": Family(type: "gauge", labels: []),
                "payrecon_discrepancies_open": Family(type: "gauge", labels: ["kind"]),
                "payrecon_money_at_risk_minor": Family(type: "gauge", labels: ["currency"]),
                "payrecon_last_reconcile_success_timestamp_seconds": Family(type: "gauge", labels: []),
                "payrecon_actions_pending": Family(type: "gauge", labels: ["state"]),
                "payrecon_oldest_pending_action_age_seconds": Family(type: "gauge", labels: []),
                "payrecon_provider_http_requests_total": Family(type: "counter", labels: ["provider", "class"]),
                "payrecon_db_connections": Family(type: "gauge", labels: ["state"]),
                "payrecon_db_pool_size": Family(type: "gauge", labels: []),
                "payrecon_db_jobs_waiting": Family(type: "gauge", labels: []),
                "payrecon_build_info": Family(type: "gauge", labels: ["version"]),
                "process_resident_memory_bytes": Family(type: "gauge", labels: []),
                "process_open_fds": Family(type: "gauge", labels: []),
                "process_max_fds": Family(type: "gauge", labels: []),
                "process_cpu_seconds_total": Family(type: "counter", labels: []),
                "process_start_time_seconds": Family(type: "gauge", labels: [])
            ]
            for (name, family) in expected {
                #expect(families[name] == family, "\(name): \(String(describing: families[name]))")
            }
            // Values from this run: the capture succeeded, both deliveries were processed, every kind has a series.
            #expect(text.contains(#"payrecon_actions_total{provider="paypal",kind="capture",status="succeeded"}"#))
            #expect(text.contains(#"payrecon_deliveries_processed_total{provider="paypal",outcome="ignored"}"#))
            #expect(text.contains(#"payrecon_money_at_risk_minor{currency="USD"} 1000"#))
            // Every class of every provider exists at 0 from the start.
            #expect(text.contains(#"payrecon_provider_http_requests_total{provider="pxp",class="no_answer"} 0"#))
            #expect(text.contains(#"payrecon_actions_pending{state="in_doubt"} 0"#))
            for kind in DiscrepancyKind.allCases { #expect(text.contains(#"payrecon_discrepancies_open{kind="\#(kind.rawValue)"}"#)) }
            // Once the currency's discrepancies are resolved, its gauge reads 0, not the last amount.
            try h.execute("UPDATE discrepancies SET status = 'resolved', resolved_at = now() WHERE currency = 'USD'")
            try await h.pool.run { try WorkerMetrics.refresh(on: $0) }
            let after = Metrics.shared.render()
            #expect(
                after.contains(#"payrecon_money_at_risk_minor{currency="USD"} 0"#),
                "\(after.split(separator: "\n").filter { $0.contains("money_at_risk") })")
            #expect(after.contains(#"payrecon_discrepancies_open{kind="amount_mismatch"} 0"#))
        }
    }

    @Test func theGrafanaDashboardQueriesOnlyWhatPayreconExports() async throws {
        let url = PayreconProcess.packageRoot.appendingPathComponent("deploy/grafana/payrecon.json")
        let dashboard = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let exprs = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        #expect(!exprs.isEmpty)
        // The receiver's families are registered by a receiver; the worker's by WorkerMetrics and the queue worker.
        try await ReceiverHarness.with { _ in }
        WorkerMetrics.register()
        DatabaseProbe.register()  // serve and work both run it
        let exported = Set(Self.parse(Metrics.shared.render()).keys)
        let pattern = try NSRegularExpression(pattern: "payrecon_[a-z_]+")
        var queried = Set<String>()
        for expr in exprs {
            for m in pattern.matches(in: expr, range: NSRange(expr.startIndex..., in: expr)) {
                var name = String(expr[Range(m.range, in: expr)!])
                for suffix in ["_bucket", "_sum", "_count"] where !exported.contains(name) && name.hasSuffix(suffix) {
                    name = String(name.dropLast(suffix.count))
                }
                queried.insert(name)
            }
        }
        #expect(queried.count >= 10)
        #expect(
            queried.subtracting(exported).isEmpty,
            "the dashboard queries metrics payrecon does not export: \(queried.subtracting(exported))")
        for name in ["payrecon_deliveries_total", "payrecon_ack_seconds", "payrecon_commit_batch_size"] { #expect(queried.contains(name)) }
    }
}
