import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The standard process families (`process_resident_memory_bytes`, `process_open_fds`, `process_max_fds`,
/// `process_cpu_seconds_total`, `process_start_time_seconds`) read from /proc at scrape time, and
/// `payrecon_build_info{version}`: an operator sees a process running out of descriptors or memory, and which build
/// runs, without a query to the database.
public enum ProcessMetrics {
    private static let registered = NSLock()
    nonisolated(unsafe) private static var done = false

    /// Adds the collector once per process.
    public static func register(version: String) {
        registered.lock(); defer { registered.unlock() }
        guard !done else { return }
        done = true
        Metrics.shared.addTextCollector { render(version: version) }
    }

    static func render(version: String) -> String {
        var out = "# HELP payrecon_build_info The payrecon build running (always 1).\n# TYPE payrecon_build_info gauge\n"
        out += "payrecon_build_info{version=\"\(Metrics.escape(version))\"} 1\n"
        if let rss = residentBytes() {
            out += "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\n"
            out += "process_resident_memory_bytes \(rss)\n"
        }
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            out +=
                "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds \(fds.count)\n"
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            out +=
                "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds \(limit.rlim_cur)\n"
        }
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            let micros =
                Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
            out +=
                "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\n"
            out += "process_cpu_seconds_total \(Metrics.formatMicros(micros))\n"
        }
        out +=
            "# HELP process_start_time_seconds Start time of the process since the unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
        out += "process_start_time_seconds \(startTime)\n"
        return out
    }

    /// When this process started: /proc/self/stat's start (clock ticks since boot) plus the boot time of /proc/stat;
    /// when either cannot be read, the moment this was first asked.
    static let startTime: Int64 = {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"),
            let ticks = Int64(stat[stat.index(after: close)...].split(separator: " ").dropFirst(19).first ?? ""),
            let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Int64(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        else {
            return Int64(Date().timeIntervalSince1970)
        }
        let hz = Int64(sysconf(Int32(_SC_CLK_TCK)))
        return boot + ticks / max(1, hz)
    }()

    /// VmRSS of /proc/self/status, in bytes.
    static func residentBytes() -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let digits = line.dropFirst("VmRSS:".count).filter(\.isNumber)
            return Int64(digits).map { $0 * 1024 }
        }
        return nil
    }
}
