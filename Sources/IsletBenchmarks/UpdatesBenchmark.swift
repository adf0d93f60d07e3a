import Foundation
import IsletAPI
import IsletApp
import IsletCore
import IsletHTTP2
import IsletStore
import Synchronization

/// `islet-bench updates` (issue 18): the hot path. `activities` live activities with one phone each (the
/// per-order pattern), then `updateLiveActivity` spread over them from `clients` keep-alive connections for
/// `seconds` (as fast as they go, or paced at `rate` updates/s in all), nginx as APNs counting what arrives.
/// With `event` `.start`, the phones are registered only and the load starts a new activity on one of them
/// with each call (`startLiveActivity` to a named device: an order placed).
/// Reports acceptance (rate, latency), how many updates reached nginx during the load and after, how long the
/// queue took to drain, the delivery-lag histogram of `/metrics`, and getTags in the same run (the ceiling).
struct UpdatesBenchmark {
    var activities = 2_000
    var clients = 16
    var seconds = 20
    /// Updates per second in all; 0: as fast as the clients go.
    var rate = 0
    /// An SQLite path or PostgreSQL URL (empty database); a fresh SQLite file in a temporary folder by default.
    var database: String?
    /// Sent updates (each with its delivery record) written into the activities' history before the load, so
    /// the load meets a database that has served for a while (issue 18: 10 million messages must not slow it).
    var history = 0
    /// What the load sends: updates of the started activities, or starts of new ones.
    var event = LiveActivityEvent.update
    /// Islet nodes on the one PostgreSQL database (in this process, each with its own node id, pool and group
    /// commit, as `islet-bench cluster` runs them); the clients take turns among them.
    var nodes = 1
    /// Each client sends its calls to the nodes in turn, so every activity is updated through every node at once
    /// (its writers meet on its row); otherwise a client, and its activities, stay with one node.
    var rotateNodes = false

    func run() throws {
        // One address and one token are the whole load here: E6's per-client limits would refuse most of it.
        let starts = event == .start
        let world = try NginxWorld(name: "updates", database: database) {
            $0.rateLimits = RateLimits(devicePerAddress: nil, devicePerToken: nil, serverPerToken: nil)
            // Each phone gets a start every second or two here: A12 would hold most of them (nginx is no phone).
            if starts { $0.pushToStartPacing = PushToStartPacing(perMinute: 0) }
        }
        let method = starts ? "startLiveActivity" : "updateLiveActivity", noun = starts ? "starts" : "updates"
        defer { world.stop() }
        var servers = [world.server]
        defer { for server in servers.dropFirst() { server.shutdown() } }
        var ports = [world.port]
        for n in (nodes > 1 ? Array(2...nodes) : []) {
            var configuration = world.server.configuration
            configuration.node = NodeID("bench-node-\(n)")!
            let server = try IsletServer(configuration: configuration, logger: .discard)
            ports.append(try server.start())
            servers.append(server)
        }
        let nginx = world.nginx, port = world.port, app = world.app, auth = world.auth, nodePorts = ports
        print("Islet \(noun): \(activities) " + (starts ? "phones, a startLiveActivity to one of them" : "activities with one phone each, updateLiveActivity")
              + " from \(clients) connections" + (nodes > 1 ? " spread over \(nodes) nodes" + (rotateNodes ? ", each client's calls going to each node in turn" : "") : "") + " for \(seconds) s"
              + (rate > 0 ? " at \(rate)/s" : " as fast as they go") + ", nginx \(nginx.version) as APNs, database \(world.server.configuration.location)")
        print("machine: \(ProcessInfo.processInfo.processorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB")

        // 1. Each activity: a phone registers, reports its push-to-start token, is started, reports its update token
        //    (for starts: the phones register and report their push-to-start tokens only).
        var started = ContinuousClock.now
        let failures = Atomic<Int>(0)
        onThreads(4) { client in
            guard let http = try? KeepAliveClient(port: port) else { failures.add(1, ordering: .relaxed); return }
            for n in stride(from: client, to: activities, by: 4) {
                let spread = String(format: "%016llx", UInt64(n + 1) &* 0x9E37_79B9_7F4A_7C15)
                let hwid = "phone-\(n)", id = "ORDER-\(n)"
                let calls = [
                    ("registerDevice", #""hwid":"\#(hwid)","push_token":"\#(String(repeating: spread, count: 4))""#),
                    ("setActivityPushToStartToken", #""hwid":"\#(hwid)","activity_push_to_start_token":"\#(String(repeating: spread, count: 5))""#),
                    ("startLiveActivity", #""notifications":[\#(Self.start(id, on: hwid))]"#),
                    ("setActivityToken", #""hwid":"\#(hwid)","activity_id":"\#(id)","activity_token":"\#(String(repeating: spread, count: 3))""#),
                ]
                for (method, fields) in calls.prefix(starts ? 2 : 4) where (try? http.call(method, app, auth, fields))?.contains(#""status_code":200"#) != true {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        guard failures.load(ordering: .relaxed) == 0 else { throw BenchError("\(failures.load(ordering: .relaxed)) set-up calls failed") }
        if !starts { try nginx.waitForRequests(activities, deadline: .now + .seconds(600)) }
        print(String(format: starts ? "set-up: %d phones registered in %.1f s" : "set-up: %d activities started in %.1f s", activities, (ContinuousClock.now - started).seconds))
        if history > 0 { try preloadHistory(world.server.configuration.location) }

        // 2. The load: each client cycles through its share of the activities.
        let before = nginx.requests()
        let metricsClient = try KeepAliveClient(port: port)
        let metricsBefore = try metricsClient.get("/metrics")
        let lagBefore = Self.histogram(metricsBefore, "islet_delivery_lag_seconds")
        let claimsBefore = Self.sample(metricsBefore, "islet_cluster_claims_total") ?? 0
        let emptyLooksBefore = Self.sample(metricsBefore, "islet_cluster_empty_looks_total") ?? 0
        let accepted = Atomic<Int>(0)
        let latencies = Mutex<[Double]>([])
        let postgres: Bool
        if case .postgresql = world.server.configuration.location { postgres = true } else { postgres = false }
        let postgresCPUBefore = postgres ? ClusterBenchmark.cpuSeconds(named: "postgres") : 0
        let loadEnd = ContinuousClock.now + .seconds(seconds)
        started = ContinuousClock.now
        let interval = rate > 0 ? Double(clients) / Double(rate) : 0
        let processCPUBefore = ClusterBenchmark.cpuSeconds(), nginxCPUBefore = ClusterBenchmark.cpuSeconds(named: "nginx")
        let clientsCPU = onThreads(clients) { client in
            let ports = rotateNodes ? nodePorts : [nodePorts[client % nodePorts.count]]
            let https = ports.compactMap { try? KeepAliveClient(port: $0) }
            guard https.count == ports.count else { failures.add(1, ordering: .relaxed); return }
            var mine: [Double] = []
            // Paced clients start spread over one interval, so they do not fire in step.
            var n = 0, next = ContinuousClock.now + .seconds(interval * Double(client) / Double(clients))
            let own = Array(stride(from: client, to: activities, by: clients))
            guard !own.isEmpty else { return }
            while ContinuousClock.now < loadEnd {
                if interval > 0 {
                    next = next + .seconds(interval)
                    let wait = next - ContinuousClock.now
                    if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
                }
                let phone = own[n % own.count]
                // A start: a new order on the phone, its own activity id; an update: the phone's order moves on.
                let notification = starts
                    ? Self.start("ORDER-\(phone)-\(n)", on: "phone-\(phone)")
                    : #"{"live_activity":{"event":"update","content-state":{"status":"moving","n":\#(n)}},"live_activity_id":"ORDER-\#(phone)"}"#
                let sent = ContinuousClock.now
                let answer = try? https[(client + n) % https.count].call(method, app, auth, #""notifications":[\#(notification)]"#)
                mine.append((ContinuousClock.now - sent).seconds * 1000)
                if answer?.contains(#""status_code":200"#) == true { accepted.add(1, ordering: .relaxed) } else { failures.add(1, ordering: .relaxed) }
                n += 1
            }
            latencies.withLock { $0 += mine }
        }
        let loadTime = (ContinuousClock.now - started).seconds
        let cpu = (islet: ClusterBenchmark.cpuSeconds() - processCPUBefore - clientsCPU, clients: clientsCPU,
                   nginx: ClusterBenchmark.cpuSeconds(named: "nginx") - nginxCPUBefore)
        let postgresCPU = postgres ? ClusterBenchmark.cpuSeconds(named: "postgres") - postgresCPUBefore : 0
        let duringLoad = nginx.requests() - before

        // 3. Drain: until no job is due, and none waits for its turn (A9: the last updates of the load go out at theirs).
        var drained: Double?
        let drainDeadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < drainDeadline {
            let metrics = try metricsClient.get("/metrics")
            if Self.sample(metrics, "islet_delivery_jobs_due") == 0 && Self.sample(metrics, "islet_delivery_jobs_scheduled") == 0 {
                drained = (ContinuousClock.now - started).seconds - loadTime
                break
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let arrived = nginx.requests() - before
        let metrics = try metricsClient.get("/metrics")

        // 4. getTags in the same run, same clients, 5 s: the read ceiling.
        let count = activities
        let readRate = getTagsRate(port: port, app: app, auth: auth, clients: clients, postgres: postgres) { "phone-\($0 % count)" }

        let sorted = latencies.withLock { $0 }.sorted()
        let total = accepted.load(ordering: .relaxed)
        let acceptance = Double(total) / loadTime
        print(method + String(format: ": %d accepted in %.1f s: %.0f/s, latency p50 %.2f ms, p99 %.2f ms, max %.1f ms, %d failed",
                     total, loadTime, acceptance, percentile(sorted, 0.5), percentile(sorted, 0.99), sorted.last ?? 0, failures.load(ordering: .relaxed)))
        if total > 0 {
            print("CPU during the load, per accepted \(noun.dropLast()): " + String(format: "Islet %.0f µs, the benchmark's clients %.0f µs, nginx %.0f µs",
                  cpu.islet / Double(total) * 1e6, cpu.clients / Double(total) * 1e6, cpu.nginx / Double(total) * 1e6))
        }
        if postgres {
            print(String(format: "PostgreSQL CPU during the load: %.1f s, %.0f µs per accepted ", postgresCPU, total > 0 ? postgresCPU / Double(total) * 1e6 : 0)
                  + String(noun.dropLast()) + " (its delivery included)")
        }
        print("getTags in the same run: \(readRate.summary); " + noun + String(format: " accepted / reads: %.2f", readRate.rate > 0 ? acceptance / readRate.rate : 0))
        print("\(noun) at nginx: \(duringLoad) during the load, \(arrived) once drained"
              + (drained.map { String(format: " (drained %.1f s after the load)", $0) } ?? " (NOT drained within 600 s)")
              + (starts ? "" : "; the rest were superseded by a newer update of their activity before they were sent (latest state wins)"))
        // The load's own lag: the histogram now less what the set-up's starts put in it.
        let lag = zip(Self.histogram(metrics, "islet_delivery_lag_seconds"), lagBefore).map { (bound: $0.bound, count: $0.count - $1.count) }
        if let count = lag.last?.count, count > 0 {
            func quantile(_ q: Double) -> String {
                let bound = lag.first { Double($0.count) >= q * Double(count) }?.bound ?? .infinity
                return bound.isInfinite ? "> \(DeliveryLag.last)" : "≤ \(bound) s"
            }
            print("delivery lag of the \(noun) (accepted to push leaving Islet, \(count) pushes): p50 \(quantile(0.5)), p99 \(quantile(0.99))")
        }
        print("push outcomes: " + metrics.split(separator: "\n").filter { $0.hasPrefix("islet_pushes_total{") }.joined(separator: ", "))
        // How well the delivery batches: each claim is a write transaction, and so is its record.
        let claims = (Self.sample(metrics, "islet_cluster_claims_total") ?? 0) - claimsBefore
        let emptyLooks = (Self.sample(metrics, "islet_cluster_empty_looks_total") ?? 0) - emptyLooksBefore
        print(String(format: "delivery claims during the load and drain: %.0f, %.1f ", claims, claims > 0 ? Double(arrived) / claims : 0) + noun
              + String(format: " per claim; %.0f looks for work found none", emptyLooks))
    }

    private enum DeliveryLag { static let last = 300 }

    /// A start of the activity `id` on the phone `hwid`: an order placed.
    static func start(_ id: String, on hwid: String) -> String {
        #"{"title":"Order","live_activity":{"event":"start","content-state":{"status":"placed"},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"\#(id)","devices":["\#(hwid)"]}"#
    }

    /// `history` sent updates spread over the activities (each after its start, as if sent in this session), and
    /// a delivery record each, written in SQL in transactions of about 250,000 messages.
    private func preloadHistory(_ location: StorageLocation) throws {
        let started = ContinuousClock.now
        let storage = try Storage(location, for: .command)
        let perActivity = max(1, history / activities)
        let (first, last) = try storage.database.withConnection { (c) throws(StoreError) in
            let row = try c.query("SELECT MIN(id) AS first, MAX(id) AS last FROM activities")[0]
            return (row["first"].int ?? 0, row["last"].int ?? 0)
        }
        let step = Int64(max(1, 250_000 / perActivity))
        var written = 0
        for low in stride(from: first, through: last, by: Int(step)) {
            written += try storage.database.write { (c) throws(StoreError) -> Int in
                let before = try c.query("SELECT COALESCE(MAX(id), 0) AS id FROM messages")[0]["id"].int ?? 0
                let added = try c.run("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
                    INSERT INTO messages (code, application, activity, event, payload, priority, state, due_at, created_at, finished_at, expires_at)
                    SELECT 'HISTORY-' || s.id || '-' || n.i, s.application, s.activity, '\(LiveActivityEvent.update.rawValue)', s.payload, 5, '\(MessageState.done.rawValue)', s.due_at, s.created_at,
                           s.finished_at, s.expires_at
                    FROM messages s CROSS JOIN n
                    WHERE s.event = '\(LiveActivityEvent.start.rawValue)' AND s.activity BETWEEN ?2 AND ?3
                    ORDER BY s.activity, n.i
                    """, [.int(Int64(perActivity)), .int(low), .int(low + step - 1)])
                try c.run("""
                    INSERT INTO deliveries (message, device, push_type, status, apns_id, attempts, at, state)
                    SELECT m.id, ad.device, '\(PushType.liveActivity.rawValue)', 200, 'HISTORY', 1, m.created_at, '\(DeliveryState.sent.rawValue)'
                    FROM messages m JOIN activity_devices ad ON ad.activity = m.activity
                    WHERE m.id > ?1
                    """, [.int(before)])
                return added
            }
        }
        if case .postgresql = location {
            try storage.database.withConnection { (c) throws(StoreError) in try c.execute("ANALYZE") }
        }
        print(String(format: "history: %d sent updates (%d an activity), each with its delivery record, written in %.1f s",
                     written, perActivity, (ContinuousClock.now - started).seconds))
    }

    /// The value of an unlabelled sample in exposition text.
    static func sample(_ text: String, _ name: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    /// A histogram's cumulative buckets, in order.
    static func histogram(_ text: String, _ name: String) -> [(bound: Double, count: Int)] {
        text.split(separator: "\n").filter { $0.hasPrefix(name + "_bucket{le=\"") }.compactMap { line in
            let parts = line.split(separator: "\"")
            guard parts.count >= 3, let count = Int(parts[2].split(separator: " ").last ?? "") else { return nil }
            return (parts[1] == "+Inf" ? .infinity : Double(parts[1]) ?? .infinity, count)
        }
    }
}
