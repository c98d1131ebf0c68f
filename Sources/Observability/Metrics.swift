import Synchronization

/// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text exposition format.
public final class Metrics: Sendable {
    public static let shared = Metrics()

    private struct Family {
        var help: String
        var type: String
        var buckets: [Double] = []
        var series: [String: Series] = [:]  // rendered label set → values
        var order: [String] = []
    }
    private struct Series {
        var value: Int64 = 0  // counter/gauge; histogram: count
        var sumMicros: Int64 = 0  // histogram sum in microseconds
        var bucketCounts: [Int64] = []

        mutating func add(_ delta: Int64, set: Bool) { value = set ? delta : value + delta }
        mutating func observe(_ seconds: Double, _ buckets: [Double]) {
            value += 1
            sumMicros += Int64((seconds * 1_000_000).rounded())
            for (i, bound) in buckets.enumerated() where seconds <= bound { bucketCounts[i] += 1 }
        }
    }

    private let families = Mutex<[String: Family]>([:])
    private let names = Mutex<[String]>([])
    /// Gauges computed at scrape time (e.g. pending deliveries from the database).
    private let collectors = Mutex<[@Sendable () -> [(name: String, help: String, value: Int64)]]>([])
    /// Families rendered whole at scrape time (process metrics), in the exposition format.
    private let textCollectors = Mutex<[@Sendable () -> String]>([])

    public init() {}

    public func counter(_ name: String, help: String) -> Counter {
        register(name, help: help, type: "counter"); return Counter(metrics: self, name: name)
    }
    public func gauge(_ name: String, help: String) -> Gauge {
        register(name, help: help, type: "gauge"); return Gauge(metrics: self, name: name)
    }
    /// Latency histogram; observations in seconds, bucket bounds in seconds.
    public func histogram(_ name: String, help: String, buckets: [Double]) -> Histogram {
        register(name, help: help, type: "histogram", buckets: buckets.sorted()); return Histogram(metrics: self, name: name)
    }
    public func addCollector(_ collector: @escaping @Sendable () -> [(name: String, help: String, value: Int64)]) {
        collectors.withLock { $0.append(collector) }
    }
    /// A collector that renders its own families (with their HELP and TYPE lines).
    public func addTextCollector(_ collector: @escaping @Sendable () -> String) {
        textCollectors.withLock { $0.append(collector) }
    }

    private func register(_ name: String, help: String, type: String, buckets: [Double] = []) {
        families.withLock { fams in
            if fams[name] == nil {
                fams[name] = Family(help: help, type: type, buckets: buckets)
                names.withLock { $0.append(name) }
            }
        }
    }

    fileprivate func add(_ name: String, _ labels: [(String, String)], _ delta: Int64, set: Bool = false) {
        let key = Self.render(labels)
        families.withLock { fams in
            // In place: copying the family out and back would copy its series dictionary on every increment.
            guard fams[name] != nil else { return }
            if fams[name]!.series[key] == nil { fams[name]!.order.append(key) }
            fams[name]!.series[key, default: Series()].add(delta, set: set)
        }
    }

    fileprivate func observe(_ name: String, _ labels: [(String, String)], seconds: Double) {
        let key = Self.render(labels)
        families.withLock { fams in
            guard let buckets = fams[name]?.buckets else { return }
            if fams[name]!.series[key] == nil { fams[name]!.order.append(key) }
            fams[name]!.series[key, default: Series(bucketCounts: Array(repeating: 0, count: buckets.count))].observe(seconds, buckets)
        }
    }

    fileprivate func initialiseHistogram(_ name: String, _ labels: [(String, String)]) {
        let key = Self.render(labels)
        families.withLock { fams in
            guard let buckets = fams[name]?.buckets, fams[name]!.series[key] == nil else { return }
            fams[name]!.order.append(key)
            fams[name]!.series[key] = Series(bucketCounts: Array(repeating: 0, count: buckets.count))
        }
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> String {
        var out = ""
        let ordered = names.withLock { $0 }
        let snapshot = families.withLock { $0 }
        for name in ordered {
            guard let fam = snapshot[name] else { continue }
            out += "# HELP \(name) \(fam.help)\n# TYPE \(name) \(fam.type)\n"
            for key in fam.order {
                let s = fam.series[key]!
                if fam.type == "histogram" {
                    for (i, bound) in fam.buckets.enumerated() {
                        out += "\(name)_bucket\(Self.merge(key, "le", Self.format(bound))) \(s.bucketCounts[i])\n"
                    }
                    out += "\(name)_bucket\(Self.merge(key, "le", "+Inf")) \(s.value)\n"
                    out += "\(name)_sum\(key) \(Self.formatMicros(s.sumMicros))\n"
                    out += "\(name)_count\(key) \(s.value)\n"
                } else {
                    out += "\(name)\(key) \(s.value)\n"
                }
            }
        }
        for collector in collectors.withLock({ $0 }) {
            for g in collector() { out += "# HELP \(g.name) \(g.help)\n# TYPE \(g.name) gauge\n\(g.name) \(g.value)\n" }
        }
        for collector in textCollectors.withLock({ $0 }) { out += collector() }
        return out
    }

    static func render(_ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
    }
    static func merge(_ key: String, _ label: String, _ value: String) -> String {
        key.isEmpty ? "{\(label)=\"\(value)\"}" : String(key.dropLast()) + ",\(label)=\"\(value)\"}"
    }
    static func escape(_ s: String) -> String {
        // Label values are almost always plain: skip Foundation's replacing when there is nothing to escape.
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == 0x0A }) else { return s }
        return s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(
            of: "\n", with: "\\n")
    }
    static func format(_ d: Double) -> String {
        // Bucket bounds are configuration, not money: printing them is the only use of Double here.
        let s = String(d)
        return s.hasSuffix(".0") ? String(s.dropLast(2)) : s
    }
    static func formatMicros(_ micros: Int64) -> String {
        let whole = micros / 1_000_000, frac = micros % 1_000_000
        let f = String(frac); return "\(whole)." + String(repeating: "0", count: 6 - f.count) + f
    }

    public struct Counter: Sendable {
        let metrics: Metrics, name: String
        public func increment(_ labels: [(String, String)] = [], by delta: Int64 = 1) { metrics.add(name, labels, delta) }
        /// Makes the series exist at 0, so `increase()` sees its first increment (a series born at 1 is read as no
        /// increase).
        public func initialise(_ labels: [(String, String)] = []) { metrics.add(name, labels, 0) }
    }
    public struct Gauge: Sendable {
        let metrics: Metrics, name: String
        public func set(_ value: Int64, _ labels: [(String, String)] = []) { metrics.add(name, labels, value, set: true) }
        public func add(_ delta: Int64, _ labels: [(String, String)] = []) { metrics.add(name, labels, delta) }
    }
    public struct Histogram: Sendable {
        let metrics: Metrics, name: String
        public func observe(seconds: Double, _ labels: [(String, String)] = []) { metrics.observe(name, labels, seconds: seconds) }
        /// Makes the series exist with every bucket at 0, so the first observations show in `rate()` (a series born
        /// with them reads as no increase, and a quantile over it as NaN).
        public func initialise(_ labels: [(String, String)] = []) { metrics.initialiseHistogram(name, labels) }
    }
}
