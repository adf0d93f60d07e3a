import Foundation
import IsletAPI
import IsletApp
import IsletCore
import Synchronization

/// `islet-bench register`: durable acceptance under concurrency (issue 13). `registerDevice` through the
/// HTTP API from `clients` keep-alive connections, on each database given (an SQLite path or a PostgreSQL
/// URL) in turn, in one run, so the engines compare side by side: calls/s and latency percentiles, with
/// every commit durable (SQLite synchronous=FULL, PostgreSQL's defaults).
struct RegisterBenchmark {
    var databases: [String] = []
    var devices = 50_000
    var clients = 16
    /// HTTP worker threads; nil: the server's default.
    var threads: Int?

    func run() throws {
        print("registerDevice through the HTTP API: \(devices) devices from \(clients) keep-alive connections, \(threads.map(String.init) ?? "default") HTTP threads")
        print("machine: \(ProcessInfo.processInfo.processorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB")
        for database in databases {
            let location = StorageLocation(database)
            if case .sqlite(let path) = location {
                for suffix in ["", "-wal", "-shm", ".serve-lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
            var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: database, apns: .simulator)
            // One address and one token are the whole load here: E6's per-client limits would refuse most of it.
            configuration.rateLimits = RateLimits(devicePerAddress: nil, devicePerToken: nil, serverPerToken: nil)
            if let threads { configuration.http.threads = threads }
            let server = try IsletServer(configuration: configuration, logger: .discard)
            guard try server.store.hasNoApplications() else { throw BenchError("\(location) is not empty; give the benchmark an empty database") }
            let created = try ApplicationAdmin(store: server.store).create(name: "Bench", bundleID: "com.example.bench")
            let port = try server.start()
            defer { server.shutdown() }
            let app = created.application.code.rawValue, auth = created.deviceToken.secret

            let latencies = Mutex<[Double]>([])
            let failures = Atomic<Int>(0)
            let started = ContinuousClock.now
            onThreads(clients) { client in
                guard let http = try? KeepAliveClient(port: port) else { failures.add(1, ordering: .relaxed); return }
                var mine: [Double] = []
                for n in stride(from: client, to: devices, by: clients) {
                    let spread = String(format: "%016llx", UInt64(n + 1) &* 0x9E37_79B9_7F4A_7C15)
                    let body = #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"bench-\#(n)","push_token":"\#(String(repeating: spread, count: 4))","language":"en","tags":{"Level":\#(n % 100)}}}"#
                    let sent = ContinuousClock.now
                    if (try? http.post("/json/1.3/registerDevice", body)) != 200 { failures.add(1, ordering: .relaxed) }
                    mine.append((ContinuousClock.now - sent).seconds * 1000)
                }
                latencies.withLock { $0 += mine }
            }
            let elapsed = (ContinuousClock.now - started).seconds
            let sorted = latencies.withLock { $0 }.sorted()
            // Reads in the same run, for scale: getTags of registered devices for 5 s from the same clients.
            let postgres = if case .postgresql = location { true } else { false }
            let readRate = getTagsRate(port: port, app: app, auth: auth, clients: clients, postgres: postgres) { "bench-\($0 % devices)" }
            let engine = postgres ? "PostgreSQL" : "SQLite"
            print(String(format: "%@ (%@): %.0f devices/s (%.1f s), latency p50 %.2f ms, p99 %.2f ms, max %.1f ms, %d failed",
                         engine, location.description, Double(devices) / elapsed, elapsed, percentile(sorted, 0.5), percentile(sorted, 0.99),
                         sorted.last ?? 0, failures.load(ordering: .relaxed)))
            print("    getTags in the same run: " + readRate.summary)
        }
    }
}

/// The `p` quantile (0...1) of latencies sorted ascending; 0 when there are none.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// getTags from `clients` keep-alive connections for `seconds`, client `c` asking for `hwid(c)`, `hwid(c + clients)`,
/// …: the read ceiling measured beside a write benchmark. Reads a second, and the answers' latency p50 and p99 (ms).
struct ReadLoad {
    let rate: Double
    let p50: Double
    let p99: Double
    /// The CPU a read cost Islet (this process but the clients), the clients and PostgreSQL (nil when not used), in µs.
    let isletCPU: Double
    let clientsCPU: Double
    let postgresCPU: Double?

    /// "N reads/s, p50 X ms, p99 Y ms, CPU a read: …".
    var summary: String {
        String(format: "%.0f reads/s, p50 %.2f ms, p99 %.2f ms, CPU a read: Islet %.0f µs, the clients %.0f µs", rate, p50, p99, isletCPU, clientsCPU)
            + (postgresCPU.map { String(format: ", PostgreSQL %.0f µs", $0) } ?? "")
    }
}

func getTagsRate(port: Int, app: String, auth: String, clients: Int, seconds: Int = 5, postgres: Bool,
                 hwid: @escaping @Sendable (Int) -> String) -> ReadLoad {
    let latencies = Mutex<[Double]>([])
    let until = ContinuousClock.now + .seconds(seconds)
    // PostgreSQL's processes are looked up in /proc only when it serves the reads.
    let processCPUBefore = ClusterBenchmark.cpuSeconds(), postgresCPUBefore = postgres ? ClusterBenchmark.cpuSeconds(named: "postgres") : nil
    let clientsCPU = onThreads(clients) { client in
        guard let http = try? KeepAliveClient(port: port) else { return }
        var n = client
        var mine: [Double] = []
        while ContinuousClock.now < until {
            let body = #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"\#(hwid(n))"}}"#
            let sent = ContinuousClock.now
            if (try? http.post("/json/1.3/getTags", body)) == 200 { mine.append((ContinuousClock.now - sent).seconds * 1000) }
            n += clients
        }
        latencies.withLock { $0 += mine }
    }
    let isletCPU = ClusterBenchmark.cpuSeconds() - processCPUBefore - clientsCPU
    let postgresCPU = postgresCPUBefore.map { ClusterBenchmark.cpuSeconds(named: "postgres") - $0 }
    let sorted = latencies.withLock { $0 }.sorted()
    let reads = Double(max(1, sorted.count))
    return ReadLoad(rate: Double(sorted.count) / Double(seconds), p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99),
                    isletCPU: isletCPU / reads * 1e6, clientsCPU: clientsCPU / reads * 1e6, postgresCPU: postgresCPU.map { $0 / reads * 1e6 })
}

/// Runs `body(0..<count)` on as many threads at once and waits for all: a load of `count` concurrent clients
/// (DispatchQueue.concurrentPerform would run only as many at once as there are cores). Returns the CPU seconds the
/// clients used: the load generator shares the machine's cores with the server it measures.
@discardableResult
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Double {
    let finished = DispatchGroup()
    let cpu = Mutex(0.0)
    for index in 0..<count {
        finished.enter()
        Thread.detachNewThread {
            defer { finished.leave() }
            body(index)
            var used = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &used)
            cpu.withLock { $0 += Double(used.tv_sec) + Double(used.tv_nsec) / 1e9 }
        }
    }
    finished.wait()
    return cpu.withLock { $0 }
}
