import Foundation
import IsletApp
import IsletCore
import IsletSQL
import IsletStore
import IsletTestPeers

/// `islet-bench cluster` (issue 14): one start to `devices` devices, delivered by 1 node and then by 3 nodes
/// sharing one PostgreSQL database, nginx as APNs. Each run gets an empty schema; the devices are written
/// straight into it (registration is not what is measured), the start goes through the API of node 1.
/// The nodes are `IsletServer`s in this process, each with its own node id, database pool, liveness session,
/// delivery workers and APNs client: as separate as processes but for the address space.
struct ClusterBenchmark {
    var devices = 1_000_000
    var nodeCounts = [1, 3]
    /// A PostgreSQL database whose user may create schemas; nil: a throwaway cluster (initdb) of the benchmark's own.
    var url: String?

    struct Result {
        let nodes: Int
        let seconds: Double
        let perNode: [(node: String, pushes: Int)]
        let shards: Int
        /// WAL PostgreSQL wrote during the fan-out, per push recorded.
        let walPerPush: Double
        /// CPU seconds during the fan-out: the nodes (this process), PostgreSQL's processes, nginx.
        let cpu: (islet: Double, postgres: Double, nginx: Double)
    }

    /// CPU seconds (user + system) used so far by this process, and by every process named `name`.
    static func cpuSeconds(named name: String? = nil) -> Double {
        guard let name else { return seconds((try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8)) ?? "") }
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { Int($0) != nil }
        return pids.reduce(0) { total, pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), stat.contains("(\(name))") else { return total }
            return total + seconds(stat)
        }
    }

    /// The CPU seconds of a line of `/proc/…/stat`.
    static func seconds(_ stat: String) -> Double {
        // Fields after the command (which may hold spaces, in parentheses): utime and stime are the 12th and 13th.
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func run() throws {
        let throwaway = url == nil ? try TestPostgres.PrivateCluster() : nil
        defer { throwaway?.stop() }
        let base = url ?? throwaway!.url
        print("Islet cluster: one start by filter to \(devices) devices, delivered by \(nodeCounts.map(String.init).joined(separator: " then by ")) node(s) on one PostgreSQL, nginx as APNs")
        print("machine: \(ProcessInfo.processInfo.processorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB; database: \(url.map { StorageLocation($0).description } ?? "a throwaway cluster (initdb, fsync on)")")
        var results: [Result] = []
        for count in nodeCounts { results.append(try once(nodes: count, base: base)) }
        print("\n| nodes | time | pushes/s | ratio to 1 node | per node (pushes) | shards | WAL per push | CPU s: Islet, PostgreSQL, nginx |")
        print("|---|---|---|---|---|---|---|---|")
        let single = results.first { $0.nodes == 1 }
        for result in results {
            let rate = Double(devices) / result.seconds
            let ratio = single.map { String(format: "%.2f", rate / (Double(devices) / $0.seconds)) } ?? "n/a"
            print(String(format: "| %d | %.2f s | %.0f | %@ | %@ | %d | %.0f bytes | %.0f, %.0f, %.0f |", result.nodes, result.seconds, rate, ratio,
                         result.perNode.map { "\($0.node) \($0.pushes)" }.joined(separator: ", "), result.shards, result.walPerPush,
                         result.cpu.islet, result.cpu.postgres, result.cpu.nginx))
        }
    }

    private func once(nodes count: Int, base: String) throws -> Result {
        let schema = "islet_bench_\(count)_\(UInt32.random(in: 0...UInt32.max))"
        try Storage(.postgresql(url: base), for: .command).database.withConnection { (c) throws(StoreError) in try c.execute("CREATE SCHEMA \(schema)") }
        let url = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
        let world = try NginxWorld(name: "cluster", database: url) { $0.node = NodeID("node-1")! }
        defer { world.stop() }
        var servers = [world.server]
        defer { for server in servers.dropFirst() { server.shutdown() } }
        for n in (count > 1 ? Array(2...count) : []) {
            var configuration = world.server.configuration
            configuration.node = NodeID("node-\(n)")!
            let server = try IsletServer(configuration: configuration, logger: .discard)
            try server.start()
            servers.append(server)
        }
        let storage = try Storage(.postgresql(url: url), for: .command)
        let started = ContinuousClock.now
        try storage.database.withConnection { (c) throws(StoreError) in
            try c.run("""
                INSERT INTO devices (application, hwid, push_token, sandbox, language, updated_at)
                SELECT ?, 'bench-' || n, lpad(to_hex(n), 64, '0'), 0, 'en', 1 FROM generate_series(1, \(devices)) n
                """, [.text(world.app)])
            try c.run("INSERT INTO push_to_start_tokens (device, attributes_type, token, updated_at) SELECT id, '', lpad(to_hex(id + 100000000), 80, '0'), 1 FROM devices")
            try c.execute("ANALYZE")
        }
        print(String(format: "\n%d node(s): %d devices written in %.1f s", count, devices, (ContinuousClock.now - started).seconds))
        let http = try KeepAliveClient(port: world.port)
        _ = try http.call("createFilter", world.app, world.auth, #""name":"ALL","conditions":[["Language","EQ","en"]]"#)

        func walPosition() throws(StoreError) -> String {
            try storage.database.withConnection { (c) throws(StoreError) in try c.query("SELECT CAST(pg_current_wal_lsn() AS TEXT) AS lsn")[0]["lsn"].text ?? "0/0" }
        }
        let walBefore = try walPosition()
        let cpuBefore = (Self.cpuSeconds(), Self.cpuSeconds(named: "postgres"), Self.cpuSeconds(named: "nginx"))
        let before = world.nginx.requests()
        let begin = ContinuousClock.now
        let code = try EndToEndBenchmark().startByFilter(http, world.app, world.auth, id: "CLUSTER", filter: "ALL")
        try world.nginx.waitForRequests(before + devices, deadline: .now + .seconds(1800))
        let seconds = (ContinuousClock.now - begin).seconds
        try EndToEndBenchmark().waitUntilSent(http, world.app, world.auth, code, count: devices, deadline: .now + .seconds(120))
        let perNode = servers.map { server in
            (server.configuration.node.rawValue, server.delivery?.metrics.snapshot().filter { $0.key.result == .sent }.values.reduce(0, +) ?? 0)
        }
        let walAfter = try walPosition()
        let cpu = (Self.cpuSeconds() - cpuBefore.0, Self.cpuSeconds(named: "postgres") - cpuBefore.1, Self.cpuSeconds(named: "nginx") - cpuBefore.2)
        let (shards, wal) = try storage.database.withConnection { (c) throws(StoreError) in
            (Int(try c.query("SELECT COUNT(*) AS shards FROM message_shards")[0]["shards"].int ?? 0),
             try c.query("SELECT CAST(pg_wal_lsn_diff(CAST(? AS pg_lsn), CAST(? AS pg_lsn)) AS BIGINT) AS bytes", [.text(walAfter), .text(walBefore)])[0]["bytes"].int ?? 0)
        }
        print(String(format: "%d node(s): delivered in %.2f s (%.0f pushes/s); per node: %@; %d shards; %.1f MB of WAL; CPU s: Islet %.1f, PostgreSQL %.1f, nginx %.1f",
                     count, seconds, Double(devices) / seconds, perNode.map { "\($0.0) \($0.1)" }.joined(separator: ", "), shards, Double(wal) / 1e6,
                     cpu.0, cpu.1, cpu.2))
        return Result(nodes: count, seconds: seconds, perNode: perNode, shards: shards, walPerPush: Double(wal) / Double(devices),
                      cpu: (cpu.0, cpu.1, cpu.2))
    }
}
