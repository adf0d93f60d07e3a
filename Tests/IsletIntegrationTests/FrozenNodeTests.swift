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

/// Issue 43: writes of different nodes do not wait for one another. Two `islet serve` nodes on one PostgreSQL, each
/// taking updates for activities of its own, from several clients at once; node A frozen with SIGSTOP for 4 s (as a
/// stalled VM, a stuck disk or a paused container would be) in the middle of it, holding whatever it held: node B
/// keeps accepting its updates at no less than half its rate before the freeze, none of its calls waits a second,
/// and its updates keep reaching APNs. Node A is frozen in the middle of a write transaction (paused and looked at,
/// until PostgreSQL shows one of its sessions idle in a write): when Islet serialized every writer, B answered 0–1
/// updates a second then.
@Suite("A frozen node holds up no other")
struct FrozenNodeTests {
    static let activities = 8
    static let clients = 4

    /// One update call as a client saw it.
    struct Call {
        let node: String
        let activity: Int
        let step: Int
        let began: ContinuousClock.Instant
        let took: Duration
        let status: Int
    }

    @Test(.enabled(if: IntegrationEngine.isPostgreSQL, "the PostgreSQL pass runs it"), .timeLimit(.minutes(3)))
    func aFrozenNodeHoldsUpNoOtherNodesUpdates() throws {
        let cluster = try ClusterTests.Cluster()
        try cluster.start("node-a")   // creates the demo application in the empty database
        try cluster.start("node-b")
        // Each node's activities, started through it, each on a phone that reports its update token.
        for node in ["a", "b"] {
            for n in 0..<Self.activities {
                let via = "node-\(node)", number = (node == "a" ? 0 : 100) + n
                let register = #"{"request":{"application":"XXXXX-XXXXX","hwid":"\#(node)-\#(n)","push_token":"\#(String(format: "%064x", 500_000 + number))"}}"#
                #expect(try request(cluster.port(via), "/json/1.3/registerDevice", body: register, headers: ClusterTests.auth).status == 200)
                let start = #"{"request":{"application":"XXXXX-XXXXX","hwid":"\#(node)-\#(n)","activity_push_to_start_token":"\#(String(format: "%080x", 600_000 + number))"}}"#
                #expect(try request(cluster.port(via), "/json/1.3/setActivityPushToStartToken", body: start, headers: ClusterTests.auth).status == 200)
                _ = try cluster.send("startLiveActivity", #"{"title":"Trip","live_activity":{"content-state":{"step":0},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"\#(Self.id(node, n))","devices":["\#(node)-\#(n)"]}"#, via: via)
                let report = #"{"request":{"application":"XXXXX-XXXXX","hwid":"\#(node)-\#(n)","activity_id":"\#(Self.id(node, n))","activity_token":"\#(Self.token(number))"}}"#
                #expect(try request(cluster.port(via), "/json/1.3/setActivityToken", body: report, headers: ClusterTests.auth).status == 200)
            }
        }

        // Clients of both nodes send updates of their node's activities as fast as they are answered.
        let calls = Mutex<[Call]>([])
        let stop = Atomic<Bool>(false)
        var threads: [Thread] = []
        for node in ["a", "b"] {
            for client in 0..<Self.clients {
                let port = cluster.port("node-\(node)")
                threads.append(Thread {
                    var step = 1
                    while !stop.load(ordering: .relaxed) {
                        let n = (client + step * Self.clients) % Self.activities
                        let body = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"live_activity":{"event":"update","content-state":{"step":\#(step)}},"live_activity_id":"\#(Self.id(node, n))"}]}}"#
                        let began = ContinuousClock.now
                        let status = (try? request(port, "/json/1.3/updateLiveActivity", body: body))?.status ?? 0
                        calls.withLock { $0.append(Call(node: node, activity: n, step: step, began: began, took: ContinuousClock.now - began, status: status)) }
                        step += 1
                    }
                })
            }
        }
        for thread in threads { thread.start() }
        defer { stop.store(true, ordering: .relaxed) }

        // 3 s running, then node A frozen for 4 s, then resumed.
        Thread.sleep(forTimeInterval: 1)
        let before = ContinuousClock.now
        Thread.sleep(forTimeInterval: 3)
        let frozenNode = cluster.nodes["node-a"]!.process.processIdentifier
        let sentBefore = cluster.sent().count { Self.isB($0.token) }
        let observer = try PostgresDatabase(url: cluster.postgres.url, maximumIdleConnections: 1, maximumConnections: 1, migrate: false)
        var tries = 0
        while true {
            kill(frozenNode, SIGSTOP)
            tries += 1
            Thread.sleep(forTimeInterval: 0.02)   // what its sessions were running when it stopped has finished
            if try Self.inAWrite("islet node-a", observer) || tries == 200 { break }
            kill(frozenNode, SIGCONT)
            Thread.sleep(forTimeInterval: Double.random(in: 0.005...0.03))
        }
        #expect(tries < 200, "node A was caught in the middle of a write transaction")
        let frozen = ContinuousClock.now
        Thread.sleep(forTimeInterval: 4)
        let thawed = ContinuousClock.now
        let sentDuring = cluster.sent().count { Self.isB($0.token) } - sentBefore
        kill(frozenNode, SIGCONT)
        Thread.sleep(forTimeInterval: 1)
        stop.store(true, ordering: .relaxed)
        #expect(eventually(10) { threads.allSatisfy(\.isFinished) }, "the clients stopped")

        let all = calls.withLock { $0 }
        let ofB = all.filter { $0.node == "b" }
        let rateBefore = Double(ofB.count { $0.began >= before && $0.began < frozen }) / 3
        let whileFrozen = ofB.filter { $0.began >= frozen && $0.began < thawed }
        let rateFrozen = Double(whileFrozen.count) / 4
        let slowest = whileFrozen.map(\.took).max() ?? .zero
        print("frozen node: node B took \(rateBefore) updates/s before, \(rateFrozen)/s while node A was frozen (caught in a write after \(tries) tries); slowest call \(slowest)")
        #expect(rateBefore > 20, "node B took updates before the freeze: \(rateBefore)/s")
        #expect(rateFrozen >= rateBefore / 2, "node B took \(rateFrozen) updates/s while node A was frozen, \(rateBefore)/s before")
        #expect(slowest < .seconds(1), "no call to node B waited a second while node A was frozen: \(slowest)")
        #expect(ofB.allSatisfy { $0.status == 200 }, "every call to node B was accepted: \(Dictionary(grouping: ofB, by: \.status).mapValues(\.count))")
        #expect(sentDuring > 0, "node B's activities kept getting their updates while node A was frozen")
        // Node A answers again once resumed, and each activity's latest state reaches its phone.
        #expect(all.contains { $0.node == "a" && $0.began > thawed && $0.status == 200 }, "node A took updates again once resumed")
        for node in ["a", "b"] {
            for n in 0..<Self.activities {
                let number = (node == "a" ? 0 : 100) + n
                guard let last = all.filter({ $0.node == node && $0.activity == n && $0.status == 200 }).map(\.step).max() else { continue }
                #expect(eventually(20) { cluster.sent().contains { $0.token == Self.token(number) && $0.step == last } },
                        "\(Self.id(node, n))'s latest state, step \(last), reached its phone")
            }
        }
    }

    /// Whether a session named `name` is idle inside a write transaction: one that holds the schema's writers' turn
    /// (`SQLDialect.takingTurns(on: nil)`, which every write shares) and waits for its client.
    static func inAWrite(_ name: String, _ observer: PostgresDatabase) throws -> Bool {
        try observer.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT EXISTS (SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
                               WHERE a.application_name = ? AND a.state = 'idle in transaction' AND l.locktype = 'advisory' AND l.granted
                                 AND l.classid = CAST(? AS oid) AND l.objsubid = 2) AS held
                """, [.text(name), .int(Int64(SQLDialect.turnsClass))])[0]["held"].bool
        }
    }

    static func id(_ node: String, _ n: Int) -> String { "TRIP_\(node.uppercased())_\(n)" }
    static func token(_ number: Int) -> String { String(format: "%064x", 700_000 + number) }
    /// A push to one of node B's activities (its update tokens are numbered from 100).
    static func isB(_ token: String) -> Bool {
        guard let value = Int(token, radix: 16) else { return false }
        return value >= 700_100 && value < 700_100 + activities
    }
}
