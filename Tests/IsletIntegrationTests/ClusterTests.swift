import Foundation
import Synchronization
import Testing
import IsletCore
import IsletPostgres
import IsletSQL
import IsletStore
import IsletTestPeers
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: three `islet serve` nodes (the test server, recording every push into one shared file in the
/// order sent) on a PostgreSQL cluster of the test's own. A start to 10,000 devices and 10 activities × 3
/// updates while one node is killed with kill -9; then a node paused (SIGSTOP) past its lease and resumed;
/// then PostgreSQL itself stopped at once (a crash) and started again mid-fan-out. Every device gets every
/// start; repeats are the same request (bytes and apns-id); each device's updates arrive in order.
@Suite("Several nodes on one PostgreSQL")
struct ClusterTests {
    static let devices = 10_000
    static let auth = ["Authorization": "Token SECRET_API_TOKEN"]

    /// One push as the shared record holds it.
    struct Sent {
        let node: String
        let token: String
        let apnsID: String
        let payload: String
        /// `content-state.round` of a start to the whole audience, `step` of an order's update.
        let round: Int?
        let step: Int?
    }

    /// `@unchecked Sendable`: its nodes are started before the order thread shares it, which only reads them.
    final class Cluster: @unchecked Sendable {
        let postgres: TestPostgres.PrivateCluster
        let directory: URL
        let record: URL
        var nodes: [String: ServeProcess] = [:]

        init() throws {
            postgres = try TestPostgres.PrivateCluster()
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-cluster-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            record = directory.appendingPathComponent("pushes.jsonl")
        }

        /// APNs answers a batch of 100 in 120 ms here, and a shard is 1,000 devices: the 10,000-device fan-out takes a
        /// few seconds over three nodes, each sending several shards in turn, so a node is caught in the middle of one.
        func start(_ node: String) throws {
            nodes[node] = try ServeProcess(executable: "islet-test-server", arguments: [
                "--database", postgres.url, "--record", record.path, "--node-id", node, "--batch-size", "100", "--batch-delay-ms", "120",
                "--workers", "2", "--shard-span", "1000", "--lease-seconds", "3",
            ], directory: directory)
        }

        func port(_ node: String) -> Int { nodes[node]!.port }

        /// The jobs, shards and retries `node`'s leases cover, as `islet cluster status` lists them: read here with
        /// the store it uses, in a few milliseconds, as a fan-out of 10,000 devices over three nodes takes a second or two.
        func claimed(by node: String) -> Int {
            let store = statusStore.withLock { store in
                if store == nil { store = (try? PostgresDatabase(url: postgres.url, maximumIdleConnections: 1, maximumConnections: 1, migrate: false)).map { SQLClusterStore(database: $0) } }
                return store
            }
            let nodes = (try? store?.nodes(since: Date().addingTimeInterval(-3600))) ?? nil
            return nodes?.first { $0.info.id.rawValue == node }?.claimed ?? 0
        }
        private let statusStore = Mutex<SQLClusterStore?>(nil)

        /// The record read so far: the pushes of its complete lines, and the bytes they took.
        private let read = Mutex<(sent: [Sent], bytes: UInt64)>(([], 0))

        /// Every push recorded so far, in the order sent. Reads only what was appended since the last call, so
        /// polling stays cheap while the record grows to tens of thousands of lines.
        func sent() -> [Sent] {
            read.withLock { read in
                guard let file = try? FileHandle(forReadingFrom: record) else { return read.sent }
                defer { try? file.close() }
                try? file.seek(toOffset: read.bytes)
                let data = (try? file.readToEnd()) ?? Data()
                guard let end = data.lastIndex(of: UInt8(ascii: "\n")) else { return read.sent }
                read.bytes += UInt64(end - data.startIndex + 1)
                read.sent += data[..<end].split(separator: UInt8(ascii: "\n")).compactMap { Self.parse(String(decoding: $0, as: UTF8.self)) }
                return read.sent
            }
        }

        /// A node killed by SIGKILL in the middle of its write leaves a partial line, and the next node's append goes on
        /// from there: such a line ends with a whole push, from its last `{"node":`.
        private static func parse(_ line: String) -> Sent? {
            let object = (try? JSONParser.parse(line).objectValue)
                ?? line.range(of: #"{"node":"#, options: .backwards).flatMap { try? JSONParser.parse(String(line[$0.lowerBound...])).objectValue }
            guard let object, let payload = object["payload"]?.stringValue,
                  let state = (try? JSONParser.parse(payload))?.objectValue?["aps"]?.objectValue?["content-state"]?.objectValue else { return nil }
            return Sent(node: object["node"]?.stringValue ?? "", token: object["token"]?.stringValue ?? "", apnsID: object["apns_id"]?.stringValue ?? "",
                        payload: payload, round: state["round"]?.intValue.map(Int.init), step: state["step"]?.intValue.map(Int.init))
        }

        /// How many pushes of round `round` (by `node`, if given) were recorded.
        func count(round: Int, node: String? = nil) -> Int {
            sent().count { push in push.round == round && (node.map { push.node == $0 } ?? true) }
        }

        func details(_ code: String, via node: String) -> JSONObject? {
            let body = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
            return (try? request(port(node), "/json/1.3/getMessageDetails", body: body))?.json?.objectValue?["response"]?.objectValue?["message"]?.objectValue
        }

        func send(_ method: String, _ notification: String, via node: String) throws -> String {
            let body = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[\#(notification)]}}"#
            let answer = try request(port(node), "/json/1.3/" + method, body: body)
            guard answer.status == 200, let code = answer.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue else {
                throw TestClientError(description: "\(method) via \(node): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            }
            return code
        }

        /// A start of round `round` to the 10,000 devices of the filter `bulk`.
        func startEveryone(round: Int, via node: String) throws -> String {
            try send("startLiveActivity", #"{"title":"Round","live_activity":{"content-state":{"round":\#(round)},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"EVERYONE_\#(round)","filter":"bulk"}"#, via: node)
        }

        deinit {
            for node in nodes.values where node.process.isRunning {
                kill(node.process.processIdentifier, SIGCONT)
                node.process.terminate()
                node.process.waitUntilExit()
            }
            postgres.stop()
            IntegrationEngine.remove(directory)
        }
    }

    /// The bulk devices' push-to-start tokens, by the device id they were made from.
    static func bulkToken(_ id: Int) -> String { String(format: "%080x", id + 1_000_000) }

    /// Each token got the round's start at least once, and every repeat is the same request.
    static func checkRound(_ round: Int, _ sent: [Sent]) -> (delivered: Int, repeats: Int) {
        let pushes = sent.filter { $0.round == round }
        let byToken = Dictionary(grouping: pushes, by: \.token)
        for (token, copies) in byToken where copies.count > 1 {
            #expect(Set(copies.map(\.payload)).count == 1 && Set(copies.map(\.apnsID)).count == 1, "round \(round), \(token): a repeat is the same request")
        }
        return (byToken.count, pushes.count - byToken.count)
    }

    @Test(.enabled(if: IntegrationEngine.isPostgreSQL, "the PostgreSQL pass runs it"), .timeLimit(.minutes(4)))
    func threeNodesSurviveKillNineAPausedNodeAndADatabaseRestart() throws {
        let cluster = try Cluster()
        try cluster.start("node-1")   // creates the demo application in the empty database
        try cluster.start("node-2")
        try cluster.start("node-3")
        #expect(try request(cluster.port("node-2"), method: "GET", "/healthz").json?.objectValue?["node"] == "node-2")
        // Each node counts the three at its next heartbeat (5 s): its looks after a kick are spaced by that many.
        #expect(eventually(20) { ["node-1", "node-2", "node-3"].allSatisfy { Self.metric("islet_cluster_nodes_running", port: cluster.port($0)) == 3 } },
                "every node counts three running")

        // 10,000 devices with push-to-start tokens, written straight into the database: registering them one by
        // one would take most of this test's time, and registration is not under test here.
        try cluster.postgres.administer("""
            INSERT INTO devices (application, hwid, push_token, sandbox, language, updated_at)
                SELECT 'XXXXX-XXXXX', 'bulk-' || n, lpad(to_hex(n), 64, '0'), 0, 'en', 1 FROM generate_series(1, \(Self.devices)) n;
            INSERT INTO push_to_start_tokens (device, attributes_type, token, updated_at)
                SELECT id, '', lpad(to_hex(id + 1000000), 80, '0'), 1 FROM devices WHERE hwid LIKE 'bulk-%';
            """)
        let filter = #"{"request":{"auth":"SECRET_API_TOKEN","name":"bulk","conditions":[["Language","EQ","en"]]}}"#
        #expect(try request(cluster.port("node-1"), "/json/1.3/createFilter", body: filter).status == 200)
        for n in 0..<10 {
            let register = #"{"request":{"application":"XXXXX-XXXXX","hwid":"order-\#(n)","push_token":"\#(String(format: "%064x", 900_000 + n))","language":"fr"}}"#
            #expect(try request(cluster.port("node-\(n % 3 + 1)"), "/json/1.3/registerDevice", body: register, headers: Self.auth).status == 200)
            let token = #"{"request":{"application":"XXXXX-XXXXX","hwid":"order-\#(n)","activity_push_to_start_token":"\#(String(format: "%080x", 800_000 + n))"}}"#
            #expect(try request(cluster.port("node-\(n % 3 + 1)"), "/json/1.3/setActivityPushToStartToken", body: token, headers: Self.auth).status == 200)
        }

        // Phase 1: the fan-out and the orders on all three nodes; kill -9 node-1 while it holds a shard, early on.
        let everyone = try cluster.startEveryone(round: 1, via: "node-2")
        let orderCodes = Mutex<[(order: Int, step: Int, code: String)]>([])
        let orders = Thread {
            for n in 0..<10 {
                let via = "node-\(n % 2 + 2)"   // nodes 2 and 3: node 1 is the one killed
                guard let start = try? cluster.send("startLiveActivity", #"{"title":"Order","live_activity":{"content-state":{"step":0},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"ORDER_\#(n)","devices":["order-\#(n)"]}"#, via: via) else { return }
                orderCodes.withLock { $0.append((n, 0, start)) }
                let report = #"{"request":{"application":"XXXXX-XXXXX","hwid":"order-\#(n)","activity_id":"ORDER_\#(n)","activity_token":"\#(String(format: "%064x", 700_000 + n))"}}"#
                guard (try? request(cluster.port(via), "/json/1.3/setActivityToken", body: report, headers: Self.auth))?.status == 200 else { return }
                for step in 1...3 {
                    let node = "node-\((n + step) % 2 + 2)"
                    guard let code = try? cluster.send("updateLiveActivity", #"{"live_activity":{"event":"update","content-state":{"step":\#(step)}},"live_activity_id":"ORDER_\#(n)"}"#, via: node) else { return }
                    orderCodes.withLock { $0.append((n, step, code)) }
                }
            }
        }
        orders.start()
        #expect(eventually(60) { cluster.count(round: 1) >= Self.devices / 10 }, "the fan-out is under way")
        let byNode = Dictionary(grouping: cluster.sent().filter { $0.round == 1 }, by: \.node).mapValues(\.count)
        #expect(byNode.count >= 2, "the shards went to several nodes: \(byNode)")
        // Killed while it holds work: frozen first (SIGSTOP), its claims read with `islet cluster status`; a node
        // found holding nothing at that moment (between two shards) goes on a little and is looked at again.
        // What the survivors rescued so far (jobs and shards, and retries in flight); nil when a node did not answer.
        let rescued = { () -> Double? in
            var total = 0.0
            for node in ["node-2", "node-3"] {
                for what in [Self.rescuedJobs, Self.rescuedDeliveries] {
                    guard let value = Self.metric(what, port: cluster.port(node)) else { return nil }
                    total += value
                }
            }
            return total
        }
        let killed = cluster.nodes["node-1"]!
        var held = 0, rescuedBefore: Double?
        while held == 0 && cluster.count(round: 1) < Self.devices * 4 / 5 {
            // Looked at running first: a node paused for every look does little work between them.
            guard cluster.claimed(by: "node-1") > 0 else { Thread.sleep(forTimeInterval: 0.005); continue }
            rescuedBefore = rescued()   // before the pause: its leases may expire (3 s) while it is looked at
            kill(killed.process.processIdentifier, SIGSTOP)
            held = cluster.claimed(by: "node-1")
            if held == 0 {
                kill(killed.process.processIdentifier, SIGCONT)
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        #expect(held > 0, "node-1 was killed holding a shard, a message or a retry; sent by node: \(Dictionary(grouping: cluster.sent().filter { $0.round == 1 }, by: \.node).mapValues(\.count))")
        kill(killed.process.processIdentifier, SIGKILL)
        #expect(cluster.count(round: 1) < Self.devices, "killed mid-fan-out")
        killed.process.waitUntilExit()
        // Its liveness session ended with its connection: a surviving node frees what it held.
        let before = try #require(rescuedBefore, "the surviving nodes' /metrics answered")
        #expect(eventually(30) { (rescued() ?? before) > before }, "a surviving node rescued the killed node's work")
        #expect(eventually(60) { !orders.isExecuting && orders.isFinished }, "the order requests were answered")
        #expect(orderCodes.withLock { $0.count } == 40, "every order start and update was accepted")
        #expect(eventually(90) { cluster.details(everyone, via: "node-2")?["status"] == "done" }, "the fan-out finished on the surviving nodes")
        let codes = orderCodes.withLock { $0 }
        #expect(eventually(60) { codes.allSatisfy { ["done", "superseded"].contains(cluster.details($0.code, via: "node-3")?["status"]?.stringValue) } })
        #expect(cluster.details(everyone, via: "node-3")?["counts"]?.objectValue?["sent"] == .int(Int64(Self.devices)))
        var sent = cluster.sent()
        let first = Self.checkRound(1, sent)
        #expect(first.delivered == Self.devices, "every device got the start")
        #expect(first.repeats <= 3 * 100 * 2, "repeats are at most the killed node's batches in flight (3 of 100 per worker): \(first.repeats)")
        // Repeats only of what the killed node had sent: a device sent twice was first sent by node-1.
        let repeated = Dictionary(grouping: sent.filter { $0.round == 1 }, by: \.token).filter { $0.value.count > 1 }
        #expect(repeated.values.allSatisfy { $0.first?.node == "node-1" }, "only the killed node's last batches were sent again")
        // Each order's start reached its phone's push-to-start token (a second copy is the same request), and its
        // device saw its steps in order (a repeat of the same step is allowed), ending with the last.
        for n in 0..<10 {
            let starts = sent.filter { $0.token == String(format: "%080x", 800_000 + n) }
            #expect(!starts.isEmpty && Set(starts.map(\.apnsID)).count == 1 && Set(starts.map(\.payload)).count == 1,
                    "ORDER_\(n)'s start reached its phone, once or as the same request again: \(starts.count)")
        }
        for n in 0..<10 {
            let steps = sent.filter { $0.token == String(format: "%064x", 700_000 + n) }.compactMap(\.step)
            #expect(steps == steps.sorted() && steps.last == 3, "ORDER_\(n) updates in order, the latest delivered: \(steps)")
        }

        // Phase 2: node-2 paused past its 3 s lease while it holds a shard: node-3 takes the shard over; resumed,
        // node-2 sends nothing more of it. A pause that lands between two shards (node-2 holds nothing) proves
        // nothing: that round is let finish and another one started, at most three times.
        let paused = cluster.nodes["node-2"]!
        var round = 2
        var beforePause: [Sent] = []
        var pausedShard: Int?
        while pausedShard == nil && round < 5 {
            let start = try cluster.startEveryone(round: round, via: "node-3")
            // Mid-shard: node-2 has sent a few batches of a shard whose devices are not all sent yet.
            let midShard = { [round] in
                let sent = cluster.sent().filter { $0.round == round }
                let mine = sent.filter { $0.node == "node-2" }
                guard mine.count >= 300, let shard = mine.last.flatMap({ Self.shard(of: $0.token) }) else { return nil as Int? }
                return sent.count { Self.shard(of: $0.token) == shard } < Self.shardSize(shard) ? shard : nil
            }
            #expect(eventually(60) { midShard() != nil }, "node-2 is sending a shard")
            kill(paused.process.processIdentifier, SIGSTOP)
            pausedShard = midShard()   // read again: node-2 may have finished the shard just before it stopped
            beforePause = cluster.sent().filter { $0.round == round && $0.node == "node-2" }
            if pausedShard == nil {
                kill(paused.process.processIdentifier, SIGCONT)
                #expect(eventually(60) { cluster.details(start, via: "node-3")?["status"] == "done" })
                round += 1
                continue
            }
            #expect(eventually(30) { cluster.count(round: round, node: "node-3") >= Self.devices - beforePause.count },
                    "node-3 sent the rest, the paused node's shard included")
            let resumedAt = cluster.sent().count
            kill(paused.process.processIdentifier, SIGCONT)
            #expect(eventually(60) { cluster.details(start, via: "node-3")?["status"] == "done" })
            sent = cluster.sent()
            #expect(Self.checkRound(round, sent).delivered == Self.devices)
            let afterResume = sent[resumedAt...].filter { $0.round == round && $0.node == "node-2" && Self.shard(of: $0.token) == pausedShard }
            #expect(afterResume.count == 0, "node-2 sent pushes of its lost shard after it resumed")
            #expect(eventually(20) { Self.metric("islet_cluster_lease_losses_total", port: cluster.port("node-2")) ?? 0 >= 1 },
                    "the resumed node counted the lease it lost")
        }
        #expect(pausedShard != nil, "node-2 was paused mid-shard in one of three rounds")

        // Phase 3: PostgreSQL crashes and comes back mid-fan-out: nothing accepted is lost.
        let recorded = { ((try? FileManager.default.attributesOfItem(atPath: cluster.record.path))?[.size] as? NSNumber)?.intValue ?? 0 }
        let sizeBefore = recorded()
        round += 1
        let third = try cluster.startEveryone(round: round, via: "node-3")
        // As soon as its first pushes are out (the record grows): the whole fan-out takes well under a second.
        #expect(eventually(60) { recorded() > sizeBefore })
        #expect(cluster.count(round: round) < Self.devices, "the database went away mid-fan-out")
        try cluster.postgres.stopServer(immediate: true)
        try cluster.postgres.start()
        #expect(eventually(120) { cluster.details(third, via: "node-3")?["status"] == "done" }, "the fan-out finished after the restart")
        let last = Self.checkRound(round, cluster.sent())
        #expect(last.delivered == Self.devices, "every device got the start after the database restart")
    }

    /// Jobs and shards, and retries in flight, a node freed from leases whose node was gone or that expired.
    static let rescuedJobs = #"islet_cluster_rescued_total{what="jobs"}"#
    static let rescuedDeliveries = #"islet_cluster_rescued_total{what="deliveries"}"#

    /// A metric's value from a node's /metrics.
    static func metric(_ name: String, port: Int) -> Double? {
        guard let response = try? request(port, method: "GET", "/metrics") else { return nil }
        let line = String(decoding: response.body, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// The bulk shards: ShardPolicy(span: 1000) over device ids 1...10,010 (the bulk devices and the orders'): ten
    /// or so, so that each node sends several of them through the fan-out, one after the other.
    static let shards = ShardPolicy(span: 1000).shards(lowest: 1, highest: Int64(devices + 10))

    /// The bulk shard a bulk token's device falls in.
    static func shard(of token: String) -> Int? {
        guard let value = Int(token, radix: 16), value > 1_000_000, value <= 1_000_000 + devices else { return nil }
        let id = Int64(value - 1_000_000)
        return shards.firstIndex { id > $0.after && id <= $0.upTo }
    }

    /// How many bulk devices a shard holds.
    static func shardSize(_ index: Int) -> Int {
        Int(min(shards[index].upTo, Int64(devices)) - shards[index].after)
    }
}
