// httpbench: fires N requests at paysim through one provider transport and prints throughput and CPU cost.
//   httpbench --base http://127.0.0.1:PORT --transport curl|urlsession --target healthz|pxp
//             [--requests 20000] [--concurrency 64] [--latency-ms 20] [--orders 1000]
// `pxp` is an authenticated PXPClient transaction GET (paysim applies its latency); `healthz` is a bare GET that
// paysim answers without latency (pure client overhead). One line of key=value results on stdout.
import Foundation
import HTTP
import Providers
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("httpbench: \(message)\n".utf8))
    exit(2)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard flag.hasPrefix("--"), let value = arguments.popFirst() else { fail("usage: see Sources/httpbench/main.swift") }
    options[String(flag.dropFirst(2))] = value
}
guard let base = options["base"] else { fail("--base is required") }
let transportName = options["transport"] ?? "curl"
let target = options["target"] ?? "pxp"
let requests = Int(options["requests"] ?? "20000") ?? 20000
let concurrency = Int(options["concurrency"] ?? "64") ?? 64
let latencyMs = Int(options["latency-ms"] ?? "20") ?? 20
let orders = Int(options["orders"] ?? "1000") ?? 1000

let configuration = URLSessionHTTPClient.Configuration(
    timeout: .seconds(30), maxConcurrentRequests: concurrency,
    maxConnectionsPerHost: concurrency)
let transport: any ProviderTransport
switch transportName {
case "curl": transport = HTTPClientTransport(client: CurlHTTPClient(configuration: configuration))
case "urlsession": transport = HTTPClientTransport(client: URLSessionHTTPClient(configuration: configuration))
default: fail("--transport must be curl or urlsession")
}
let pxp = PXPClient(
    configuration: PXPConfiguration(
        baseURL: base + "/api/v1", clientID: "bench", tokenID: "bench-token",
        tokenValue: "bench-value"),
    transport: transport, retry: .none)

/// One request; true when it got the expected answer.
@Sendable func one(_ index: Int) async -> Bool {
    switch target {
    case "healthz":
        let response = try? await transport.send(ProviderRequest(method: "GET", url: base + "/healthz"))
        return response?.status == 200
    default:
        let ref = "BT-" + String(repeating: "0", count: max(0, 8 - String(index % orders).count)) + String(index % orders)
        if case .found = await pxp.transaction(merchant: "BM", site: "BS", merchantTransactionId: ref) { return true }
        return false
    }
}

/// Runs `count` requests with `concurrency` workers; returns how many failed.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func add(_ n: Int) -> Int { value.add(n, ordering: .relaxed).oldValue }
    var current: Int { value.load(ordering: .relaxed) }
}

func run(_ count: Int) async -> Int {
    let next = Counter()
    let failures = Counter()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                while true {
                    let index = next.add(1)
                    guard index < count else { return }
                    if await !one(index) { _ = failures.add(1) }
                }
            }
        }
    }
    return failures.current
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1_000_000 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

_ = await run(min(2000, max(concurrency, requests / 10)))  // warm up: connections, caches
let cpuBefore = cpuSeconds()
let started = ContinuousClock.now
let failed = await run(requests)
let elapsed = ContinuousClock.now - started
let cpu = cpuSeconds() - cpuBefore
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let rate = Double(requests) / seconds
let ideal = target == "healthz" ? "n/a" : String(Int(Double(concurrency) / (Double(latencyMs) / 1000)))
let ratio = target == "healthz" ? "n/a" : String(format: "%.2f", rate / (Double(concurrency) / (Double(latencyMs) / 1000)))
print(
    "transport=\(transportName) target=\(target) requests=\(requests) failed=\(failed) concurrency=\(concurrency)"
        + " seconds=\(String(format: "%.2f", seconds)) rps=\(Int(rate)) ideal=\(ideal) ratio=\(ratio)"
        + " cpu_s=\(String(format: "%.2f", cpu)) cpu_s_per_1000=\(String(format: "%.3f", cpu / Double(requests) * 1000))")
